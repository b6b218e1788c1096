"""Every operator against a float64 numpy reference on random inputs (f32, bf16, fp8)."""
import math

import numpy as np
import pytest

import sol
from helpers import BF16, DTYPES, E4M3, E5M2, TOL, f64, poison, randn, rel_err


# ---- data movement ---------------------------------------------------------------------

def test_copy_strided_source(rng):
    x = randn(rng, (37, 64))
    view = x[::3, 1::2]
    y = sol.copy(view)
    assert y.shape == view.shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, view)


@pytest.mark.parametrize("dtype", [BF16, E4M3, E5M2, np.float16])
def test_cast_from_f32_rounds_like_ml_dtypes(rng, dtype):
    x = randn(rng, (5, 129), scale=3.0)  # within every format's range
    y = sol.cast(x, dtype)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.view(np.uint8), x.astype(dtype).view(np.uint8))
    back = sol.cast(y, "f32")
    np.testing.assert_array_equal(back, y.astype(np.float32))


def test_cast_dtype_spellings(rng):
    x = randn(rng, (4, 16))
    for spelling in ("bf16", "bfloat16", BF16, np.dtype(BF16)):
        assert sol.cast(x, spelling).dtype == np.dtype(BF16)


def test_embedding(rng):
    table = randn(rng, (50, 96), BF16)
    ids = rng.integers(0, 50, size=13).astype(np.int32)
    out = sol.embedding(table, ids)
    np.testing.assert_array_equal(out.view(np.uint16), table[ids].view(np.uint16))


# ---- gemm ------------------------------------------------------------------------------

def silu(x):
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 65), (64, 96, 128)])
def test_gemm_f32_nn(rng, m, n, k):
    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    d = sol.gemm(a, b)
    assert d.shape == (m, n) and d.dtype == np.float32
    assert rel_err(d, f64(a) @ f64(b)) < TOL["f32"]


def test_gemm_nt_bias_silu_alpha_beta(rng):
    m, n, k = 23, 40, 72
    a, w = randn(rng, (m, k)), randn(rng, (n, k))
    c, bias = randn(rng, (m, n)), randn(rng, (n,))
    d = sol.gemm(a, w, layout="nt", alpha=0.5, beta=2.0, c=c, bias=bias, activation="silu")
    ref = silu(0.5 * f64(a) @ f64(w).T + 2.0 * f64(c) + f64(bias))
    assert rel_err(d, ref) < TOL["f32"]


@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
def test_gemm_bf16(rng, out_dtype):
    m, n, k = 31, 64, 160
    a, b = randn(rng, (m, k), BF16), randn(rng, (k, n), BF16)
    d = sol.gemm(a, b, out_dtype=out_dtype)
    assert d.dtype == np.dtype(DTYPES[out_dtype])
    assert rel_err(d, f64(a) @ f64(b)) < (TOL["f32"] if out_dtype == "f32" else TOL["bf16"])


def test_gemm_packed_matches_plain(rng):
    a, w = randn(rng, (19, 256), BF16), randn(rng, (48, 256), BF16)
    packed = sol.pack_b(w, "nt")
    assert (packed.k, packed.n, packed.dtype) == (256, 48, "bf16")
    plain = sol.gemm(a, w, layout="nt", out_dtype="f32")
    np.testing.assert_array_equal(sol.gemm(a, packed, out_dtype="f32"), plain)


def test_gemm_leading_dimension_views(rng):
    big_a, big_d = randn(rng, (20, 100)), poison((20, 50), np.float32)
    b = randn(rng, (60, 30))
    d = sol.gemm(big_a[:, :60], b, out=big_d[:, 10:40])
    assert rel_err(d, f64(big_a[:, :60]) @ f64(b)) < TOL["f32"]
    assert np.isnan(big_d[:, :10]).all() and np.isnan(big_d[:, 40:]).all()


