#!/usr/bin/env python3
"""Fails on any #include that points up the layer table of docs/ARCHITECTURE.md.

Each source folder and each public header belongs to a layer; a file may include its own
layer and the layers below it (arrows point down only), plus the few exceptions listed here
with their reasons. Usage: check-layers.py [ROOT] (default: the repository holding this script).
Exit 0 when clean, 1 with one line per upward include otherwise.
"""
import os
import re
import sys

# Bottom to top, as the table in docs/ARCHITECTURE.md.
LAYERS = ["core", "hw", "device", "kernels", "ops", "comm", "parallel", "compiler", "model", "interfaces"]

FOLDERS = {
    "src/core": "core", "src/hw": "hw", "src/device": "device", "src/kernels": "kernels", "src/ops": "ops",
    "src/comm": "comm", "src/ep": "parallel", "src/cp": "parallel", "src/pp": "parallel",
    "src/engram": "parallel", "src/compiler": "compiler", "src/model": "model", "tools": "interfaces",
    "python": "interfaces", "include/sol": None,  # public headers: by name, below
}

PUBLIC = {
    "core": ["dtype", "tensor", "error", "threads", "isa", "reduce_op"],
    "hw": ["hw", "timing", "roofline", "tuning"],
    "device": ["device"],
    "ops": ["activation", "attention", "bench", "copy", "embedding", "gemm", "mla", "mla_absorbed", "moe_permute",
            "norm", "quant", "registry", "rope", "routing", "sampling", "softmax"],
    "comm": ["comm", "comm_bench", "comm_window"],
    "parallel": ["cp", "engram", "ep", "pp"],
    "compiler": ["tile", "tile_ir"],
    "model": ["model", "model_loop"],
    "interfaces": ["sol"],
}
PUBLIC_LAYER = {f"sol/{name}.h": layer for layer, names in PUBLIC.items() for name in names}

# (including file's folder prefix, included path prefix): why the upward edge is allowed.
EXCEPTIONS = {
    ("src/hw/ceiling_loops_amx.cc", "kernels/x86/amx/amx_tile_config.h"):
        "the AMX ceiling loads its tile configuration with the kernels' header-only loader "
        "(GCC 12's _tile_loadconfig reads only 8 of the 64 bytes: DESIGN.md section 9)",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_path(rel):
    """The layer of a file (relative to the root), or None when it is outside the table."""
    if rel.startswith("include/sol/"):
        return PUBLIC_LAYER.get(rel[len("include/"):], "unknown")
    for folder, layer in FOLDERS.items():
        if layer and (rel == folder or rel.startswith(folder + "/")):
            return layer
    return None


def layer_of_include(inc):
    if inc.startswith("sol/"):
        return PUBLIC_LAYER.get(inc, "unknown")
    return layer_of_path("src/" + inc)


def check(root):
    problems = []
    for top in FOLDERS:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for folder, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".cu", ".cuh", ".cpp")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                own = layer_of_path(rel)
                if own is None:
                    continue
                if own == "unknown":
                    problems.append(f"{rel}: public header missing from the layer map in {sys.argv[0]}")
                    continue
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        target = layer_of_include(inc)
                        if target is None:  # a generated or third-party header, or the same folder
                            continue
                        if target == "unknown":
                            problems.append(f"{rel}:{number}: includes {inc}, which is in no layer")
                            continue
                        if LAYERS.index(target) <= LAYERS.index(own):
                            continue
                        if any(rel.startswith(a) and inc.startswith(b) for a, b in EXCEPTIONS):
                            continue
                        problems.append(f"{rel}:{number}: {own} includes {inc} ({target}), a layer above it")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} include(s) point up the layer table (docs/ARCHITECTURE.md)")
        return 1
    print("check-layers: every include points down the layer table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
