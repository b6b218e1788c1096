// sol::PackedMatrix and pack_b: B packed once, in the panel layout of src/kernels/gemm.h.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/common/validate.h"
#include "ops/gemm/packing.h"
#include "sol/error.h"

namespace sol {

PackedMatrix::PackedMatrix() = default;
PackedMatrix::~PackedMatrix() = default;
PackedMatrix::PackedMatrix(PackedMatrix&&) noexcept = default;
PackedMatrix& PackedMatrix::operator=(PackedMatrix&&) noexcept = default;

int64_t PackedMatrix::k() const { return impl_ ? impl_->k : 0; }
int64_t PackedMatrix::n() const { return impl_ ? impl_->n : 0; }
DType PackedMatrix::dtype() const { return impl_ ? impl_->dtype : DType::f32; }

PackedMatrix pack_b(const Tensor& b, Layout layout, const Tensor* b_scales) {
  check(b.ndim() == 2, "pack_b", "b must be 2-D but b.shape = ", shape_text(b));
  const DType t = b.dtype();
  check(t == DType::f32 || t == DType::bf16 || t == DType::i8 || t == DType::f8e4m3, "pack_b",
        "b.dtype = ", dtype_name(t), " but must be f32, bf16, i8 or f8e4m3");
  check(b.shape(1) <= 1 || b.stride(1) == 1, "pack_b", "b.strides[1] = ", b.stride(1),
        " but the last dimension must be dense (stride 1)");
  require_data("pack_b", "b", b);

  using kernels::kGemmNR;
  auto impl = std::make_unique<PackedMatrix::Impl>();
  impl->k = layout == Layout::nn ? b.shape(0) : b.shape(1);
  impl->n = layout == Layout::nn ? b.shape(1) : b.shape(0);
  impl->dtype = t;
  const int64_t n = impl->n, k = impl->k;
  if (t == DType::f8e4m3) {
    check(b_scales != nullptr, "pack_b", "an f8e4m3 b needs its b_scales (f32 [ceil(N/128), K/128])");
    gemm_detail::require_b_scales("pack_b", *b_scales, n, k);
    const int64_t rows = (n + kFp8ScaleBlock - 1) / kFp8ScaleBlock, cols = k / kFp8ScaleBlock;
    impl->scales = Buffer(DType::f32, {rows, cols});
    for (int64_t r = 0; r < rows && cols > 0; ++r)  // K = 0: no scale columns to index
      std::memcpy(impl->scales.tensor().ptr({r, 0}), b_scales->ptr({r, 0}), size_t(cols) * 4);
  } else {
    check(b_scales == nullptr, "pack_b", "b_scales given but b.dtype = ", dtype_name(t),
          " (only f8e4m3 takes block scales)");
  }
  const DType in = gemm_detail::compute_type(t);
  const int64_t group = gemm_detail::k_group(in);
  impl->panel_elems = (k + group - 1) / group * group * kGemmNR;
  const int64_t panels = (n + kGemmNR - 1) / kGemmNR;
  impl->data = Buffer(size_t(std::max<int64_t>(1, panels * impl->panel_elems)) * dtype_size(t));
  if (t == DType::i8) impl->start = Buffer(size_t(std::max<int64_t>(1, panels)) * kGemmNR * 4);

  const gemm_detail::PlainB src{b.data(), b.stride(0), layout};
  const int64_t panel_elems = impl->panel_elems;
  void* base = impl->data.data();
  int32_t* start = t == DType::i8 ? static_cast<int32_t*>(impl->start.data()) : nullptr;
  const kernels::GemmKernels& kern = gemm_detail::gemm_kernels();
  parallel_ranges(panels, 1, [&](int64_t p0, int64_t p1) {
    char* dst = static_cast<char*>(base) + p0 * panel_elems * int64_t(dtype_size(t));
    if (t == DType::f8e4m3)
      gemm_detail::pack_b_fp8_pairs(src, n, 0, k, p0 * kGemmNR, (p1 - p0) * kGemmNR,
                                    reinterpret_cast<uint8_t*>(dst), panel_elems);
    else
      gemm_detail::pack_b_block(kern, src, t, n, 0, k, p0 * kGemmNR, (p1 - p0) * kGemmNR, dst, panel_elems,
                                start ? start + p0 * kGemmNR : nullptr);
  });

  PackedMatrix packed;
  packed.impl_ = std::move(impl);
  return packed;
}

}  // namespace sol
