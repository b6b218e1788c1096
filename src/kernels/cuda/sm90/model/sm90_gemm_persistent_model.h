#pragma once
// CPU model of sm90_gemm_persistent.cuh: each CTA of a persistent grid walks the tiles
// GemmTileScheduler gives it (index c, c + ctas, ...) with ONE ring for all of them — the
// producer runs ahead into the next tile while the consumers finish and store the current one —
// and each consumer frees a tile's last stage after its final wgmma wait, which the one-tile
// kernel never needs. Roles interleave in a random order from `seed`, as in sm90_gemm_model.h;
// the stage and parity bookkeeping, the scheduler's tile order, the grouped layouts' row rules,
// the fp8 scale indexing and the split-K partials are the kernel's own functions.
// With split_k > 1 a tile's sums go to the f32 workspace [split][rows][n], and
// gemm_split_reduce_model sums them in split order, as the kernel's reduction pass does. The
// epilogue's TMA stores run on sm90_store_model.h.
// With B multicast (Plan::cluster_m = 2) the CTAs of a cluster run together, their roles
// interleaved at random: CTA r's producer writes slice r of each B stage into every CTA's ring
// and credits every CTA's full barrier; each consumer frees a stage on every CTA's empty barrier,
// so a producer overwrites a stage only once all the cluster's consumers have read it.

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_fp8_order_model.h"
#include "kernels/cuda/sm90/model/sm90_store_model.h"
#include "kernels/cuda/sm90/model/sm90_wgmma_model.h"
#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_gemm_epilogue.h"
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "kernels/cuda/sm90/sm90_ring.h"

namespace sol::kernels::sm90::model {

struct GemmOutput {
  GemmEpilogueParams epilogue;  // D (bf16 or f32) and the epilogue applied on the way
  float* workspace = nullptr;   // f32 partials [split_k][rows][n], split_k > 1
  u32 rows = 0;                 // rows of D (groups * m for masked)
  std::vector<u32>* writes = nullptr;  // stores of each element of D (rows * n counters), or null
  // contiguous: the layout report (kNoLayoutError before), lowered as the kernel's atomicMin
  unsigned long long* layout_error = nullptr;
};

// One result through the kernel's epilogue arithmetic, rounded to D's dtype as the kernel's
// cvt.rn.bf16x2 does (nearest even).
inline void store_result(const GemmEpilogueParams& e, u64 index, u32 col, float acc) {
  const float v = epilogue_value(e, acc, index, col);
  if (e.d_f32)
    static_cast<float*>(e.d)[index] = v;
  else
    static_cast<u16*>(e.d)[index] = f32_to_bf16(v);
}

template <class Plan, class Scheduler>
class PersistentGemmCta {
 public:
  static constexpr u32 kBase = 2 * swizzle_period_bytes(Plan::swizzle);

  PersistentGemmCta(const GlobalTensor2d& a, const GlobalTensor2d& b, const GemmProblemView& p, u32 cta, u32 ctas,
                    GemmOutput out, const float* scales_a, const float* scales_b)
      : a_(a), b_(b), p_(p), out_(out), scales_a_(scales_a), scales_b_(scales_b), smem_(kBase + Plan::used_bytes),
        rank_(cta % Plan::cluster_m) {
    for (u32 t = cta; t < Scheduler::tile_count(p); t += ctas) {
      const GemmTileWork w = Scheduler::work(p, t);
      if (!w.skip) tiles_.push_back(w);  // the kernel's roles skip the same tiles
    }
    for (u32 s = 0; s < Plan::stages; ++s) {
      barriers_.emplace(Plan::full_barrier_offset(s), Mbarrier(1));
      barriers_.emplace(Plan::empty_barrier_offset(s), Mbarrier(Plan::empty_arrivals));
    }
    for (u32 c = 0; c < Plan::consumers; ++c) consumers_.push_back(Consumer{});
    producer_.kb = tiles_.empty() ? 0 : tiles_[0].kb_begin;
    for (Consumer& c : consumers_) c.kb = producer_.kb;
    if (out_.writes) check(out_.writes->size() == u64(out_.rows) * p.n, "sm90 model", "write counters for ",
                           out_.writes->size(), " elements of a ", out_.rows, " x ", p.n, " D");
  }

  // The CTAs of this one's cluster, in rank order (itself included).
  void join(const std::vector<PersistentGemmCta*>& cluster) { cluster_ = cluster; }