def test_gemm_int8_is_exact(rng):
    a = rng.integers(-128, 128, size=(13, 200)).astype(np.int8)
    au = rng.integers(0, 256, size=(13, 200)).astype(np.uint8)
    b = rng.integers(-128, 128, size=(200, 24)).astype(np.int8)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    d = sol.gemm(a, b)
    assert d.dtype == np.int32
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(sol.gemm(au, b), au.astype(np.int64) @ b.astype(np.int64))


def test_gemm_fp8_block_scaled(rng):
    m, n, k = 9, 136, 256
    qa, sa = sol.quant_fp8_per_token(randn(rng, (m, k), BF16))
    qb, sb = sol.quant_fp8_per_block(randn(rng, (n, k), BF16))
    a_deq = (f64(qa).reshape(m, 2, 128) * f64(sa)[..., None]).reshape(m, k)
    b_deq = f64(qb) * np.repeat(np.repeat(f64(sb), 128, 0), 128, 1)[:n]
    d = sol.gemm(qa, qb, layout="nt", a_scales=sa, b_scales=sb)
    assert d.dtype == np.dtype(BF16)
    assert rel_err(d, a_deq @ b_deq.T) < TOL["bf16"]
    packed = sol.pack_b(qb, "nt", b_scales=sb)
    np.testing.assert_array_equal(sol.gemm(qa, packed, a_scales=sa, out_dtype="f32"),
                                  sol.gemm(qa, qb, layout="nt", a_scales=sa, b_scales=sb, out_dtype="f32"))
    x = randn(rng, (m, k), BF16)  # weight-only fp8
    assert rel_err(sol.gemm(x, qb, layout="nt", b_scales=sb, out_dtype="f32"), f64(x) @ b_deq.T) < TOL["f32"]


def test_grouped_gemm_contiguous_and_masked(rng):
    groups, n, k = 3, 40, 64
    b = randn(rng, (groups, n, k), BF16)
    layout = np.array([0] * 5 + [-1] * 3 + [2] * 4 + [1] * 2, np.int32)
    a = randn(rng, (len(layout), k), BF16)
    d = sol.grouped_gemm_contiguous(a, b, layout, out_dtype="f32")
    for r, e in enumerate(layout):
        if e < 0:
            assert (d[r] == 0).all()
        else:
            assert rel_err(d[r], f64(a[r]) @ f64(b[e]).T) < TOL["f32"]
    packed = sol.pack_experts(b)
    assert len(packed) == groups
    np.testing.assert_array_equal(sol.grouped_gemm_contiguous(a, packed, layout, out_dtype="f32"), d)
    masked_m = np.array([2, 0, 5], np.int32)
    a3 = randn(rng, (groups, 6, k), BF16)
    d3 = sol.grouped_gemm_masked(a3, b, masked_m)
    assert d3.shape == (groups, 6, n) and d3.dtype == np.dtype(BF16)
    for g, rows in enumerate(masked_m):
        assert rel_err(d3[g, :rows], f64(a3[g, :rows]) @ f64(b[g]).T) < TOL["bf16"]
        assert (f64(d3[g, rows:]) == 0).all()
    np.testing.assert_array_equal(sol.grouped_gemm_masked(a3, packed, masked_m).view(np.uint16), d3.view(np.uint16))


# ---- fp8 quantization ------------------------------------------------------------------

