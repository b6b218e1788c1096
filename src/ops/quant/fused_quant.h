#pragma once
// Fusing per-token FP8 quantization into a row-wise op: produce(r, out) writes output row r as
// bf16 into out; rows are produced a chunk at a time into an L1/L2-sized buffer and quantized
// from there, so only the op's inputs are read from memory and only q and scales written. The
// result is bit-identical to quant_fp8_per_token of the op's bf16 output.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/common/parallel.h"
#include "sol/error.h"
#include "sol/quant.h"

namespace sol {

// Checks q [rows, h] f8e4m3 and scales [rows, h / group] f32; `h_name` names the row length in
// the op's own terms ("x.shape[1]", "inter").
inline void validate_fused_quant(const char* op, const char* h_name, int64_t rows, int64_t h, const Tensor& q,
                                 const Tensor& scales, const QuantOptions& qopt) {
  check(q.ndim() == 2 && q.shape(0) == rows && q.shape(1) == h && q.dtype() == DType::f8e4m3, op, "q = ",
        q.describe(), " but expected [", rows, ", ", h, "] f8e4m3");
  check(qopt.group > 0 && h % qopt.group == 0, op, h_name, " = ", h, " but must be a multiple of the group (",
        qopt.group, ")");
  check(scales.ndim() == 2 && scales.shape(0) == rows && scales.shape(1) == h / qopt.group &&
            scales.dtype() == DType::f32,
        op, "scales = ", scales.describe(), " but expected [", rows, ", ", h / qopt.group, "] f32");
}

template <class ProduceRow>
void quantize_rows_fp8(int64_t rows, int64_t h, const Tensor& q, const Tensor& scales, const QuantOptions& qopt,
                       ProduceRow&& produce) {
  constexpr int64_t kChunk = 16;
  parallel_ranges(rows, kChunk, [&](int64_t r0, int64_t r1) {
    std::vector<uint16_t> chunk_rows(static_cast<size_t>(kChunk * h));  // once per thread
    for (int64_t c0 = r0; c0 < r1; c0 += kChunk) {
      const int64_t c1 = std::min(r1, c0 + kChunk);
      for (int64_t r = c0; r < c1; ++r) produce(r, chunk_rows.data() + (r - c0) * h);
      // Inside this parallel region the nested call runs on the calling thread alone.
      Tensor chunk(chunk_rows.data(), DType::bf16, {int64_t(c1 - c0), h});
      quant_fp8_per_token(chunk, q.slice(0, c0, c1), scales.slice(0, c0, c1), qopt);
    }
  });
}

}  // namespace sol
