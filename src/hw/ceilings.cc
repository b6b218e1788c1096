// Ceilings: which loop measures each unit, on how many threads, and with what data.
// SOL_ISA plays no part here: ceilings describe the hardware, not the path Sol runs.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "hw/ceiling_loops.h"
#include "hw/parallel_rate.h"
#include "hw/stream_arena.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

// Two measurements at once would compete for the same cores and memory; each would be wrong.
std::mutex& measurement_mutex() {
  static std::mutex m;
  return m;
}

// What the AVX-512 loop files may contain besides AVX512-BF16, which only dot_bf16 uses.
bool has_avx512_loops(const CpuFeatures& f) {
  return f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

bool has_avx2_loops(const CpuFeatures& f) { return f.os_avx && f.avx2 && f.fma; }

// The loops that measure fp32 FMA and the memory levels: the widest vectors the CPU and OS
// allow, so that each ceiling is the most the hardware does. The call signatures are the
// header's with every argument spelled out.
struct VectorLoops {
  const char* fma_instruction;  // as the notes name it
  const char* loads;
  std::span<const int> accumulator_choices;
  double (*fma_f32)(int accumulators, long iterations);
  double (*read)(const float*, size_t, long, int, bool);
  double (*copy)(float*, const float*, size_t, long, bool, int);
  double (*triad)(float*, const float*, const float*, size_t, long, int);
  double (*update)(float*, size_t, long, int);
  double (*write)(float*, size_t, long, int);
};

constexpr VectorLoops kAvx512Loops{
    "vfmadd231ps zmm", "AVX-512 loads", ceiling_loops::kAccumulatorChoices,
    ceiling_loops::fma_f32, ceiling_loops::read, ceiling_loops::copy, ceiling_loops::triad,
    ceiling_loops::update, ceiling_loops::write};
constexpr VectorLoops kAvx2Loops{
    "vfmadd231ps ymm", "AVX2 loads", ceiling_loops::avx2::kAccumulatorChoices,
    ceiling_loops::avx2::fma_f32, ceiling_loops::avx2::read, ceiling_loops::avx2::copy,
    ceiling_loops::avx2::triad, ceiling_loops::avx2::update, ceiling_loops::avx2::write};

// nullptr where the CPU has neither set (then only the clock is measured).
const VectorLoops* vector_loops() {
  const CpuFeatures& f = cpu_features();
  if (has_avx512_loops(f)) return &kAvx512Loops;
  if (has_avx2_loops(f)) return &kAvx2Loops;
  return nullptr;
}

const VectorLoops& loops() {
  const VectorLoops* v = vector_loops();
  check(v != nullptr, "measure_ceiling", "no vector loops on this CPU");  // unavailable_reason stops it first
  return *v;
}

std::optional<std::string> unavailable_reason(Unit u) {
  const CpuFeatures& f = cpu_features();
  switch (u) {
    case Unit::clock: return std::nullopt;
    case Unit::mma_fp8: return device_only_ceiling(u).note;
    case Unit::amx_bf16:
    case Unit::amx_int8:
      if (!enable_amx()) return "AMX: " + f.amx_status;
      if (f.best_isa < Isa::amx) return std::string("AMX: the CPU lacks the AVX-512 level");
      return std::nullopt;
    case Unit::dot_bf16:
      if (!has_avx512_loops(f) || !f.avx512_bf16) return std::string("no AVX512_BF16");
      return std::nullopt;
    case Unit::dot_s8:
      if (!has_avx512_loops(f) || !f.avx512_vnni) return std::string("no AVX512_VNNI");
      return std::nullopt;
    default:
      if (!vector_loops()) return std::string("no AVX-512, nor AVX2 with FMA (CPU or OS)");
      return std::nullopt;
  }
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

std::string mebibytes(size_t bytes) { return format("%.0f MiB", double(bytes) / (1 << 20)); }

struct Rate {
  double value = 0;
  std::string note;
};

// The accumulator count this machine likes for an arithmetic loop: the fastest of the built
// choices on one thread. Too few chains leave pipes idle while results wait on latency; all
// counts that cover latency x pipes tie, so the choice is stable. Probed once a process.
int fastest_accumulator_count(double (*loop)(int, long),
                              std::span<const int> choices = ceiling_loops::kAccumulatorChoices) {
  int best_count = choices[0];
  double best_rate = 0;
  for (int count : choices) {
    RateOptions probe{.threads = 1, .seconds = 0.03, .rep_seconds = 0.005};
    double rate = best_parallel_rate([&](int, long it) { return loop(count, it); }, probe);
    if (rate > best_rate) {
      best_rate = rate;
      best_count = count;
    }
  }
  return best_count;
}

// " (the fastest of 8, 12, 16, 24 here)" for the choices a loop was timed with.
std::string fastest_of_text(std::span<const int> choices) {
  std::string list;
  for (int count : choices) list += (list.empty() ? "" : ", ") + std::to_string(count);
  return " (the fastest of " + list + " here)";
}

Rate arithmetic_rate(double (*loop)(int, long), int accumulators, const char* instruction,
                     const RateOptions& o,
                     std::span<const int> choices = ceiling_loops::kAccumulatorChoices) {
  double value = best_parallel_rate([&](int, long it) { return loop(accumulators, it); }, o);
  return {value, std::string(instruction) + ", " + std::to_string(accumulators) + " independent accumulators" +
                     fastest_of_text(choices)};
}

Rate fma_f32_rate(const RateOptions& o) {
  const VectorLoops& v = loops();
  static const int accumulators = fastest_accumulator_count(v.fma_f32, v.accumulator_choices);
  return arithmetic_rate(v.fma_f32, accumulators, v.fma_instruction, o, v.accumulator_choices);
}

Rate dot_bf16_rate(const RateOptions& o) {
  static const int accumulators = fastest_accumulator_count(ceiling_loops::dot_bf16);
  return arithmetic_rate(ceiling_loops::dot_bf16, accumulators, "vdpbf16ps zmm", o);
}

Rate dot_s8_rate(const RateOptions& o) {
  static const int accumulators = fastest_accumulator_count(ceiling_loops::dot_s8);
  return arithmetic_rate(ceiling_loops::dot_s8, accumulators, "vpdpbusd zmm", o);
}

// The DRAM loops are timed once for each stream count (ceiling_loops.h), each with an equal
// share of the time, and the fastest is the ceiling: a ceiling is the most this memory level
// delivers to a core, however the core issues the same bytes. One pass over a DRAM share takes
// tens of milliseconds, so a repetition is a single pass.
struct StreamRate {
  double rate = 0;
  int streams = 1;
  bool prefetch = false;
};

// loop(thread, passes, streams, prefetch); prefetch is tried only with_prefetch.
template <class Loop>
StreamRate fastest_streams(const Loop& loop, const RateOptions& o, bool with_prefetch = false) {
  const int prefetch_choices = with_prefetch ? 2 : 1;
  RateOptions each = o;
  each.seconds = o.seconds / double(std::size(ceiling_loops::kStreamChoices) * prefetch_choices);
  StreamRate best;
  for (int p = 0; p < prefetch_choices; ++p)
    for (int streams : ceiling_loops::kStreamChoices) {
      const bool prefetch = p == 1;
      double rate = best_parallel_rate([&](int t, long passes) { return loop(t, passes, streams, prefetch); }, each);
      if (rate > best.rate) best = {rate, streams, prefetch};
    }
  return best;
}

// fastest_streams for a loop over one array, loop(data, floats, passes, streams): each thread
// streams its whole share of the arena (the write and in-place update ceilings).
StreamRate one_array_streams(const RateOptions& o, double (*loop)(float*, size_t, long, int)) {
  const StreamArena& arena = StreamArena::get();
  return fastest_streams(
      [&](int t, long passes, int streams, bool) {
        const std::span<float> s = split(arena.slice(t, o.threads), 0, 1);
        return loop(s.data(), s.size(), passes, streams);
      },
      o);
}

std::string streams_text(int streams, bool prefetch = false) {
  return (streams == 1 ? std::string("1 sequential stream") : std::to_string(streams) + " interleaved streams") +
         (prefetch ? " with each line requested " + std::to_string(ceiling_loops::kReadPrefetchBytes / 1024) +
                         " KiB ahead"
                   : "");
}

Rate mem_read_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  StreamRate best = fastest_streams(
      [&](int t, long passes, int streams, bool prefetch) {
        std::span<float> s = split(arena.slice(t, o.threads), 0, 1);
        return loops().read(s.data(), s.size(), passes, streams, prefetch);
      },
      o, true);
  return {best.rate, std::string(loops().loads) + ", " + streams_text(best.streams, best.prefetch) + fastest_of_text(ceiling_loops::kStreamChoices) +
                         " with and without software prefetch, " + mebibytes(arena.bytes()) + " in all"};
}

// Regular stores make the core read each destination line before writing it (write-allocate),
// traffic that copy's read + write bytes do not count; non-temporal stores skip it but are not
// faster everywhere. Both are timed, with each stream count, and the best is the ceiling.
Rate mem_copy_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  auto rate_with = [&](bool non_temporal) {
    RateOptions half = o;
    half.seconds = o.seconds / 2;
    return fastest_streams(
        [&](int t, long passes, int streams, bool) {
          std::span<float> share = arena.slice(t, o.threads);
          std::span<float> src = split(share, 0, 2), dst = split(share, 1, 2);
          return loops().copy(dst.data(), src.data(), src.size(), passes, non_temporal, streams);
        },
        half);
  };
  StreamRate streaming = rate_with(true);
  StreamRate regular = rate_with(false);
  std::string in_all = fastest_of_text(ceiling_loops::kStreamChoices) + ", " + mebibytes(arena.bytes()) + " in all";
  if (streaming.rate >= regular.rate)
    return {streaming.rate, "non-temporal stores, " + streams_text(streaming.streams) +
                                " (regular stores: " + format("%.1f GB/s)", regular.rate / 1e9) +
                                in_all};
  return {regular.rate, "regular stores, " + streams_text(regular.streams) + " (non-temporal: " +
                            format("%.1f GB/s)", streaming.rate / 1e9) + in_all};
}

