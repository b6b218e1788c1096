#pragma once
// TMA: tiled tensor copies between global and shared memory (cp.async.bulk.tensor). Loads
// complete on an mbarrier by transaction bytes; stores complete by bulk group. Boxes outside
// the tensor are zero-filled on load and clipped on store, and a load still credits the whole
// box's bytes to the barrier. The descriptor is built on the host (cuTensorMapEncodeTiled,
// checked first by sm90_tma_rules.h) and passed as a __grid_constant__ kernel parameter.

#include "kernels/cuda/sm90/sm90_device.cuh"

namespace sol::kernels::sm90 {

// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned (cuda.h is not available to
// NVRTC, so the layout is restated here).
struct alignas(64) TmaDescriptor {
  u64 opaque[16];
};

SOL_SM90_DEVICE u64 tma_desc_address(const TmaDescriptor* map) { return reinterpret_cast<u64>(map); }

SOL_SM90_DEVICE void tma_prefetch_descriptor(const TmaDescriptor* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tma_desc_address(map)) : "memory");
}

// Coordinates are in elements, innermost first; `dst` and `bar` are shared-window addresses.
SOL_SM90_DEVICE void tma_load_2d(const TmaDescriptor* map, u32 bar, u32 dst, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(tma_desc_address(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The same box into the same shared offset of every CTA of the cluster named in `cta_mask`
// (bit r: rank r), each landing's bytes credited to the barrier at `bar`'s offset in that CTA.
SOL_SM90_DEVICE void tma_load_2d_multicast(const TmaDescriptor* map, u32 bar, u32 dst, int c0, int c1, u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(tma_desc_address(map)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

SOL_SM90_DEVICE void tma_load_3d(const TmaDescriptor* map, u32 bar, u32 dst, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          dst),
      "l"(tma_desc_address(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Stores read shared memory through the async proxy: write the tile, fence_proxy_async_shared,
// synchronise the writers, then one thread stores and commits.
SOL_SM90_DEVICE void tma_store_2d(const TmaDescriptor* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   tma_desc_address(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}

SOL_SM90_DEVICE void tma_store_3d(const TmaDescriptor* map, u32 src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   tma_desc_address(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

SOL_SM90_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until at most `Pending` committed store groups still read their shared source.
template <int Pending>
SOL_SM90_DEVICE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}

}  // namespace sol::kernels::sm90
