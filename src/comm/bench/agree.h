#pragma once
// Scalars the ranks of a bench agree on (the slowest round, the lowest ceiling, wrong counts),
// through the group's own all_gather: its waits end at SOL_COMM_TIMEOUT_S and name the peer,
// where MPI_Allreduce would wait forever for a rank that stopped.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sol/comm.h"

namespace sol::comm::detail {

// Every rank's value, in rank order. T: 4 or 8 bytes (moved as i32 words).
template <class T>
std::vector<T> gather_scalars(const Group& g, T mine) {
  static_assert(sizeof(T) % 4 == 0, "gather_scalars moves whole 32-bit words");
  constexpr int64_t words = int64_t(sizeof(T) / 4);
  std::vector<T> all(size_t(g.size()));
  g.all_gather(Tensor(&mine, DType::i32, {words}), Tensor(all.data(), DType::i32, {words * g.size()}));
  return all;
}

inline double max_over(const Group& g, double mine) {
  const std::vector<double> all = gather_scalars(g, mine);
  return *std::max_element(all.begin(), all.end());
}

inline double min_over(const Group& g, double mine) {
  const std::vector<double> all = gather_scalars(g, mine);
  return *std::min_element(all.begin(), all.end());
}

inline int64_t sum_over(const Group& g, int64_t mine) {
  const std::vector<int64_t> all = gather_scalars(g, mine);
  return std::accumulate(all.begin(), all.end(), int64_t(0));
}

}  // namespace sol::comm::detail
