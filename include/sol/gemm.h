#pragma once
// GEMM: D = act(alpha * A * op(B) + beta * C + bias), row-major.
//
//   A [M, K]; B [K, N] (Layout::nn) or [N, K] (Layout::nt: weights as DeepGEMM stores them,
//   D = A * B^T); C and D [M, N]; bias [N]. Any leading dimensions (row strides); the last
//   dimension of every operand must be dense (stride 1).
//   Types: f32 x f32 -> f32; bf16 x bf16 -> f32 or bf16. C has D's dtype; bias is f32.
//   Accumulation is in f32 with a fixed summation order: results are bitwise identical for any
//   thread count, and for packed and plain B.
//   The formula is evaluated literally: alpha = 0 still multiplies (an Inf or NaN in A*B gives
//   NaN), while beta = 0 never reads C, so C (or D's old contents) may hold anything then.
//   M, N or K may be 0; K = 0 gives D = act(beta * C + bias).
//   SOL_ISA=avx512 runs the blocked AVX-512 kernels (FMA for f32, vdpbf16ps for bf16);
//   SOL_ISA=scalar and SOL_ISA=avx2 run the plain scalar loops (slow; there is no AVX2 kernel).
#include <cstdint>
#include <memory>

#include "sol/tensor.h"

namespace sol {

enum class Layout { nn, nt };

enum class Activation { none, silu };  // silu(x) = x / (1 + exp(-x))

struct GemmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;           // scales C (or D's old contents when c is null)
  Layout layout = Layout::nn;  // how a plain B is stored (a PackedMatrix knows its own)
  const Tensor* c = nullptr;   // [M, N], D's dtype; null: C = D (in place); read only if beta != 0
  const Tensor* bias = nullptr;  // [N], f32: added after alpha/beta, before the activation
  Activation activation = Activation::none;
};

// B laid out once (at model load) in exactly the order the micro-kernel consumes it: panels
// of 32 columns, K-major inside a panel, bf16 as (k, k+1) pairs. Owns its memory; the source
// tensor may be freed after pack_b returns.
class PackedMatrix {
 public:
  PackedMatrix();
  ~PackedMatrix();
  PackedMatrix(PackedMatrix&&) noexcept;
  PackedMatrix& operator=(PackedMatrix&&) noexcept;
  int64_t k() const;
  int64_t n() const;
  DType dtype() const;
  bool empty() const { return impl_ == nullptr; }
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  friend PackedMatrix pack_b(const Tensor& b, Layout layout);
  std::unique_ptr<Impl> impl_;
};

// b is [K, N] (nn) or [N, K] (nt), f32 or bf16, last dimension dense.
PackedMatrix pack_b(const Tensor& b, Layout layout);

void gemm(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt = {});
void gemm(const Tensor& a, const PackedMatrix& b, const Tensor& d, const GemmOptions& opt = {});

}  // namespace sol
