"""sol.profile(fn, *args): every Sol op of one call of fn, timed, costed and placed on the roofline.

Each op call made through the sol module (directly, through sol.torch's custom ops or a patched
model) is timed around the extension call and given its FLOPs and minimum bytes (the same
counting as the C++ registry's costs: useful FLOPs only, each input read once and each output
written once). Its floor is max(FLOPs / peak of its unit, bytes / memory copy bandwidth) with the
machine's cached ceilings (`sol hw`) at the thread count in use; SOL% = floor / time. sol bench
re-measures the ceiling beside each op (pairing); a profile of a whole forward cannot, so its
SOL% is against the cached ceiling (quote sol bench for single-op claims).

Writes a Chrome-trace / Perfetto JSON (chrome://tracing, ui.perfetto.dev) and a roofline SVG, and
returns a Profile whose table() says where the step's time went: Sol ops by name, and the rest.
"""
import functools
import json
import math
import time

from . import _sol, _torch_io

_ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2, "f8e4m3": 1, "f8e5m2": 1, "i8": 1, "u8": 1, "i32": 4}


def _nbytes(x):
    if x is None:
        return 0
    if hasattr(x, "element_size"):  # torch
        return x.numel() * x.element_size()
    if hasattr(x, "nbytes"):  # numpy
        return int(x.nbytes)
    if isinstance(x, _sol.PackedMatrix):
        return x.k * x.n * _ITEMSIZE.get(x.dtype, 4)
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(e) for e in x)
    return 0


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _dtype_name(x):
    s = str(getattr(x, "dtype", ""))
    for key, name in (("bfloat16", "bf16"), ("float32", "f32"), ("float8", "f8e4m3"), ("int8", "i8"),
                      ("uint8", "u8")):
        if key in s:
            return name
    return s


def _arg(args, kwargs, i, name, default=None):
    return args[i] if len(args) > i else kwargs.get(name, default)


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


def _gemm_cost(args, kwargs, result):
    a, b = args[0], args[1]
    out = _outputs(result)[0]
    m, k = _shape(a)[:2]
    n = _shape(out)[-1]
    return 2.0 * m * n * k, _nbytes(a) + _nbytes(b) + _nbytes(out), _dtype_name(a)


def _grouped_cost(args, kwargs, result):
    a, b, index = args[0], args[1], args[2]
    out = _outputs(result)[0]
    n, k = _shape(out)[-1], _shape(a)[-1]
    if len(_shape(a)) == 2:  # contiguous: rows with an expert (not padding); experts that have rows
        rows = int((index >= 0).sum())
        used = len(set(int(e) for e in index.tolist()) - {-1})
    else:  # masked: masked_m rows per group
        rows = int(index.sum())
        used = int((index > 0).sum())
    # Only the experts with rows are read (bf16 or fp8 weights).
    weight_item = 2 if not hasattr(b, "shape") else _nbytes(b) // max(1, math.prod(_shape(b)))
    weight_bytes = used * n * k * weight_item
    row_bytes = _nbytes(a) // max(1, math.prod(_shape(a)[:-1])) if _shape(a) else 0
    out_row = _nbytes(out) // max(1, math.prod(_shape(out)[:-1]))
    return 2.0 * rows * n * k, weight_bytes + rows * (row_bytes + out_row), "bf16"


def _attention_cost(args, kwargs, result):
    q, k, v = args[:3]
    causal = kwargs.get("causal", False)
    o = _outputs(result)[0]
    if len(_shape(q)) == 4:
        b, sq, h, d = _shape(q)
        skv = _shape(k)[1]
        pairs = b * h * sq * skv
        if causal:  # the unmasked part, bottom-right aligned
            pairs = b * h * sum(min(skv, max(0, skv - sq + i + 1)) for i in range(sq))
    else:
        total, h, d = _shape(q)
        pairs = h * total * _shape(k)[0]  # varlen: an upper bound
    dv = _shape(v)[-1]
    return 2.0 * pairs * (d + dv), sum(_nbytes(x) for x in (q, k, v)) + _nbytes(o), _dtype_name(q)