// The ceiling of ops that work in place (rope; decision 13 of docs/ARCHITECTURE.md): each line
// read, then a regular store to the line just read, written back when evicted. The same DRAM
// bytes as a copy, but no streamed store and no write-allocate read: on the Zen 5 guests here
// this moves them faster than any copy (quiet: 67.7 GB/s on one thread against a
// streamed copy's 62.2, 141.8 on two against ~123), and rope, held to the copy ceiling,
// printed 100-115% SOL.
Rate mem_update_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  const StreamRate best = one_array_streams(o, loops().update);
  return {best.rate, "a[i] += 1, regular stores to the lines just read, " + streams_text(best.streams) +
                         fastest_of_text(ceiling_loops::kStreamChoices) + ", " + mebibytes(arena.bytes()) + " in all"};
}

Rate mem_triad_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  StreamRate best = fastest_streams(
      [&](int t, long passes, int streams, bool) {
        std::span<float> share = arena.slice(t, o.threads);
        std::span<float> a = split(share, 0, 3), b = split(share, 1, 3), c = split(share, 2, 3);
        return loops().triad(a.data(), b.data(), c.data(), a.size(), passes, streams);
      },
      o);
  return {best.rate, "a = b + s*c, non-temporal stores to a, " + streams_text(best.streams) +
                         fastest_of_text(ceiling_loops::kStreamChoices) + ", " + mebibytes(arena.bytes()) + " in all"};
}