def quant_ref(x, group):
    """DeepSeek's f32-scale rule, exactly as sol/quant.h writes it (f32 arithmetic)."""
    x32 = np.asarray(x).astype(np.float32)
    t, h = x32.shape
    g = x32.reshape(t, h // group, group)
    amax = np.maximum(np.abs(g).max(axis=-1), np.float32(1e-4))
    scale = amax / np.float32(448.0)
    q = (g * (np.float32(448.0) / amax)[..., None]).astype(E4M3).reshape(t, h)
    return q, scale.astype(np.float32)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_quant_fp8_per_token(rng, dtype):
    x = randn(rng, (7, 384), DTYPES[dtype], scale=4.0)
    q, scales = sol.quant_fp8_per_token(x)
    q_ref, s_ref = quant_ref(x, 128)
    assert q.dtype == np.dtype(E4M3) and scales.shape == (7, 3)
    np.testing.assert_array_equal(scales, s_ref)
    np.testing.assert_array_equal(q.view(np.uint8), q_ref.view(np.uint8))
    y = sol.dequant_fp8_per_token(q, scales, out_dtype=DTYPES[dtype])
    assert rel_err(y, f64(x)) < TOL["fp8"]


def test_quant_fp8_ue8m0_scales_are_powers_of_two(rng):
    x = randn(rng, (5, 256), scale=10.0)
    q, scales = sol.quant_fp8_per_token(x, scale_format="ue8m0")
    mantissa, _ = np.frexp(scales)
    assert (mantissa == 0.5).all()
    y = f64(q).reshape(5, 2, 128) * f64(scales)[..., None]
    assert rel_err(y.reshape(5, 256), f64(x)) < TOL["fp8"]


def test_quant_fp8_per_block(rng):
    w = randn(rng, (200, 256), BF16)
    q, scales = sol.quant_fp8_per_block(w)
    assert scales.shape == (2, 2)
    y = f64(q) * np.repeat(np.repeat(f64(scales), 128, 0), 128, 1)[:200]
    assert rel_err(y, f64(w)) < TOL["fp8"]
    amax = np.abs(f64(w)[:128, :128]).max()
    assert scales[0, 0] == np.float32(np.float32(amax) / np.float32(448))


# ---- norms -----------------------------------------------------------------------------

def rmsnorm_ref(x, w, eps=1e-6):
    x = f64(x)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * f64(w)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_rmsnorm(rng, dtype):
    x, w = randn(rng, (9, 1000), DTYPES[dtype]), randn(rng, (1000,), DTYPES[dtype])
    y = sol.rmsnorm(x, w, eps=1e-5)
    assert y.dtype == x.dtype
    assert rel_err(y, rmsnorm_ref(x, w, 1e-5)) < TOL[dtype]


def test_add_rmsnorm_updates_residual_in_place(rng):
    x, r, w = randn(rng, (6, 512), BF16), randn(rng, (6, 512), BF16), randn(rng, (512,), BF16)
    new_r = (f64(r) + f64(x)).astype(np.float32).astype(BF16)
    y = sol.add_rmsnorm(x, r, w)
    np.testing.assert_array_equal(r.view(np.uint16), new_r.view(np.uint16))
    assert rel_err(y, rmsnorm_ref(new_r, w)) < TOL["bf16"]


@pytest.mark.parametrize("with_bias", [False, True])
def test_layernorm(rng, with_bias):
    x, w = randn(rng, (5, 333)) + 3.0, randn(rng, (333,))
    b = randn(rng, (333,)) if with_bias else None
    y = sol.layernorm(x, w, b, eps=1e-5)
    x64 = f64(x)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * f64(w)
    if with_bias:
        ref += f64(b)
    assert rel_err(y, ref) < TOL["f32"]


def test_rmsnorm_quant_fp8_is_the_composition(rng):
    x, w = randn(rng, (4, 512), BF16), randn(rng, (512,), BF16)
    q, s = sol.rmsnorm_quant_fp8(x, w)
    q2, s2 = sol.quant_fp8_per_token(sol.rmsnorm(x, w))
    np.testing.assert_array_equal(q.view(np.uint8), q2.view(np.uint8))
    np.testing.assert_array_equal(s, s2)


# ---- activations -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_silu_mul(rng, dtype):
    gu = randn(rng, (7, 2 * 300), DTYPES[dtype])
    y = sol.silu_mul(gu)
    assert y.shape == (7, 300)
    g, u = f64(gu)[:, :300], f64(gu)[:, 300:]
    assert rel_err(y, silu(g) * u) < TOL[dtype]


def test_silu_mul_quant_fp8(rng):
    gu = randn(rng, (3, 512), BF16)
    q, s = sol.silu_mul_quant_fp8(gu)
    assert q.shape == (3, 256) and s.shape == (3, 2)
    q2, s2 = sol.quant_fp8_per_token(sol.silu_mul(gu))
    np.testing.assert_array_equal(q.view(np.uint8), q2.view(np.uint8))


_erf = np.vectorize(math.erf)


@pytest.mark.parametrize("form", ["tanh", "erf"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_gelu(rng, form, dtype):
    x = randn(rng, (6, 257), DTYPES[dtype], scale=3.0)
    y = sol.gelu(x, form)
    v = f64(x)
    if form == "tanh":
        ref = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    else:
        ref = 0.5 * v * (1 + _erf(v / math.sqrt(2)))
    assert rel_err(y, ref) < TOL[dtype]


def test_gelu_quant_fp8(rng):
    x = randn(rng, (2, 256), BF16)
    q, s = sol.gelu_quant_fp8(x, "erf")
    q2, _ = sol.quant_fp8_per_token(sol.gelu(x, "erf"))
    np.testing.assert_array_equal(q.view(np.uint8), q2.view(np.uint8))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_softmax_with_masked_entries(rng, dtype):
    x = randn(rng, (3, 4, 129), DTYPES[dtype], scale=2.0)
    x[:, :, :7] = -np.inf
    y = sol.softmax(x)
    v = f64(x)
    e = np.exp(v - v.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    assert (f64(y)[..., :7] == 0).all()
    assert rel_err(y, ref) < TOL[dtype]


# ---- rope ------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope(rng, layout):
    cfg = sol.RopeConfig(rope_dim=64, theta=10000.0, layout=layout)
    table = sol.RopeTable(cfg, 512)
    t, heads, head_dim, offset = 11, 3, 192, 128
    x = randn(rng, (t, heads, head_dim))
    pos = rng.integers(0, 512, size=t).astype(np.int32)
    ref = f64(x).copy()
    inv = 10000.0 ** (-np.arange(32) * 2 / 64)
    np.testing.assert_allclose(sol.rope_inv_freq(cfg), inv, rtol=1e-12)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    sl = ref[:, :, offset:offset + 64]
    i0, i1 = (slice(0, 64, 2), slice(1, 64, 2)) if layout == "interleaved" else (slice(0, 32), slice(32, 64))
    a, b = sl[..., i0].copy(), sl[..., i1].copy()
    sl[..., i0], sl[..., i1] = a * cos - b * sin, a * sin + b * cos
    out = sol.rope(x, pos, table, offset)
    assert out is x
    assert rel_err(x, ref) < TOL["f32"]


def test_deepseek_v3_rope_config():
    cfg = sol.deepseek_v3_rope()
    assert (cfg.rope_dim, cfg.factor, cfg.layout) == (64, 40.0, "interleaved")
    plain = sol.rope_inv_freq(sol.RopeConfig(rope_dim=64, theta=cfg.theta))
    yarn = sol.rope_inv_freq(cfg)
    assert len(yarn) == 32 and yarn[0] == plain[0]  # the fastest pair keeps its frequency
    assert yarn[-1] == pytest.approx(plain[-1] / 40.0)  # the slowest is interpolated
    x = randn(np.random.default_rng(1), (2, 1, 64))
    sol.rope(x, np.array([0, 0], np.int32), sol.RopeTable(cfg, 4))
    assert np.isfinite(x).all()


# ---- MoE -------------------------------------------------------------------------------

def routing_ref(logits, bias, top_k, n_group, topk_group, scoring, renormalize, scaling):
    v = f64(logits)
    if scoring == "sigmoid":
        scores = 1 / (1 + np.exp(-v))
    else:
        e = np.exp(v - v.max(-1, keepdims=True))
        scores = e / e.sum(-1, keepdims=True)
    sel = scores + (f64(bias) if bias is not None else 0.0)
    t, experts = v.shape
    idx = np.zeros((t, top_k), np.int32)
    w = np.zeros((t, top_k))
    for r in range(t):
        groups = sel[r].reshape(n_group, experts // n_group)
        top2 = -np.sort(-groups, axis=1)
        gscore = top2[:, :2].sum(1) if scoring == "sigmoid" else top2[:, 0]
        keep = np.argsort(-gscore, kind="stable")[:topk_group]
        masked = np.full(experts, -np.inf)
        for g in keep:
            span = slice(g * (experts // n_group), (g + 1) * (experts // n_group))
            masked[span] = sel[r][span]
        idx[r] = np.argsort(-masked, kind="stable")[:top_k]
        w[r] = scores[r][idx[r]]
        if renormalize:
            w[r] /= w[r].sum()
        w[r] *= scaling
    return idx, w


def test_moe_routing_deepseek_v3(rng):
    t, experts = 9, 64
    logits = np.stack([rng.permutation(experts) * 0.05 for _ in range(t)]).astype(np.float32)
    bias = (rng.permutation(experts) * 1e-3).astype(np.float32)
    idx, w = sol.moe_routing(logits, top_k=8, n_group=8, topk_group=4, scaling=2.5, correction_bias=bias)
    idx_ref, w_ref = routing_ref(logits, bias, 8, 8, 4, "sigmoid", True, 2.5)
    np.testing.assert_array_equal(idx, idx_ref)
    assert rel_err(w, w_ref) < TOL["f32"]


def test_moe_routing_int64_indices(rng):
    logits = rng.standard_normal((11, 64)).astype(np.float32)
    out = np.full((11, 8), -7, np.int64)
    idx, w = sol.moe_routing(logits, top_k=8, n_group=8, topk_group=4, scaling=2.5, topk_idx=out)
    assert idx is out and idx.dtype == np.int64
    idx32, w32 = sol.moe_routing(logits, top_k=8, n_group=8, topk_group=4, scaling=2.5)
    np.testing.assert_array_equal(idx, idx32)
    np.testing.assert_array_equal(w, w32)


def test_moe_routing_softmax_bf16(rng):
    logits = np.stack([rng.permutation(16) * 0.25 for _ in range(5)]).astype(BF16)
    idx, w = sol.moe_routing(logits, top_k=2, scoring="softmax", renormalize=False)
    idx_ref, w_ref = routing_ref(logits, None, 2, 1, 1, "softmax", False, 1.0)
    np.testing.assert_array_equal(idx, idx_ref)
    assert rel_err(w, w_ref) < TOL["f32"]


def permute_ref(x, idx, experts, alignment):
    t, k = idx.shape
    blocks, layout, row_of, row = [], [], np.full((t, k), -1, np.int32), 0
    for e in range(experts):
        members = [(i, j) for i in range(t) for j in range(k) if idx[i, j] == e]
        if not members:
            continue
        padded = -(-len(members) // alignment) * alignment
        for n, (i, j) in enumerate(members):
            row_of[i, j] = row + n
        block = np.zeros((padded, x.shape[1]), np.float64)
        block[:len(members)] = f64(x)[[i for i, _ in members]]
        blocks.append(block)
        layout += [e] * len(members) + [-1] * (padded - len(members))
        row += padded
    x_perm = np.concatenate(blocks) if blocks else np.zeros((0, x.shape[1]))
    return x_perm, np.array(layout, np.int32), row_of


def test_moe_permute_and_unpermute(rng):
    t, k, experts, h, align = 13, 3, 6, 40, 8
    idx = np.stack([rng.choice(experts, k, replace=False) for _ in range(t)]).astype(np.int32)
    idx[2, 1] = -1  # not routed here (a remote expert)
    x = randn(rng, (t, h), BF16)
    x_perm, layout, row_of = sol.moe_permute(x, idx, experts, align)
    ref_x, ref_layout, ref_rows = permute_ref(x, idx, experts, align)
    assert sol.moe_permuted_rows(idx, experts, align) == len(ref_layout)
    np.testing.assert_array_equal(layout, ref_layout)
    np.testing.assert_array_equal(row_of, ref_rows)
    np.testing.assert_array_equal(f64(x_perm), ref_x)
    weights = rng.random((t, k)).astype(np.float32)
    y = sol.moe_unpermute(x_perm, row_of, weights)
    ref = np.zeros((t, h))
    for i in range(t):
        for j in range(k):
            if row_of[i, j] >= 0:
                ref[i] += weights[i, j] * ref_x[row_of[i, j]]
    assert rel_err(y, ref) < TOL["bf16"]


# ---- sampling --------------------------------------------------------------------------

def sample_ref(logits, temperature, top_k, top_p, seed):
    out = []
    for r, row in enumerate(f64(logits)):
        if temperature == 0:
            out.append(int(np.argmax(row)))
            continue
        z = row / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        order = np.lexsort((np.arange(len(p)), -p))
        if top_k:
            order = order[:top_k]
        c = np.cumsum(p[order])
        if top_p < 1.0:  # the shortest prefix holding top_p of what top_k kept
            order = order[:int(np.searchsorted(c, top_p * c[-1]) + 1)]
            c = c[:len(order)]
        u = sol.sampling_uniform(seed, r) * c[-1]
        out.append(int(order[np.argmax(c > u)]))
    return np.array(out, np.int32)


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.0, 0, 1.0), (1.0, 0, 1.0), (0.7, 20, 0.9)])
def test_sample(rng, temperature, top_k, top_p):
    logits = randn(rng, (8, 300), scale=2.0)
    ids = sol.sample(logits, temperature=temperature, top_k=top_k, top_p=top_p, seed=7)
    np.testing.assert_array_equal(ids, sample_ref(logits, temperature, top_k, top_p, 7))


# ---- MLA decode ------------------------------------------------------------------------

@pytest.mark.parametrize("fp8", [False, True])
def test_mla_decode_paged(rng, fp8):
    b, s_q, h_q, lens = 2, 1, 4, [50, 100]
    q = randn(rng, (b, s_q, h_q, 576), BF16)
    cache = randn(rng, (4, 64, 1, 576), BF16)
    block_table = np.array([[3, 0], [1, 2]], np.int32)  # pages anywhere, in any order
    seqlens = np.array(lens, np.int32)
    md = sol.get_mla_metadata(seqlens, s_q * h_q)
    scale = 1 / np.sqrt(192)
    kv_cache = sol.mla_quantize_kv_cache_fp8(cache) if fp8 else cache
    if fp8:  # the reference reads what the fp8 cache holds: FlashMLA's 656-byte token rows
        raw = kv_cache.view(np.uint8)
        codes = f64(raw[..., :512].view(E4M3))
        scales = f64(np.ascontiguousarray(raw[..., 512:528]).view(np.float32))
        rope = f64(np.ascontiguousarray(raw[..., 528:656]).view(BF16))
        cache = np.concatenate([codes * np.repeat(scales, 128, axis=-1), rope], axis=-1)
    out, lse = sol.mla_decode_with_kvcache(q, kv_cache, block_table, seqlens, 512, scale, False, md)
    assert out.shape == (b, s_q, h_q, 512) and out.dtype == np.dtype(BF16) and lse.shape == (b, h_q, s_q)
    for i in range(b):
        kv = f64(np.concatenate([cache[p, :, 0] for p in block_table[i]])[:lens[i]])
        s = f64(q[i, 0]) @ kv.T * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        assert rel_err(out[i, 0], (p / p.sum(-1, keepdims=True)) @ kv[:, :512]) < TOL["bf16"]
        assert rel_err(lse[i, :, 0], np.log(p.sum(-1)) + s.max(-1)) < 1e-3
