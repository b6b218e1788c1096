#pragma once
// The TMA-store epilogue of the sm90 GEMMs (layout: sm90_gemm_store.h). Per box of a consumer's
// 64 rows: thread 0 waits until the store that last read the box's staging buffer is done
// reading it (bulk groups are per thread, so the thread that commits is the one that waits), the
// warpgroup synchronises on its named barrier, every thread writes its pairs (each value through
// the caller's epilogue, rounded as the register epilogue rounds), fences the generic-proxy
// writes before the async proxy reads them, synchronises again, and thread 0 issues the store
// and commits it. TMA clips the box at D's edges, so no row or column guard is needed for the
// store itself; values outside D are not computed (the epilogue would read C or bias past their
// ends) and staged as zeros that never leave shared memory.

#include "kernels/cuda/sm90/sm90_gemm_store.h"
#include "kernels/cuda/sm90/sm90_tma.cuh"
#include "kernels/cuda/sm90/sm90_wgmma.cuh"

namespace sol::kernels::sm90 {

SOL_SM90_DEVICE u32 pack_bf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Consumer `consumer`'s named barrier over its 128 threads (ids 1 and 2; 0 is __syncthreads').
// The id is an immediate so that ptxas reserves only the barriers used.
SOL_SM90_DEVICE void warpgroup_sync(u32 consumer) {
  if (consumer == 0)
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// True on every thread of consumer `consumer`'s warpgroup when `pred` is true on all 128 (a
// barrier reduction on the same named barrier).
SOL_SM90_DEVICE bool warpgroup_all(u32 consumer, bool pred) {
  u32 all;
  if (consumer == 0)
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, 1, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
                 : "=r"(all)
                 : "r"(u32(pred))
                 : "memory");
  else
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, 2, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
                 : "=r"(all)
                 : "r"(u32(pred))
                 : "memory");
  return all != 0;
}

SOL_SM90_DEVICE void st_shared_b32(u32 address, u32 v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}
SOL_SM90_DEVICE void st_shared_f32x2(u32 address, float lo, float hi) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(lo), "f"(hi) : "memory");
}

// One consumer's 64 x BlockN block of D (first row row0, first column col0) through the staging
// buffers to map_d (D [rows, n], OutBytes per element, box store_box_cols x 64, 128-byte
// swizzle). value(acc, row, col) is the element's f32 value before rounding. `stored_boxes`
// counts this consumer's boxes over the kernel's life: it picks the buffer.
template <class Plan, u32 OutBytes, class Value>
SOL_SM90_DEVICE void tma_store_block(const Accum<Plan::block_n>& acc, u32 consumer, u32 base,
                                     const TmaDescriptor* map_d, u32 row0, u32 col0, u32 rows, u32 n,
                                     u32& stored_boxes, const Value& value) {
  static_assert(OutBytes == 2 || OutBytes == 4, "bf16 or f32 D");
  static_assert(Plan::consumers <= 2, "one named barrier per consumer: ids 1 and 2");
  const u32 t = thread_in_warpgroup();
#pragma unroll
  for (u32 box = 0; box < store_boxes(Plan::block_n, OutBytes); ++box, ++stored_boxes) {
    const u32 buffer = base + Plan::store_buffer_offset(consumer, stored_boxes % kStoreBuffers);
    if (t == 0) tma_store_wait_read<kStoreBuffers - 1>();
    warpgroup_sync(consumer);
    constexpr u32 regs = store_box_regs(OutBytes);
#pragma unroll
    for (u32 j = 0; j < regs; j += 2) {
      const u32 i = store_box_first_reg(box, OutBytes) + j;
      const u32 row = row0 + accum_row(t, i), col = col0 + accum_col(t, i);
      const bool inside = row < rows && col < n;  // n is even: col + 1 is inside with col
      const float v0 = inside ? value(acc.d[i], row, col) : 0.0f;
      const float v1 = inside ? value(acc.d[i + 1], row, col + 1) : 0.0f;
      const u32 dst = buffer + store_pair_offset(t, i, OutBytes);
      if constexpr (OutBytes == 4)
        st_shared_f32x2(dst, v0, v1);
      else
        st_shared_b32(dst, pack_bf16x2(v0, v1));
    }
    fence_proxy_async_shared();
    warpgroup_sync(consumer);
    if (t == 0) {
      tma_store_2d(map_d, buffer, int(col0 + box * store_box_cols(OutBytes)), int(row0));
      tma_store_commit();
    }
  }
}

// Before the CTA exits (its shared memory goes away): every store this thread issued has read
// its buffer.
SOL_SM90_DEVICE void tma_store_drain() {
  if (thread_in_warpgroup() == 0) tma_store_wait_read<0>();
}

}  // namespace sol::kernels::sm90