// The mirror of the read term's ceiling (decision 12 of docs/ARCHITECTURE.md): an op that writes
// far more than it reads (MoE permute) is held to what a core's stores can stream.
Rate mem_write_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  const StreamRate best = one_array_streams(o, loops().write);
  return {best.rate, "non-temporal stores, " + streams_text(best.streams) +
                         fastest_of_text(ceiling_loops::kStreamChoices) + ", " + mebibytes(arena.bytes()) + " in all"};
}

// Half of L2 per thread: large enough that L1 (48 KiB here) serves almost none of it, small
// enough that the L2's own conflicts and the page tables never push it out to L3. A sweep on
// the Zen 5 guests (1 MiB L2), one thread: 64-384 KiB ~200 GB/s, 512-640 KiB ~250, 1 MiB ~155.
Rate l2_read_rate(const RateOptions& o) {
  const StreamArena& arena = StreamArena::get();
  long l2 = cpu_features().l2_bytes > 0 ? cpu_features().l2_bytes : 256 << 10;
  constexpr size_t kBlock = ceiling_loops::kStreamBlockFloats;
  size_t floats = size_t(l2) / 2 / sizeof(float) / kBlock * kBlock;
  auto loop = [&](int t, long passes) {
    std::span<float> share = arena.slice(t, o.threads);
    return loops().read(share.data(), std::min(floats, share.size()), passes, 1, false);
  };
  return {best_parallel_rate(loop, o),
          std::string(loops().loads) + ", " + format("%.0f KiB", double(floats * sizeof(float)) / 1024) +
              " per thread (half of L2)"};
}

