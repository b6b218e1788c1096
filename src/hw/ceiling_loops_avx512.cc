// AVX-512 ceiling loops: fp32 FMA, BF16 dot products, and the streaming memory kernels.
#include <immintrin.h>

#include "hw/ceiling_loops.h"
#include "sol/error.h"

// Full speed in every build type: a Debug or sanitizer build measuring slow loops would write
// wrong ceilings into the machine cache that release builds share. AddressSanitizer would also
// keep the accumulator arrays on an instrumented stack instead of in registers.
#pragma GCC optimize("O3")
#define FULL_SPEED __attribute__((no_sanitize("address", "undefined")))

// After the pragma, so the shared walk is built at full speed too.
#include "hw/stream_walk.h"  // NOLINT(llvm-include-order)

namespace sol::ceiling_loops {

namespace {

// Makes a register value observable without a store, so the loop computing it stays.
inline void keep(__m512 v) { __asm__ volatile("" : : "v"(v)); }

// Independent chains per loop trip are unrolled this many times so the loop's own
// increment-and-branch is a negligible share of the issued instructions.
constexpr int kChainRepeats = 4;

template <int kAccumulators>
FULL_SPEED double fma_f32_chains(long iterations) {
  __m512 acc[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_set1_ps(float(j));
  // acc * 0.999 + 0.001 converges to 1: no overflow, no denormals (which would be slow).
  const __m512 scale = _mm512_set1_ps(0.999f);
  const __m512 bias = _mm512_set1_ps(0.001f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 128
    for (int r = 0; r < kChainRepeats * kAccumulators; ++r)
      acc[r % kAccumulators] = _mm512_fmadd_ps(acc[r % kAccumulators], scale, bias);
  }
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  keep(acc[0]);
  constexpr double kFlopPerFma = 16 * 2;
  return double(iterations) * kChainRepeats * kAccumulators * kFlopPerFma;
}

template <int kAccumulators>
FULL_SPEED double dot_bf16_chains(long iterations) {
  __m512 acc[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_setzero_ps();
  // Products of 1/64 * 1/64 grow the sums slowly; once they stop changing the instruction
  // still does the same work.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.015625f), _mm512_set1_ps(0.015625f));
  const __m512bh b = a;
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 128
    for (int r = 0; r < kChainRepeats * kAccumulators; ++r)
      acc[r % kAccumulators] = _mm512_dpbf16_ps(acc[r % kAccumulators], a, b);
  }
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  keep(acc[0]);
  constexpr double kFlopPerDot = 16 * 2 * 2;  // 16 lanes, each two bf16 products and adds
  return double(iterations) * kChainRepeats * kAccumulators * kFlopPerDot;
}

template <int kAccumulators>
FULL_SPEED double dot_s8_chains(long iterations) {
  __m512i acc[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_setzero_si512();
  // 1 * 1 products: the int32 sums wrap after 2^29 trips, which costs nothing and is harmless.
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 128
    for (int r = 0; r < kChainRepeats * kAccumulators; ++r)
      acc[r % kAccumulators] = _mm512_dpbusd_epi32(acc[r % kAccumulators], a, b);
  }
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
  __asm__ volatile("" : : "v"(acc[0]));
  constexpr double kOpPerDot = 16 * 4 * 2;  // 16 lanes, each four u8 x s8 products and adds
  return double(iterations) * kChainRepeats * kAccumulators * kOpPerDot;
}

}  // namespace

double dot_s8(int accumulators, long iterations) {
  switch (accumulators) {
    case 8: return dot_s8_chains<8>(iterations);
    case 12: return dot_s8_chains<12>(iterations);
    case 16: return dot_s8_chains<16>(iterations);
    case 24: return dot_s8_chains<24>(iterations);
  }
  fail("dot_s8 loop", "no loop built for ", accumulators, " accumulators");
}

double fma_f32(int accumulators, long iterations) {
  switch (accumulators) {
    case 8: return fma_f32_chains<8>(iterations);
    case 12: return fma_f32_chains<12>(iterations);
    case 16: return fma_f32_chains<16>(iterations);
    case 24: return fma_f32_chains<24>(iterations);
  }
  fail("fma_f32 loop", "no loop built for ", accumulators, " accumulators");
}

double dot_bf16(int accumulators, long iterations) {
  switch (accumulators) {
    case 8: return dot_bf16_chains<8>(iterations);
    case 12: return dot_bf16_chains<12>(iterations);
    case 16: return dot_bf16_chains<16>(iterations);
    case 24: return dot_bf16_chains<24>(iterations);
  }
  fail("dot_bf16 loop", "no loop built for ", accumulators, " accumulators");
}

namespace {

// Eight loads per trip into eight accumulators: enough lines in flight for the prefetchers,
// and 8 chains cover vaddps latency (3-4) x 2 ports, so the adds never limit an L2-resident
// read. kPrefetch: every line is also requested kReadPrefetchBytes ahead (software prefetch,
// as a kernel streaming one row would do; past the end of a part it only touches the next one).
template <int S, bool kPrefetch>
FULL_SPEED double read_streams(const float* data, size_t floats, long passes) {
  __m512 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_setzero_ps();
  const double walked = walk_streams<S, false>(floats, passes, [&](size_t k, int slot, long) __attribute__((always_inline)) {
    if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(data + k) + kReadPrefetchBytes, _MM_HINT_T0);
    acc[slot] = _mm512_add_ps(acc[slot], _mm512_load_ps(data + k));
  });
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  keep(acc[0]);
  return walked * sizeof(float);
}

template <int S, bool kNonTemporal>
FULL_SPEED double copy_streams(float* dst, const float* src, size_t floats, long passes) {
  return 2 * sizeof(float) * walk_streams<S, kNonTemporal>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    if constexpr (kNonTemporal) _mm512_stream_ps(dst + k, _mm512_load_ps(src + k));
    else _mm512_store_ps(dst + k, _mm512_load_ps(src + k));
  });
}

