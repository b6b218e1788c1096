#include "ops/attention/packing.h"

#include <cstring>

#include "kernels/attention.h"
#include "ops/attention/problem.h"

namespace sol::attention_detail {

int64_t transposed_elems(int64_t rows, int64_t cols) { return round_up(rows, 32) * cols; }
int64_t interleaved_elems(int64_t rows, int64_t cols) { return round_up(cols, 32) * round_up(rows, 32); }

void pack_transposed(const kernels::AttentionKernels& k, const void* src, int64_t ld, DType t, int64_t rows, int64_t cols, void* dst) {
  // The vector path gathers 32 rows with 32-bit offsets.
  if (k.pack_transposed && 32 * ld * int64_t(dtype_size(t)) < (int64_t(1) << 31))
    return k.pack_transposed(src, ld, t == DType::bf16, rows, cols, dst);
  const int64_t panels = round_up(rows, 32) / 32;
  if (t == DType::f32) {
    const float* s = static_cast<const float*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t p = 0; p < panels; ++p) {
      float* panel = d + p * cols * 32;
      for (int64_t r = 0; r < 32; ++r) {
        const int64_t row = p * 32 + r;
        if (row < rows)
          for (int64_t c = 0; c < cols; ++c) panel[c * 32 + r] = s[row * ld + c];
        else
          for (int64_t c = 0; c < cols; ++c) panel[c * 32 + r] = 0.0f;
      }
    }
    return;
  }
  // bf16: (c, c+1) pairs move as one 32-bit word.
  const char* s = static_cast<const char*>(src);
  uint32_t* d = static_cast<uint32_t*>(dst);
  const int64_t pairs = cols / 2;
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* panel = d + p * pairs * 32;
    for (int64_t r = 0; r < 32; ++r) {
      const int64_t row = p * 32 + r;
      if (row < rows) {
        const char* src_row = s + row * ld * 2;
        for (int64_t c = 0; c < pairs; ++c) std::memcpy(&panel[c * 32 + r], src_row + c * 4, 4);
      } else {
        for (int64_t c = 0; c < pairs; ++c) panel[c * 32 + r] = 0;
      }
    }
  }
}

void pack_interleaved(const kernels::AttentionKernels& k, const void* src, int64_t ld, DType t, int64_t rows, int64_t cols, void* dst) {
  if (k.pack_interleaved) return k.pack_interleaved(src, ld, t == DType::bf16, rows, cols, dst);
  const int64_t rows_pad = round_up(rows, 32), panels = round_up(cols, 32) / 32;
  if (t == DType::f32) {
    const float* s = static_cast<const float*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t c0 = p * 32, w = std::min<int64_t>(32, cols - c0);
      float* panel = d + p * rows_pad * 32;
      for (int64_t r = 0; r < rows_pad; ++r) {
        float* out = panel + r * 32;
        if (r < rows) std::memcpy(out, s + r * ld + c0, size_t(w) * 4);
        std::memset(out + (r < rows ? w : 0), 0, size_t(32 - (r < rows ? w : 0)) * 4);
      }
    }
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t c0 = p * 32, w = std::min<int64_t>(32, cols - c0);
    uint16_t* panel = d + p * rows_pad * 32;
    for (int64_t r = 0; r < rows_pad; r += 2) {
      uint16_t* out = panel + r * 32;  // [32][2] for rows (r, r+1)
      const uint16_t* a = r < rows ? s + r * ld + c0 : nullptr;
      const uint16_t* b = r + 1 < rows ? s + (r + 1) * ld + c0 : nullptr;
      for (int64_t c = 0; c < 32; ++c) {
        out[2 * c] = a && c < w ? a[c] : 0;
        out[2 * c + 1] = b && c < w ? b[c] : 0;
      }
    }
  }
}

}  // namespace sol::attention_detail
