#pragma once
// A tiny harness for the MPI test programs: deterministic inputs every rank can recompute
// for every other rank, poisoned outputs, failure counting, and a job-wide verdict.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sol/comm.h"
#include "sol/dtype.h"

namespace sol::comm::testing {

// Value of element i of rank r's input in test case `seed`: a small integer in [-8, 8] plus
// a random fraction when `fractional`, so sums of integers are exact in bf16 and f32 alike.
inline double input_value(uint64_t seed, int rank, int64_t i, bool fractional) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank) << 40) ^ uint64_t(i);
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  double whole = double(int64_t(x % 17) - 8);
  return fractional ? whole + double(x >> 40) / double(1ull << 24) : whole;
}

// Identifies (rank, index) exactly in any dtype of at least 32 bits: used for data movement.
inline int32_t tag_value(int rank, int64_t i) { return int32_t(rank * 1000003 + i * 7 + 1); }

inline void fill(void* p, DType t, int64_t n, uint64_t seed, int rank, bool fractional) {
  for (int64_t i = 0; i < n; ++i) store_from_double(p, t, size_t(i), input_value(seed, rank, i, fractional));
}

// 0xFF bytes: NaN in every float format. An empty buffer may have no storage (null).
inline void poison(void* p, size_t bytes) {
  if (bytes > 0) std::memset(p, 0xFF, bytes);
}

struct Checker {
  explicit Checker(int rank_) : rank(rank_) {}  // the rank that failure lines name

  int failures = 0;
  int checks = 0;
  int rank = 0;

  void expect(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    if (++failures <= 20) std::fprintf(stderr, "rank %d FAILED: %s\n", rank, what.c_str());
  }

  // Relative error norm of out against a double reference.
  void expect_close(const void* out, DType t, const std::vector<double>& ref, double tolerance,
                    const std::string& what) {
    double diff = 0, norm = 0;
    bool finite = true;
    for (size_t i = 0; i < ref.size(); ++i) {
      double v = load_as_double(out, t, i);
      finite &= std::isfinite(v);
      diff += (v - ref[i]) * (v - ref[i]);
      norm += ref[i] * ref[i];
    }
    double err = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    expect(finite && err <= tolerance, what + ": relative error " + std::to_string(err) +
                                           (finite ? "" : " (non-finite values)"));
  }

  // Job-wide: prints one verdict line on rank 0 and returns the exit code.
  int finish(const char* program) {
    int total = 0, all_checks = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checks, &all_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("%s: %d checks, %d failed\n", program, all_checks, total);
    return total == 0 ? 0 : 1;
  }
};

}  // namespace sol::comm::testing
