#pragma once
// Host-side rules of a tiled TMA descriptor (CUDA driver API, cuTensorMapEncodeTiled), checked
// before the driver sees them: the driver answers a bad argument with a bare
// CUDA_ERROR_INVALID_VALUE, and a box that breaks the swizzle rule loads silently wrong data.
// Interleaved layouts are not modelled (Sol's kernels never use them).

#include <cstdint>
#include <string_view>

#include "kernels/cuda/sm90/sm90_swizzle.h"
#include "sol/error.h"

namespace sol::kernels::sm90 {

constexpr int kTmaMaxRank = 5;

struct TmaBox {
  std::uintptr_t global_address = 0;
  int rank = 2;
  std::uint32_t element_bytes = 2;
  std::uint64_t dims[kTmaMaxRank] = {};          // elements, innermost first
  std::uint64_t strides_bytes[kTmaMaxRank] = {};  // of dims 1..rank-1 (index 0 unused: packed)
  std::uint32_t box[kTmaMaxRank] = {};           // elements per load, innermost first
  std::uint32_t element_strides[kTmaMaxRank] = {1, 1, 1, 1, 1};
  Swizzle swizzle = Swizzle::none;
};

// Throws sol::Error naming `op`, the argument, what was expected and what was got.
inline void check_tma_box(const TmaBox& t, std::string_view op) {
  check(t.rank >= 1 && t.rank <= kTmaMaxRank, op, "TMA rank = ", t.rank, " but it must be 1..5");
  check(t.element_bytes == 1 || t.element_bytes == 2 || t.element_bytes == 4 || t.element_bytes == 8, op,
        "TMA element size = ", t.element_bytes, " bytes but it must be 1, 2, 4 or 8");
  check(t.global_address % 16 == 0, op, "TMA global address 0x", std::hex, t.global_address, std::dec,
        " is not 16-byte aligned");
  for (int i = 0; i < t.rank; ++i) {
    check(t.dims[i] >= 1 && t.dims[i] <= (std::uint64_t(1) << 32), op, "TMA dims[", i, "] = ", t.dims[i],
          " but it must be 1..2^32");
    check(t.box[i] >= 1 && t.box[i] <= 256, op, "TMA box[", i, "] = ", t.box[i], " but it must be 1..256");
    check(t.element_strides[i] >= 1 && t.element_strides[i] <= 8, op, "TMA element_strides[", i,
          "] = ", t.element_strides[i], " but it must be 1..8");
  }
  for (int i = 1; i < t.rank; ++i) {
    check(t.strides_bytes[i] % 16 == 0, op, "TMA strides_bytes[", i, "] = ", t.strides_bytes[i],
          " is not a multiple of 16");
    check(t.strides_bytes[i] < (std::uint64_t(1) << 40), op, "TMA strides_bytes[", i, "] = ",
          t.strides_bytes[i], " but it must be below 2^40");
  }
  const std::uint64_t inner_bytes = std::uint64_t(t.box[0]) * t.element_bytes;
  check(inner_bytes % 16 == 0, op, "TMA inner box = ", inner_bytes, " bytes is not a multiple of 16");
  if (t.swizzle != Swizzle::none)
    check(inner_bytes <= swizzle_bytes(t.swizzle), op, "TMA inner box = ", inner_bytes,
          " bytes but the ", swizzle_bytes(t.swizzle), "B swizzle allows at most ", swizzle_bytes(t.swizzle));
}

}  // namespace sol::kernels::sm90
