#pragma once
// The single-path reference of EP normal dispatch, shared by the EP MPI tests (tests/ep and
// tests/comm/mpi_ep.cc): each token's record (x row | fp8 scales | local expert ids | weights)
// is sent once to each destination rank through all_to_all_v and received in source-rank
// order, which is what sol::ep's dispatch must reproduce exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sol/comm.h"
#include "sol/tensor.h"

namespace sol::ep::testing {

// One rank's tagged inputs: bf16 and fp8 rows, 1x128 scales, topk ids and weights.
struct Inputs {
  std::vector<uint16_t> x;
  std::vector<uint8_t> x8;
  std::vector<float> scales, w;
  std::vector<int32_t> idx;
};

struct Expected {
  std::vector<std::byte> x, scales;
  std::vector<int32_t> idx;
  std::vector<float> w;
  int64_t rows = 0;
};

inline bool same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// This rank's expected receive for `tokens` rows of width `hidden`, top_k choices, experts
// split `local_experts` per rank.
inline Expected reference_dispatch(const comm::Group& g, const Inputs& in, int64_t tokens, int64_t hidden,
                                   int64_t top_k, int64_t local_experts, bool fp8) {
  const int R = g.size();
  const int64_t T = tokens, H = hidden, K = top_k, L = local_experts, S = H / 128;
  const int64_t rb = fp8 ? H : 2 * H, sb = fp8 ? S * 4 : 0, rec = rb + sb + 8 * K;
  std::vector<std::vector<std::byte>> per_dst(static_cast<size_t>(R));
  for (int64_t t = 0; t < T; ++t) {
    for (int d = 0; d < R; ++d) {
      bool to = false;
      for (int64_t j = 0; j < K; ++j) to |= in.idx[size_t(t * K + j)] >= 0 && in.idx[size_t(t * K + j)] / L == d;
      if (!to) continue;
      std::vector<std::byte> r(static_cast<size_t>(rec));
      std::memcpy(r.data(), fp8 ? static_cast<const void*>(in.x8.data() + t * H) : in.x.data() + t * H, size_t(rb));
      if (sb) std::memcpy(r.data() + rb, in.scales.data() + t * S, size_t(sb));
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = in.idx[size_t(t * K + j)];
        const int32_t le = e >= 0 && e / L == d ? int32_t(e - d * L) : -1;
        const float w = le >= 0 ? in.w[size_t(t * K + j)] : 0.0f;
        std::memcpy(r.data() + rb + sb + j * 4, &le, 4);
        std::memcpy(r.data() + rb + sb + K * 4 + j * 4, &w, 4);
      }
      per_dst[size_t(d)].insert(per_dst[size_t(d)].end(), r.begin(), r.end());
    }
  }
  std::vector<std::byte> send;
  std::vector<int64_t> send_counts(static_cast<size_t>(R)), recv_counts(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) {
    send_counts[size_t(d)] = int64_t(per_dst[size_t(d)].size());
    send.insert(send.end(), per_dst[size_t(d)].begin(), per_dst[size_t(d)].end());
  }
  g.all_to_all(Tensor(send_counts.data(), DType::i8, {int64_t(8 * R)}),
               Tensor(recv_counts.data(), DType::i8, {int64_t(8 * R)}));
  int64_t total = 0;
  for (int64_t n : recv_counts) total += n;
  std::vector<std::byte> recv(static_cast<size_t>(std::max<int64_t>(total, 1)));
  send.resize(std::max<size_t>(send.size(), 1));
  g.all_to_all_v(Tensor(send.data(), DType::i8, {int64_t(send.size())}), send_counts,
                 Tensor(recv.data(), DType::i8, {int64_t(recv.size())}), recv_counts);
  Expected ex;
  ex.rows = total / rec;
  ex.x.resize(size_t(ex.rows * rb));
  ex.scales.resize(size_t(ex.rows * sb));
  ex.idx.resize(size_t(ex.rows * K));
  ex.w.resize(size_t(ex.rows * K));
  for (int64_t i = 0; i < ex.rows; ++i) {
    const std::byte* p = recv.data() + i * rec;
    std::memcpy(ex.x.data() + i * rb, p, size_t(rb));
    if (sb) std::memcpy(ex.scales.data() + i * sb, p + rb, size_t(sb));  // bf16: no scales (null)
    std::memcpy(ex.idx.data() + i * K, p + rb + sb, size_t(K * 4));
    std::memcpy(ex.w.data() + i * K, p + rb + sb + K * 4, size_t(K * 4));
  }
  return ex;
}

}  // namespace sol::ep::testing
