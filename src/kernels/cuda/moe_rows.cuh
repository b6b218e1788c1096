#pragma once
// Row movers of sol::embedding, sol::moe_permute and sol::moe_unpermute on the device: one
// block per row (grid-stride over rows), its threads over the row's 16-byte vectors when the
// host found every row start 16-byte aligned and the row a whole number of vectors, else over
// its bytes (elements for unpermute). Row indices (ids, row_of) are checked by the host while
// the kernel runs (src/device/cuda/index_readback.h), so the kernel skips any outside its table:
// an out-of-range index leaves its row unwritten (gather) or its choice unsummed (unpermute).
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

// A row's vectors, 4 per thread loaded before any is stored (a 14 KiB row is 3.5 vectors per
// thread: one HBM round trip for the whole row instead of one per vector; dst may alias src as
// far as the compiler knows, so it would not batch the loads by itself).
__device__ __forceinline__ void copy_row(const char* src, char* dst, long long bytes, int vectors) {
  if (vectors) {
    const int kBatch = 4;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    const long long n = bytes / 16;
    for (long long i0 = threadIdx.x; i0 < n; i0 += kBatch * blockDim.x) {
      uint4 v[kBatch];
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
        if (i0 + q * blockDim.x < n) v[q] = s[i0 + q * blockDim.x];
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
        if (i0 + q * blockDim.x < n) d[i0 + q * blockDim.x] = v[q];
    }
  } else {
    for (long long i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

// Unpermute's sum for 8 (kVec) or 1 elements from column c: acc = fma(w_j, y_j, acc) over the
// routed choices in order from +0, as the CPU's AVX-512 weighted_row_sum, rounded once. The
// rows of a batch of choices are loaded together before the first is summed: one load at a
// time (the sum waiting on each) left a single 16-byte HBM read per thread in flight.
template <bool kInBf16> inline constexpr int kUnpermuteBatch = kInBf16 ? 8 : 4;

template <bool kInBf16, bool kOutBf16, bool kVec>
__device__ __forceinline__ void unpermute_columns(const char* y_perm, long long rows, long long h, const int* row_of,
                                                  const float* w, int k, char* out_row, long long c) {
  constexpr int kIn = kCodeOf<kInBf16>, kOut = kCodeOf<kOutBf16>, kBatch = kUnpermuteBatch<kInBf16>;
  const int ys = kInBf16 ? 2 : 4, os = kOutBf16 ? 2 : 4;
  const int n = kVec ? 8 : 1;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int j0 = 0; j0 < k; j0 += kBatch) {
    Raw8<kIn> raw[kBatch];
    float one[kBatch];  // the element path's values
    bool use[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int r = j0 + q < k ? row_of[j0 + q] : -1;
      use[q] = r >= 0 && r < rows;
      const char* y = y_perm + ((long long)(use[q] ? r : 0) * h + c) * ys;
      if (use[q]) {
        if (kVec) load8_raw<kIn>(y, raw[q]);
        else one[q] = Elem<kIn>::get(y, 0);
      }
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      if (!use[q]) continue;
      float v[8];
      if (kVec) widen8<kIn>(raw[q], v);
      else v[0] = one[q];
      const float wj = w[j0 + q];
#pragma unroll
      for (int i = 0; i < n; ++i) acc[i] = __fmaf_rn(wj, v[i], acc[i]);
    }
  }
  if (kVec) store8<kOut>(out_row + c * os, true, acc);
  else Elem<kOut>::put(out_row + c * os, 0, acc[0]);
}

}  // namespace sol_cuda

// out[t] = table[ids[t]] for t < rows and ids[t] in [0, table_rows); strides in bytes.
extern "C" __global__ void __launch_bounds__(256) sol_gather_rows(const char* table, long long table_rows,
                                                                  long long table_stride, const int* ids, char* out,
                                                                  long long out_stride, long long rows,
                                                                  long long row_bytes, int vectors) {
  for (long long t = blockIdx.x; t < rows; t += gridDim.x) {
    const long long id = ids[t];
    if (id < 0 || id >= table_rows) continue;
    sol_cuda::copy_row(table + id * table_stride, out + t * out_stride, row_bytes, vectors);
  }
}

// x_perm[row_of[t, j]] = x[t] for every routed choice (row_of >= 0): each 16-byte vector of a
// token's row is read once per 8 choices and stored to their rows. The choices' rows are read
// into registers first: read per vector, each store waited on a load of its row index (x_perm
// may alias row_of as far as the compiler knows).
extern "C" __global__ void __launch_bounds__(256) sol_permute_rows(const char* x, const int* row_of, int k,
                                                                   long long tokens, long long row_bytes, char* x_perm,
                                                                   int vectors) {
  const int kBatch = 8;
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    const char* src = x + t * row_bytes;
    for (int j0 = 0; j0 < k; j0 += kBatch) {
      long long dst[kBatch];  // byte offset of each choice's row, -1 if not routed here
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        const int r = j0 + q < k ? row_of[t * k + j0 + q] : -1;
        dst[q] = r >= 0 ? r * row_bytes : -1;
      }
      if (vectors) {
        for (long long i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) {
          const uint4 v = reinterpret_cast<const uint4*>(src)[i];
#pragma unroll
          for (int q = 0; q < kBatch; ++q)
            if (dst[q] >= 0) reinterpret_cast<uint4*>(x_perm + dst[q])[i] = v;
        }
      } else {
        for (long long i = threadIdx.x; i < row_bytes; i += blockDim.x) {
          const char v = src[i];
#pragma unroll
          for (int q = 0; q < kBatch; ++q)
            if (dst[q] >= 0) x_perm[dst[q] + i] = v;
        }
      }
    }
  }
}

// Zeroes the padding rows of x_perm (grouped_layout[r] < 0).
extern "C" __global__ void __launch_bounds__(256) sol_zero_padding_rows(char* x_perm, const int* grouped_layout,
                                                                        long long rows, long long row_bytes,
                                                                        int vectors) {
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    if (grouped_layout[r] >= 0) continue;
    char* d = x_perm + r * row_bytes;
    if (vectors) {
      for (long long i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
        reinterpret_cast<uint4*>(d)[i] = make_uint4(0, 0, 0, 0);
    } else {
      for (long long i = threadIdx.x; i < row_bytes; i += blockDim.x) d[i] = 0;
    }
  }
}

// sol_unpermute_<y bf16>_<out bf16>_<vec>: out [tokens, h] from y_perm [rows, h], row_of and
// topk_weights [tokens, k].
#define SOL_CUDA_UNPERMUTE_KERNEL(in_bf16, out_bf16, vec)                                                    \
  extern "C" __global__ void __launch_bounds__(256) sol_unpermute_##in_bf16##_##out_bf16##_##vec(           \
      const char* y_perm, long long rows, const int* row_of, const float* weights, int k, long long tokens, \
      long long h, char* out) {                                                                             \
    const long long step = vec ? 8 : 1;                                                                     \
    for (long long t = blockIdx.x; t < tokens; t += gridDim.x)                                              \
      for (long long c = threadIdx.x * step; c < h; c += blockDim.x * step)                                 \
        sol_cuda::unpermute_columns<in_bf16, out_bf16, vec>(y_perm, rows, h, row_of + t * k, weights + t * k, \
                                                             k, out + t * h * (out_bf16 ? 2 : 4), c);        \
  }