@functools.lru_cache(maxsize=256)
def _registry_cost(op, **params):
    """The C++ registry's cost of one case (sol.op_cost): the formula `sol bench` uses, not a copy."""
    c = _sol.op_cost(op, **params)
    return c["flops"], c["bytes"], c["compute"], c["memory"]


def _mla_absorbed_cost(args, kwargs, result):
    q, latent, w_uv = _arg(args, kwargs, 0, "q"), _arg(args, kwargs, 2, "latent"), _arg(args, kwargs, 3, "w_uv")
    (b, h, dq), (length, dk) = _shape(q), _shape(latent)[1:]
    if kwargs.get("seqlen", -1) >= 0:  # the first seqlen rows of a cache buffer
        length = kwargs["seqlen"]
    rope = dk - w_uv.k
    flops, nbytes, compute, memory = _registry_cost(
        "mla-decode-absorbed", batch=b, seqlen=length, heads=h, nope=dq - rope, rope=rope, latent=w_uv.k,
        v=_shape(_outputs(result)[0])[-1], dtype=_dtype_name(q))
    return flops, nbytes, _dtype_name(q), compute, memory


def _streaming_cost(flops_per_element):
    def cost(args, kwargs, result):
        inputs = [a for a in args if hasattr(a, "shape")] + [v for v in kwargs.values() if hasattr(v, "shape")]
        outs = [o for o in _outputs(result) if hasattr(o, "shape")]
        first = inputs[0] if inputs else None
        elements = math.prod(_shape(first)) if first is not None else 0
        return flops_per_element * elements, sum(_nbytes(x) for x in inputs + outs), _dtype_name(first)
    return cost


_COSTS = {
    "gemm": _gemm_cost,
    "grouped_gemm_contiguous": _grouped_cost,
    "grouped_gemm_masked": _grouped_cost,
    "flash_attention": _attention_cost,
    "mla_decode_absorbed": _mla_absorbed_cost,
}


def _cost(name, args, kwargs, result):
    """(flops, bytes, dtype, compute unit, memory unit) of one call; a unit None: the profiler's
    choice (compute by dtype, memory mem_copy)."""
    fn = _COSTS.get(name)
    if fn is None:
        # Row ops are memory-bound: their FLOPs do not place them, bytes do.
        fn = _streaming_cost(0.0)
    try:
        cost = fn(args, kwargs, result)
    except Exception:  # an op whose arguments this table does not know: time only
        return 0.0, 0, "", None, None
    return cost if len(cost) == 5 else (*cost, None, None)


def _compute_unit(dtype, ceilings):
    if dtype in ("bf16", "f8e4m3", "f16"):
        return "amx_bf16" if ceilings.get("amx_bf16") else "dot_bf16"
    if dtype in ("i8", "u8"):
        return "amx_int8" if ceilings.get("amx_int8") else "dot_s8"
    return "fma_f32"


