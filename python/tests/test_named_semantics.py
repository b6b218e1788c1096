"""Ops documented with DeepGEMM's, FlashMLA's or DeepEP's semantics against those projects' own
test references, rewritten here in torch / numpy.

Quantization (DeepGEMM): bit for bit. DeepGEMM's tests quantize with plain torch: per token
(1 x 128 groups) and per 128 x 128 block, amax clamped to 1e-4, q = fp8(x * (448 / amax)) with
the f32 reciprocal-multiply, scale = amax / 448; with UE8M0 scales, scale = 2^ceil(log2(amax /
448)) and q = fp8(x / scale). Those formulas are written out here in torch (torch's
float8_e4m3fn cast rounds to nearest even) and Sol's results must equal them in every bit, edge
cases included: all-zero groups, exact rounding ties, a partial last block row.
GEMMs (DeepGEMM), MLA decode (FlashMLA): their tests' own criteria (calc_diff / cos_diff against
an f32 torch reference), their layouts' padding rows and empty groups, FlashMLA's empty and short
sequences; where the results are not bit-defined the test says why. Dispatch layout (DeepEP):
exact, under mpirun (ep_layout_worker.py)."""
import pytest

torch = pytest.importorskip("torch")
import sol  # noqa: E402


def per_token_reference(x, ue8m0):
    t, h = x.shape
    g = x.float().view(t, h // 128, 128)
    amax = g.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
        q = (g / scale).to(torch.float8_e4m3fn)
    else:
        scale = amax / 448.0
        q = (g * (448.0 / amax)).to(torch.float8_e4m3fn)
    return q.view(t, h), scale.view(t, h // 128)


def per_block_reference(w):
    n, k = w.shape
    rows = (n + 127) // 128 * 128
    padded = torch.zeros(rows, k, dtype=torch.float32)
    padded[:n] = w.float()
    blocks = padded.view(rows // 128, 128, k // 128, 128)
    amax = blocks.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
    q = (blocks * (448.0 / amax)).to(torch.float8_e4m3fn).view(rows, k)[:n]
    return q, (amax / 448.0).view(rows // 128, k // 128)


def inputs(dtype):
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(9, 512, generator=g) * 3).to(dtype)
    x[1, :128] = 0  # an all-zero group: amax clamps to 1e-4
    # Exact ties: with amax 448 the multiplier is 1, and 1.0625 lies halfway between the e4m3
    # values 1.0 and 1.125 (even: 1.0); 304 between 288 and 320 (even: 320).
    x[2, 128:256] = 0.5
    x[2, 128], x[2, 129], x[2, 130] = 448.0, 1.0625, 304.0
    x[3, 256:384] *= 1e-3  # small magnitudes: subnormal codes
    if dtype == torch.float32:
        # Where the order matters: x * (448 / amax) and x / amax * 448 round to different e4m3
        # codes for these pairs (found by search), so only DeepGEMM's order passes.
        x[4, 384:512] = 0.25
        x[4, 384], x[4, 385] = 11.1, 4.558928489685059
        x[5, 384:512] = 0.125
        x[5, 384], x[5, 385] = 0.77, 0.6875
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_quant_fp8_per_token_is_deepgemm_bit_for_bit(dtype, ue8m0):
    x = inputs(dtype)
    q, s = sol.quant_fp8_per_token(x, scale_format="ue8m0" if ue8m0 else "f32")
    q_ref, s_ref = per_token_reference(x, ue8m0)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(s, s_ref)


def test_quant_fp8_per_block_is_deepgemm_bit_for_bit():
    w = inputs(torch.bfloat16).repeat(15, 1)[:130]  # 130 rows: a partial last block row
    q, s = sol.quant_fp8_per_block(w)
    q_ref, s_ref = per_block_reference(w)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(s, s_ref)


# ------------------------------------------------------------------------- DeepGEMM's GEMMs
# DeepGEMM's tests draw bf16 A [m, k] and B [n, k] from randn, quantize A per token (1 x 128) and
# B per 128 x 128 block, run the FP8 kernel and compare it with the unquantized product
# (a.float() @ b.float().T, rounded to the output dtype) by calc_diff = 1 - 2 sum(xy) /
# sum(x^2 + y^2) (in float64), asserting calc_diff < 0.001. The kernel itself is not bit-defined:
# the Hopper tensor cores add FP8 products in a reduced-precision accumulator inside each
# 128-deep K block before the f32 promotion with the scales; Sol adds them in f32. So the check
# below is DeepGEMM's own criterion, plus Sol's result against the exact product of the
# dequantized operands (what the promotion computes when every sum is exact).

def calc_diff(x, y):
    x, y = x.double(), y.double()
    return (1 - 2 * (x * y).sum() / (x * x + y * y).sum()).item()


def dequant(q, scales, rows_per_scale):
    """q [r, k] fp8 with one f32 scale per (rows_per_scale x 128) block -> f64."""
    s = scales.double().repeat_interleave(rows_per_scale, 0)[:q.shape[0]].repeat_interleave(128, 1)
    return q.double() * s


@pytest.mark.parametrize("m,n,k", [(1, 576, 1536), (128, 256, 512), (129, 320, 384)])
def test_fp8_gemm_passes_deepgemm_test_and_equals_the_dequantized_product(m, n, k):
    g = torch.Generator().manual_seed(m + n)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    qa, sa = sol.quant_fp8_per_token(a)
    qb, sb = sol.quant_fp8_per_block(b)
    for out_dtype in (torch.bfloat16, torch.float32):
        d = sol.gemm(qa, qb, layout="nt", a_scales=sa, b_scales=sb, out_dtype=out_dtype)
        assert d.dtype == out_dtype and d.shape == (m, n)
        assert calc_diff(d, (a.float() @ b.float().t()).to(out_dtype)) < 0.001  # DeepGEMM's bar
    exact = dequant(qa, sa, 1) @ dequant(qb, sb, 128).t()
    d = sol.gemm(qa, qb, layout="nt", a_scales=sa, b_scales=sb, out_dtype=torch.float32)
    assert ((d.double() - exact).norm() / exact.norm()).item() < 1e-6  # f32 sums of exact products


def contiguous_case(group_ms, n, k, align=128, seed=0):
    """DeepGEMM's m-grouped contiguous layout: group i takes align(m_i) rows, its m_i real rows
    labelled i and the rest -1, with A's padding rows zero; the reference is A @ B[i]^T per group."""
    g = torch.Generator().manual_seed(seed)
    rows = sum((mi + align - 1) // align * align for mi in group_ms)
    a = torch.randn(rows, k, generator=g).to(torch.bfloat16)
    b = torch.randn(len(group_ms), n, k, generator=g).to(torch.bfloat16)
    layout = torch.full((rows,), -1, dtype=torch.int32)
    ref = torch.zeros(rows, n)
    start = 0
    for i, mi in enumerate(group_ms):
        end = start + (mi + align - 1) // align * align
        layout[start:start + mi] = i
        a[start + mi:end] = 0
        ref[start:end] = a[start:end].float() @ b[i].float().t()
        start = end
    return a, b, layout, ref


def test_grouped_gemm_contiguous_on_deepgemm_layout():
    # An empty group (0 rows) and groups with 1 and exactly 128 rows among ordinary ones.
    a, b, layout, ref = contiguous_case([90, 0, 1, 128, 200], n=192, k=256)
    valid = layout >= 0
    d = sol.grouped_gemm_contiguous(a, b, layout)  # bf16
    assert calc_diff(d[valid], ref[valid]) < 0.001
    # bf16 x bf16 products are exact in f32: only the summation order differs from the reference.
    d32 = sol.grouped_gemm_contiguous(a, b, layout, out_dtype=torch.float32)
    assert ((d32[valid] - ref[valid]).norm() / ref[valid].norm()).item() < 1e-6
    # Padding rows: DeepGEMM leaves them unspecified (its test reads only valid rows); Sol leaves
    # them untouched, so a caller's poisoned buffer keeps its poison there.
    out = torch.full_like(d, float("nan"))
    sol.grouped_gemm_contiguous(a, b, layout, out=out)
    assert torch.isnan(out[~valid]).all() and torch.equal(out[valid], d[valid])
    # FP8 operands quantized as DeepGEMM's test does (A per token, B per block, per group).
    qa, sa = sol.quant_fp8_per_token(a)
    pairs = [sol.quant_fp8_per_block(b[i]) for i in range(b.shape[0])]
    qb, sb = torch.stack([q for q, _ in pairs]), torch.stack([s for _, s in pairs])
    d8 = sol.grouped_gemm_contiguous(qa, qb, layout, a_scales=sa, b_scales=sb)
    assert calc_diff(d8[valid], ref[valid]) < 0.001


def test_moe_permute_builds_deepgemm_contiguous_layout():
    """From a routing, moe_permute's grouped_layout is DeepGEMM's: experts in ascending order, each
    padded to 128 rows with -1 (an expert without tokens takes none), and topk_idx -1 routes
    nowhere (DeepEP's mask for remote experts)."""
    g = torch.Generator().manual_seed(3)
    experts, tokens, k = 6, 150, 2
    idx = torch.stack([torch.randperm(experts - 1, generator=g)[:k] for _ in range(tokens)])  # expert 5 unused
    idx[::7, 1] = -1
    x = torch.randn(tokens, 64, generator=g).to(torch.bfloat16)
    x_perm, layout, row_of = sol.moe_permute(x, idx, experts, 128)
    counts = [int((idx == e).sum()) for e in range(experts)]
    expected = torch.cat([torch.tensor([e] * c + [-1] * ((-c) % 128), dtype=torch.int32)
                          for e, c in enumerate(counts)])
    assert torch.equal(layout, expected)
    assert torch.equal(row_of[idx < 0], torch.full_like(row_of[idx < 0], -1))
    routed = idx >= 0
    assert torch.equal(x_perm[row_of[routed].long()], x[routed.nonzero()[:, 0]])
    assert (x_perm[layout < 0] == 0).all()


def test_grouped_gemm_masked_on_deepgemm_layout():
    """DeepGEMM's masked layout: a [G, max_m, k], masked_m[g] valid rows (0 and max_m included);
    reference einsum('gmk,gnk->gmn') read on the valid rows only."""
    g = torch.Generator().manual_seed(4)
    groups, max_m, n, k = 4, 64, 128, 256
    a = torch.randn(groups, max_m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(groups, n, k, generator=g).to(torch.bfloat16)
    masked_m = torch.tensor([0, 1, 37, max_m], dtype=torch.int32)
    ref = torch.einsum("gmk,gnk->gmn", a.float(), b.float())
    valid = torch.arange(max_m)[None, :] < masked_m[:, None]
    d = sol.grouped_gemm_masked(a, b, masked_m)
    assert calc_diff(d[valid], ref[valid]) < 0.001
    out = torch.full_like(d, float("nan"))
    sol.grouped_gemm_masked(a, b, masked_m, out=out)
    assert torch.isnan(out[~valid]).all() and torch.equal(out[valid], d[valid])


# ------------------------------------------------------------------------- FlashMLA's decode
# FlashMLA's decode test: q [b, s_q, h_q, 576] and a paged cache of randn, 64-token pages taken
# in order (block_table = arange), cache rows at or past cache_seqlens[i] set to NaN, v = the
# first 512 dims of k, scale 1/sqrt(576); the reference per sequence is plain attention in f32
# (scores, causal mask tril(diagonal = s_k - s_q), logsumexp, softmax, P @ V), compared by
# cos_diff = 1 - 2 sum(xy) / sum(x^2 + y^2) < 1e-5 on out and on lse.

def flashmla_reference(q, cache, seqlens, causal, scale):
    b, s_q, h_q, d = q.shape
    rows = cache.view(b, -1, d)
    out = torch.zeros(b, s_q, h_q, 512)
    lse = torch.zeros(b, h_q, s_q)
    for i in range(b):
        n = int(seqlens[i])
        k = rows[i, :n].float()
        s = torch.einsum("qhd,kd->hqk", q[i].float(), k) * scale
        if causal:
            visible = torch.ones(s_q, n, dtype=torch.bool).tril(diagonal=n - s_q)
            s = s.masked_fill(~visible, float("-inf"))
        lse[i] = s.logsumexp(-1)
        out[i] = torch.einsum("hqk,kd->qhd", torch.softmax(s, -1), k[:, :512])
    return out, lse


def mla_case(seqlens, s_q, h_q, seed=0):
    g = torch.Generator().manual_seed(seed)
    b = len(seqlens)
    pages = max(1, (max(seqlens) + 63) // 64)
    q = torch.randn(b, s_q, h_q, 576, generator=g).to(torch.bfloat16)
    cache = torch.randn(b * pages, 64, 1, 576, generator=g).to(torch.bfloat16)
    flat = cache.view(b, pages * 64, 576)
    for i, n in enumerate(seqlens):
        flat[i, n:] = float("nan")  # FlashMLA's test poisons the unused tail of each sequence
    table = torch.arange(b * pages, dtype=torch.int32).view(b, pages)
    return q, cache, table, torch.tensor(seqlens, dtype=torch.int32)


def run_mla(q, cache, table, seqlens, causal):
    md = sol.get_mla_metadata(seqlens, q.shape[1] * q.shape[2])
    return sol.mla_decode_with_kvcache(q, cache, table, seqlens, 512, 576 ** -0.5, causal, md)


@pytest.mark.parametrize("s_q,causal", [(1, False), (2, True)])
def test_mla_decode_passes_flashmla_test(s_q, causal):
    seqlens = [300, 64, 2, 129]
    q, cache, table, lens = mla_case(seqlens, s_q, h_q=16, seed=s_q)
    out, lse = run_mla(q, cache, table, lens, causal)
    ref_out, ref_lse = flashmla_reference(q, cache, lens, causal, 576 ** -0.5)
    assert calc_diff(out, ref_out) < 1e-5 and calc_diff(lse, ref_lse) < 1e-5
    # Not bit for bit: Sol (as FlashMLA's kernel) rounds the probabilities to bf16 before P @ V and
    # sums in another order than torch's reference; the normwise error stays near bf16 rounding.
    assert ((out.float() - ref_out).norm() / ref_out.norm()).item() < 2 ** -8


def test_mla_decode_edge_cases_against_flashmla_reference():
    # cache_seqlens 0 (an empty sequence) and 1: the reference's logsumexp of no scores is -inf
    # and P @ V over no rows is 0 -- Sol writes exactly that (out 0, lse -inf).
    q, cache, table, lens = mla_case([0, 1, 65], 1, h_q=8, seed=5)
    out, lse = run_mla(q, cache, table, lens, False)
    ref_out, ref_lse = flashmla_reference(q, cache, lens, False, 576 ** -0.5)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(lse[0], ref_lse[0])
    assert torch.isneginf(lse[0]).all()
    # One cached token: softmax is exactly 1, out = v rounded to bf16, lse = the single score.
    assert torch.equal(out[1].float(), ref_out[1].to(torch.bfloat16).float())
    assert calc_diff(out[2], ref_out[2]) < 1e-5 and calc_diff(lse[1:], ref_lse[1:]) < 1e-5
    # Causal with fewer cached tokens than queries (seqlen 1, s_q 2): the first query sees no key.
    # FlashMLA's dense test never builds this (its lengths are >= s_q) and its torch reference would
    # give NaN (softmax of a row of -inf); FlashMLA's sparse-decode reference defines out 0 and lse
    # +inf for such a "lonely" query. Sol gives out 0 and lse -inf (the log of an empty sum), as
    # flash-attn does: the one documented difference.
    q, cache, table, lens = mla_case([1], 2, h_q=4, seed=6)
    out, lse = run_mla(q, cache, table, lens, True)
    ref_out, ref_lse = flashmla_reference(q, cache, lens, True, 576 ** -0.5)
    assert torch.isnan(ref_out[0, 0]).all() and torch.isneginf(ref_lse[0, :, 0]).all()
    assert torch.equal(out[0, 0], torch.zeros_like(out[0, 0])) and torch.isneginf(lse[0, :, 0]).all()
    assert calc_diff(out[0, 1], ref_out[0, 1]) < 1e-5


# ------------------------------------------------------------------------- DeepEP's layout
@pytest.mark.skipif(__import__("shutil").which("mpirun") is None, reason="mpirun is not installed")
def test_ep_layout_dispatch_combine_against_deepep_reference():
    from mpi_workers import run_under_mpirun
    run_under_mpirun("ep_layout_worker.py")
