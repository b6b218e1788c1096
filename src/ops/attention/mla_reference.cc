#include "ops/attention/mla_reference.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "sol/dtype.h"
#include "sol/mla.h"

namespace sol::reference {

namespace {

const uint8_t* token_row(const Tensor& kv, const Tensor& block_table, int64_t b, int64_t pos) {
  const int32_t block =
      block_table.data_as<int32_t>()[b * block_table.stride(0) + (pos / kMlaPageSize) * block_table.stride(1)];
  return static_cast<const uint8_t*>(kv.data()) +
         (block * kv.stride(0) + (pos % kMlaPageSize) * kv.stride(1)) * int64_t(dtype_size(kv.dtype()));
}

double bf16_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return double(bf16_to_f32(bits));
}

// All 576 dims of one cached token.
void cache_row(const Tensor& kv, const Tensor& block_table, int64_t b, int64_t pos, double* row) {
  const uint8_t* token = token_row(kv, block_table, b, pos);
  if (kv.dtype() == DType::bf16) {
    for (int d = 0; d < kMlaHeadDimQk; ++d) row[d] = bf16_at(token + 2 * d);
    return;
  }
  for (int d = 0; d < kMlaHeadDimV; ++d) {
    float scale;
    std::memcpy(&scale, token + kMlaFp8ScaleOffset + 4 * (d / kMlaFp8GroupSize), 4);
    row[d] = double(e4m3_to_f32(token[d])) * double(scale);
  }
  for (int d = 0; d < kMlaRopeDim; ++d) row[kMlaHeadDimV + d] = bf16_at(token + kMlaFp8RopeOffset + 2 * d);
}

}  // namespace

double mla_cache_value(const Tensor& kv, const Tensor& block_table, int64_t b, int64_t pos, int d) {
  double row[kMlaHeadDimQk];
  cache_row(kv, block_table, b, pos, row);
  return row[d];
}

std::vector<double> mla_sequence_cache(const Tensor& kv, const Tensor& block_table, const Tensor& cache_seqlens,
                                       int64_t b) {
  const int64_t seqlen = cache_seqlens.data_as<int32_t>()[b * cache_seqlens.stride(0)];
  std::vector<double> rows(static_cast<size_t>(seqlen * kMlaHeadDimQk));
  for (int64_t t = 0; t < seqlen; ++t) cache_row(kv, block_table, b, t, rows.data() + t * kMlaHeadDimQk);
  return rows;
}

void mla_decode_row(const Tensor& q, const std::vector<double>& cache, double softmax_scale, bool causal, int64_t b,
                    int64_t i, int64_t h, double* out, double* lse) {
  const int64_t s_q = q.shape(1), seqlen = int64_t(cache.size()) / kMlaHeadDimQk;
  const int64_t visible = seqlen - (causal ? s_q - 1 - i : 0);
  for (int d = 0; d < kMlaHeadDimV; ++d) out[d] = 0;
  if (visible <= 0) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  std::vector<double> qrow(kMlaHeadDimQk), score(static_cast<size_t>(visible));
  for (int d = 0; d < kMlaHeadDimQk; ++d)
    qrow[size_t(d)] = load_as_double(q.data(), DType::bf16,
                                     size_t(b * q.stride(0) + i * q.stride(1) + h * q.stride(2) + d * q.stride(3)));
  double mx = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t t = 0; t < visible; ++t) {
    const double* k = cache.data() + t * kMlaHeadDimQk;
    double s = 0;
    for (int d = 0; d < kMlaHeadDimQk; ++d) s += qrow[size_t(d)] * k[d];
    score[size_t(t)] = s * softmax_scale;
    nan |= std::isnan(score[size_t(t)]);
    if (score[size_t(t)] > mx) mx = score[size_t(t)];
  }
  if (nan) {
    for (int d = 0; d < kMlaHeadDimV; ++d) out[d] = std::nan("");
    *lse = std::nan("");
    return;
  }
  if (mx == -std::numeric_limits<double>::infinity()) {  // every score -inf: nothing to weigh
    *lse = mx;
    return;
  }
  double sum = 0;
  for (int64_t t = 0; t < visible; ++t) {
    const double p = std::exp(score[size_t(t)] - mx);
    const double* v = cache.data() + t * kMlaHeadDimQk;
    sum += p;
    for (int d = 0; d < kMlaHeadDimV; ++d) out[d] += p * v[d];
  }
  for (int d = 0; d < kMlaHeadDimV; ++d) out[d] /= sum;
  *lse = mx + std::log(sum);
}

void mla_decode(const Tensor& q, const Tensor& kv, const Tensor& block_table, const Tensor& cache_seqlens,
                double softmax_scale, bool causal, const Tensor& out, const Tensor& lse) {
  double row[kMlaHeadDimV], l;
  for (int64_t b = 0; b < q.shape(0); ++b) {
    const std::vector<double> cache = mla_sequence_cache(kv, block_table, cache_seqlens, b);
    for (int64_t i = 0; i < q.shape(1); ++i)
      for (int64_t h = 0; h < q.shape(2); ++h) {
        mla_decode_row(q, cache, softmax_scale, causal, b, i, h, row, &l);
        for (int d = 0; d < kMlaHeadDimV; ++d)
          store_from_double(out.data(), out.dtype(),
                            size_t(b * out.stride(0) + i * out.stride(1) + h * out.stride(2) + d * out.stride(3)),
                            row[d]);
        lse.data_as<float>()[b * lse.stride(0) + h * lse.stride(1) + i * lse.stride(2)] = float(l);
      }
  }
}

}  // namespace sol::reference
