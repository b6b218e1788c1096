#pragma once
// CPU model of sm90_gemm_tile.cuh: every CTA of the grid run with the kernel's plan — its
// shared-memory map, TMA boxes, mbarrier ring (RingCursor parities), wgmma descriptors and the
// TMA-store epilogue (sm90_store_model.h) — on the models of sm90_smem_model.h and
// sm90_wgmma_model.h. The
// producer and consumer warpgroups are interleaved in a random order drawn from `seed`, one
// ring step at a time, so a stage freed too early (a wrong parity or arrival count) gets
// overwritten before a consumer reads it and the result goes wrong; a schedule where no role
// can move is a deadlock and throws, as the device would hang. With fp8 scales it models
// sm90_gemm_tile_fp8.cuh instead: a fresh partial per K block, promoted at once, the stage freed
// right after its wgmmas, two consumers issuing in turns (sm90_fp8_order_model.h). Limit: a modelled wgmma reads
// its operands when issued, so freeing a stage that the hardware's asynchronous wgmmas may still
// be reading (before their wgmma.wait_group) is not caught here; the kernel's one-block release
// lag is mirrored by hand in consumer_step.

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_fp8_order_model.h"
#include "kernels/cuda/sm90/model/sm90_store_model.h"
#include "kernels/cuda/sm90/model/sm90_wgmma_model.h"
#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_ring.h"

namespace sol::kernels::sm90::model {

template <class Plan>
class GemmTileCta {
 public:
  // A shared base that is aligned (as the kernel rounds it) but not zero.
  static constexpr u32 kBase = 2 * swizzle_period_bytes(Plan::swizzle);

  // scales_a / scales_b: the fp8 block scales (sm90_fp8_promotion.h), or null for plain sums.
  GemmTileCta(const GlobalTensor2d& a, const GlobalTensor2d& b, u32 m, u32 k, u32 tile_m, u32 tile_n,
              const float* scales_a = nullptr, const float* scales_b = nullptr)
      : a_(a), b_(b), m_(m), k_blocks_(Plan::k_blocks(k)), m0_(tile_m * Plan::block_m), n0_(tile_n * Plan::block_n),
        scales_a_(scales_a), scales_b_(scales_b), smem_(kBase + Plan::used_bytes) {
    static_assert(Plan::staging_offset >= Plan::stages * (Plan::a_stage_bytes + Plan::b_stage_bytes) &&
                      Plan::staging_offset + Plan::staging_bytes <= Plan::barrier_offset,
                  "the staging buffers overlap the ring or the barriers");
    for (u32 s = 0; s < Plan::stages; ++s) {
      add_barrier(Plan::full_barrier_offset(s), 1);
      add_barrier(Plan::empty_barrier_offset(s), Plan::consumers);
    }
    for (u32 c = 0; c < Plan::consumers; ++c) consumers_.push_back({0, {}, WarpgroupAccum(Plan::block_n)});
  }

  void run(std::mt19937& rng) {
    const u32 roles = 1 + Plan::consumers;
    for (;;) {
      bool done = producer_kb_ == k_blocks_, moved = false;
      for (const Consumer& c : consumers_) done = done && c.kb == k_blocks_;
      if (done) {
        turns_.finish();
        return;
      }
      const u32 first = rng() % roles;  // try the roles from a random one on
      for (u32 i = 0; i < roles && !moved; ++i) {
        const u32 role = (first + i) % roles;
        moved = role == 0 ? producer_step() : consumer_step(consumers_[role - 1], role - 1);
      }
      check(moved, "sm90 model", "GEMM tile (", m0_, ", ", n0_, ") deadlocked: no warpgroup can pass its mbarrier");
    }
  }

  // The kernel's epilogue: each consumer's rows through its staging buffers to D (bf16 [m, n]) by
  // TMA store, boxes clipped at D's edges.
  void store(const GlobalOut2d& d, u32 m, u32 n) {
    for (u32 c = 0; c < Plan::consumers; ++c) {
      u32 stored_boxes = 0;
      tma_store_block_model<Plan>(smem_, kBase, consumers_[c].acc, c, m0_ + c * Plan::consumer_rows, n0_, m, n,
                                  stored_boxes, d, [](float x, u32, u32) { return x; });
    }
  }

 private:
  struct Consumer {
    u32 kb;
    RingCursor<Plan::stages> ring;
    WarpgroupAccum acc;
    u32 previous_stage = 0;
    WarpgroupAccum partial = WarpgroupAccum(Plan::block_n);  // the fp8 kernel's per-block sums
  };

  void add_barrier(u32 offset, u32 arrivals) {
    check(offset % 8 == 0 && offset >= Plan::stages * (Plan::a_stage_bytes + Plan::b_stage_bytes), "sm90 model",
          "mbarrier at ", offset, " is misaligned or inside the operand buffers");
    check(barriers_.emplace(offset, Mbarrier(arrivals)).second, "sm90 model", "two mbarriers at offset ", offset);
  }
  Mbarrier& barrier(u32 offset) { return barriers_.at(offset); }

  bool producer_step() {
    if (producer_kb_ == k_blocks_) return false;
    const u32 s = producer_ring_.stage;
    if (!barrier(Plan::empty_barrier_offset(s)).try_wait(producer_ring_.empty_parity())) return false;
    Mbarrier& full = barrier(Plan::full_barrier_offset(s));
    full.arrive_expect_tx(Plan::tx_bytes);
    const long long k0 = (long long)producer_kb_ * Plan::block_k;
    full.complete_tx(tma_load_2d(smem_, kBase + Plan::a_offset(s), a_, Plan::block_k, Plan::block_m, k0, m0_, Plan::swizzle));
    for (u32 box = 0; box < Plan::b_boxes; ++box)
      full.complete_tx(tma_load_2d(smem_, kBase + Plan::b_box_offset(s, box), b_, Plan::b_box_inner, Plan::b_box_outer,
                                   Plan::b_box_c0(int(k0), int(n0_), box), Plan::b_box_c1(int(k0), int(n0_), box),
                                   Plan::swizzle));
    ++producer_kb_;
    producer_ring_.advance();
    return true;
  }

