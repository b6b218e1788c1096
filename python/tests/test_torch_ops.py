"""sol.torch: torch.library custom ops (fake kernels, torch.compile) and autograd.

Gradients are Sol's (f32 kernels, or torch math in f32 for rmsnorm and silu-mul) compared with
torch's own autograd of the same function in float64."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import sol  # noqa: E402
import sol.torch as st  # noqa: E402


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(20240611)


def randn(gen, *shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


# ------------------------------------------------------------------ fake kernels (opcheck)
def opcheck_cases(gen):
    x = randn(gen, 5, 64)
    w = randn(gen, 64)
    gu = randn(gen, 5, 128)
    q, k, v = randn(gen, 1, 9, 2, 32), randn(gen, 1, 11, 2, 32), randn(gen, 1, 11, 2, 32)
    logits = randn(gen, 6, 16)
    return [
        (st._gemm, (x, randn(gen, 24, 64), "nt", None, "none", None, None, None)),
        (st._gemm, (x, randn(gen, 64, 24), "nn", randn(gen, 24), "none", None, None, None)),
        (st._rmsnorm, (x, w, 1e-6)),
        (st._layernorm, (x, w, randn(gen, 64), 1e-5)),
        (st._silu_mul, (gu,)),
        (st._gelu, (x, "tanh")),
        (st._softmax, (x,)),
        (st._flash_attention, (q, k, v, True, -1, -1, None, None, None)),
        (st._quant_fp8_per_token, (randn(gen, 4, 256), 128, "f32")),
        (st._quant_fp8_per_block, (randn(gen, 130, 256), 128, "ue8m0")),
        (st._moe_routing, (logits, 4, 4, 2, "sigmoid", True, 2.5, randn(gen, 16, scale=0.1))),
        (st._embedding, (randn(gen, 30, 16), torch.tensor([3, 0, 29], dtype=torch.int32))),
    ]


def test_every_op_passes_opcheck(gen):
    for op, args in opcheck_cases(gen):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor",
                                                     "test_autograd_registration"))


def test_fake_kernels_give_the_real_shapes_and_dtypes(gen):
    from torch._subclasses.fake_tensor import FakeTensorMode
    for op, args in opcheck_cases(gen):
        real = op(*args)
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = op(*fake_args)
        real = real if isinstance(real, tuple) else (real,)
        fake = fake if isinstance(fake, tuple) else (fake,)
        for r, f in zip(real, fake):
            assert (tuple(r.shape), r.dtype) == (tuple(f.shape), f.dtype), op


# ------------------------------------------------------------------ torch.compile
def block(x, w_qkv, w_norm, w_up, w_down):
    h = st.rmsnorm(x, w_norm)
    qkv = st.gemm(h, w_qkv, layout="nt")
    t = x.shape[0]
    q, k, v = qkv.reshape(1, t, 3, 2, 32).unbind(2)
    o, _ = st.flash_attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    x = x + o.reshape(t, 64)
    return x + st.gemm(st.silu_mul(st.gemm(st.rmsnorm(x, w_norm), w_up, layout="nt")), w_down, layout="nt")


def block_args(gen, t=7):
    return (randn(gen, t, 64), randn(gen, 192, 64, scale=0.1), 1 + randn(gen, 64, scale=0.1),
            randn(gen, 256, 64, scale=0.1), randn(gen, 64, 128, scale=0.1))


def test_compile_traces_without_graph_breaks(gen):
    torch._dynamo.reset()
    args = block_args(gen)
    explanation = torch._dynamo.explain(block)(*args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    np.testing.assert_array_equal(compiled(*args).numpy(), block(*args).numpy())


def test_compile_with_inductor_equals_eager(gen):
    torch._dynamo.reset()
    args = block_args(gen, t=5)
    compiled = torch.compile(block, fullgraph=True)
    # Inductor fuses the torch-side adds; the Sol ops run the same kernels, so only the adds
    # may round differently (f32: a few ulp).
    assert rel(compiled(*args), block(*args)) < 1e-6


# ------------------------------------------------------------------ autograd
def test_gemm_grad_against_float64_autograd(gen):
    for layout in ("nn", "nt"):
        a = randn(gen, 13, 40).requires_grad_()
        b = (randn(gen, 40, 9) if layout == "nn" else randn(gen, 9, 40)).requires_grad_()
        bias = randn(gen, 9).requires_grad_()
        dy = randn(gen, 13, 9)
        st.gemm(a, b, layout=layout, bias=bias).backward(dy)
        a64, b64, bias64 = (t.detach().double().requires_grad_() for t in (a, b, bias))
        ((a64 @ (b64 if layout == "nn" else b64.t())) + bias64).backward(dy.double())
        for got, ref in ((a.grad, a64.grad), (b.grad, b64.grad), (bias.grad, bias64.grad)):
            assert rel(got, ref) < 1e-5


def test_rmsnorm_grad_against_float64_autograd(gen):
    x = randn(gen, 6, 96, scale=2.0).requires_grad_()
    w = (1 + randn(gen, 96, scale=0.1)).requires_grad_()
    dy = randn(gen, 6, 96)
    st.rmsnorm(x, w, eps=1e-6).backward(dy)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64).backward(dy.double())
    assert rel(x.grad, x64.grad) < 1e-5 and rel(w.grad, w64.grad) < 1e-5


def test_silu_mul_grad_against_float64_autograd(gen):
    gu = randn(gen, 7, 2 * 48, scale=2.0).requires_grad_()
    dy = randn(gen, 7, 48)
    st.silu_mul(gu).backward(dy)
    g64 = gu.detach().double().requires_grad_()
    g, u = g64.chunk(2, dim=-1)
    (torch.nn.functional.silu(g) * u).backward(dy.double())
    assert rel(gu.grad, g64.grad) < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_grad_against_float64_autograd(gen, causal):
    b, sq, skv, h, hkv, d = 2, 11, 17, 4, 2, 32
    q = randn(gen, b, sq, h, d).requires_grad_()
    k = randn(gen, b, skv, hkv, d).requires_grad_()
    v = randn(gen, b, skv, hkv, d).requires_grad_()
    d_o = randn(gen, b, sq, h, d)
    o, lse = st.flash_attention(q, k, v, causal=causal)
    assert not lse.requires_grad
    o.backward(d_o)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    kr, vr = k64.repeat_interleave(h // hkv, dim=2), v64.repeat_interleave(h // hkv, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q64, kr) / d ** 0.5
    if causal:  # bottom-right aligned, as FlashAttention-2
        mask = torch.arange(skv)[None, :] > torch.arange(sq)[:, None] + skv - sq
        s = s.masked_fill(mask, float("-inf"))
    o64 = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), vr)
    assert rel(o, o64) < 1e-5
    o64.backward(d_o.double())
    for got, ref in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert rel(got, ref) < 1e-5


def test_bf16_grads_flow_in_bf16(gen):
    x = randn(gen, 4, 64, dtype=torch.bfloat16).requires_grad_()
    w = randn(gen, 32, 64, dtype=torch.bfloat16).requires_grad_()
    st.gemm(x, w, layout="nt").float().sum().backward()
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.bfloat16
    ref = torch.ones(4, 32, dtype=torch.float64) @ w.detach().double()
    assert rel(x.grad, ref) < 1e-2


def test_ops_without_backward_refuse_grad(gen):
    x = randn(gen, 3, 64).requires_grad_()
    with pytest.raises(sol.Error, match="sol::layernorm: x requires grad but sol::layernorm has no backward"):
        st.layernorm(x, torch.ones(64))
    with pytest.raises(sol.Error, match="sol::gelu"):
        st.gelu(x)
    with pytest.raises(sol.Error, match="activation='none' only"):
        st.gemm(x, randn(gen, 8, 64), layout="nt", activation="silu")
    with torch.no_grad():
        assert not st.layernorm(x, torch.ones(64)).requires_grad


def test_rope_in_place_and_routing_through_ops(gen):
    x = randn(gen, 5, 2, 32)
    pos = torch.arange(5, dtype=torch.int32)
    expected = sol.rope(x.clone(), pos, st.rope_table(32, 10000.0, 64, "half"))
    y = x.clone()
    assert st.rope_(y, pos, rope_dim=32, max_positions=64) is y
    assert torch.equal(y, expected)
    idx, w = st.moe_routing(randn(gen, 6, 16), top_k=4, n_group=4, topk_group=2)
    assert idx.dtype == torch.int32 and w.dtype == torch.float32 and idx.shape == (6, 4)
