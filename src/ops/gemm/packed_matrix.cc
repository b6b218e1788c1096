// sol::PackedMatrix and pack_b: B packed once, in the panel layout of src/kernels/gemm.h.
#include <algorithm>

#include "ops/common/parallel.h"
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

PackedMatrix pack_b(const Tensor& b, Layout layout) {
  check(b.ndim() == 2, "pack_b", "b must be 2-D but b.shape = ", b.shape_string());
  check(b.dtype() == DType::f32 || b.dtype() == DType::bf16, "pack_b", "b.dtype = ",
        dtype_name(b.dtype()), " but must be f32 or bf16");
  check(b.shape(1) <= 1 || b.stride(1) == 1, "pack_b", "b.strides[1] = ", b.stride(1),
        " but the last dimension must be dense (stride 1)");
  require_data("pack_b", "b", b);

  using kernels::kGemmNR;
  auto impl = std::make_unique<PackedMatrix::Impl>();
  impl->k = layout == Layout::nn ? b.shape(0) : b.shape(1);
  impl->n = layout == Layout::nn ? b.shape(1) : b.shape(0);
  impl->dtype = b.dtype();
  const int64_t k_padded = b.dtype() == DType::bf16 ? (impl->k + 1) / 2 * 2 : impl->k;
  impl->panel_elems = k_padded * kGemmNR;
  const int64_t panels = (impl->n + kGemmNR - 1) / kGemmNR;
  impl->data = Buffer(size_t(std::max<int64_t>(1, panels * impl->panel_elems)) * dtype_size(b.dtype()));

  const gemm_detail::PlainB src{b.data(), b.stride(0), layout};
  const int64_t n = impl->n, k = impl->k, panel_elems = impl->panel_elems;
  void* base = impl->data.data();
  const DType in = b.dtype();
  parallel_ranges(panels, 1, [&](int64_t p0, int64_t p1) {
    char* dst = static_cast<char*>(base) + p0 * panel_elems * int64_t(dtype_size(in));
    gemm_detail::pack_b_block(src, in, n, 0, k, p0 * kGemmNR, (p1 - p0) * kGemmNR, dst, panel_elems);
  });

  PackedMatrix packed;
  packed.impl_ = std::move(impl);
  return packed;
}

}  // namespace sol
