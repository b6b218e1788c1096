#pragma once
// Softmax rows per ISA (internal).
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {
// One row per call. scratch holds n f32 (the exponentials between the sum and the final
// scaling, so exp runs once per element). stream: y may be written with non-temporal stores (a
// hint; see kernels/activation.h). tp: the vector kernels request a row's first pass
// tp.row_prefetch_bytes ahead (speed only; the scalar kernel ignores it).
void softmax_row_avx2(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream,
                      const TuningParams& tp);
void softmax_row_scalar(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream,
                        const TuningParams& tp);
// softmax_row_avx512: the exponential of the per-lane routing kernel, whose scores promise its
// bits (kernels/route.h); any input dtype. softmax_op_row_avx512: the softmax op's bf16 rows, a
// cheaper exponential, the same bits as softmax_rows_avx512. Both to f32 accuracy.
void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream,
                        const TuningParams& tp);
void softmax_op_row_avx512(const uint16_t* x, void* y, DType yt, int64_t n, float* scratch, bool stream,
                           const TuningParams& tp);
// bf16 rows [0, rows) of x (row r at x + r * x_row_bytes) into y likewise, pipelined: row r's
// exponentials are computed while row r - 1 is scaled and stored and row r + 1's maximum is
// read, so the read stream, the arithmetic and the write stream overlap. Same results as one
// softmax_op_row_avx512 per row. scratch holds 2 n f32. Out of place only (x and y disjoint).
void softmax_rows_avx512(const uint16_t* x, int64_t x_row_bytes, void* y, int64_t y_row_bytes, DType yt, int64_t rows,
                         int64_t n, float* scratch, bool stream, const TuningParams& tp);
// The softmax op's f32 rows: two passes per row and no scratch (the maximum and the sum of
// exponentials in one read, then the exponentials again for the output), in one
// call per row (in place allowed) or pipelined over rows (pass 2 of row r beside pass 1 of row
// r + 1, reads requested tp.pass_prefetch_bytes ahead; out of place only), with the same results.
void softmax_two_pass_row_avx512(const float* x, void* y, DType yt, int64_t n, bool stream, const TuningParams& tp);
void softmax_two_pass_rows_avx512(const float* x, int64_t x_row_bytes, void* y, int64_t y_row_bytes, DType yt,
                                  int64_t rows, int64_t n, bool stream, const TuningParams& tp);
// Softmax's kernels at one ISA level: a row of any dtype (every level), and the bf16 and f32
// row kernels, one row or a thread's rows pipelined (null below AVX-512).
struct SoftmaxKernels {
  decltype(&softmax_row_scalar) row;
  decltype(&softmax_op_row_avx512) bf16_row;
  decltype(&softmax_rows_avx512) bf16_rows;
  decltype(&softmax_two_pass_row_avx512) f32_row;
  decltype(&softmax_two_pass_rows_avx512) f32_rows;
};
KernelTable<SoftmaxKernels> softmax_kernel_table();

}  // namespace sol::kernels
