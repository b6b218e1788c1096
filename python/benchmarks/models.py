"""Tokens/s of a Sol-patched Hugging Face model against torch's own CPU kernels, side by side.

    PYTHONPATH=build/python python3 python/benchmarks/models.py [--threads 1] [--rounds 5] [--compile] [--profile]
        [--baseline-rev REV]

A DeepseekV3 architecture (MLA attention, group-limited sigmoid MoE with a shared expert) with
random bf16 weights, sized so that kernels, not Python, dominate: hidden 1024, 2 layers (one
dense, one MoE of 16 experts, top-4). Cases: prefill of 512 tokens (batch 1), decode at batch 1
and 16 after a 64-token prompt with a KV cache. Rounds interleave the variants (eager torch,
patched, and torch.compile'd eager with --compile; each round starts with the next variant) so
that a loaded machine's drift and the caches left by the variant before hit each alike; each
case prints the median and the spread of the rounds. torch and Sol use the same thread count.
Timed by default in the calling thread's CPU time (--clock cpu, one thread: all of torch's and
Sol's work runs on it), so that a loaded machine's descheduling does not land on one variant;
--clock wall for elapsed time. --profile adds, each round, Sol's share of one profiled step (sol.profile) of the
patched model for the case. --baseline-rev REV adds a variant patched by the model glue of git
revision REV (python/sol/_hf_*.py as they were there, over the same Sol ops), so that a change to
the glue is measured against its predecessor in one interleaved run."""
import argparse
import copy
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import torch
from transformers import DynamicCache

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import sol  # noqa: E402
import sol.torch as st  # noqa: E402
from test_torch_models import deepseek_v3  # noqa: E402

MID = dict(vocab_size=4096, hidden_size=1024, intermediate_size=2816, moe_intermediate_size=512,
           num_attention_heads=8, num_key_value_heads=8, kv_lora_rank=256, q_lora_rank=384, qk_nope_head_dim=64,
           qk_rope_head_dim=32, v_head_dim=64, max_position_embeddings=1024)


# Seconds on the clock the run was asked for (--clock): wall time, or this thread's CPU time.
clock = time.perf_counter


def prefill(model, tokens):
    ids = torch.randint(2, MID["vocab_size"], (1, tokens), generator=torch.Generator().manual_seed(0))

    def run():
        start = clock()
        model(ids, use_cache=False)
        return tokens / (clock() - start)
    return run


def decode(model, batch, prompt=64, steps=8):
    ids = torch.randint(2, MID["vocab_size"], (batch, prompt), generator=torch.Generator().manual_seed(1))
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, use_cache=True, pad_token_id=0)

    def timed(n):
        start = clock()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        return clock() - start

    def run():  # the prompt's prefill and the first token cancel out
        return batch * (steps - 1) / (timed(steps) - timed(1))
    return run


def step_share(model, case):
    """Sol's share (percent) of one profiled step of the patched model, in wall time and in thread
    CPU time: the prefill of 512 tokens, or one decode step after a 64-token prompt (the prompt's
    prefill not profiled)."""
    if case.startswith("prefill"):
        ids = torch.randint(2, MID["vocab_size"], (1, 512), generator=torch.Generator().manual_seed(0))
        step = lambda: model(ids, use_cache=False)  # noqa: E731
    else:
        batch = int(case.split("=")[1])
        ids = torch.randint(2, MID["vocab_size"], (batch, 64), generator=torch.Generator().manual_seed(1))
        cache = DynamicCache(config=model.config)
        tok = model(ids, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
        model(tok, cache=cache, use_cache=True)  # the first step after a prefill grows scratch buffers
        step = lambda: model(tok, cache=cache, use_cache=True)  # noqa: E731
    shares = []
    for clock in ("wall", "cpu"):
        _, prof = sol.profile(step, trace=None, roofline=None, quiet=True, clock=clock)
        shares.append(100.0 * prof.op_time_s / prof.wall_s)
    return shares


def baseline_patch(rev):
    """sol.torch.patch as git revision rev had it: its python/sol/_hf_*.py loaded as the package
    sol_baseline (they import the current sol for the ops)."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    names = subprocess.run(["git", "-C", root, "ls-tree", "--name-only", rev, "python/sol/"], check=True,
                           capture_output=True, text=True).stdout.split()
    folder = tempfile.mkdtemp()
    for name in (n for n in names if os.path.basename(n).startswith("_hf_")):
        text = subprocess.run(["git", "-C", root, "show", f"{rev}:{name}"], check=True, capture_output=True,
                              text=True).stdout
        with open(os.path.join(folder, os.path.basename(name)), "w") as f:
            f.write(text)
    package = types.ModuleType("sol_baseline")
    package.__path__ = [folder]
    sys.modules["sol_baseline"] = package
    return importlib.import_module("sol_baseline._hf_patch").patch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="also torch.compile the eager model (prefill only)")
    p.add_argument("--profile", action="store_true", help="also Sol's share of a profiled step, each round")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="cpu (default): this thread's CPU time, needs --threads 1; wall: elapsed time")
    p.add_argument("--baseline-rev", help="also a model patched by the sol.torch glue of this git revision")
    p.add_argument("--cases", default="prefill 512,decode b=1,decode b=16",
                   help="comma-separated subset of: prefill 512, decode b=1, decode b=16")
    args = p.parse_args()
    global clock
    if args.clock == "cpu":
        if args.threads != 1:
            p.error("--clock cpu counts the calling thread only: use --threads 1 or --clock wall")
        clock = time.thread_time
    torch.set_num_threads(args.threads)
    sol.set_num_threads(args.threads)
    eager = deepseek_v3(torch.bfloat16, **MID)
    patched = st.patch(copy.deepcopy(eager))
    variants = {"torch eager": eager, "Sol patched": patched}
    if args.baseline_rev:
        variants[f"Sol @{args.baseline_rev}"] = baseline_patch(args.baseline_rev)(copy.deepcopy(eager))
    profiled = {name: m for name, m in variants.items() if name != "torch eager"}
    cases = {"prefill 512": lambda m: prefill(m, 512), "decode b=1": lambda m: decode(m, 1),
             "decode b=16": lambda m: decode(m, 16)}
    wanted = [c.strip() for c in args.cases.split(",")]
    if any(c not in cases for c in wanted):
        p.error(f"--cases: {args.cases!r} names a case other than {', '.join(cases)}")
    cases = {c: cases[c] for c in wanted}
    compiled = torch.compile(eager) if args.compile else None
    print(f"threads {args.threads}, rounds {args.rounds}, bf16, tokens per second of {args.clock} time "
          f"(median [min, max])")
    with torch.no_grad():
        for case, make in cases.items():
            runs = {name: make(m) for name, m in variants.items()}
            if compiled is not None and case.startswith("prefill"):
                runs["torch.compile"] = make(compiled)
            for run in runs.values():
                run()  # warm-up (and compilation)
            rates = {name: [] for name in runs}
            shares = {name: [] for name in profiled}
            order = list(runs.items())
            for r in range(args.rounds):
                # Each round starts with another variant: the one run right after torch eager's
                # generate finds the caches full of eager's weights.
                for name, run in order[r % len(order):] + order[:r % len(order)]:
                    rates[name].append(run())
                for name, m in profiled.items() if args.profile else ():
                    shares[name].append(step_share(m, case))
            base = statistics.median(rates["torch eager"])
            for name, r in rates.items():
                med = statistics.median(r)
                print(f"{case:<12} {name:<14} {med:>10.1f}  [{min(r):.1f}, {max(r):.1f}]  x{med / base:.2f}")
            for name, got in shares.items() if args.profile else ():
                for i, kind in enumerate(("wall time", "thread CPU time")):
                    r = [s[i] for s in got]
                    print(f"{case:<12} {'Sol share %':<14} {statistics.median(r):>10.1f}  [{min(r):.1f}, {max(r):.1f}]  "
                          f"of a profiled step's {kind} ({name})")


if __name__ == "__main__":
    main()