  bool consumer_step(Consumer& c, u32 index) {
    if (c.kb == k_blocks_) return false;
    const u32 s = c.ring.stage;
    if (!barrier(Plan::full_barrier_offset(s)).try_wait(c.ring.full_parity())) return false;
    const Operand t = Plan::element_bytes == 2 ? Operand::bf16 : Operand::e4m3;
    if (scales_a_) {
      if (!turns_.try_take(index)) return false;
      promoted_step(c, index, s);
      return true;
    }
    for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
      wgmma(smem_, Plan::desc_a(kBase, s, index, mma), Plan::desc_b(kBase, s, mma), c.acc, t, true, Plan::b_mn_major);
    // As the kernel: the previous block's stage is freed after this block's wgmmas are issued.
    if (c.kb > 0) barrier(Plan::empty_barrier_offset(c.previous_stage)).arrive();
    c.previous_stage = s;
    ++c.kb;
    c.ring.advance();
    return true;
  }

  // sm90_gemm_tile_fp8.cuh's consumer step: partial sums of one K block, the stage freed, the
  // partial promoted into the sum with the scales of each register's row and column.
  void promoted_step(Consumer& c, u32 index, u32 s) {
    WarpgroupAccum& partial = c.partial;  // registers: what the previous block left stays there
    for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
      wgmma(smem_, Plan::desc_a(kBase, s, index, mma), Plan::desc_b(kBase, s, mma), partial, Operand::e4m3,
            fp8_partial_scale_d(mma) != 0);
    turns_.passed(index);
    barrier(Plan::empty_barrier_offset(s)).arrive();
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < Plan::block_n / 2; ++i) {
        const u32 row = m0_ + index * Plan::consumer_rows + accum_row(t, i), col = n0_ + accum_col(t, i);
        const float sa = row < m_ ? scales_a_[fp8_scale_a_index(row, c.kb, k_blocks_)] : 0.0f;
        // A column past D (never stored) reads the last column's scale, as the kernel does.
        const float sb = scales_b_[fp8_scale_b_index(std::min<u32>(col, u32(b_.rows) - 1), c.kb, k_blocks_)];
        c.acc.at(t, i) = fp8_promote(c.acc.at(t, i), partial.at(t, i), sa, sb);
      }
    ++c.kb;
    c.ring.advance();
  }

  GlobalTensor2d a_, b_;
  u32 m_, k_blocks_, m0_, n0_;
  const float* scales_a_;
  const float* scales_b_;
  SharedMemory smem_;
  std::map<u32, Mbarrier> barriers_;
  u32 producer_kb_ = 0;
  RingCursor<Plan::stages> producer_ring_;
  std::vector<Consumer> consumers_;
  Fp8Turns turns_{Plan::consumers};
};

// The whole grid: D[m, n] (bf16 bits) = A[m, k] * B[n, k]^T, A and B K-major with
// Plan::element_bytes per element, or, for an MN-major plan, D = A[m, k] * B[k, n] (B as stored,
// layout nn). The kernel's shape rules hold here too. `writes`, when given, counts the stores of
// every element of D (m * n counters).
template <class Plan>
void gemm_tile_model(const void* a, const void* b, u16* d, u32 m, u32 n, u32 k, u32 seed,
                     const float* scales_a = nullptr, const float* scales_b = nullptr,
                     std::vector<u32>* writes = nullptr) {
  if (scales_a) check(Plan::element_bytes == 1 && scales_b, "sm90 gemm", "block scales need fp8 operands and both scales");
  if (scales_a)
    check(k % kFp8ScaleBlock == 0, "sm90 gemm", "k = ", k, " but fp8 block scales need k % ", kFp8ScaleBlock, " == 0");
  check(n % 8 == 0, "sm90 gemm", "n = ", n, " is not a multiple of 8 (D rows are stored 16-byte aligned)");
  check(u64(k) * Plan::element_bytes % 16 == 0, "sm90 gemm", "k = ", k, " is not a multiple of ",
        16 / Plan::element_bytes, " (TMA row strides are multiples of 16 bytes)");
  const u64 row_bytes = u64(k) * Plan::element_bytes;
  const GlobalTensor2d ga{static_cast<const u8*>(a), Plan::element_bytes, k, m, row_bytes};
  const GlobalTensor2d gb = Plan::b_mn_major
                               ? GlobalTensor2d{static_cast<const u8*>(b), Plan::element_bytes, n, k, u64(n) * Plan::element_bytes}
                               : GlobalTensor2d{static_cast<const u8*>(b), Plan::element_bytes, k, n, row_bytes};
  if (writes) writes->assign(u64(m) * n, 0);
  const GlobalOut2d gd{reinterpret_cast<u8*>(d), 2, n, m, u64(n) * 2, writes};
  std::mt19937 rng(seed);
  for (u32 tm = 0; tm < Plan::tiles(m, Plan::block_m); ++tm)
    for (u32 tn = 0; tn < Plan::tiles(n, Plan::block_n); ++tn) {
      GemmTileCta<Plan> cta(ga, gb, m, k, tm, tn, scales_a, scales_b);
      cta.run(rng);
      cta.store(gd, m, n);
    }
}

}  // namespace sol::kernels::sm90::model
