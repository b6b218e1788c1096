#pragma once
// The innermost loops of the ceiling micro-benchmarks, one per unit. Each runs on the calling
// thread and returns the work it did (FLOP, OP, bytes or cycles), so callers never need to
// know how big a loop's block is. The AVX-512, AVX2 and AMX loops live in translation units
// built with those ISA flags: call them only after cpu_features() says the unit exists.
#include <cstddef>

namespace sol::ceiling_loops {

// Accumulator counts the FMA and BF16 dot loops are built for. Enough independent chains must
// be in flight to cover latency x pipes; more than needed costs nothing but registers, and 32
// zmm registers cap it at 24 plus the two operands. Measured on the Zen 5 guests here (one
// thread, FLOP/cycle for 8/12/16/24): vfmadd231ps 62/63/64/64 (latency 4 x 2 pipes = 8 just
// short of enough), vdpbf16ps 86/117/128/128 (latency ~6 x 2 pipes: needs 16). Emerald
// Rapids FMA needs 8. The fastest count is picked at run time (ceilings.cc).
inline constexpr int kAccumulatorChoices[] = {8, 12, 16, 24};

// ceiling_loops_avx512.cc
double fma_f32(int accumulators, long iterations);
double dot_bf16(int accumulators, long iterations);
double dot_s8(int accumulators, long iterations);  // vpdpbusd; returns OPs (multiply + add)
// The streaming loops read (and write) their arrays as `streams` interleaved streams: each
// array cut into that many equal parts, a few lines from each part in turn. One sequential
// stream under-states what a core can read from DRAM: on the Zen 5 guests here (quiet, 256 MiB)
// one thread read 28-29 GB/s as 1 stream, 34-39 as 2-8; two threads 45-59 and 70-74. Copy with
// non-temporal stores gained less (52-57 -> 57-59 GB/s). The fastest count is picked at run
// time (ceilings.cc); a loop returns the bytes it moved, the parts rounded down to whole blocks.
// Pointers must be 64-byte aligned.
inline constexpr size_t kStreamBlockFloats = 128;
inline constexpr int kStreamChoices[] = {1, 2, 4, 8};
// read may also request each line this far ahead in software: decode GEMM, which does so on
// one stream, read 37-39 GB/s on one thread where the plain one-stream loop read 28-29.
inline constexpr size_t kReadPrefetchBytes = 16384;
double read(const float* data, size_t floats, long passes, int streams = 1, bool prefetch = false);
double copy(float* dst, const float* src, size_t floats, long passes, bool non_temporal,
            int streams = 1);
double triad(float* a, const float* b, const float* c, size_t floats, long passes,
             int streams = 1);
// a[i] += 1 with regular stores (read and write-back of the same lines); returns bytes read
// plus written, as copy does.
double update(float* a, size_t floats, long passes, int streams = 1);
// Non-temporal stores only: a regular store reads each line before writing it, traffic a
// write ceiling must not pay (the ops that write large outputs stream them).
double write(float* dst, size_t floats, long passes, int streams = 1);

// ceiling_loops_amx.cc — tile data permission must have been granted (enable_amx()).
double amx_bf16(long iterations);
double amx_int8(long iterations);

// ceiling_loops_avx2.cc — the same loops with ymm registers, for CPUs with AVX2 and FMA but
// no AVX-512 (Zen 2/3, Intel client cores, older Xeons): the widest loads, stores and FMAs those
// cores have, so their ceilings too are the most the hardware does. The memory loops walk and
// count exactly as the AVX-512 ones (stream_walk.h), two ymm accesses to each 64-byte line.
namespace avx2 {
// 16 ymm registers hold at most 14 chains beside the two FMA operands. Zen 3 and Skylake issue
// two FMAs a cycle at latency 4 (8 chains), Haswell at latency 5 (10).
inline constexpr int kAccumulatorChoices[] = {8, 10, 12};
double fma_f32(int accumulators, long iterations);
double read(const float* data, size_t floats, long passes, int streams = 1, bool prefetch = false);
double copy(float* dst, const float* src, size_t floats, long passes, bool non_temporal,
            int streams = 1);
double triad(float* a, const float* b, const float* c, size_t floats, long passes,
             int streams = 1);
double update(float* a, size_t floats, long passes, int streams = 1);
double write(float* dst, size_t floats, long passes, int streams = 1);
}  // namespace avx2

// clock_loop.cc — returns cycles (one dependent add each).
double clock_cycles(long iterations);

}  // namespace sol::ceiling_loops