// Each element read and the sum stored back to the same line with a regular store: an op that
// updates its data in place (rope, the residual of rmsnorm + add) moves the same bytes as a copy
// (a read and a write-back per line, no write-allocate read since the line is already there),
// and this machine moves them faster that way than by a streamed copy. Returns the
// bytes read plus the bytes written.
template <int S>
FULL_SPEED double update_streams(float* a, size_t floats, long passes) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return 2 * sizeof(float) * walk_streams<S, false>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    _mm512_store_ps(a + k, _mm512_add_ps(_mm512_load_ps(a + k), one));
  });
}

// One value per pass, stored non-temporally (the value changes each pass, so no pass can be
// skipped as a repeat of the one before). Never zero: this guest writes all-zero lines at about
// twice the rate of any other data (quiet, one thread: 94-98 GB/s against 44 for
// 1.0f or a copy's real data), so a loop storing 0.0f — as this one did in its first pass, which
// at one pass per repetition was every pass — measured zeros, not writes. Also keeps zeros out
// of the arena, which the copy loops read afterwards (a copy of zeros is ~8% faster too).
template <int S>
FULL_SPEED double write_streams(float* dst, size_t floats, long passes) {
  return sizeof(float) * walk_streams<S, true>(floats, passes, [&](size_t k, int, long p) __attribute__((always_inline)) {
    _mm512_stream_ps(dst + k, _mm512_set1_ps(float(p + 1)));
  });
}

// Non-temporal stores for `a`: a write-allocate read of `a` would be traffic the op never
// asked for, and the ceiling is meant to be the best the memory system can do.
template <int S>
FULL_SPEED double triad_streams(float* a, const float* b, const float* c, size_t floats,
                                long passes) {
  const __m512 scale = _mm512_set1_ps(0.5f);
  return 3 * sizeof(float) * walk_streams<S, true>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    _mm512_stream_ps(a + k, _mm512_fmadd_ps(scale, _mm512_load_ps(c + k), _mm512_load_ps(b + k)));
  });
}

}  // namespace

double read(const float* data, size_t floats, long passes, int streams, bool prefetch) {
  return with_streams(streams, [&](auto s) {
    constexpr int S = decltype(s)::value;
    return prefetch ? read_streams<S, true>(data, floats, passes) : read_streams<S, false>(data, floats, passes);
  });
}

double copy(float* dst, const float* src, size_t floats, long passes, bool non_temporal, int streams) {
  return with_streams(streams, [&](auto s) {
    constexpr int S = decltype(s)::value;
    return non_temporal ? copy_streams<S, true>(dst, src, floats, passes) : copy_streams<S, false>(dst, src, floats, passes);
  });
}

double write(float* dst, size_t floats, long passes, int streams) {
  return with_streams(streams, [&](auto s) { return write_streams<decltype(s)::value>(dst, floats, passes); });
}

double update(float* a, size_t floats, long passes, int streams) {
  return with_streams(streams, [&](auto s) { return update_streams<decltype(s)::value>(a, floats, passes); });
}

double triad(float* a, const float* b, const float* c, size_t floats, long passes, int streams) {
  return with_streams(streams, [&](auto s) { return triad_streams<decltype(s)::value>(a, b, c, floats, passes); });
}

}  // namespace sol::ceiling_loops
