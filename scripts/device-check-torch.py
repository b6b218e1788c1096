"""torch beside Sol on the same device shapes (scripts/device-check.sh): the same copy and cast
cases as `sol_gpu_tests bench_copy_cast`, the GEMM table of `bench_gemm` (at the end of this file)
and memory-bound cases as `bench_memory_bound` (rope,
softmax, DeepSeek-V3 routing, permute/unpermute without padding, embedding: torch's eager
compositions, which move more bytes than the floor counts), timed the same way (events, 256 MiB L2 flush before
each run, median of 21 after 3 warm-ups). One 'BENCH {json}' line per case."""
import json
import sys

try:
    import torch
except ImportError as e:
    print(f"torch not importable: {e}")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch sees no CUDA device")
    sys.exit(77)

DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f8e4m3": torch.float8_e4m3fn}
CASES = [("bf16", "bf16"), ("f32", "f32"), ("f32", "bf16"), ("bf16", "f32"), ("bf16", "f8e4m3"),
         ("f32", "f8e4m3"), ("f8e4m3", "bf16")]
rows, cols = 4096, 7168
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def median_seconds(fn):
    times = []
    for i in range(24):
        flush.fill_(i)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop) / 1e3)
    times.sort()
    return times[len(times) // 2]


for src, dst in CASES:
    a = torch.randn(rows, cols, device="cuda").to(DT[src])
    b = torch.empty(rows, cols, device="cuda", dtype=DT[dst])
    t = median_seconds(lambda: b.copy_(a))
    nbytes = a.numel() * (a.element_size() + b.element_size())
    print("BENCH " + json.dumps({"op": "torch copy_" if src == dst else "torch cast", "shape": f"{rows}x{cols}",
                                 "from": src, "to": dst, "time_s": t, "bytes": nbytes,
                                 "gbps": round(nbytes / t / 1e9, 1)}))


# The memory-bound ops of `sol_gpu_tests bench_memory_bound`, as torch composes them (eager).
def rope_interleaved(x, cos, sin):
    """x [T, H, 64] rotated in place, pairs (2i, 2i+1); cos/sin [T, 32] per token."""
    pairs = x.view(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0].float(), pairs[..., 1].float()
    c, s = cos[:, None, :], sin[:, None, :]
    x.copy_(torch.stack((a * c - b * s, a * s + b * c), dim=-1).view(x.shape).to(x.dtype))


def v3_routing(logits, bias, k=8, groups=8, topk_group=4, scaling=2.5):
    scores = logits.float().sigmoid()
    sel = scores + bias
    group_scores = sel.view(sel.shape[0], groups, -1).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(topk_group, dim=-1).indices, 1.0)
    sel = sel.masked_fill(keep.repeat_interleave(sel.shape[1] // groups, dim=1) == 0, float("-inf"))
    idx = sel.topk(k, dim=-1).indices
    w = scores.gather(1, idx)
    return idx, w * (scaling / w.sum(-1, keepdim=True))


def permute(x, idx):
    order = idx.flatten().argsort(stable=True)
    return x.index_select(0, order // idx.shape[1]), order


def unpermute(y, order, w, out):
    rows = torch.empty_like(y)
    rows[order] = y
    out.copy_((rows.view(w.shape[0], w.shape[1], -1).float() * w[..., None]).sum(1).to(out.dtype))


gen = torch.Generator(device="cuda").manual_seed(11)
for name, dt in (("bf16", torch.bfloat16), ("f32", torch.float32)):
    es = torch.tensor([], dtype=dt).element_size()
    x = torch.randn(rows, 112, 64, device="cuda", dtype=dt)
    ang = torch.rand(rows, 32, device="cuda", generator=gen) * 1e3
    cos, sin = ang.cos(), ang.sin()
    cases = [("torch rope", "4096x112x64", 2 * x.numel() * es + rows * 64 * 4, lambda: rope_interleaved(x, cos, sin))]
    rx = torch.randn(rows, cols, device="cuda", dtype=dt)
    rw = torch.randn(cols, device="cuda", dtype=dt)
    cases.append(("torch rmsnorm", "4096x7168", 2 * rx.numel() * es + cols * es,
                  lambda: torch.nn.functional.rms_norm(rx, (cols,), rw, 1e-6)))
    cases.append(("torch gelu", "4096x7168", 2 * rx.numel() * es,
                  lambda: torch.nn.functional.gelu(rx, approximate="tanh")))
    gu = torch.randn(rows, 2 * cols, device="cuda", dtype=dt)
    cases.append(("torch silu_mul", "4096x(2x7168)", 3 * rx.numel() * es,
                  lambda: torch.nn.functional.silu(gu[:, :cols]) * gu[:, cols:]))
    s_in = torch.randn(rows, cols, device="cuda", dtype=dt) * 8
    cases.append(("torch softmax", "4096x7168", 2 * s_in.numel() * es, lambda: torch.softmax(s_in, -1)))
    logits = torch.randn(rows, 256, device="cuda", dtype=dt) * 3
    bias = torch.randn(256, device="cuda") * 0.1
    cases.append(("torch moe_routing", "4096x256", logits.numel() * es + 1024 + rows * 8 * 8,
                  lambda: v3_routing(logits, bias)))
    idx, w = v3_routing(logits, bias)
    px = torch.randn(rows, cols, device="cuda", dtype=dt)
    y, order = permute(px, idx)
    out = torch.empty_like(px)
    cases.append(("torch moe_permute", "4096x7168 k8 e256", (rows + y.shape[0]) * cols * es, lambda: permute(px, idx)))
    cases.append(("torch moe_unpermute", "4096x7168 k8 e256", (y.shape[0] + rows) * cols * es,
                  lambda: unpermute(y, order, w, out)))
    table = torch.randn(129280, cols, device="cuda", dtype=dt)
    ids = torch.randint(0, 129280, (rows,), device="cuda", generator=gen)
    cases.append(("torch embedding", "4096x7168 vocab 129280", 2 * rows * cols * es,
                  lambda: torch.nn.functional.embedding(ids, table)))
    for op, shape, nbytes, fn in cases:
        t = median_seconds(fn)
        print("BENCH " + json.dumps({"op": op, "shape": shape, "dtype": name, "time_s": t, "bytes": nbytes,
                                     "gbps": round(nbytes / t / 1e9, 1)}))
    del table


# GEMM beside `sol_gpu_tests bench_gemm` on the same shapes (bench/gemm_shapes.json, layout nt:
# weights [N, K]): torch.matmul in bf16, and torch._scaled_mm in fp8 e4m3 with DeepGEMM's scales
# (A per 1 x 128, B per 128 x 128) where this torch and its cuBLASLt take them, else one scale per
# tensor, named in every record ("scaling"). A grouped shape is one call per non-empty expert.
# Each block-scaled result is first checked against the dequantized product in f32 on a small
# shape: a recipe that computes something else is not timed.
GEMM_ROLES = [("qkv_a", 2112, 7168), ("q_b", 24576, 1536), ("kv_b", 32768, 512), ("o", 7168, 16384),
              ("ffn_up", 4096, 7168), ("ffn_down", 7168, 2048)]
GEMM_SHAPES = [(f"dsv3.{r}.m{m}", [m], n, k) for m in (1, 16, 128, 4096) for r, n, k in GEMM_ROLES]
PREFILL, DECODE = [1024, 768, 0, 512, 896, 384, 256, 256], [37, 0, 5, 22, 17, 1, 30, 16]
GEMM_SHAPES += [("dsv3.moe_up.g8.m4096", PREFILL, 4096, 7168), ("dsv3.moe_down.g8.m4096", PREFILL, 7168, 2048),
                ("dsv3.moe_up.g8.m128", DECODE, 4096, 7168), ("dsv3.moe_down.g8.m128", DECODE, 7168, 2048)]
E4M3 = torch.float8_e4m3fn


def block_scales(m, n, k, pad_b):
    """A's [m, k/128] with strides (1, m); B's 128 x 128 scales for b.t() ([k, n] column-major)."""
    kb, nb = k // 128, (n + 127) // 128
    sa = (torch.rand(kb, m, device="cuda") * 1.5 + 0.5).t()
    kb_rows = (kb + 3) // 4 * 4 if pad_b else kb
    sb = (torch.rand(nb, kb_rows, device="cuda") * 1.5 + 0.5).t()
    return sa, sb


def dequantized(a8, b8, sa, sb):
    k = a8.shape[1]
    a = a8.float() * sa.repeat_interleave(128, dim=1)[:, :k]
    b = b8.float() * sb[: k // 128].t().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[: b8.shape[0], :k]
    return a @ b.t()


def fp8_recipe():
    """The scaling torch._scaled_mm takes here, checked on a small shape: (name, make_scales)."""
    m, n, k = 256, 384, 512
    a8 = (torch.rand(m, k, device="cuda") * 2 - 1).to(E4M3)
    b8 = (torch.rand(n, k, device="cuda") * 2 - 1).to(E4M3)
    reasons = []
    for pad_b in (True, False):
        try:
            sa, sb = block_scales(m, n, k, pad_b)
            got = torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=torch.bfloat16).float()
            ref = dequantized(a8, b8, sa, sb)
            err = ((got - ref).norm() / ref.norm()).item()
            if err < 1e-2:
                return "block 1x128/128x128", lambda m, n, k: block_scales(m, n, k, pad_b)
            reasons.append(f"block scales (pad {pad_b}) differ from the dequantized product by {err:.3g}")
        except Exception as e:  # this torch or its cuBLASLt does not take the recipe
            reasons.append(f"block scales (pad {pad_b}): {str(e).splitlines()[0][:160]}")
    one = torch.ones((), device="cuda")
    print("torch fp8: per-tensor scaling (" + "; ".join(reasons) + ")")
    return "per-tensor", lambda m, n, k: (one, one)


scaling, make_scales = fp8_recipe()
for name, group_m, n, k in GEMM_SHAPES:
    used = [m for m in group_m if m > 0]
    flops = 2.0 * sum(used) * n * k
    dims = (f"g{len(group_m)} m=[{','.join(map(str, group_m))}]" if len(group_m) > 1 else f"m={group_m[0]}") + \
        f",n={n},k={k},nt"
    a16 = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for m in used]
    b16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in used]
    t = median_seconds(lambda: [torch.matmul(a, b.t()) for a, b in zip(a16, b16)])
    print("BENCH " + json.dumps({"op": "torch matmul" + (" per expert" if len(group_m) > 1 else ""), "shape": name,
                                 "dims": dims, "dtype": "bf16", "time_s": t, "flops": flops,
                                 "tflops": round(flops / t / 1e12, 1)}))
    del a16, b16
    a8 = [(torch.rand(m, k, device="cuda") * 2 - 1).to(E4M3) for m in used]
    b8 = [(torch.rand(n, k, device="cuda") * 2 - 1).to(E4M3) for _ in used]
    scales = [make_scales(m, n, k) for m in used]
    try:
        t = median_seconds(lambda: [torch._scaled_mm(a, b.t(), s[0], s[1], out_dtype=torch.bfloat16)
                                    for a, b, s in zip(a8, b8, scales)])
        rec = {"time_s": t, "tflops": round(flops / t / 1e12, 1)}
    except Exception as e:
        rec = {"error": str(e).splitlines()[0][:200]}
    print("BENCH " + json.dumps({"op": "torch _scaled_mm" + (" per expert" if len(group_m) > 1 else ""), "shape": name,
                                 "dims": dims, "dtype": "fp8", "scaling": scaling, "flops": flops, **rec}))
    del a8, b8, scales
