"""torch beside Sol on the same device shapes (scripts/device-check.sh): the same copy and cast
cases as `sol_gpu_tests bench_copy_cast` and memory-bound cases as `bench_memory_bound` (rope,
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
