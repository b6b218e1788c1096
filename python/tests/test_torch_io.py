"""torch tensors in -> torch tensors out (sol._torch_io): dtype, device, allocation, values.

Every op family is called twice on the same data, once with torch tensors and once with numpy
arrays; the torch results must be torch tensors of the op's dtype and hold the numpy results bit
for bit (the same kernel ran on the same bytes)."""
import numpy as np
import pytest

import sol
from helpers import BF16, randn

torch = pytest.importorskip("torch")

NP_OF = {torch.float32: np.float32, torch.bfloat16: BF16, torch.int32: np.int32,
         torch.float8_e4m3fn: np.dtype("uint8"), torch.int8: np.int8, torch.int64: np.int64}


def as_numpy(t):
    """The torch tensor's bytes as the numpy array Sol would have returned (fp8 as raw bytes)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy()
    return t.numpy()


def to_torch(a):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def bits(a):
    a = np.ascontiguousarray(a)
    if a.dtype.name == "float8_e4m3fn":
        return a.view(np.uint8)
    return a.view(np.uint8)


def same(torch_result, numpy_result, dtype):
    assert isinstance(torch_result, torch.Tensor), type(torch_result)
    assert torch_result.dtype == dtype
    assert torch_result.device.type == "cpu"
    assert tuple(torch_result.shape) == numpy_result.shape
    np.testing.assert_array_equal(bits(as_numpy(torch_result)), bits(numpy_result))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_gemm_layouts(rng, dtype):
    a, b = randn(rng, (7, 33), dtype), randn(rng, (19, 33), dtype)
    tdt = torch.float32 if dtype == np.float32 else torch.bfloat16
    same(sol.gemm(to_torch(a), to_torch(b), layout="nt"), sol.gemm(a, b, layout="nt"), tdt)
    bt = np.ascontiguousarray(b.T)
    same(sol.gemm(to_torch(a), to_torch(bt)), sol.gemm(a, bt), tdt)
    same(sol.gemm(to_torch(a), to_torch(b), layout="nt", out_dtype=torch.float32),
         sol.gemm(a, b, layout="nt", out_dtype="f32"), torch.float32)


def test_gemm_packed_and_int8(rng):
    a, b = randn(rng, (5, 64), BF16), randn(rng, (48, 64), BF16)
    packed = sol.pack_b(b, "nt")
    same(sol.gemm(to_torch(a), packed), sol.gemm(a, packed), torch.bfloat16)
    ai = rng.integers(-100, 100, (3, 64)).astype(np.int8)
    bi = rng.integers(-100, 100, (64, 9)).astype(np.int8)
    same(sol.gemm(torch.from_numpy(ai), torch.from_numpy(bi)), sol.gemm(ai, bi), torch.int32)


def test_cast_to_fp8_and_bf16(rng):
    x = randn(rng, (4, 96), scale=3.0)
    same(sol.cast(torch.from_numpy(x), torch.float8_e4m3fn), sol.cast(x, "f8e4m3"), torch.float8_e4m3fn)
    same(sol.cast(torch.from_numpy(x), torch.bfloat16), sol.cast(x, "bf16"), torch.bfloat16)
    same(sol.copy(torch.from_numpy(x)), sol.copy(x), torch.float32)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_norms_and_activations(rng, dtype):
    tdt = torch.float32 if dtype == np.float32 else torch.bfloat16
    x, w, bias = randn(rng, (9, 160), dtype), randn(rng, (160,), dtype), randn(rng, (160,), dtype)
    tx, tw, tb = to_torch(x), to_torch(w), to_torch(bias)
    same(sol.rmsnorm(tx, tw, eps=1e-5), sol.rmsnorm(x, w, eps=1e-5), tdt)
    same(sol.layernorm(tx, tw, tb), sol.layernorm(x, w, bias), tdt)
    same(sol.silu_mul(tx), sol.silu_mul(x), tdt)
    same(sol.gelu(tx, "erf"), sol.gelu(x, "erf"), tdt)
    same(sol.softmax(tx), sol.softmax(x), tdt)


def test_quant_outputs_are_torch_fp8(rng):
    x = randn(rng, (6, 256), BF16)
    q, s = sol.quant_fp8_per_token(to_torch(x))
    q_np, s_np = sol.quant_fp8_per_token(x)
    same(q, q_np, torch.float8_e4m3fn)
    same(s, s_np, torch.float32)
    w = randn(rng, (200, 256), BF16)
    for t, n, dt in zip(sol.quant_fp8_per_block(to_torch(w)), sol.quant_fp8_per_block(w),
                        (torch.float8_e4m3fn, torch.float32)):
        same(t, n, dt)


def test_routing_permute_grouped_gemm(rng):
    t, e, h, k = 11, 16, 64, 4
    logits = randn(rng, (t, e))
    bias = randn(rng, (e,), scale=0.1)
    kw = dict(top_k=k, n_group=4, topk_group=2, scaling=2.5)
    idx, w = sol.moe_routing(torch.from_numpy(logits), correction_bias=torch.from_numpy(bias), **kw)
    idx_np, w_np = sol.moe_routing(logits, correction_bias=bias, **kw)
    same(idx, idx_np, torch.int32)
    same(w, w_np, torch.float32)
    x = randn(rng, (t, h), BF16)
    outs = sol.moe_permute(to_torch(x), idx, e, 8)
    outs_np = sol.moe_permute(x, idx_np, e, 8)
    for o, o_np, dt in zip(outs, outs_np, (torch.bfloat16, torch.int32, torch.int32)):
        same(o, o_np, dt)
    experts = randn(rng, (e, 24, h), BF16)
    y = sol.grouped_gemm_contiguous(outs[0], to_torch(experts), outs[1])
    y_np = sol.grouped_gemm_contiguous(outs_np[0], experts, outs_np[1])
    same(y, y_np, torch.bfloat16)
    same(sol.moe_unpermute(y, outs[2], w), sol.moe_unpermute(y_np, outs_np[2], w_np), torch.bfloat16)


def test_attention_and_rope(rng):
    q, k, v = (randn(rng, (2, 13, 4, 32), BF16) for _ in range(3))
    o, lse = sol.flash_attention(to_torch(q), to_torch(k), to_torch(v), causal=True)
    o_np, lse_np = sol.flash_attention(q, k, v, causal=True)
    same(o, o_np, torch.bfloat16)
    same(lse, lse_np, torch.float32)
    table = sol.RopeTable(sol.RopeConfig(rope_dim=32, layout="half"), 64)
    x = randn(rng, (13, 4, 32), BF16)
    pos = np.arange(13, dtype=np.int32)
    tx = to_torch(x.copy())
    assert sol.rope(tx, torch.from_numpy(pos), table) is tx  # in place, the caller's tensor
    same(tx, sol.rope(x, pos, table), torch.bfloat16)


def test_embedding(rng):
    table, ids = randn(rng, (50, 24), BF16), rng.integers(0, 50, 7).astype(np.int32)
    same(sol.embedding(to_torch(table), torch.from_numpy(ids)), sol.embedding(table, ids), torch.bfloat16)


def test_numpy_stays_numpy_and_mixed_inputs_give_torch(rng):
    a, b = randn(rng, (4, 8)), randn(rng, (8, 3))
    assert isinstance(sol.gemm(a, b), np.ndarray)
    mixed = sol.gemm(a, torch.from_numpy(b))
    assert isinstance(mixed, torch.Tensor)
    np.testing.assert_array_equal(mixed.numpy(), sol.gemm(a, b))


def test_out_is_returned_as_given(rng):
    a, b = randn(rng, (4, 8)), randn(rng, (8, 3))
    out = torch.full((4, 3), float("nan"))
    assert sol.gemm(torch.from_numpy(a), torch.from_numpy(b), out=out) is out
    np.testing.assert_array_equal(out.numpy(), sol.gemm(a, b))


def test_outputs_are_fresh_torch_allocations(rng):
    x = torch.from_numpy(randn(rng, (3, 64)))
    y1, y2 = sol.silu_mul(x), sol.silu_mul(x)
    assert y1.data_ptr() != y2.data_ptr()
    assert y1.is_contiguous() and y1._base is None  # torch owns it: not a view of a numpy array


def test_requires_grad_is_an_error_under_grad_mode(rng):
    x = torch.from_numpy(randn(rng, (3, 64))).requires_grad_()
    w = torch.ones(64)
    with pytest.raises(sol.Error, match=r"sol.rmsnorm: argument 0 requires grad.*sol.torch"):
        sol.rmsnorm(x, w)
    with torch.no_grad():
        y = sol.rmsnorm(x, w)
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), sol.rmsnorm(x.detach().numpy(), w.numpy()))


def test_transposed_and_expanded_inputs(rng):
    a = randn(rng, (33, 7))
    b = randn(rng, (33, 5))
    ta = torch.from_numpy(a).t()  # [7, 33] with strides (1, 7)
    try:
        d = sol.gemm(ta, torch.from_numpy(b).t().contiguous().t())
    except sol.Error as e:
        assert "gemm" in str(e) and "stride" in str(e)
    else:
        np.testing.assert_allclose(d.numpy(), a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    w = torch.from_numpy(randn(rng, (1, 64))).expand(4, 64)  # stride 0 rows
    try:
        y = sol.rmsnorm(w, torch.ones(64))
    except sol.Error as e:
        assert "rmsnorm" in str(e)
    else:
        np.testing.assert_array_equal(y.numpy(), sol.rmsnorm(np.ascontiguousarray(w.numpy()), np.ones(64, np.float32)))


def test_meta_and_unsupported_dtype_inputs_are_clear_errors():
    with pytest.raises((sol.Error, TypeError)) as e:
        sol.rmsnorm(torch.empty(2, 8, device="meta"), torch.empty(8, device="meta"))
    assert "rmsnorm" in str(e.value)
    with pytest.raises(sol.DTypeError, match="rmsnorm: x.dtype"):
        sol.rmsnorm(torch.ones(2, 8, dtype=torch.float64), torch.ones(8, dtype=torch.float64))


def test_no_dtype_promotion(rng):
    a = torch.from_numpy(randn(rng, (4, 64)))
    with pytest.raises(sol.DTypeError, match="gemm"):
        sol.gemm(a.bfloat16(), a.t().contiguous())  # bf16 x f32: refused, not promoted
    with pytest.raises(sol.Error, match="rmsnorm: weight must be a contiguous f32 or bf16"):
        sol.rmsnorm(a.bfloat16(), torch.ones(64, dtype=torch.float16))
    # The output dtype is the op's, out_dtype where it has one.
    assert sol.gemm(a.bfloat16(), a.t().contiguous().bfloat16()).dtype == torch.bfloat16
    assert sol.gemm(a.bfloat16(), a.t().contiguous().bfloat16(), out_dtype=torch.float32).dtype == torch.float32
