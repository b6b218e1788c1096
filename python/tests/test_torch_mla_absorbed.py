"""sol.mla_decode_absorbed (one MLA layer's absorbed decode in one op) from torch, against float64
torch math; and the patched DeepseekV3 attention using it once per layer and decode step."""
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402

import sol  # noqa: E402
import sol.torch as st  # noqa: E402
from test_torch_models import deepseek_v3, rel  # noqa: E402


def layer(dtype, b, length, heads=3, nope=6, rope=4, lat=10, v=5, spare=3, seed=0):
    """q [b, heads, nope + rope] inside wider rows, latent rows [b, length, lat + rope] inside a
    buffer with NaN rows past length, and per-head weights w_uk [heads, lat + rope, nope + rope],
    w_uv [heads, v, lat]."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, heads, nope + rope + 2, generator=g).to(dtype)[..., :nope + rope]
    cache = torch.full((b, length + spare, lat + rope), float("nan"))
    cache[:, :length] = torch.randn(b, length, lat + rope, generator=g)
    w_uk = (torch.randn(heads, lat + rope, nope + rope, generator=g) / math.sqrt(nope + rope)).to(dtype)
    w_uv = (torch.randn(heads, v, lat, generator=g) / math.sqrt(lat)).to(dtype)
    return q, cache.to(dtype)[:, :length], w_uk, w_uv


def reference(q, latent, w_uk, w_uv, scale):
    q, latent, w_uk, w_uv = (t.double() for t in (q, latent, w_uk, w_uv))
    q_lat = torch.einsum("bhd,hkd->bhk", q, w_uk)
    p = torch.softmax(scale * torch.einsum("bhk,blk->bhl", q_lat, latent), -1)
    o_lat = torch.einsum("bhl,blc->bhc", p, latent[..., :w_uv.shape[2]])
    return torch.einsum("bhc,hvc->bhv", o_lat, w_uv)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("b", [1, 2, 3])
@pytest.mark.parametrize("length", [1, 17])
def test_matches_float64_math(dtype, b, length):
    q, latent, w_uk, w_uv = layer(dtype, b, length, seed=b * 10 + length)
    out = torch.full((b, q.shape[1], w_uv.shape[1] + 1), float("nan"), dtype=dtype)[..., :-1]
    got = sol.mla_decode_absorbed(q, sol.pack_experts(w_uk), latent, sol.pack_experts(w_uv), 0.4, out=out)
    assert got is out and got.dtype == dtype
    want = reference(q, latent, w_uk, w_uv, 0.4)
    assert rel(got, want) < (1e-2 if dtype == torch.bfloat16 else 1e-5)
    allocated = sol.mla_decode_absorbed(q, sol.pack_experts(w_uk), latent, sol.pack_experts(w_uv), 0.4)
    assert isinstance(allocated, torch.Tensor) and allocated.shape == out.shape and torch.equal(allocated, got)
    # seqlen: the first rows of the buffer the view was cut from (its NaN rows past length unread).
    buffer = latent.as_strided((b, length + 3, latent.shape[2]), latent.stride())
    assert torch.isnan(buffer[:, length:].float()).all()
    prefix = sol.mla_decode_absorbed(q, sol.pack_experts(w_uk), buffer, sol.pack_experts(w_uv), 0.4, seqlen=length)
    assert torch.equal(prefix, got)


def test_bad_input_is_a_sol_error():
    q, latent, w_uk, w_uv = layer(torch.bfloat16, 2, 5)
    uk, uv = sol.pack_experts(w_uk), sol.pack_experts(w_uv)
    with pytest.raises(sol.Error, match=r"mla_decode_absorbed: w_uk holds 2 packed matrices but q has H = 3"):
        sol.mla_decode_absorbed(q, sol.pack_experts(w_uk[:2]), latent, uv, 1.0)
    with pytest.raises(sol.Error, match=r"mla_decode_absorbed: latent.dtype = f32 but q is bf16"):
        sol.mla_decode_absorbed(q, uk, latent.float(), uv, 1.0)
    with pytest.raises(sol.Error, match=r"mla_decode_absorbed: latent.shape = \[2, 5, 13\]"):
        sol.mla_decode_absorbed(q, uk, latent[..., :13], uv, 1.0)
    with pytest.raises(sol.Error, match=r"mla_decode_absorbed: seqlen = 6 but latent is \[2, 5, 14\] bf16"):
        sol.mla_decode_absorbed(q, uk, latent, uv, 1.0, seqlen=6)
    with pytest.raises(sol.Error, match=r"mla_decode_absorbed: out.shape"):
        sol.mla_decode_absorbed(q, uk, latent, uv, 1.0, out=torch.empty(2, 3, 4, dtype=torch.bfloat16))


def decode_ops(model, b, dtype):
    """The Sol ops of one decode step after a 6-token prompt, by name (sol.profile)."""
    ids = torch.randint(2, 256, (b, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        tok = model(ids, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
        _, prof = sol.profile(lambda: model(tok, cache=cache, use_cache=True), trace=None, roofline=None, quiet=True)
    return [r["op"] for r in prof.records]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("b", [1, 3])
def test_patched_decode_runs_one_sol_op_per_layer(dtype, b):
    model = st.patch(deepseek_v3(dtype))
    ops = decode_ops(model, b, dtype)
    layers = model.config.num_hidden_layers
    assert ops.count("mla_decode_absorbed") == layers
    # Nothing of the absorbed decode is left outside the op: no softmax, no grouped products
    # over heads or sequences, no copies of the cache.
    assert "softmax" not in ops and "grouped_gemm_masked" not in ops and "copy" not in ops


def test_patched_decode_equals_the_layer_math_in_float64(monkeypatch):
    """One decode step's attention of the patched module (bf16: the softmax scale folded into
    w_uk) against float64 torch math over the op's own q and cache rows and HF's kv_b weights."""
    hf = deepseek_v3(torch.bfloat16).model.layers[0].self_attn
    model = st.patch(deepseek_v3(torch.bfloat16))
    calls = []
    original = sol.mla_decode_absorbed

    def spy(q, w_uk, latent, w_uv, scale, **kw):
        out = original(q, w_uk, latent, w_uv, scale, **kw)
        rows = latent if kw.get("seqlen", -1) < 0 else latent[:, :kw["seqlen"]]
        calls.append((q.clone(), rows.clone(), out.clone(), scale))
        return out
    monkeypatch.setattr(sol, "mla_decode_absorbed", spy)
    decode_ops(model, 2, torch.bfloat16)
    q, latent, out, scale = calls[0]  # layer 0
    h, n, r, v, lat = hf.num_heads, hf.qk_nope_head_dim, hf.qk_rope_head_dim, hf.v_head_dim, hf.kv_lora_rank
    assert q.shape == (2, h, n + r) and latent.shape == (2, 7, lat + r) and out.shape == (2, h, v)
    w = hf.kv_b_proj.weight.detach().double().view(h, n + v, lat)
    w_uk = torch.zeros(h, lat + r, n + r, dtype=torch.float64)
    w_uk[:, :lat, :n], w_uk[:, lat:, n:] = w[:, :n].transpose(1, 2), torch.eye(r, dtype=torch.float64)
    want = reference(q, latent, w_uk, w[:, n:], hf.scaling)
    assert rel(out, want) < 1e-2


# ------------------------------------------------------------------ torch.library op sol::mla_decode_absorbed
def op_args(dtype=torch.bfloat16, b=2, length=9):
    q, latent, w_uk, w_uv = layer(dtype, b, length, seed=5)
    return q, w_uk, latent, w_uv


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_torch_op_equals_the_direct_call(dtype):
    q, w_uk, latent, w_uv = op_args(dtype)
    got = st.mla_decode_absorbed(q, w_uk, latent, w_uv, softmax_scale=0.4)
    want = sol.mla_decode_absorbed(q, sol.pack_experts(w_uk), latent, sol.pack_experts(w_uv), 0.4)
    assert got.dtype == dtype and torch.equal(got, want)
    assert torch.ops.sol.mla_decode_absorbed.default(q, w_uk, latent, w_uv, 0.4).equal(want)


def test_torch_op_passes_opcheck_and_its_fake_kernel_gives_the_real_shape():
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = (*op_args(), 0.4)
    torch.library.opcheck(st._mla_decode_absorbed, args,
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    real = st._mla_decode_absorbed(*args)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = st._mla_decode_absorbed(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args))
    assert (tuple(fake.shape), fake.dtype) == (tuple(real.shape), real.dtype) == ((2, 3, 5), torch.bfloat16)


def attention_then_projection(q, w_uk, latent, w_uv, w_o):
    out = st.mla_decode_absorbed(q, w_uk, latent, w_uv, softmax_scale=0.4)
    return st.gemm(out.reshape(out.shape[0], -1), w_o, layout="nt")


def test_torch_compile_traces_it_without_graph_breaks():
    torch._dynamo.reset()
    args = (*op_args(torch.float32), torch.randn(7, 15, generator=torch.Generator().manual_seed(6)))
    explanation = torch._dynamo.explain(attention_then_projection)(*args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(attention_then_projection, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(*args), attention_then_projection(*args))


def test_torch_op_refuses_grad_and_repacks_a_weight_updated_in_place():
    q, w_uk, latent, w_uv = op_args(torch.float32)
    with pytest.raises(sol.Error, match="sol::mla_decode_absorbed: q requires grad but sol::mla_decode_absorbed "
                                        "has no backward"):
        st.mla_decode_absorbed(q.clone().requires_grad_(), w_uk, latent, w_uv, softmax_scale=0.4)
    with pytest.raises(sol.Error, match="w_uv requires grad"):
        st.mla_decode_absorbed(q, w_uk, latent, w_uv.clone().requires_grad_(), softmax_scale=0.4)
    before = st.mla_decode_absorbed(q, w_uk, latent, w_uv, softmax_scale=0.4)
    w_uv.mul_(2)  # same tensor, new version: packed again
    after = st.mla_decode_absorbed(q, w_uk, latent, w_uv, softmax_scale=0.4)
    assert torch.equal(after, sol.mla_decode_absorbed(q, sol.pack_experts(w_uk), latent, sol.pack_experts(w_uv), 0.4))
    assert rel(after, 2 * before) < 1e-6


def test_profile_costs_it_with_the_registry_formula():
    q, w_uk, latent, w_uv = op_args(torch.bfloat16, b=2, length=9)  # H 3, nope 6, rope 4, latent 10, v 5
    uk, uv = sol.pack_experts(w_uk), sol.pack_experts(w_uv)
    assert (uv.k, uv.n, len(uv)) == (10, 5, 3)
    _, prof = sol.profile(lambda: sol.mla_decode_absorbed(q, uk, latent, uv, 0.4), trace=None, roofline=None,
                          quiet=True)
    (r,) = prof.records
    b, h, dq, dk, dl, dv, length = 2, 3, 10, 14, 10, 5, 9
    assert r["flops"] == 2 * b * h * (dq * dk + length * (dk + dl) + dl * dv)
    assert r["bytes"] == 2 * (b * h * dq + b * length * dk + h * (dq * dk + dl * dv) + b * h * dv)
    assert r["bound"] in ("dot_bf16", "mem_read") and r["sol_pct"] > 0
    # The first seqlen rows of a longer buffer cost what a view of them costs.
    buffer = torch.cat([latent, latent], 1)
    _, prof = sol.profile(lambda: sol.mla_decode_absorbed(q, uk, buffer, uv, 0.4, seqlen=length), trace=None,
                          roofline=None, quiet=True)
    assert (prof.records[0]["flops"], prof.records[0]["bytes"]) == (r["flops"], r["bytes"])
    assert sol.op_cost("mla-decode-absorbed", batch=b, seqlen=length, heads=h, nope=6, rope=4, latent=dl, v=dv,
                       dtype="bf16") == {"flops": r["flops"], "bytes": r["bytes"], "compute": "dot_bf16",
                                         "memory": "mem_read"}
    with pytest.raises(sol.Error, match="op_cost: op 'gemm' has no cost without building a case"):
        sol.op_cost("gemm", m=4)
