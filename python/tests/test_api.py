"""The skin itself: zero copies, out=, strides, dtypes, errors, the GIL, DLPack (torch)."""
import sys
import threading
import time

import numpy as np
import pytest

import sol
from helpers import BF16, E4M3, poison, randn, rel_err, f64


def test_out_is_written_in_place_and_returned(rng):
    x, w = randn(rng, (4, 64), BF16), randn(rng, (64,), BF16)
    out = poison((4, 64), BF16)
    address = out.__array_interface__["data"][0]
    result = sol.rmsnorm(x, w, out=out)
    assert result is out
    assert out.__array_interface__["data"][0] == address
    assert not np.isnan(f64(out)).any()


def test_outputs_alias_caller_memory_through_views(rng):
    buf = poison((3, 128), np.float32)
    x, w = randn(rng, (3, 64)), randn(rng, (64,))
    sol.rmsnorm(x, w, out=buf[:, 64:])  # rows 128 apart, each dense: what rmsnorm takes
    assert np.isnan(buf[:, :64]).all()
    np.testing.assert_array_equal(buf[:, 64:], sol.rmsnorm(x, w))


def test_ops_that_need_contiguous_outputs_say_so(rng):
    buf = np.zeros((3, 128), np.float32)
    with pytest.raises(ValueError, match="^softmax: .*contiguous"):
        sol.softmax(randn(rng, (3, 64)), out=buf[:, 64:])


def test_softmax_in_place(rng):
    x = randn(rng, (2, 100))
    assert sol.softmax(x, out=x) is x
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)


def test_quant_outputs_can_be_given(rng):
    x = randn(rng, (2, 256))
    q, s = poison((2, 256), E4M3), poison((2, 2), np.float32)
    rq, rs = sol.quant_fp8_per_token(x, q=q, scales=s)
    assert rq is q and rs is s and not np.isnan(s).any()


def test_allocated_outputs_are_numpy(rng):
    y = sol.silu_mul(randn(rng, (2, 32), BF16))
    assert isinstance(y, np.ndarray) and y.dtype == np.dtype(BF16) and y.flags.c_contiguous


# ---- strides ---------------------------------------------------------------------------

def test_row_strided_input_is_accepted(rng):
    x, w = randn(rng, (10, 64)), randn(rng, (64,))
    view = x[::2]  # rows 2 apart, each row dense: what rmsnorm takes
    y = sol.rmsnorm(view, w)
    ref = f64(view) / np.sqrt((f64(view) ** 2).mean(-1, keepdims=True) + 1e-6) * f64(w)
    assert rel_err(y, ref) < 1e-5


def test_column_strided_rows_get_the_op_message(rng):
    x, w = randn(rng, (4, 128)), randn(rng, (64,))
    with pytest.raises(ValueError, match=r"^rmsnorm: .*dense"):
        sol.rmsnorm(x[:, ::2], w)


def test_negative_strides_are_refused(rng):
    x = randn(rng, (8, 8))
    with pytest.raises(ValueError, match="non-negative strides"):
        sol.copy(x[::-1])


def test_strided_bf16_view(rng):
    x = randn(rng, (6, 9), BF16)
    view = x[::2, 1::3]
    np.testing.assert_array_equal(sol.copy(view).view(np.uint16), view.view(np.uint16))


def test_empty_arrays(rng):
    assert sol.gemm(np.zeros((0, 4), np.float32), randn(rng, (4, 3))).shape == (0, 3)
    assert sol.softmax(np.zeros((2, 0), np.float32)).shape == (2, 0)
    assert sol.rmsnorm(np.zeros((0, 8), BF16), np.ones(8, BF16)).shape == (0, 8)


def test_fortran_order_copy(rng):
    x = np.asfortranarray(randn(rng, (5, 7)))
    np.testing.assert_array_equal(sol.copy(x), x)


# ---- errors ----------------------------------------------------------------------------

def test_shape_error_carries_the_cpp_message(rng):
    a, b = randn(rng, (4, 96)), randn(rng, (128, 8))
    with pytest.raises(sol.Error) as e:
        sol.gemm(a, b)
    assert isinstance(e.value, ValueError) and not isinstance(e.value, TypeError)
    assert str(e.value).startswith("gemm: ")
    assert "96" in str(e.value) and "128" in str(e.value)


