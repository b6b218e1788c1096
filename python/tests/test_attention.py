"""Flash attention (forward, backward, varlen, GQA) against a float64 numpy reference."""
import numpy as np
import pytest

import sol
from helpers import BF16, TOL, f64, randn, rel_err


def attention_ref(q, k, v, causal):
    """q [Sq, H, D], k/v [Skv, Hkv, D] in float64 -> (o [Sq, H, Dv], lse [H, Sq], p [H, Sq, Skv])."""
    q, k, v = f64(q), f64(k), f64(v)
    sq, h, d = q.shape
    skv, hkv = k.shape[:2]
    k = np.repeat(k, h // hkv, axis=1)
    v = np.repeat(v, h // hkv, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    if causal:
        mask = np.arange(skv)[None, :] > np.arange(sq)[:, None] + skv - sq
        s[:, mask] = -np.inf
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (np.log(e.sum(-1, keepdims=True)) + m)[..., 0]
    p = e / e.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v), lse, p


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_gqa(rng, dtype, causal):
    b, sq, skv, h, hkv, d = 2, 37, 53, 4, 2, 64
    q, k, v = randn(rng, (b, sq, h, d), dtype), randn(rng, (b, skv, hkv, d), dtype), randn(rng, (b, skv, hkv, d), dtype)
    o, lse = sol.flash_attention(q, k, v, causal=causal)
    assert o.shape == (b, sq, h, d) and lse.shape == (b, h, sq)
    for i in range(b):
        o_ref, lse_ref, _ = attention_ref(q[i], k[i], v[i], causal)
        assert rel_err(o[i], o_ref) < (TOL["f32"] if dtype == np.float32 else TOL["bf16"])
        assert rel_err(lse[i], lse_ref) < (1e-5 if dtype == np.float32 else 1e-3)


def test_flash_attention_varlen(rng):
    lens_q, lens_k, h, d = [5, 0, 17], [9, 4, 17], 2, 32
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(rng, (cu_q[-1], h, d)), randn(rng, (cu_k[-1], h, d)), randn(rng, (cu_k[-1], h, d))
    o, lse = sol.flash_attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert lse.shape == (h, cu_q[-1])
    for i in range(3):
        sl_q, sl_k = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        if lens_q[i] == 0:
            continue
        o_ref, _, _ = attention_ref(q[sl_q], k[sl_k], v[sl_k], True)
        assert rel_err(o[sl_q], o_ref) < TOL["f32"]


def test_flash_attention_backward(rng):
    sq, skv, h, d = 19, 23, 2, 32
    q, k, v = randn(rng, (1, sq, h, d)), randn(rng, (1, skv, h, d)), randn(rng, (1, skv, h, d))
    o, lse = sol.flash_attention(q, k, v, causal=True)
    d_o = randn(rng, (1, sq, h, d))
    dq, dk, dv = sol.flash_attention_backward(q, k, v, o, lse, d_o, causal=True)
    o_ref, _, p = attention_ref(q[0], k[0], v[0], True)
    g = f64(d_o[0])
    dv_ref = np.einsum("hqk,qhd->khd", p, g)
    dp = np.einsum("qhd,khd->hqk", g, f64(v[0]))
    ds = p * (dp - np.einsum("qhd,qhd->hq", g, o_ref)[..., None]) / np.sqrt(d)
    dq_ref = np.einsum("hqk,khd->qhd", ds, f64(k[0]))
    dk_ref = np.einsum("hqk,qhd->khd", ds, f64(q[0]))
    assert rel_err(dq[0], dq_ref) < 1e-4
    assert rel_err(dk[0], dk_ref) < 1e-4
    assert rel_err(dv[0], dv_ref) < 1e-4
