#pragma once
// FP8 quantization on the device (sol/quant.h's rule, fp8_quant_math.cuh), bit for bit the CPU
// path's codes and scales.
//   per token: a thread takes 16 consecutive elements of a row (two or four 16-byte loads, one
//   16-byte store of codes); the group / 16 threads of a group are neighbouring lanes of one
//   warp and combine their abs-max with shuffles, so a group of 16 * 2^k elements (k <= 5)
//   never leaves registers. A warp walks the rows with a grid-stride loop whose trip count is
//   the same for all its lanes, so every shuffle has the whole warp.
//   per block: one CTA per 128 x 128 block; its 256 threads hold 4 rows x 16 elements each in
//   registers, reduce the abs-max over the warp then the CTA, and write the codes.
#include "kernels/cuda/fp8_quant_math.cuh"
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

__device__ __forceinline__ u32 warp_max_u32(u32 v, int lanes) {
  for (int m = 1; m < lanes; m <<= 1) v = max_u32(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Codes and scale of 16 values that are one thread's share of a group (all lanes of the warp
// call this together; inactive lanes pass active = false). col: the first value's column.
__device__ __forceinline__ void quant16(const float (&v)[16], bool active, long long row, long long col,
                                        const QuantOut& out) {
  u32 amax = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) amax = max_u32(amax, abs_bits(v[j]));
  amax = warp_max_u32(amax, out.group_lanes);
  if (!active) return;
  const Fp8Scale s = fp8_scale_of(amax, out.ue8m0 != 0);
  u32 codes[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    codes[k] = fp8_codes2(v[4 * k], v[4 * k + 1], s) | fp8_codes2(v[4 * k + 2], v[4 * k + 3], s) << 16;
  store_codes16(out.q + row * out.q_stride + col, out.vec_q != 0, codes);
  const long long group = 16LL * out.group_lanes;
  if (col % group == 0) out.scales[row * out.scale_stride0 + col / group * out.scale_stride1] = s.scale;
}

// Per-token quantization of rows x cols values (cols a multiple of the group), source(r, c, v)
// giving the 16 values of row r from column c as f32.
template <class Source>
__device__ __forceinline__ void quant_rows(const Source& source, long long rows, long long cols, const QuantOut& out) {
  const long long per_row = cols / 16, total = rows * per_row;
  const int lane = threadIdx.x & 31;
  for (long long base = global_thread() - lane; base < total; base += global_threads()) {
    const long long c = base + lane;
    const bool active = c < total;
    float v[16];
    long long r = 0, col = 0;
    if (active) {
      r = c / per_row;
      col = (c - r * per_row) * 16;
      source(r, col, v);
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = 0.0f;
    }
    quant16(v, active, r, col, out);
  }
}

template <int kX>
struct RowSource {
  const void* x;
  long long stride;  // elements
  int vec;
  __device__ __forceinline__ void operator()(long long r, long long c, float (&v)[16]) const {
    const void* p = byte_at(x, r * stride + c, int(sizeof(typename Elem<kX>::type)));
    float a[8], b[8];
    load8<kX>(p, vec != 0, a);
    load8<kX>(byte_at(p, 8, int(sizeof(typename Elem<kX>::type))), vec != 0, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = a[j], v[8 + j] = b[j];
  }
};

template <int kX>
__device__ __forceinline__ void quant_per_token(const void* x, long long x_stride, int x_vec, long long rows,
                                                long long cols, const QuantOut& out) {
  quant_rows(RowSource<kX>{x, x_stride, x_vec}, rows, cols, out);
}

// One 128 x 128 block (blockIdx.x: block column, blockIdx.y: block row) of w [rows, cols].
template <int kX>
__device__ __forceinline__ void quant_per_block(const void* w, long long w_stride, int w_vec, long long rows,
                                                const QuantOut& out) {
  __shared__ u32 warp_amax[8];
  const int t = threadIdx.x, part = t % 8, row_in = t / 8;
  const long long row0 = (long long)blockIdx.y * 128, col = (long long)blockIdx.x * 128 + part * 16;
  const RowSource<kX> source{w, w_stride, w_vec};
  float v[4][16];
  u32 amax = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long r = row0 + row_in + 32 * i;
    if (r < rows) {
      source(r, col, v[i]);
#pragma unroll
      for (int j = 0; j < 16; ++j) amax = max_u32(amax, abs_bits(v[i][j]));
    }
  }
  amax = warp_max_u32(amax, 32);
  if ((t & 31) == 0) warp_amax[t / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 8; ++k) amax = max_u32(amax, warp_amax[k]);
  const Fp8Scale s = fp8_scale_of(amax, out.ue8m0 != 0);
  if (t == 0) out.scales[(long long)blockIdx.y * out.scale_stride0 + (long long)blockIdx.x * out.scale_stride1] = s.scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long r = row0 + row_in + 32 * i;
    if (r >= rows) continue;
    u32 codes[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      codes[k] = fp8_codes2(v[i][4 * k], v[i][4 * k + 1], s) | fp8_codes2(v[i][4 * k + 2], v[i][4 * k + 3], s) << 16;
    store_codes16(out.q + r * out.q_stride + col, out.vec_q != 0, codes);
  }
}

}  // namespace sol_cuda