  // Runs a cluster's CTAs (rank order) to the end, one warpgroup step at a time in a random
  // order; a state where no warpgroup of any of them can pass its mbarrier is a deadlock.
  static void run(const std::vector<PersistentGemmCta*>& cluster, std::mt19937& rng) {
    check(cluster.size() == Plan::cluster_m, "sm90 model", "a cluster of ", cluster.size(), " CTAs for a plan of ",
          Plan::cluster_m);
    for (PersistentGemmCta* cta : cluster) cta->join(cluster);
    const u32 roles = u32(cluster.size()) * (1 + Plan::consumers);
    for (;;) {
      bool done = true;
      for (PersistentGemmCta* cta : cluster) done = done && cta->finished();
      if (done) {
        for (PersistentGemmCta* cta : cluster) cta->turns_.finish();
        return;
      }
      const u32 first = rng() % roles;
      bool moved = false;
      for (u32 i = 0; i < roles && !moved; ++i) {
        const u32 r = (first + i) % roles, role = r % (1 + Plan::consumers);
        PersistentGemmCta& cta = *cluster[r / (1 + Plan::consumers)];
        moved = role == 0 ? cta.producer_step() : cta.consumer_step(cta.consumers_[role - 1], role - 1);
      }
      check(moved, "sm90 model", "persistent GEMM cluster deadlocked: no warpgroup can pass its mbarrier");
    }
  }

 private:
  bool finished() const {
    bool done = producer_.tile == tiles_.size();
    for (const Consumer& c : consumers_) done = done && c.tile == tiles_.size();
    return done;
  }

  // A consumer is done reading stage `s`: an arrival on that stage's empty barrier in every CTA
  // of the cluster (each one's producer loads a slice into it).
  void release(u32 s) {
    for (PersistentGemmCta* cta : cluster_) cta->barriers_.at(Plan::empty_barrier_offset(s)).arrive();
  }

  struct Cursor {
    std::size_t tile = 0;
    u32 kb = 0;
  };
  struct Consumer : Cursor {
    RingCursor<Plan::stages> ring;
    u32 previous_stage = 0;
    u32 stored_boxes = 0;  // the TMA store's box counter: picks the staging buffer
    WarpgroupAccum acc = WarpgroupAccum(Plan::block_n);
    WarpgroupAccum partial = WarpgroupAccum(Plan::block_n);
  };

  // The cursor's next K block, moving to the next tile after the last one.
  void advance(Cursor& c) {
    if (++c.kb == tiles_[c.tile].kb_end && ++c.tile < tiles_.size()) c.kb = tiles_[c.tile].kb_begin;
  }

  bool producer_step() {
    if (producer_.tile == tiles_.size()) return false;
    const GemmTileWork& w = tiles_[producer_.tile];
    const u32 s = producer_ring_.stage;
    if (!barriers_.at(Plan::empty_barrier_offset(s)).try_wait(producer_ring_.empty_parity())) return false;
    Mbarrier& full = barriers_.at(Plan::full_barrier_offset(s));
    full.arrive_expect_tx(Plan::tx_bytes);
    const long long k0 = (long long)producer_.kb * Plan::block_k;
    full.complete_tx(tma_load_2d(smem_, kBase + Plan::a_offset(s), a_, Plan::block_k, Plan::block_m, k0, w.row0, Plan::swizzle));
    // This CTA's B boxes land in every CTA of the cluster (multicast) and credit each one's full
    // barrier, which may not have announced its own bytes yet (its transaction count goes
    // below zero until it does, as on the device).
    for (PersistentGemmCta* cta : cluster_)
      for (u32 box = 0; box < Plan::b_boxes; ++box)
        cta->barriers_.at(Plan::full_barrier_offset(s))
            .complete_tx(tma_load_2d(cta->smem_, kBase + Plan::b_box_offset(s, box, rank_), b_, Plan::b_box_inner,
                                     Plan::b_box_outer, Plan::b_box_c0(int(k0), int(w.b_row0), box),
                                     Plan::b_box_c1(int(k0), int(w.b_row0), box, rank_), Plan::swizzle));
    advance(producer_);
    producer_ring_.advance();
    return true;
  }