class Profile:
    def __init__(self, records, wall_s, ceilings, threads, clock="wall"):
        self.records, self.wall_s, self.ceilings, self.threads = records, wall_s, ceilings, threads
        self.clock = clock  # "wall", or "cpu": wall_s and the op times are then this thread's CPU time

    @property
    def op_time_s(self):
        return sum(r["time_s"] for r in self.records)

    def by_op(self):
        groups = {}
        for r in self.records:
            g = groups.setdefault(r["op"], {"op": r["op"], "calls": 0, "time_s": 0.0, "flops": 0.0,
                                            "bytes": 0, "floor_s": 0.0, "bound": {}})
            g["calls"] += 1
            g["time_s"] += r["time_s"]
            g["flops"] += r["flops"]
            g["bytes"] += r["bytes"]
            g["floor_s"] += r["floor_s"]
            g["bound"][r["bound"]] = g["bound"].get(r["bound"], 0) + 1
        rows = sorted(groups.values(), key=lambda g: -g["time_s"])
        for g in rows:
            g["bound"] = max(g["bound"], key=g["bound"].get)
            g["sol_pct"] = 100.0 * g["floor_s"] / g["time_s"] if g["time_s"] > 0 else 0.0
            g["share_pct"] = 100.0 * g["time_s"] / self.wall_s if self.wall_s > 0 else 0.0
        return rows

    def table(self):
        lines = [f"{'op':<26}{'calls':>6}{'time ms':>10}{'share':>8}{'GFLOP/s':>10}{'GB/s':>8}  {'bound':<10}{'SOL%':>6}"]
        for g in self.by_op():
            t = g["time_s"]
            lines.append(f"{g['op']:<26}{g['calls']:>6}{t * 1e3:>10.3f}{g['share_pct']:>7.1f}%"
                         f"{g['flops'] / t / 1e9 if t else 0:>10.1f}{g['bytes'] / t / 1e9 if t else 0:>8.1f}  "
                         f"{g['bound']:<10}{g['sol_pct']:>6.1f}")
        rest = self.wall_s - self.op_time_s
        lines.append(f"{'Sol ops':<26}{len(self.records):>6}{self.op_time_s * 1e3:>10.3f}"
                     f"{100 * self.op_time_s / self.wall_s:>7.1f}%")
        lines.append(f"{'the rest (torch, Python)':<26}{'':>6}{rest * 1e3:>10.3f}{100 * rest / self.wall_s:>7.1f}%")
        lines.append(f"{'wall' if self.clock == 'wall' else 'step (thread CPU time)':<26}{'':>6}"
                     f"{self.wall_s * 1e3:>10.3f}   threads {self.threads}, SOL% against "
                     f"the cached ceilings (sol hw)")
        return "\n".join(lines)

    def chrome_trace(self):
        events = [{"name": r["op"], "ph": "X", "ts": r["start_us"], "dur": r["time_s"] * 1e6, "pid": 0, "tid": 0,
                   "cat": "sol", "args": {k: r[k] for k in ("shape", "dtype", "flops", "bytes", "bound", "sol_pct")}}
                  for r in self.records]
        events.append({"name": "wall", "ph": "X", "ts": 0, "dur": self.wall_s * 1e6, "pid": 0, "tid": 1,
                       "cat": "step"})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def roofline_svg(self):
        w, h, pad = 640, 420, 60
        pts = [g for g in self.by_op() if g["flops"] > 0 and g["bytes"] > 0 and g["time_s"] > 0]
        peak = max([v for k, v in self.ceilings.items() if not k.startswith("mem")] + [1e9])
        bw = self.ceilings.get("mem_copy", 1e10)
        x0, x1 = -2.0, 4.0  # log10 FLOP/byte
        y1 = math.log10(peak * 2)
        y0 = y1 - 5

        def px(x):
            return pad + (math.log10(x) - x0) / (x1 - x0) * (w - 2 * pad)

        def py(y):
            return h - pad - (math.log10(max(y, 10 ** y0)) - y0) / (y1 - y0) * (h - 2 * pad)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
               f'font-size="11"><rect width="{w}" height="{h}" fill="white"/>',
               f'<text x="{pad}" y="20" font-size="13">Sol ops of one step on the roofline ({self.threads} '
               f'threads; x: FLOP/byte, y: FLOP/s, log-log)</text>']
        for unit, v in self.ceilings.items():
            if unit.startswith("mem"):
                continue
            knee = v / bw
            out.append(f'<polyline fill="none" stroke="#888" points="{px(10 ** x0):.1f},{py(bw * 10 ** x0):.1f} '
                       f'{px(min(knee, 10 ** x1)):.1f},{py(min(v, bw * 10 ** x1)):.1f} {px(10 ** x1):.1f},{py(v):.1f}"/>')
            out.append(f'<text x="{w - pad + 2}" y="{py(v):.1f}" fill="#666">{unit}</text>')
        for g in pts:
            x, y = g["flops"] / g["bytes"], g["flops"] / g["time_s"]
            r = 3 + 12 * math.sqrt(g["time_s"] / max(self.wall_s, 1e-12))
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{r:.1f}" fill="#d62" fill-opacity="0.6"/>')
            out.append(f'<text x="{px(x) + r + 2:.1f}" y="{py(y) + 4:.1f}">{g["op"]} {g["sol_pct"]:.0f}%</text>')
        mem_only = [g["op"] for g in self.by_op() if g["flops"] == 0]
        if mem_only:
            out.append(f'<text x="{pad}" y="{h - 15}">memory-only ops (no FLOPs, not placed): '
                       f'{", ".join(mem_only)}</text>')
        out.append("</svg>")
        return "\n".join(out)


