"""sol.profile: every Sol op of a call recorded with its time, FLOPs, bytes, bound and SOL%, a
Chrome trace and a roofline picture written."""
import json

import numpy as np
import pytest

import sol
from helpers import BF16, randn


def test_profile_counts_a_gemm_exactly(rng, tmp_path):
    a, b = randn(rng, (64, 96)), randn(rng, (96, 48))
    trace, svg = tmp_path / "t.json", tmp_path / "r.svg"
    d, prof = sol.profile(lambda: sol.gemm(a, b), trace=str(trace), roofline=str(svg), quiet=True)
    np.testing.assert_array_equal(d, sol.gemm(a, b))
    (r,) = prof.records
    assert r["op"] == "gemm" and r["flops"] == 2 * 64 * 96 * 48
    assert r["bytes"] == 4 * (64 * 96 + 96 * 48 + 64 * 48)
    assert 0 < r["time_s"] <= prof.wall_s
    assert r["bound"] in ("fma_f32", "mem_copy") and 0 < r["sol_pct"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events] == ["gemm", "wall"] and events[0]["args"]["flops"] == r["flops"]
    assert svg.read_text().startswith("<svg") and "gemm" in svg.read_text()
    # Roofs are compute units only: no bandwidth or clock drawn as a FLOP/s ceiling (the memory
    # levels are kept for the ops whose registry cost names one: mla_decode_absorbed's mem_read).
    assert set(prof.ceilings) <= {"fma_f32", "dot_bf16", "dot_s8", "amx_bf16", "amx_int8", "mem_copy", "mem_read",
                                  "mem_write", "mem_update", "mem_triad"}
    assert "mem_read" not in svg.read_text()
    assert "clock" not in svg.read_text() and "l2_read" not in svg.read_text()


def test_profile_in_thread_cpu_time(rng):
    a, b = randn(rng, (64, 96)), randn(rng, (96, 48))
    threads = sol.num_threads()
    try:
        sol.set_num_threads(1)
        _, prof = sol.profile(lambda: [sol.gemm(a, b) for _ in range(3)], trace=None, roofline=None, quiet=True,
                              clock="cpu")
        assert prof.clock == "cpu" and len(prof.records) == 3
        assert 0 < prof.op_time_s <= prof.wall_s and "thread CPU time" in prof.table()
        if threads > 1:
            sol.set_num_threads(2)
            with pytest.raises(sol.Error, match="counts this thread only"):
                sol.profile(lambda: None, trace=None, roofline=None, quiet=True, clock="cpu")
    finally:
        sol.set_num_threads(threads)
    with pytest.raises(sol.Error, match="'wall' or 'cpu'"):
        sol.profile(lambda: None, trace=None, roofline=None, quiet=True, clock="gpu")


def test_profile_outside_records_nothing(rng):
    a = randn(rng, (4, 64))
    _, prof = sol.profile(lambda: sol.rmsnorm(a, np.ones(64, np.float32)), trace=None, roofline=None, quiet=True)
    assert len(prof.records) == 1
    sol.rmsnorm(a, np.ones(64, np.float32))  # after the profile: no recorder left behind
    assert len(prof.records) == 1


def test_profile_of_a_patched_deepseek_v3_forward(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import sol.torch as st
    from test_torch_models import deepseek_v3
    model = st.patch(deepseek_v3(torch.bfloat16))
    ids = torch.randint(2, 256, (1, 16), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        _, prof = sol.profile(lambda: model(ids), trace=str(tmp_path / "t.json"),
                              roofline=str(tmp_path / "r.svg"), quiet=True)
    names = {g["op"] for g in prof.by_op()}
    assert {"gemm", "rmsnorm", "silu_mul", "flash_attention", "moe_routing", "moe_permute",
            "grouped_gemm_contiguous", "moe_unpermute"} <= names
    assert 0 < prof.op_time_s < prof.wall_s
    assert sum(g["share_pct"] for g in prof.by_op()) <= 100.0
    attn = [r for r in prof.records if r["op"] == "flash_attention"]
    # 2 layers, causal 16 x 16 (136 unmasked pairs), 4 heads, qk 48 + v 32 dims.
    assert len(attn) == 2 and attn[0]["flops"] == 2.0 * 4 * 136 * (48 + 32)
    table = prof.table()
    assert "the rest" in table and "flash_attention" in table


def test_grouped_gemm_cost_counts_only_used_experts_and_real_rows(rng):
    experts, n, k = 8, 32, 64
    a = randn(rng, (256, k), BF16)
    b = randn(rng, (experts, n, k)).astype(a.dtype)
    layout = np.full(256, -1, np.int32)
    layout[:5], layout[128:131] = 2, 6  # 8 real rows of 2 experts, the rest padding
    _, prof = sol.profile(lambda: sol.grouped_gemm_contiguous(a, b, layout), trace=None, roofline=None, quiet=True)
    (r,) = prof.records
    assert r["flops"] == 2 * 8 * n * k
    assert r["bytes"] == 2 * n * k * 2 + 8 * (k * 2 + n * 2)


def test_python_m_sol_profile_runs_a_script(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "step.py"
    script.write_text("import numpy as np, sol\n"
                      "a = np.ones((8, 64), np.float32)\n"
                      "sol.rmsnorm(a, np.ones(64, np.float32))\n"
                      "sol.gemm(a, np.ones((64, 4), np.float32))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "sol", "profile", str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "gemm" in r.stdout and "rmsnorm" in r.stdout and "the rest" in r.stdout
    assert (tmp_path / "sol-profile.json").exists() and (tmp_path / "sol-profile.svg").exists()
    bad = subprocess.run([sys.executable, "-m", "sol"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr
