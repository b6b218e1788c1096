#!/usr/bin/env python3
"""Offline checks of Sol's sm90 kernels, run by ctest (cmake/SolCudaChecks.cmake).

  build    SRC CUBIN --nvcc NVCC -I DIR   nvcc for sm_90a, warnings and ptxas spills/local memory
                                          as errors; the ptxas log (CUBIN.log) must not report a
                                          changed wgmma pipeline (C7511 serialised, C7517 waits)
  negative SRC --nvcc NVCC -I DIR         the same source for plain sm_90 must fail, for the
                                          reason that wgmma and setmaxnreg need sm_90a (built
                                          with SOL_OFFLINE_NEGATIVE_BUILD defined: a source may
                                          keep one kernel of many for it)
  expect   CUBIN TABLE --cuobjdump BIN    each kernel row of TABLE holds in CUBIN's SASS and
                                          resource usage

TABLE rows: `kernel OPCODE=count ... max_reg=N max_stack=N max_shared=N`. Every opcode named is
counted exactly (SASS text, e.g. HGMMA.64x128x16.F32.BF16; HGMMA:tnspB counts the wgmmas that read
B MN-major, the .tnspB on their descriptor; USETMAXREG:N the setmaxnreg instructions to N registers;
issue:OPCODE the OPCODE instructions between an mbarrier wait (SYNCS.PHASECHK.*TRYWAIT) and the
wgmma that closes the next commit group (gsb0), program order: work that a group's issue waits
behind once its stage is full); opcodes of the watched families
(*GMMA*, UTMA*) that the row does not name must not occur; LDL/STL (local memory) never may.
Adding a kernel to the checks is a row in TABLE, not code.
"""
import argparse
import re
import subprocess
import sys

NVCC_FLAGS = ["-std=c++20", "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-Werror", "all-warnings",
              "-Xptxas", "--warn-on-spills,--warn-on-local-memory-usage,-Werror", "--resource-usage"]
WATCHED = re.compile(r"^([HQIB]GMMA|UTMA(LDG|STG|REDG|PF|CCTL)|UBLKCP)")
GMMA = re.compile(r"^[HQIB]GMMA\.")
LOCAL = re.compile(r"^(LDL|STL)(\.|$)")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd):
    print("+ " + " ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def cmd_build(a):
    rc, out = run([a.nvcc] + NVCC_FLAGS + ["-I" + d for d in a.include] + ["-o", a.cubin, a.src])
    with open(a.cubin + ".log", "w") as f:
        f.write(out)
    print(out)
    if rc != 0:
        fail("nvcc exited with %d" % rc)
    # C75xx: ptxas changed the wgmma pipeline (C7511 serialised it, C7517 injected a wait
    # because accumulator registers were touched before wgmma.wait_group).
    notes = [line for line in out.splitlines() if re.search(r"\(C75\d\d\)", line) or "serializ" in line.lower()]
    if notes:
        fail("ptxas altered the wgmma pipeline:\n  " + "\n  ".join(notes))
    print("ok: %s built for sm_90a without warnings" % a.src)


def cmd_negative(a):
    flags = [f.replace("compute_90a,code=sm_90a", "compute_90,code=sm_90") for f in NVCC_FLAGS]
    flags.append("-DSOL_OFFLINE_NEGATIVE_BUILD")
    rc, out = run([a.nvcc] + flags + ["-I" + d for d in a.include] + ["-o", "/dev/null", a.src])
    print(out)
    if rc == 0:
        fail("the sm_90 build succeeded; wgmma code must need sm_90a")
    if not re.search(r"Instruction '(wgmma|setmaxnreg)[^']*' not supported on \.target 'sm_90'", out):
        fail("the sm_90 build failed, but not because wgmma/setmaxnreg need sm_90a")
    print("ok: plain sm_90 rejects the kernel's wgmma")


def sass_by_function(text):
    funcs, name, since_wait = {}, None, None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name, since_wait = m.group(1), None
            funcs[name] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.x]*)", line)
        if m and name:
            funcs[name].append(m.group(1))
            # The instructions from an mbarrier wait to the wgmma closing the next commit group
            # count once more as issue:OPCODE (a wait with no group after it counts nothing).
            if re.match(r"SYNCS\.PHASECHK\..*TRYWAIT", m.group(1)):
                since_wait = []
            elif since_wait is not None:
                since_wait.append(m.group(1))
                if GMMA.match(m.group(1)) and re.search(r"\bgsb0\b", line):
                    funcs[name] += ["issue:" + op for op in since_wait]
                    since_wait = None
            # A wgmma reading an operand MN-major carries .tnspA / .tnspB on its descriptor: counted
            # as the pseudo-opcode FAMILY:tnspB (a watched family, so only rows that name it may have it).
            if GMMA.match(m.group(1)):
                funcs[name] += ["%s:%s" % (m.group(1).split(".")[0], t) for t in re.findall(r"\.(tnsp[AB])\b", line)]
            # setmaxnreg's register count, counted as USETMAXREG:<count> (e.g. USETMAXREG:232), so a
            # row can state the intended producer / consumer split.
            if m.group(1).startswith("USETMAXREG"):
                funcs[name] += ["USETMAXREG:%d" % int(v, 16) for v in re.findall(r"(0x[0-9a-f]+)\s*;", line)[-1:]]
    return funcs


def resources_by_function(text):
    res = {}
    for m in re.finditer(r"Function (\S+):\s*\n\s*(REG:.*)", text):
        res[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", m.group(2))}
    return res


def cmd_expect(a):
    rc, sass = run([a.cuobjdump, "-sass", a.cubin])
    if rc != 0:
        fail("cuobjdump -sass failed:\n" + sass)
    rc, usage = run([a.cuobjdump, "-res-usage", a.cubin])
    if rc != 0:
        fail("cuobjdump -res-usage failed:\n" + usage)
    funcs, res = sass_by_function(sass), resources_by_function(usage)
    errors, rows = [], 0
    for line in open(a.table):
        fields = line.split("#")[0].split()
        if not fields:
            continue
        rows += 1
        kernel, want = fields[0], dict(f.split("=") for f in fields[1:])
        if kernel not in funcs:
            errors.append("%s: not in the cubin (has %s)" % (kernel, ", ".join(sorted(funcs))))
            continue
        ops = funcs[kernel]
        counts = {}
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
        for key, value in want.items():
            if key.startswith("max_"):
                what = key[4:].upper()
                got = res.get(kernel, {}).get(what)
                if got is None or got > int(value):
                    errors.append("%s: %s = %s, budget %s" % (kernel, what, got, value))
            elif counts.get(key, 0) != int(value):
                errors.append("%s: %d x %s, expected %s" % (kernel, counts.get(key, 0), key, value))
        for op, n in sorted(counts.items()):
            if LOCAL.match(op):
                errors.append("%s: %d x %s (local memory)" % (kernel, n, op))
            elif WATCHED.match(op) and op not in want:
                errors.append("%s: %d x %s, which the table does not expect" % (kernel, n, op))
        if res.get(kernel, {}).get("LOCAL", 0) != 0:
            errors.append("%s: LOCAL = %d bytes" % (kernel, res[kernel]["LOCAL"]))
        print("%s: %s | %s" % (kernel, " ".join("%s=%d" % (k, v) for k, v in sorted(counts.items()) if WATCHED.match(k)),
                               " ".join("%s=%s" % kv for kv in sorted(res.get(kernel, {}).items()))))
    if rows == 0:
        errors.append("no kernel rows in " + a.table)
    if errors:
        fail("\n  ".join([""] + errors))
    print("ok: %d kernels match %s" % (rows, a.table))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("src")
    b.add_argument("cubin")
    n = sub.add_parser("negative")
    n.add_argument("src")
    for s in (b, n):
        s.add_argument("--nvcc", required=True)
        s.add_argument("-I", dest="include", action="append", default=[])
    e = sub.add_parser("expect")
    e.add_argument("cubin")
    e.add_argument("table")
    e.add_argument("--cuobjdump", required=True)
    a = p.parse_args()
    {"build": cmd_build, "negative": cmd_negative, "expect": cmd_expect}[a.cmd](a)


if __name__ == "__main__":
    main()
