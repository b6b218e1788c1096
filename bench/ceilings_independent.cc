// An independent check of `sol hw`: fp32 FMA peak and DRAM read/copy bandwidth, written from
// scratch without Sol's code (different loops, array sizes and timing), so a bug in Sol's
// ceilings shows up as a disagreement rather than being repeated here.
//
//   g++ -O2 -march=native -fopenmp bench/ceilings_independent.cc -o ceilings_independent
//
// Prints one line per figure: "<unit> <threads> <value per second>", raw FLOP/s or B/s.
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

double seconds_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// 12 dependent chains of vfmadd231ps written as assembly, 10 rounds per loop trip: 120 FMAs
// of 16 lanes x 2 FLOP. 12 chains cover 4-cycle latency x 2 pipes with a margin.
void fma_loop(long trips) {
  __asm__ volatile(
      "vxorps %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
      "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t"
      "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t"
      "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"
      "vxorps %%zmm12, %%zmm12, %%zmm12\n\t vxorps %%zmm13, %%zmm13, %%zmm13\n\t"
      "1:\n\t"
      ".rept 10\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm0\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm1\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm2\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm3\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm4\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm5\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm6\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm7\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm8\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm9\n\t"
      "vfmadd231ps %%zmm12, %%zmm13, %%zmm10\n\t vfmadd231ps %%zmm12, %%zmm13, %%zmm11\n\t"
      ".endr\n\t"
      "sub $1, %0\n\t"
      "jnz 1b\n\t"
      : "+r"(trips)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
}

constexpr double kFlopPerTrip = 10 * 12 * 16 * 2;

// Integer loads this time (Sol uses vaddps), four lines per step.
long long read_sum(const char* p, size_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < bytes; i += 256) {
    a = _mm512_add_epi64(a, _mm512_load_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_load_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_load_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_load_si512(p + i + 192));
  }
  alignas(64) long long lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
  long long sum = 0;
  for (long long lane : lanes) sum += lane;
  return sum;
}

// Streaming (non-temporal) stores skip the read-for-ownership of each destination line.
void stream_copy(char* dst, const char* src, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 256) {
    __m512i a = _mm512_load_si512(src + i), b = _mm512_load_si512(src + i + 64);
    __m512i c = _mm512_load_si512(src + i + 128), d = _mm512_load_si512(src + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 192), d);
  }
  _mm_sfence();
}

char* big_array(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<char*>(p);
}

// Runs `body(thread)` on `threads` threads `reps` times; the master's wall time between two
// barriers is one repetition, and the shortest one wins (noise only adds time).
template <class Body>
double best_seconds(int threads, int reps, Body body) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double start = 0, stop = 0;
#pragma omp parallel num_threads(threads)
    {
#pragma omp barrier
#pragma omp master
      start = seconds_now();
      body(omp_get_thread_num());
#pragma omp barrier
#pragma omp master
      stop = seconds_now();
    }
    best = std::min(best, stop - start);
  }
  return best;
}

long long g_sink = 0;

void report(const char* unit, int threads, double per_second) {
  std::printf("%s %d %.6e\n", unit, threads, per_second);
  std::fflush(stdout);
}

}  // namespace

int main() {
  const int all = omp_get_num_procs();
  const int counts[] = {1, all};

  constexpr long kTrips = 2'000'000;  // ~15 ms at 256 GFLOP/s per thread
  for (int threads : counts) {
    double t = best_seconds(threads, 40, [](int) { fma_loop(kTrips); });
    report("fma_f32", threads, kFlopPerTrip * kTrips * threads / t);
  }

  // 1 GiB per array, split between the threads; each thread first-touches its own part.
  constexpr size_t kBytes = size_t(1) << 30;
  char* src = big_array(kBytes);
  char* dst = big_array(kBytes);
  for (int threads : counts) {
    size_t part = kBytes / threads;
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      std::memset(src + t * part, 1, part);
      std::memset(dst + t * part, 2, part);
    }
    double t = best_seconds(threads, 10, [&](int i) {
      long long s = read_sum(src + i * part, part);
#pragma omp atomic
      g_sink += s;
    });
    report("mem_read", threads, double(kBytes) / t);
    // Copy counts bytes read + written. glibc's memcpy and a streaming-store loop both run and
    // the better one counts, as a ceiling should (glibc keeps regular stores when CPUID
    // reports a huge shared L3, as the 384 MiB of the Zen 5 hosts here).
    double by_memcpy =
        best_seconds(threads, 6, [&](int i) { std::memcpy(dst + i * part, src + i * part, part); });
    double by_streaming =
        best_seconds(threads, 6, [&](int i) { stream_copy(dst + i * part, src + i * part, part); });
    report("mem_copy", threads, 2.0 * double(kBytes) / std::min(by_memcpy, by_streaming));
  }
  return g_sink == 42 ? 1 : 0;
}
