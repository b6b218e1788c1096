#pragma once
// GEMM: D = act(alpha * A * op(B) + beta * C + bias), row-major.
//
//   A [M, K]; B [K, N] (Layout::nn) or [N, K] (Layout::nt: weights as DeepGEMM stores them,
//   D = A * B^T); C and D [M, N]; bias [N]. Any leading dimensions (row strides); the last
//   dimension of every operand must be dense (stride 1).
//   Types (A x B -> D):
//     f32 x f32 -> f32                      AVX-512 FMA
//     bf16 x bf16 -> f32 or bf16            vdpbf16ps (AMX TDPBF16PS where the CPU has it; f32
//                                           FMAs on Intel's AVX-512 cores without AMX, where
//                                           they are twice as fast: other bits, same accuracy)
//     i8 x i8 -> i32, u8 x i8 -> i32        vpdpbusd; exact (wrapping) int32 sums: the result is
//                                           exact whenever it fits in int32. alpha must be 1,
//                                           beta 0 or 1 (D += A*B), no bias or activation.
//     f8e4m3 x f8e4m3 -> bf16 or f32        DeepGEMM's recipe: a_scales f32 [M, K/128] (one per
//                                           1x128 block of A, per token), b_scales f32
//                                           [ceil(N/128), K/128] (one per 128x128 block of B).
//     bf16 x f8e4m3 -> bf16 or f32          weight-only fp8: b_scales as above, no a_scales.
//   fp8 needs K % 128 == 0. No CPU here multiplies fp8: both operands are converted exactly to
//   bf16 while packing, each 128-wide K group is summed in f32 on its own and then added as
//   sum * a_scale * b_scale (DeepGEMM's promotion), so scales are applied exactly, per group.
//   UE8M0 scales are f32 powers of two (quant_fp8_* with ScaleFormat::ue8m0) and need nothing
//   else. C has D's dtype; bias is f32. A residual add is beta = 1 with c = the residual.
//   Accumulation is in f32 (i32) with a fixed summation order: results are bitwise identical
//   for any thread count, and for packed and plain B.
//   The formula is evaluated literally: alpha = 0 still multiplies (an Inf or NaN in A*B gives
//   NaN), while beta = 0 never reads C, so C (or D's old contents) may hold anything then.
//   M, N or K may be 0; K = 0 gives D = act(beta * C + bias).
//   SOL_ISA=avx512 runs the blocked AVX-512 kernels (FMA for f32, vdpbf16ps or FMA for bf16 and
//   fp8 as above, vpdpbusd for int8), SOL_ISA=avx2 the AVX2 kernels (FMA, bf16 widened to f32; vpmaddwd for
//   int8), SOL_ISA=scalar the plain loops (slow).
#include <cstdint>
#include <memory>
#include <span>

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
  const Tensor* a_scales = nullptr;  // f32 [M, K/128]: fp8 A only
  const Tensor* b_scales = nullptr;  // f32 [ceil(N/128), K/128]: plain fp8 B only (a packed
                                     // fp8 B carries its own)
};

// Width of an fp8 scale block along K (and height along N for B's 128 x 128 blocks).
inline constexpr int64_t kFp8ScaleBlock = 128;

// B laid out once (at model load) in exactly the order the micro-kernel consumes it: panels
// of 32 columns, K-major inside a panel, bf16 as (k, k+1) pairs, int8 as (k..k+3) quads
// (with the column sums the s8 x s8 product needs), fp8 kept as fp8 in bf16's pair order (half
// the bytes to stream; widened to bf16 block by block as it is used) with a copy of its
// 128 x 128 scales. Owns its memory; the source tensors may be freed after pack_b returns.
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
  friend PackedMatrix pack_b(const Tensor& b, Layout layout, const Tensor* b_scales);
  std::unique_ptr<Impl> impl_;
};

// b is [K, N] (nn) or [N, K] (nt), f32, bf16, i8 or f8e4m3, last dimension dense; fp8 needs
// its b_scales (f32 [ceil(N/128), K/128]), the others none.
PackedMatrix pack_b(const Tensor& b, Layout layout, const Tensor* b_scales = nullptr);

void gemm(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt = {});
void gemm(const Tensor& a, const PackedMatrix& b, const Tensor& d, const GemmOptions& opt = {});

// ---- MoE grouped GEMM (DeepGEMM semantics) -------------------------------------------------
// B holds one weight matrix per expert, [G, N, K] (layout nt, D = A * B[g]^T); bf16 x bf16,
// f8e4m3 x f8e4m3 (a_scales as for gemm, b_scales f32 [G, ceil(N/128), K/128]) or bf16 x
// f8e4m3; D is bf16 or f32. No alpha/beta/bias epilogue (as in DeepGEMM).
struct GroupedGemmOptions {
  const Tensor* a_scales = nullptr;
  const Tensor* b_scales = nullptr;
};

// The row alignment DeepGEMM requires of each expert's block in the contiguous layout, and
// that moe_permute pads to. Sol itself accepts runs of any length.
inline constexpr int64_t kGroupedGemmMAlignment = 128;

// Contiguous layout: a [M, K], d [M, N], grouped_layout int32 [M] = the expert of each row, or
// -1 for a padding row. Rows of one expert are computed as one GEMM per maximal run of equal
// ids; the output rows of padding (-1) rows are left untouched (never read or written).
void grouped_gemm_contiguous(const Tensor& a, const Tensor& b, const Tensor& grouped_layout,
                             const Tensor& d, const GroupedGemmOptions& opt = {});

// On a CUDA device grouped_layout is read by the kernel alone (no copy to the host, no wait),
// so its values are the caller's contract there: each is -1 or an expert in [0, G), and every
// row of each tile of the kernel's rows (64 or 128, chosen per shape; runs padded to
// kGroupedGemmMAlignment satisfy both) is -1 or the expert of the tile's first row. The kernel
// checks every row against this, computes no row that breaks it (that row of d is left
// untouched) and records the first such row on the device. check_grouped_layouts waits for
// every stream of `device`, clears the record and throws sol::Error naming that row and its
// value if there was one; on the CPU it does nothing (the CPU path checks every call). Launches
// another host thread makes while the check runs may be missed by it (the next check sees
// them). The first contiguous call on a device allocates its record (make it before capturing
// a CUDA graph, as torch's warm-up runs do), and the check itself waits for the whole device:
// call it outside any stream capture, after the graph's replays.
void check_grouped_layouts(Device device);

// Masked layout (decode): a [G, max_m, K], d [G, max_m, N], masked_m int32 [G] = the rows of
// each expert that are valid (0 <= masked_m[g] <= max_m). Rows at or past masked_m[g] of d
// are left untouched; an expert with masked_m = 0 does nothing.
void grouped_gemm_masked(const Tensor& a, const Tensor& b, const Tensor& masked_m, const Tensor& d,
                         const GroupedGemmOptions& opt = {});

// The same with each expert's weights packed once at model load (pack_b(B[g], Layout::nt,
// &b_scales[g]) for fp8): what a serving loop should use, since a plain B is packed again on
// every call (per expert run). All experts must have the same n, k and dtype.
void grouped_gemm_contiguous(const Tensor& a, std::span<const PackedMatrix> b, const Tensor& grouped_layout,
                             const Tensor& d, const GroupedGemmOptions& opt = {});
void grouped_gemm_masked(const Tensor& a, std::span<const PackedMatrix> b, const Tensor& masked_m, const Tensor& d,
                         const GroupedGemmOptions& opt = {});

}  // namespace sol