def test_dtype_error_from_cpp_is_a_type_error(rng):
    a = rng.integers(0, 5, size=(4, 4)).astype(np.int32)
    with pytest.raises(TypeError, match=r"^gemm: a\.dtype = i32") as e:
        sol.gemm(a, a)
    assert isinstance(e.value, ValueError) and isinstance(e.value, sol.DTypeError)


def test_unsupported_numpy_dtype_is_a_type_error():
    with pytest.raises(sol.DTypeError, match=r"rmsnorm: x\.dtype = float64 is not a Sol dtype"):
        sol.rmsnorm(np.zeros((2, 8)), np.zeros(8, np.float32))


def test_not_an_array_is_a_type_error():
    with pytest.raises(TypeError, match="copy: src must be an array"):
        sol.copy([1.0, 2.0])


def test_read_only_output_is_refused(rng):
    out = np.zeros((2, 8), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="copy: out is a read-only array"):
        sol.copy(randn(rng, (2, 8)), out=out)


def test_read_only_input_is_fine(rng):
    x = randn(rng, (2, 8))
    x.flags.writeable = False
    np.testing.assert_array_equal(sol.copy(x), x)


def test_bad_option_names_the_choices(rng):
    with pytest.raises(ValueError, match=r"gemm: layout = 'tn' but must be one of nn, nt"):
        sol.gemm(randn(rng, (2, 2)), randn(rng, (2, 2)), layout="tn")


def test_embedding_bad_id_leaves_output_untouched(rng):
    table = randn(rng, (10, 16))
    out = poison((3, 16), np.float32)
    with pytest.raises(ValueError, match="embedding: "):
        sol.embedding(table, np.array([1, 10, 2], np.int32), out=out)
    assert np.isnan(out).all()


def test_overlap_is_an_error_not_a_crash(rng):
    x = randn(rng, (64,))
    with pytest.raises(ValueError, match="overlap"):
        sol.copy(x[:32], out=x[16:48])


def test_unknown_dtype_string():
    with pytest.raises(TypeError, match="unknown dtype 'f64'"):
        sol.cast(np.zeros(4, np.float32), "f64")


# ---- the GIL ---------------------------------------------------------------------------

def test_gil_is_released_inside_an_op(rng):
    # One Sol thread, so the op leaves a core for the main thread to tick on, and a GEMM of a
    # few milliseconds; on a loaded 2-core machine the main thread may still miss the window,
    # so it gets three tries (an op that held the GIL would fail all three).
    a, b = randn(rng, (1024, 1024)), randn(rng, (1024, 1024))
    sol.set_num_threads(1)
    try:
        sol.gemm(a, b)  # warm up
        assert any(_main_thread_ticks_inside(lambda: sol.gemm(a, b)) for _ in range(3))
    finally:
        sol.set_num_threads(0)


def _main_thread_ticks_inside(op):
    span, ticks = {}, []

    def work():
        span["start"] = time.perf_counter()
        op()
        span["end"] = time.perf_counter()

    # With a long switch interval nothing takes the GIL from a thread that holds it: the main
    # thread can tick between the worker's two timestamps only if the op let go of it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        t = threading.Thread(target=work)
        t.start()
        while t.is_alive():
            ticks.append(time.perf_counter())
            time.sleep(0)
        t.join()
    finally:
        sys.setswitchinterval(interval)
    return any(span["start"] < x < span["end"] for x in ticks)


# ---- DLPack (torch, optional) ----------------------------------------------------------

def test_torch_tensors_through_dlpack(rng):
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    w = torch.randn(256, dtype=torch.bfloat16)
    out = torch.empty(4, 256, dtype=torch.bfloat16)
    assert sol.rmsnorm(x, w, out=out) is out
    ref = (x.double() / torch.sqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6) * w.double())
    assert rel_err(out.double().numpy(), ref.numpy()) < 1e-2
    a, b = torch.randn(8, 32), torch.randn(32, 16)
    np.testing.assert_allclose(sol.gemm(a, b), (a @ b).numpy(), rtol=1e-4, atol=1e-4)


class Wrapped:
    """Only __dlpack__: any producer works, not just numpy."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_producer(rng):
    x, out = randn(rng, (3, 5)), np.zeros((3, 5), np.float32)
    wrapped_out = Wrapped(out)
    assert sol.copy(Wrapped(x), out=wrapped_out) is wrapped_out
    np.testing.assert_array_equal(out, x)


def test_dlpack_producer_of_a_read_only_output(rng):
    out = np.zeros((3, 5), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="copy: out is read-only"):
        sol.copy(randn(rng, (3, 5)), out=Wrapped(out))
