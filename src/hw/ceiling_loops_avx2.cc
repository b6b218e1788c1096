// AVX2 ceiling loops: fp32 FMA and the streaming memory kernels, for CPUs without AVX-512.
// Each mirrors its AVX-512 twin (ceiling_loops_avx512.cc) with ymm registers: the same work
// counts, the same walk over the same lines, two 32-byte accesses where that one makes one.
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

namespace sol::ceiling_loops::avx2 {

namespace {

// Makes a register value observable without a store, so the loop computing it stays.
inline void keep(__m256 v) { __asm__ volatile("" : : "x"(v)); }

// Independent chains per loop trip are unrolled this many times so the loop's own
// increment-and-branch is a negligible share of the issued instructions.
constexpr int kChainRepeats = 4;

template <int kAccumulators>
FULL_SPEED double fma_f32_chains(long iterations) {
  __m256 acc[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm256_set1_ps(float(j));
  // acc * 0.999 + 0.001 converges to 1: no overflow, no denormals (which would be slow).
  const __m256 scale = _mm256_set1_ps(0.999f);
  const __m256 bias = _mm256_set1_ps(0.001f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 128
    for (int r = 0; r < kChainRepeats * kAccumulators; ++r)
      acc[r % kAccumulators] = _mm256_fmadd_ps(acc[r % kAccumulators], scale, bias);
  }
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  keep(acc[0]);
  constexpr double kFlopPerFma = 8 * 2;
  return double(iterations) * kChainRepeats * kAccumulators * kFlopPerFma;
}

}  // namespace

double fma_f32(int accumulators, long iterations) {
  switch (accumulators) {
    case 8: return fma_f32_chains<8>(iterations);
    case 10: return fma_f32_chains<10>(iterations);
    case 12: return fma_f32_chains<12>(iterations);
  }
  fail("fma_f32 loop (AVX2)", "no loop built for ", accumulators, " accumulators");
}

namespace {

// A line's two ymm loads are summed before they join the line's accumulator, so each of the
// eight chains takes one dependent add per line, as in the AVX-512 loop: 8 chains cover vaddps
// latency (3-4) x 2 ports, and the adds never limit an L2-resident read. kPrefetch: every line
// is also requested kReadPrefetchBytes ahead, once per line.
template <int S, bool kPrefetch>
FULL_SPEED double read_streams(const float* data, size_t floats, long passes) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  const double walked = walk_streams<S, false>(floats, passes, [&](size_t k, int slot, long) __attribute__((always_inline)) {
    if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(data + k) + kReadPrefetchBytes, _MM_HINT_T0);
    const __m256 line = _mm256_add_ps(_mm256_load_ps(data + k), _mm256_load_ps(data + k + 8));
    acc[slot] = _mm256_add_ps(acc[slot], line);
  });
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  keep(acc[0]);
  return walked * sizeof(float);
}

template <int S, bool kNonTemporal>
FULL_SPEED double copy_streams(float* dst, const float* src, size_t floats, long passes) {
  return 2 * sizeof(float) * walk_streams<S, kNonTemporal>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    const __m256 lo = _mm256_load_ps(src + k), hi = _mm256_load_ps(src + k + 8);
    if constexpr (kNonTemporal) {
      _mm256_stream_ps(dst + k, lo);
      _mm256_stream_ps(dst + k + 8, hi);
    } else {
      _mm256_store_ps(dst + k, lo);
      _mm256_store_ps(dst + k + 8, hi);
    }
  });
}

// a[i] += 1 with regular stores to the lines just read (see the AVX-512 loop for why this is
// a ceiling of its own). Returns the bytes read plus the bytes written.
template <int S>
FULL_SPEED double update_streams(float* a, size_t floats, long passes) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return 2 * sizeof(float) * walk_streams<S, false>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    _mm256_store_ps(a + k, _mm256_add_ps(_mm256_load_ps(a + k), one));
    _mm256_store_ps(a + k + 8, _mm256_add_ps(_mm256_load_ps(a + k + 8), one));
  });
}

// One value per pass, never zero, stored non-temporally (see the AVX-512 loop: all-zero lines
// are written faster than real data, and a value that changes each pass keeps passes distinct).
template <int S>
FULL_SPEED double write_streams(float* dst, size_t floats, long passes) {
  return sizeof(float) * walk_streams<S, true>(floats, passes, [&](size_t k, int, long p) __attribute__((always_inline)) {
    const __m256 v = _mm256_set1_ps(float(p + 1));
    _mm256_stream_ps(dst + k, v);
    _mm256_stream_ps(dst + k + 8, v);
  });
}

// Non-temporal stores for `a`: a write-allocate read of `a` would be traffic the op never
// asked for, and the ceiling is meant to be the best the memory system can do.
template <int S>
FULL_SPEED double triad_streams(float* a, const float* b, const float* c, size_t floats,
                                long passes) {
  const __m256 scale = _mm256_set1_ps(0.5f);
  return 3 * sizeof(float) * walk_streams<S, true>(floats, passes, [&](size_t k, int, long) __attribute__((always_inline)) {
    _mm256_stream_ps(a + k, _mm256_fmadd_ps(scale, _mm256_load_ps(c + k), _mm256_load_ps(b + k)));
    _mm256_stream_ps(a + k + 8, _mm256_fmadd_ps(scale, _mm256_load_ps(c + k + 8), _mm256_load_ps(b + k + 8)));
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

}  // namespace sol::ceiling_loops::avx2
