"""torch beside Sol on the same device shapes (scripts/device-check.sh): the same copy and cast
cases as `sol_gpu_tests bench_copy_cast`, timed the same way (events, 256 MiB L2 flush before
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
