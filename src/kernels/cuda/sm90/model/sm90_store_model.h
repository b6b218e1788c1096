#pragma once
// CPU model of the TMA-store epilogue (sm90_gemm_store.cuh): each box of a consumer's 64 rows is
// staged thread by thread at the kernel's own offsets (store_pair_offset, the plan's staging
// buffers, alternating as the kernel's box counter says) into the poisoned shared-memory model,
// then written to D by the TMA store model of sm90_smem_model.h, which unswizzles by the PTX
// ISA's chunk rule rather than by sm90_swizzle.h and clips at D's edges. A pair staged outside
// its buffer or on top of another pair, or a byte of a box left unstaged, is an error; a wrong
// map or box coordinate puts results in the wrong place, which the model tests see.

#include <cstring>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_smem_model.h"
#include "kernels/cuda/sm90/model/sm90_wgmma_model.h"
#include "kernels/cuda/sm90/sm90_gemm_store.h"

namespace sol::kernels::sm90::model {

// Consumer `consumer`'s 64 x Plan::block_n block (first row row0, first column col0) of
// accumulators `acc` to D [rows, n] (`out`, element bytes 2: bf16 rounded to nearest even, or 4:
// f32). value(acc, row, col) is the element's f32 value before rounding.
template <class Plan, class Value>
void tma_store_block_model(SharedMemory& smem, u32 base, WarpgroupAccum& acc, u32 consumer, u32 row0, u32 col0,
                           u32 rows, u32 n, u32& stored_boxes, const GlobalOut2d& out, const Value& value) {
  const u32 ob = out.element_bytes, cols = store_box_cols(ob);
  check(ob == 2 || ob == 4, "sm90 model", "D elements of ", ob, " bytes");
  for (u32 box = 0; box < store_boxes(Plan::block_n, ob); ++box, ++stored_boxes) {
    const u32 buffer = base + Plan::store_buffer_offset(consumer, stored_boxes % kStoreBuffers);
    check(buffer - base >= Plan::staging_offset && buffer - base + kStoreBoxBytes <= Plan::barrier_offset,
          "sm90 model", "staging buffer at ", buffer - base, " lies outside the plan's staging area");
    std::memset(smem.at(buffer, kStoreBoxBytes), 0xFF, kStoreBoxBytes);
    std::vector<u8> staged(kStoreBoxBytes, 0);
    for (u32 t = 0; t < 128; ++t)
      for (u32 j = 0; j < store_box_regs(ob); j += 2) {
        const u32 i = store_box_first_reg(box, ob) + j;
        const u32 row = row0 + accum_row(t, i), col = col0 + accum_col(t, i);
        const bool inside = row < rows && col < n;
        const float v[2] = {inside ? value(acc.at(t, i), row, col) : 0.0f,
                            inside ? value(acc.at(t, i + 1), row, col + 1) : 0.0f};
        const u32 at = store_pair_offset(t, i, ob);
        check(at + 2 * ob <= kStoreBoxBytes, "sm90 model", "thread ", t, " register ", i, " stages at ", at,
              ", outside its ", kStoreBoxBytes, "-byte buffer");
        for (u32 b = at; b < at + 2 * ob; ++b)
          check(staged[b]++ == 0, "sm90 model", "thread ", t, " register ", i, " stages on top of another pair");
        u8* dst = smem.at(buffer + at, 2 * ob);
        for (u32 h = 0; h < 2; ++h) {
          if (ob == 2) {
            const u16 bits = f32_to_bf16(v[h]);
            std::memcpy(dst + 2 * h, &bits, 2);
          } else {
            std::memcpy(dst + 4 * h, &v[h], 4);
          }
        }
      }
    for (u32 b = 0; b < kStoreBoxBytes; ++b)
      check(staged[b] == 1, "sm90 model", "byte ", b, " of box ", box, " was not staged");
    tma_store_2d(smem, buffer, out, cols, kStoreBoxRows, col0 + box * cols, row0, kStoreSwizzle);
  }
}

}  // namespace sol::kernels::sm90::model