def _ceilings(threads):
    """{unit: ceiling} at this thread count: the compute units (FLOP/s, OP/s) and the memory ones
    (mem_*: mem_copy for the ops costed here, another where the registry's cost names it)."""
    key = "one_thread" if threads == 1 else "all_threads"
    return {c["unit"]: c[key] for c in _sol.hw()["ceilings"]
            if c.get("available") and c.get(key) and (c["units"] in ("FLOP/s", "OP/s") or c["unit"].startswith("mem_"))}


def profile(fn, *args, trace="sol-profile.json", roofline="sol-profile.svg", quiet=False, clock="wall", **kwargs):
    """Runs fn(*args, **kwargs) once with every Sol op recorded; returns (result, Profile).

    clock="cpu" times the step and each op in this thread's CPU time instead of wall time: on a
    shared machine, time spent descheduled then counts nowhere. It needs one Sol thread (work
    on other threads would not be counted) and torch at one thread too."""
    threads = _sol.num_threads()
    if clock == "cpu":
        if threads != 1:
            raise _sol.Error(f"sol.profile: clock='cpu' counts this thread only but Sol runs {threads} threads; "
                             f"call sol.set_num_threads(1) first")
        now = time.thread_time
    elif clock == "wall":
        now = time.perf_counter
    else:
        raise _sol.Error(f"sol.profile: clock = '{clock}' but must be 'wall' or 'cpu'")
    ceilings = _ceilings(threads)
    origin = now()

    def cost(name, a, kw, result, start, end):
        flops, nbytes, dtype, unit, memory = _cost(name, a, kw, result)
        t = end - start
        unit = unit or _compute_unit(dtype, ceilings)
        memory = memory or "mem_copy"
        compute_s = flops / ceilings[unit] if flops and ceilings.get(unit) else 0.0
        memory_s = nbytes / ceilings[memory] if nbytes and ceilings.get(memory) else 0.0
        floor = max(compute_s, memory_s)
        first = a[0] if a else None
        return {"op": name, "shape": list(_shape(first)), "dtype": dtype, "start_us": (start - origin) * 1e6,
                "time_s": t, "flops": flops, "bytes": nbytes, "bound": unit if compute_s >= memory_s else memory,
                "floor_s": floor, "sol_pct": 100.0 * floor / t if t > 0 else 0.0}

    calls = []  # costed after the run: the step's time holds no profiler work but one append per op
    previous = _torch_io.recorder, _torch_io.clock
    _torch_io.recorder, _torch_io.clock = calls.append, now
    try:
        start = now()
        result = fn(*args, **kwargs)
        wall = now() - start
    finally:
        _torch_io.recorder, _torch_io.clock = previous
    records = [cost(*call) for call in calls]
    prof = Profile(records, wall, ceilings, threads, clock)
    if trace:
        with open(trace, "w") as f:
            json.dump(prof.chrome_trace(), f)
    if roofline:
        with open(roofline, "w") as f:
            f.write(prof.roofline_svg())
    if not quiet:
        print(prof.table())
    return result, prof
