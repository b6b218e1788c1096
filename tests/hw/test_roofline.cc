#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "hw/flat_profile.h"
#include "sol/bench.h"
#include "sol/error.h"
#include "sol/roofline.h"
#include "sol/timing.h"

namespace sol {
namespace {

TEST(Roofline, FloorIsTheLargerSide) {
  Cost gemm{2e12, 1e9, Unit::fma_f32, Unit::mem_read};
  Floor f = roofline_floor(gemm, 1e12, 1e10);  // 2 s of compute vs 0.1 s of memory
  EXPECT_DOUBLE_EQ(f.floor_s, 2.0);
  EXPECT_EQ(f.bound, Bound::compute);
  Cost copy{0, 4e9, Unit::fma_f32, Unit::mem_copy};
  f = roofline_floor(copy, 0, 2e10);  // no flops: the unavailable peak does not matter
  EXPECT_DOUBLE_EQ(f.floor_s, 0.2);
  EXPECT_EQ(f.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(sol_percent(f, 0.4), 50.0);
}

// An op that reads 8 GB and writes 1 GB: 9 GB over a 60 GB/s copy ceiling is 0.15 s, but one
// core reads at 40 GB/s, so its reads alone need 0.2 s, and that is the floor.
TEST(Roofline, ReadTermBindsWhenReadsDominate) {
  Cost unpermute{0, 9e9, Unit::fma_f32, Unit::mem_copy, 8e9};
  Floor f = roofline_floor(unpermute, 0, 6e10, 4e10, 4e10);
  EXPECT_DOUBLE_EQ(f.floor_s, 0.2);
  EXPECT_EQ(f.bound, Bound::memory);
  EXPECT_EQ(f.memory_unit, Unit::mem_read);
  // Equal reads and writes (a norm): the copy term binds, the read term is smaller.
  Cost norm{0, 8e9, Unit::fma_f32, Unit::mem_copy, 4e9};
  f = roofline_floor(norm, 0, 6e10, 4e10, 4e10);
  EXPECT_DOUBLE_EQ(f.memory_s, 8e9 / 6e10);
  EXPECT_EQ(f.memory_unit, Unit::mem_copy);
  // No split given: no read term, whatever the read bandwidth.
  Cost plain{0, 9e9, Unit::fma_f32, Unit::mem_copy};
  EXPECT_DOUBLE_EQ(roofline_floor(plain, 0, 6e10, 1e9).floor_s, 0.15);
  // A read-only op already counted at the read ceiling: the term is the same level, not added twice.
  Cost read{0, 4e9, Unit::fma_f32, Unit::mem_read, 4e9};
  f = roofline_floor(read, 0, 2e10);
  EXPECT_DOUBLE_EQ(f.floor_s, 0.2);
  EXPECT_EQ(f.memory_unit, Unit::mem_read);
  // A compute-bound op keeps its compute bound.
  Cost gemm{1e12, 9e9, Unit::fma_f32, Unit::mem_copy, 8e9};
  EXPECT_EQ(roofline_floor(gemm, 1e12, 6e10, 4e10, 4e10).bound, Bound::compute);
}

// The mirror: an op that reads 1 GB and writes 8 GB (MoE permute) at a 60 GB/s copy, 40 GB/s
// read and 30 GB/s write ceiling needs 8/30 s for its writes, above the copy term's 0.15 s.
TEST(Roofline, WriteTermBindsWhenWritesDominate) {
  Cost permute{0, 9e9, Unit::fma_f32, Unit::mem_copy, 1e9};
  Floor f = roofline_floor(permute, 0, 6e10, 4e10, 3e10);
  EXPECT_DOUBLE_EQ(f.floor_s, 8e9 / 3e10);
  EXPECT_EQ(f.memory_unit, Unit::mem_write);
  // A read-only op (bytes == read_bytes) writes nothing: no write ceiling is needed.
  Cost read_only{0, 4e9, Unit::fma_f32, Unit::mem_copy, 4e9};
  EXPECT_DOUBLE_EQ(roofline_floor(read_only, 0, 6e10, 4e10, 0).floor_s, 0.1);
  // Writes given but no write ceiling: an error, not a zero term.
  EXPECT_THROW(roofline_floor(permute, 0, 6e10, 4e10, 0), Error);
}

TEST(Roofline, ReadBytesMustBeAPartOfBytes) {
  EXPECT_THROW(roofline_floor(Cost{0, 1e9, Unit::fma_f32, Unit::mem_copy, 2e9}, 0, 6e10, 4e10, 4e10), Error);
  EXPECT_THROW(roofline_floor(Cost{0, 1e9, Unit::fma_f32, Unit::mem_copy, -1}, 0, 6e10, 4e10, 4e10), Error);
  // The read ceiling is needed once read_bytes are given (unmeasured: an error, not a zero floor).
  EXPECT_THROW(roofline_floor(Cost{0, 1e9, Unit::fma_f32, Unit::mem_copy, 5e8}, 0, 6e10, 0, 4e10), Error);
}

TEST(Roofline, MissingCeilingIsAnError) {
  Cost amx{1e12, 1e6, Unit::amx_bf16, Unit::mem_read};
  EXPECT_THROW(roofline_floor(amx, 0, 1e10), Error);
  EXPECT_THROW(roofline_floor(Cost{-1, 0}, 1, 1), Error);
}

// bf16 work on a CPU without AVX512_BF16 runs as fp32 FMAs on the widened values: its floor is
// the fma_f32 peak, not no floor at all; int8 without VNNI is held to the same peak. A unit that
// is there is its own floor; other missing units have no stand-in.
TEST(Roofline, Bf16WithoutDotProductsFallsBackToFma) {
  MachineProfile m = testing_hw::flat_profile(1e12, 2e12);
  for (Ceiling& c : m.ceilings) {
    if (c.unit == Unit::fma_f32) c.one_thread = c.all_threads = 5e11;
    if (c.unit == Unit::dot_bf16 || c.unit == Unit::dot_s8 || c.unit == Unit::amx_int8) c.available = false;
  }
  const Cost bf16{1e12, 1e3, Unit::dot_bf16, Unit::mem_read};
  EXPECT_EQ(compute_unit_on(Unit::dot_bf16, m), Unit::fma_f32);
  EXPECT_DOUBLE_EQ(roofline_floor(bf16, m, 1).floor_s, 2.0);  // 1e12 FLOP at the FMA's 5e11
  EXPECT_EQ(compute_unit_on(Unit::dot_s8, m), Unit::fma_f32);
  EXPECT_DOUBLE_EQ(roofline_floor(Cost{1e12, 1e3, Unit::dot_s8, Unit::mem_read}, m, 1).floor_s, 2.0);
  EXPECT_EQ(compute_unit_on(Unit::amx_int8, m), Unit::amx_int8);
  EXPECT_THROW(roofline_floor(Cost{1e12, 1e3, Unit::amx_int8, Unit::mem_read}, m, 1), Error);
  EXPECT_EQ(compute_unit_on(Unit::fma_f32, m), Unit::fma_f32);
  const MachineProfile has_dot = testing_hw::flat_profile(1e12, 2e12);
  EXPECT_EQ(compute_unit_on(Unit::dot_bf16, has_dot), Unit::dot_bf16);
  EXPECT_DOUBLE_EQ(roofline_floor(bf16, has_dot, 1).floor_s, 1.0);
}

// Where both units are there and the FMAs are the faster (Intel's AVX-512 cores: vdpbf16ps at
// half two FMA pipes' rate), bf16 work is held to fma_f32, which computes the same exact
// products; a dot product faster than the FMAs (Zen) stays the floor. int8 keeps its own unit.
TEST(Roofline, Bf16IsHeldToTheFasterOfDotAndFma) {
  MachineProfile m = testing_hw::flat_profile(1e12, 2e12);
  for (Ceiling& c : m.ceilings) {
    if (c.unit == Unit::fma_f32) c.one_thread = c.all_threads = 2e12;
    if (c.unit == Unit::dot_bf16 || c.unit == Unit::dot_s8) c.one_thread = c.all_threads = 1e12;
  }
  const Cost bf16{1e12, 1e3, Unit::dot_bf16, Unit::mem_read};
  EXPECT_EQ(compute_unit_on(Unit::dot_bf16, m), Unit::fma_f32);
  EXPECT_DOUBLE_EQ(roofline_floor(bf16, m, 1).floor_s, 0.5);
  EXPECT_EQ(compute_unit_on(Unit::dot_s8, m), Unit::dot_s8);
  for (Ceiling& c : m.ceilings)
    if (c.unit == Unit::dot_bf16) c.one_thread = c.all_threads = 4e12;
  EXPECT_EQ(compute_unit_on(Unit::dot_bf16, m), Unit::dot_bf16);
  EXPECT_DOUBLE_EQ(roofline_floor(bf16, m, 1).floor_s, 0.25);
}

// sol bench re-measures every memory term of a split cost's floor beside the op (decisions
// 12-13), the binding unit first and none twice; an unsplit cost pairs only its binding unit.
TEST(Bench, PairsEveryMemoryTermOfASplitCost) {
  using V = std::vector<Unit>;
  const Cost unsplit{0, 100, Unit::fma_f32, Unit::mem_copy};
  EXPECT_EQ(units_to_pair(unsplit, Unit::mem_copy), V{Unit::mem_copy});
  const Cost split{0, 100, Unit::fma_f32, Unit::mem_copy, 60};
  EXPECT_EQ(units_to_pair(split, Unit::mem_copy), (V{Unit::mem_copy, Unit::mem_read, Unit::mem_write}));
  EXPECT_EQ(units_to_pair(split, Unit::mem_read), (V{Unit::mem_read, Unit::mem_copy, Unit::mem_write}));
  const Cost in_place{0, 100, Unit::fma_f32, Unit::mem_update, 50};
  EXPECT_EQ(units_to_pair(in_place, Unit::mem_update), (V{Unit::mem_update, Unit::mem_read, Unit::mem_write}));
  const Cost reads_only{0, 100, Unit::fma_f32, Unit::mem_copy, 100};  // nothing written
  EXPECT_EQ(units_to_pair(reads_only, Unit::mem_read), (V{Unit::mem_read, Unit::mem_copy}));
  const Cost compute_bound{1e12, 100, Unit::fma_f32, Unit::mem_copy, 60};
  EXPECT_EQ(units_to_pair(compute_bound, Unit::fma_f32),
            (V{Unit::fma_f32, Unit::mem_copy, Unit::mem_read, Unit::mem_write}));
}

// How far a paired ceiling moved between its two measurements beside an op: the same either
// way round, 1 for a unit not measured; a record is marked uncertain above the limit, which
// lies between one state's spread (~10%) and the two-thread states' 2x.
TEST(Bench, CeilingMoveIsASymmetricRatio) {
  EXPECT_DOUBLE_EQ(ceiling_move(60e9, 60e9), 1.0);
  EXPECT_DOUBLE_EQ(ceiling_move(60e9, 120e9), 2.0);
  EXPECT_DOUBLE_EQ(ceiling_move(120e9, 60e9), 2.0);
  EXPECT_DOUBLE_EQ(ceiling_move(0, 60e9), 1.0);
  EXPECT_DOUBLE_EQ(ceiling_move(60e9, 0), 1.0);
  EXPECT_GT(kCeilingMovedLimit, 1.1);
  EXPECT_LT(kCeilingMovedLimit, 2.0);
  EXPECT_GT(ceiling_move(60e9, 123e9), kCeilingMovedLimit);
  EXPECT_LT(ceiling_move(60e9, 63e9), kCeilingMovedLimit);
}

// Exactly min_runs timed runs after warmup_runs (and, with sets, every set once) warm ones.
TimingOptions counted_runs(int min_runs, int warmup_runs, int input_sets = 1) {
  TimingOptions opt;
  opt.min_seconds = 0.0;
  opt.min_runs = min_runs;
  opt.warmup_runs = warmup_runs;
  opt.warmup_seconds = 0;
  opt.input_sets = input_sets;
  return opt;
}

TEST(Timing, MedianOfRunsAndSetRotation) {
  int calls = 0, sets_seen = 0;
  TimingOptions opt = counted_runs(11, 1, 3);
  Timing t = time_runs([&](int set) {
    ++calls;
    sets_seen |= 1 << set;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }, opt);
  EXPECT_EQ(t.runs, 11);
  EXPECT_EQ(calls, 14);  // 11 timed, each of the 3 sets once in the warm-up
  EXPECT_EQ(sets_seen, 7);
  EXPECT_LE(t.min_s, t.median_s);
  EXPECT_LE(t.median_s, t.max_s);
  EXPECT_GE(t.min_s, 150e-6);
  opt.input_sets = 0;
  EXPECT_THROW(time_runs([](int) {}, opt), Error);
}

// A set's first run pays for what is fresh in it (page faults on never-written outputs), so
// the warm-up runs every set once, however many sets there are: no timed run is a first one.
TEST(Timing, WarmUpRunsEverySetOnce) {
  std::vector<int> runs_of(7, 0);
  const Timing t = time_runs([&](int set) {
    const bool first = runs_of[size_t(set)]++ == 0;
    std::this_thread::sleep_for(std::chrono::microseconds(first ? 100000 : 200));
  }, counted_runs(9, 1, 7));
  EXPECT_EQ(t.runs, 9);
  EXPECT_LT(t.max_s, 0.05) << "a timed run was some set's first";
  for (int n : runs_of) EXPECT_GE(n, 2);
}

// The thread clock counts the calling thread's work only: a run that sleeps 20 ms costs it
// (almost) nothing, a run that spins 20 ms costs it about that. The bounds are loose on purpose
// (a loaded machine may preempt the spinning thread), but a wall clock fails the first one.
TEST(Timing, ThreadCpuClockCountsWorkNotWaiting) {
  TimingOptions opt = counted_runs(3, 0);
  opt.clock = TimingOptions::Clock::thread_cpu;
  const Timing sleeping = time_runs([](int) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, opt);
  EXPECT_LT(sleeping.median_s, 5e-3);
  const Timing spinning = time_runs([](int) {
    const double until = thread_cpu_seconds() + 0.02;
    while (thread_cpu_seconds() < until) {
    }
  }, opt);
  EXPECT_GE(spinning.median_s, 0.019);
  EXPECT_LT(spinning.median_s, 0.2);
}

}  // namespace
}  // namespace sol