// Per core, not summed: all_threads is the clock each core keeps while every core is busy.
Rate clock_rate(const RateOptions& o) {
  auto loop = [](int, long iterations) { return ceiling_loops::clock_cycles(iterations); };
  double total = best_parallel_rate(loop, o);
  return {total / o.threads, "dependent integer adds, one per cycle; per core, not summed"};
}

Rate measure_rate(Unit u, int threads, double seconds) {
  // 10 ms repetitions: long enough that timer and thread start-up skew are < 0.1%, short
  // enough that many fit the budget and one of them misses the neighbours' bursts.
  RateOptions o{.threads = threads, .seconds = seconds, .rep_seconds = 0.01};
  switch (u) {
    case Unit::fma_f32: return fma_f32_rate(o);
    case Unit::dot_bf16: return dot_bf16_rate(o);
    case Unit::dot_s8: return dot_s8_rate(o);
    case Unit::amx_bf16:
      return {best_parallel_rate([](int, long it) { return ceiling_loops::amx_bf16(it); }, o),
              "TDPBF16PS 16x16x32, 4 tile accumulators"};
    case Unit::amx_int8:
      return {best_parallel_rate([](int, long it) { return ceiling_loops::amx_int8(it); }, o),
              "TDPBSSD 16x16x64, 4 tile accumulators"};
    case Unit::mem_read: return mem_read_rate(o);
    case Unit::mem_copy: return mem_copy_rate(o);
    case Unit::mem_triad: return mem_triad_rate(o);
    case Unit::mem_write: return mem_write_rate(o);
    case Unit::mem_update: return mem_update_rate(o);
    case Unit::l2_read: return l2_read_rate(o);
    case Unit::clock: return clock_rate(o);
    case Unit::mma_fp8: break;  // unavailable_reason stops it before here
  }
  fail("measure_ceiling", "unknown unit ", int(u));
}

}  // namespace

// The rate at `threads` threads is all_threads (and one_thread too when threads is 1), so a
// paired re-measurement reads one field whatever the thread count.
Ceiling measure_ceiling(Unit u, int threads, double seconds) {
  std::lock_guard lock(measurement_mutex());
  check(threads >= 1, "measure_ceiling", "threads = ", threads, " but must be >= 1");
  check(seconds > 0, "measure_ceiling", "seconds = ", seconds, " but must be > 0");
  Ceiling c;
  c.unit = u;
  c.threads = threads;
  if (std::optional<std::string> why = unavailable_reason(u)) {
    c.note = *why;
    return c;
  }
  Rate r = measure_rate(u, threads, seconds);
  c.available = true;
  c.note = r.note;
  c.all_threads = r.value;
  if (threads == 1) c.one_thread = r.value;
  return c;
}

}  // namespace sol
