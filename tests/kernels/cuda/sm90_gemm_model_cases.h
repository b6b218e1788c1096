#pragma once
// Random problems for the CPU model of the persistent sm90 GEMM (test_sm90_gemm_persistent.cc,
// test_sm90_gemm_epilogue.cc): operands encoded as the kernel reads them with their exact values,
// fp8 block scales, the grouped layouts' row maps, and the float64 reference sum of a result.
#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_wgmma_model.h"
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"

namespace sol::kernels::sm90::model_cases {

constexpr u16 kPoison = 0xFFFF;  // NaN in bf16

struct Matrix {
  std::vector<u8> bytes;       // encoded, K-major
  std::vector<double> values;  // exact
};

inline Matrix random_matrix(u64 rows, u32 k, u32 element_bytes, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix m;
  m.bytes.resize(rows * k * element_bytes);
  m.values.resize(rows * k);
  for (u64 i = 0; i < rows * k; ++i) {
    if (element_bytes == 2) {
      const u16 bits = f32_to_bf16(dist(rng));
      m.bytes[2 * i] = u8(bits);
      m.bytes[2 * i + 1] = u8(bits >> 8);
      m.values[i] = bf16_to_f32(bits);
    } else {
      m.bytes[i] = f32_to_e4m3(dist(rng) * 8.0f);
      m.values[i] = e4m3_to_f32(m.bytes[i]);
    }
  }
  return m;
}

// A problem with its operands, scales (fp8) and the group of each row of D (-1: none).
struct Case {
  GemmProblemView p;
  u32 k = 0, rows = 0;
  std::vector<int> row_group, masked_m;
  Matrix a, b;
  std::vector<float> sa, sb;
};

template <class Plan>
Case make_case(GemmGrouping grouping, u32 m, u32 n, u32 k, std::vector<int> groups_info, u32 split, bool scaled,
               u32 seed) {
  std::mt19937 rng(seed);
  Case c;
  c.k = k;
  c.p.grouping = grouping;
  c.p.m = m;
  c.p.n = n;
  c.p.k_blocks = Plan::k_blocks(k);
  c.p.split_k = split;
  if (grouping == GemmGrouping::contiguous) {
    c.row_group = std::move(groups_info);
    int groups = 1;
    for (int g : c.row_group) groups = std::max(groups, g + 1);
    c.p.groups = u32(groups);
  } else if (grouping == GemmGrouping::masked) {
    c.masked_m = std::move(groups_info);
    c.p.groups = u32(c.masked_m.size());
  }
  c.p.row_group = c.row_group.empty() ? nullptr : c.row_group.data();
  c.p.masked_m = c.masked_m.empty() ? nullptr : c.masked_m.data();
  c.rows = grouping == GemmGrouping::masked ? c.p.groups * m : m;
  c.a = random_matrix(c.rows, k, Plan::element_bytes, rng);
  c.b = random_matrix(u64(c.p.groups) * n, k, Plan::element_bytes, rng);
  if (scaled) {
    std::uniform_real_distribution<float> scale(0.25f, 4.0f);
    c.sa.resize(u64(c.rows) * c.p.k_blocks);
    c.sb.resize(u64(c.p.groups) * ((n + 127) / 128) * c.p.k_blocks);
    for (float& x : c.sa) x = scale(rng);
    for (float& x : c.sb) x = scale(rng);
  }
  return c;
}

inline int group_of(const Case& c, u32 row) {
  switch (c.p.grouping) {
    case GemmGrouping::single: return 0;
    case GemmGrouping::contiguous: return c.row_group[row];
    case GemmGrouping::masked: return int(row % c.p.m) < c.masked_m[row / c.p.m] ? int(row / c.p.m) : -1;
  }
  return -1;
}

// sum over K of A[row] * B[group g][col] in float64, per 128-K block scaled for fp8.
inline double reference_sum(const Case& c, u32 row, int g, u32 col) {
  const u32 n = c.p.n, kbs = c.p.k_blocks, blocks_per_group = (n + 127) / 128;
  const double* x = &c.a.values[u64(row) * c.k];
  const double* y = &c.b.values[(u64(g) * n + col) * c.k];
  double r = 0;
  if (c.sa.empty()) {
    for (u32 p = 0; p < c.k; ++p) r += x[p] * y[p];
    return r;
  }
  for (u32 kb = 0; kb < kbs; ++kb) {
    double block = 0;
    for (u32 p = 128 * kb; p < 128 * (kb + 1); ++p) block += x[p] * y[p];
    r += double(c.sa[u64(row) * kbs + kb]) * c.sb[(u64(g) * blocks_per_group + col / 128) * kbs + kb] * block;
  }
  return r;
}

}  // namespace sol::kernels::sm90::model_cases
