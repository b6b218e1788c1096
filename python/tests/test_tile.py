"""sol.tile: a program's text form round-trips, the interpreter and a JIT-compiled kernel match
numpy on arrays, and errors keep the C++ messages."""
import numpy as np
import pytest

import sol
import sol.tile as tile

ROWS = """\
kernel rows(X: f32[R, 32], Y: f32[R, 32], S: f32[R]) grid(br = ceildiv(R, 8)) {
  alloc x: fragment f32[8, 32]
  alloc s: fragment f32[8]
  copy X[br * 8, 0] -> x
  for u in 0 .. 2 unroll {
    parallel i, j in x {
      x[i, j] = x[i, j] * rsqrt(float(u + 1)) + max(x[i, j], 0.5)
    }
  }
  reduce sum x -> s axis=1 clear
  copy x -> Y[br * 8, 0]
  copy s -> S[br * 8]
}
"""


def rows_np(x):
    x = x.astype(np.float64)
    for u in range(2):
        x = x / np.sqrt(u + 1) + np.maximum(x, 0.5)
    return x, x.sum(axis=1)


@pytest.fixture
def jit_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SOL_JIT_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_parse_print_round_trip():
    p = tile.parse(ROWS)
    assert isinstance(p, tile.Program) and p.name == "rows"
    assert tile.print(p) == ROWS and str(p) == ROWS
    assert str(tile.Program(ROWS)) == ROWS
    assert p.params == [("X", "f32", ["R", 32]), ("Y", "f32", ["R", 32]), ("S", "f32", ["R"])]
    assert p.dims() == ["R"] and p.grid == [("br", "ceildiv(R, 8)")]
    tile.verify(p)
    tile.verify(ROWS)  # text works where a program does
    assert len(tile.pass_names()) > 0
    lowered = tile.lower(p)
    assert "ukernel" in str(lowered) or str(lowered) != ROWS
    assert "sol_rt" in tile.emit_cpp(lowered)


def test_interpret_matches_numpy(rng):
    x = rng.standard_normal((29, 32)).astype(np.float32)
    y, s = np.zeros((29, 32), np.float32), np.zeros(29, np.float32)
    tile.interpret(ROWS, x, y, s)
    y_ref, s_ref = rows_np(x)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, s_ref, rtol=1e-5, atol=1e-4)


def test_compiled_kernel_matches_numpy(rng, jit_cache):
    kernel = tile.compile(ROWS)
    assert kernel.source.name == "rows" and kernel.library_path
    assert set(kernel.info) == {"memory_hit", "disk_hit", "seconds", "key"}
    for R in (29, 64):
        x = rng.standard_normal((R, 32)).astype(np.float32)
        y, s = np.full((R, 32), np.nan, np.float32), np.full(R, np.nan, np.float32)
        kernel(x, y, s)
        y_ref, s_ref = rows_np(x)
        np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, s_ref, rtol=1e-5, atol=1e-4)
    assert tile.compile(tile.parse(ROWS)).info["memory_hit"]


def test_errors(jit_cache):
    with pytest.raises(sol.Error, match=r"<program>:\d+"):
        tile.parse("kernel broken(X: f32[N]) grid(b = 1) {\n  alloc t: fragment\n}\n")
    with pytest.raises(sol.Error, match="kernel bad"):
        tile.verify(ROWS.replace("kernel rows", "kernel bad").replace("copy s -> S[br * 8]", "copy s -> T[br * 8]"))
    kernel = tile.compile(ROWS)
    x = np.zeros((29, 32), np.float32)
    with pytest.raises(sol.Error, match=r"Y.shape\[0\] = 30 but R = 29"):
        kernel(x, np.zeros((30, 32), np.float32), np.zeros(29, np.float32))
    with pytest.raises(sol.Error, match="takes 3 arrays"):
        kernel(x, x)
    readonly = np.zeros((29, 32), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        kernel(x, readonly, np.zeros(29, np.float32))
