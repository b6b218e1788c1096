#pragma once
// SwiGLU's gate and GELU on the device (activation_math.cuh), elementwise over rows: a thread
// takes 8 elements (16-byte vectors where the rows are aligned) through a grid-stride loop; the
// elements after a row's last whole 8, and every element of misaligned rows, go one by one.
// The fused variants produce 16 values per thread, rounded to bf16 as the plain op's bf16
// output would be, and quantize them per token (quant_fp8.cuh): the codes are those of
// quant_fp8_per_token of that bf16 output, bit for bit.
#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/quant_fp8.cuh"

namespace sol_cuda {

// f(r, i, v): v = the 8 results of row r from column i (vec: 16-byte accesses);
// f1(r, i): the result at (r, i). Rows of `cols` results; y rows `y_stride` elements apart.
template <int kY, class Eight, class One>
__device__ __forceinline__ void elementwise_rows(long long rows, long long cols, bool vec, void* y, long long y_stride,
                                                 const Eight& eight, const One& one) {
  const int ys = sizeof(typename Elem<kY>::type);
  const long long groups = vec ? cols / 8 : 0, tail = cols - groups * 8;
  const long long total = rows * groups, tails = rows * tail;
  for (long long c = global_thread(); c < total; c += global_threads()) {
    const long long r = c / groups, i = (c - r * groups) * 8;
    float v[8];
    eight(r, i, v);
    store8<kY>(byte_at(y, r * y_stride + i, ys), true, v);
  }
  for (long long c = global_thread(); c < tails; c += global_threads()) {
    const long long r = c / tail, i = groups * 8 + (c - r * tail);
    Elem<kY>::put(y, r * y_stride + i, one(r, i));
  }
}

// gate_up rows: the gate in columns [0, inter), the up projection in [inter, 2 inter).
template <int kT>
struct SiluMulSource {
  const void* gu;
  long long stride, inter;
  __device__ __forceinline__ void operator()(long long r, long long i, float (&v)[8]) const {
    const int ts = sizeof(typename Elem<kT>::type);
    const void* row = byte_at(gu, r * stride, ts);
    float g[8], u[8];
    load8<kT>(byte_at(row, i, ts), true, g);
    load8<kT>(byte_at(row, inter + i, ts), true, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = silu_mul_of(g[j], u[j]);
  }
  __device__ __forceinline__ float operator()(long long r, long long i) const {
    const void* row = byte_at(gu, r * stride, int(sizeof(typename Elem<kT>::type)));
    return silu_mul_of(Elem<kT>::get(row, i), Elem<kT>::get(row, inter + i));
  }
};

template <int kT>
struct GeluSource {
  const void* x;
  long long stride;
  int erf_form;
  __device__ __forceinline__ void operator()(long long r, long long i, float (&v)[8]) const {
    load8<kT>(byte_at(x, r * stride + i, int(sizeof(typename Elem<kT>::type))), true, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = gelu_of(v[j], erf_form != 0);
  }
  __device__ __forceinline__ float operator()(long long r, long long i) const {
    return gelu_of(Elem<kT>::get(x, r * stride + i), erf_form != 0);
  }
};

// 16 results of a source, rounded to bf16, for the per-token quantizer (vec: the source's rows
// are 16-byte aligned; otherwise element by element).
template <class Source>
struct Bf16Rounded16 {
  Source source;
  int vec;
  __device__ __forceinline__ void operator()(long long r, long long c, float (&v)[16]) const {
    if (vec) {
      float a[8], b[8];
      source(r, c, a);
      source(r, c + 8, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = round_to<kBF16>(a[j]), v[8 + j] = round_to<kBF16>(b[j]);
      return;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = round_to<kBF16>(source(r, c + j));
  }
};

}  // namespace sol_cuda