  bool consumer_step(Consumer& c, u32 index) {
    if (c.tile == tiles_.size()) return false;
    const GemmTileWork& w = tiles_[c.tile];
    const u32 s = c.ring.stage;
    if (!barriers_.at(Plan::full_barrier_offset(s)).try_wait(c.ring.full_parity())) return false;
    const bool first = c.kb == w.kb_begin, last = c.kb + 1 == w.kb_end;
    if (scales_a_) {
      if (!turns_.try_take(index)) return false;
      for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
        wgmma(smem_, Plan::desc_a(kBase, s, index, mma), Plan::desc_b(kBase, s, mma), c.partial, Operand::e4m3,
              fp8_partial_scale_d(mma) != 0);
      turns_.passed(index);
      release(s);  // waited at once: freed at once
      promote(c, index, w);
    } else {
      const Operand t = Plan::element_bytes == 2 ? Operand::bf16 : Operand::e4m3;
      for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
        wgmma(smem_, Plan::desc_a(kBase, s, index, mma), Plan::desc_b(kBase, s, mma), c.acc, t, true,
              Plan::b_mn_major);
      if (!first) release(c.previous_stage);
      if (last) release(s);  // after the final wait
    }
    c.previous_stage = s;
    c.ring.advance();
    if (last) {
      store(c, index, w);
      c.acc = WarpgroupAccum(Plan::block_n);
    }
    advance(c);
    return true;
  }

  void promote(Consumer& c, u32 index, const GemmTileWork& w) {
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < Plan::block_n / 2; ++i) {
        const u32 row = w.row0 + index * Plan::consumer_rows + accum_row(t, i);
        const float sa = row < out_.rows ? scales_a_[fp8_scale_a_index(row, c.kb, p_.k_blocks)] : 0.0f;
        // A column past D (never stored) reads the last column's scale: a 192-column tile may
        // reach past B's last scale block.
        const u32 col = std::min(w.col0 + accum_col(t, i), p_.n - 1);
        const float sb = scales_b_[Scheduler::scale_b_index(p_, w, col, c.kb)];
        c.acc.at(t, i) = fp8_promote(c.acc.at(t, i), c.partial.at(t, i), sa, sb);
      }
  }

  // The kernel's store: a consumer whose 64 rows may all leave by TMA (one GEMM; grouped tiles
  // without padding rows, rows past masked_m or another group's rows) stages them and stores by
  // TMA; otherwise results through the epilogue to D from registers, or raw f32 partials to the
  // split's workspace plane (the reduction applies the epilogue); rows the scheduler does not
  // store for this tile and columns outside D skipped.
  void store(Consumer& c, u32 index, const GemmTileWork& w) {
    const u32 row0 = w.row0 + index * Plan::consumer_rows;
    bool tma = p_.split_k == 1;
    for (u32 r = row0; r < row0 + Plan::consumer_rows && tma; ++r)
      tma = Scheduler::row_tma_storable(p_, w, r, out_.rows);
    if (tma) {
      const GemmEpilogueParams& e = out_.epilogue;
      const u32 ob = e.d_f32 ? 4 : 2;
      const GlobalOut2d d{static_cast<u8*>(e.d), ob, p_.n, out_.rows, u64(p_.n) * ob, out_.writes};
      const u32 n = p_.n;
      tma_store_block_model<Plan>(smem_, kBase, c.acc, index, row0, w.col0, out_.rows, n, c.stored_boxes, d,
                                  [&](float x, u32 row, u32 col) { return epilogue_value(e, x, u64(row) * n + col, col); });
      return;
    }
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < Plan::block_n / 2; i += 2) {
        const u32 row = w.row0 + index * Plan::consumer_rows + accum_row(t, i), col = w.col0 + accum_col(t, i);
        if (row >= out_.rows || col >= p_.n || !Scheduler::row_stored(p_, w, row)) continue;
        for (u32 j = 0; j < 2; ++j) {
          if (p_.split_k == 1) {
            store_result(out_.epilogue, u64(row) * p_.n + col + j, col + j, c.acc.at(t, i + j));
            if (out_.writes) ++(*out_.writes)[u64(row) * p_.n + col + j];
          } else
            out_.workspace[(u64(w.split) * out_.rows + row) * p_.n + col + j] = c.acc.at(t, i + j);
        }
      }
  }

  GlobalTensor2d a_, b_;
  GemmProblemView p_;
  GemmOutput out_;
  const float* scales_a_;
  const float* scales_b_;
  SharedMemory smem_;
  u32 rank_;                                  // in the cluster
  std::vector<PersistentGemmCta*> cluster_;   // rank order, this one included
  std::map<u32, Mbarrier> barriers_;
  std::vector<GemmTileWork> tiles_;
  Cursor producer_;
  RingCursor<Plan::stages> producer_ring_;
  std::vector<Consumer> consumers_;
  Fp8Turns turns_{Plan::consumers};
};

// The split-K reduction pass: D = epilogue(sum over splits in order of the f32 partials), for
// the rows a tile stores (Scheduler::row_valid); the epilogue runs once, on the sum.
template <class Scheduler>
void gemm_split_reduce_model(const GemmProblemView& p, const GemmOutput& out) {
  for (u32 row = 0; row < out.rows; ++row) {
    if (!Scheduler::row_valid(p, row)) continue;
    for (u32 col = 0; col < p.n; ++col) {
      float sum = 0.0f;
      for (u32 s = 0; s < p.split_k; ++s) sum += out.workspace[(u64(s) * out.rows + row) * p.n + col];
      store_result(out.epilogue, u64(row) * p.n + col, col, sum);
      if (out.writes) ++(*out.writes)[u64(row) * p.n + col];
    }
  }
}

// The whole persistent grid of `ctas` CTAs. A: [out.rows, k], B: [groups * n, k], both K-major
// with Plan::element_bytes per element, or for an MN-major plan (one GEMM) B [k, n] as stored;
// `k` a multiple of the K block (fp8 scales) or of 16 bytes.
template <class Plan, class Scheduler>
void gemm_persistent_model(const void* a, const void* b, const GemmProblemView& p, u32 k, GemmOutput out, u32 ctas,
                           u32 seed, const float* scales_a = nullptr, const float* scales_b = nullptr) {
  check(ctas >= 1, "sm90 gemm", "a persistent grid needs a CTA");
  check(p.n % 8 == 0, "sm90 gemm", "n = ", p.n, " is not a multiple of 8 (D rows are stored 16-byte aligned)");
  check(p.split_k >= 1 && p.split_k <= p.k_blocks, "sm90 gemm", "split_k = ", p.split_k, " but K has ", p.k_blocks,
        " blocks");
  const u64 row_bytes = u64(k) * Plan::element_bytes;
  const GlobalTensor2d ga{static_cast<const u8*>(a), Plan::element_bytes, k, out.rows, row_bytes};
  if (Plan::b_mn_major)
    check(p.grouping == GemmGrouping::single, "sm90 gemm", "an MN-major B (layout nn) is for one GEMM");
  const GlobalTensor2d gb =
      Plan::b_mn_major
          ? GlobalTensor2d{static_cast<const u8*>(b), Plan::element_bytes, p.n, k, u64(p.n) * Plan::element_bytes}
          : GlobalTensor2d{static_cast<const u8*>(b), Plan::element_bytes, k, p.groups * p.n, row_bytes};
  static_assert(Plan::cluster_m == Scheduler::cluster_m, "the plan's loads and the scheduler's tiles pair the same CTAs");
  check(ctas % Plan::cluster_m == 0, "sm90 gemm", ctas, " CTAs are not whole clusters of ", Plan::cluster_m);
  // The kernel traps on this (a pair with a skipped tile would wait forever).
  check(Plan::cluster_m == 1 || p.grouping == GemmGrouping::single, "sm90 gemm",
        "B multicast is for one GEMM: a grouped layout's tiles may be skipped");
  std::mt19937 rng(seed);
  for (u32 first = 0; first < ctas; first += Plan::cluster_m) {
    std::vector<PersistentGemmCta<Plan, Scheduler>> cluster;
    cluster.reserve(Plan::cluster_m);
    for (u32 cta = first; cta < first + Plan::cluster_m; ++cta) cluster.emplace_back(ga, gb, p, cta, ctas, out, scales_a, scales_b);
    std::vector<PersistentGemmCta<Plan, Scheduler>*> members;
    for (auto& cta : cluster) members.push_back(&cta);
    PersistentGemmCta<Plan, Scheduler>::run(members, rng);
    // The producer warpgroup's second warp checks the layout (persistent_layout_check).
    if (p.grouping != GemmGrouping::contiguous || !out.layout_error) continue;
    for (u32 cta = first; cta < first + Plan::cluster_m; ++cta)
      for (u32 lane = 0; lane < 32; ++lane)
        *out.layout_error = std::min(*out.layout_error, Scheduler::layout_check_lane(p, cta, ctas, lane));
  }
  if (p.split_k > 1) gemm_split_reduce_model<Scheduler>(p, out);
}

}  // namespace sol::kernels::sm90::model
