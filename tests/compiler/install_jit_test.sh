#!/usr/bin/env bash
# The tile JIT from an installed Sol: install the built tree into a temporary prefix, then let
# the installed `sol` compile and run a tile program (checked against the interpreter) with a
# fresh kernel cache. The runtime header the kernel was built against must be the one
# installed under include/sol/tile_runtime (libsol embeds it; the JIT writes it into its
# cache), and pointing SOL_TILE_RUNTIME_DIR at the installed directory must work too.
set -eu
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
installed="$tmp/prefix/include/sol/tile_runtime"
for f in sol_tile_runtime.h sol_tile_cuda.cuh; do
  test -f "$installed/$f" || { echo "not installed: $installed/$f"; exit 1; }
done
cp "$src/examples/tile/gemm_bf16.tile" "$tmp/gemm.tile"
run() { "$tmp/prefix/bin/sol" bench tile-program --file "$tmp/gemm.tile" --dims M=70,N=50,K=90 --check --threads 1; }

export SOL_JIT_CACHE_DIR="$tmp/cache"
unset SOL_TILE_RUNTIME_DIR
out=$(run) || { echo "$out"; echo "installed sol could not compile and run a tile program"; exit 1; }
echo "$out" | grep -q ' ok' || { echo "$out"; echo "no passing check in the output"; exit 1; }
copies=("$SOL_JIT_CACHE_DIR"/runtime-*/sol_tile_runtime.h)
test -f "${copies[0]}" || { echo "the JIT wrote no runtime header into its cache"; exit 1; }
cmp "${copies[0]}" "$installed/sol_tile_runtime.h" || { echo "embedded runtime differs from the installed one"; exit 1; }

export SOL_JIT_CACHE_DIR="$tmp/cache2" SOL_TILE_RUNTIME_DIR="$installed"
out=$(run) || { echo "$out"; echo "the installed runtime header does not build a kernel"; exit 1; }
echo "$out" | grep -q ' ok' || { echo "$out"; exit 1; }
echo "installed JIT ok"
