#pragma once
// Persistent sm_90a GEMM for one GEMM (B [N, K], or bf16 B [K, N] with an MN-major plan: layout
// nn, where b_row0 is the tile's first column), DeepGEMM's two MoE grouped layouts and split-K: a grid of
// about one CTA per SM, CTA c taking tiles c, c + gridDim.x, ... in GemmTileScheduler's order.
// Each CTA keeps ONE ring for all its tiles, so the producer loads the next tile's first stages
// while the consumers run the current tile's epilogue; a consumer frees a tile's last stage
// after its final wgmma wait (the one-tile kernel never has to). Operands, ring, descriptors and
// fp8 promotion are sm90_gemm_tile.cuh's / sm90_gemm_tile_fp8.cuh's; the CPU model
// (model/sm90_gemm_persistent_model.h) runs this walk.
//
// Output: D [rows, n] (bf16 or f32) through the epilogue (sm90_gemm_epilogue.h) where the
// scheduler says a tile stores a row (padding rows and rows past masked_m untouched), or with
// split_k > 1 f32 partials into workspace [split_k][rows][n], summed in split order by
// gemm_split_reduce, which applies the epilogue once to the sum. A consumer whose 64 rows are
// all stored rows of its tile or past D's end (every row of one GEMM; all but a group's last
// tile in the grouped layouts) stores them by TMA through map_d (sm90_gemm_store.cuh), which
// clips at D's edges; one whose rows include a padding row, a row past masked_m or the next
// group's rows writes its stored rows from registers, as TMA cannot skip rows inside a box.

#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "kernels/cuda/sm90/sm90_gemm_tile_fp8.cuh"

namespace sol::kernels::sm90 {

template <class Plan, class Scheduler>
SOL_SM90_DEVICE void persistent_producer(const TmaDescriptor* map_a, const TmaDescriptor* map_b, u32 base,
                                         const GemmProblemView& p) {
  RingCursor<Plan::stages> ring;
#pragma unroll 1
  for (u32 t = blockIdx.x; t < Scheduler::tile_count(p); t += gridDim.x) {
    const GemmTileWork w = Scheduler::work(p, t);
    if (w.skip) continue;
#pragma unroll 1
    for (u32 kb = w.kb_begin; kb < w.kb_end; ++kb, ring.advance()) {
      const u32 full = base + Plan::full_barrier_offset(ring.stage);
      mbar_wait(base + Plan::empty_barrier_offset(ring.stage), ring.empty_parity());
      mbar_arrive_expect_tx(full, Plan::tx_bytes);
      const int k0 = int(kb * Plan::block_k);
      tma_load_2d(map_a, full, base + Plan::a_offset(ring.stage), k0, int(w.row0));
      gemm_load_b<Plan>(map_b, full, base, ring.stage, k0, int(w.b_row0));
    }
  }
}

// The contiguous layout's check, by the producer warpgroup's second warp (idle otherwise): CTA c
// reads the row blocks c, c + gridDim.x, ... of grouped_layout (every row once over the grid,
// 4 bytes a row) and reports the first row breaking Scheduler::layout_row_ok through
// args.layout_error. The tiles never compute such a row, so the check can run beside them.
template <class Scheduler>
SOL_SM90_DEVICE void persistent_layout_check(const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  if (p.grouping != GemmGrouping::contiguous || args.layout_error == nullptr) return;
  const unsigned long long bad = Scheduler::layout_check_lane(p, blockIdx.x, gridDim.x, threadIdx.x % 32);
  if (bad != kNoLayoutError) atomicMin(args.layout_error, bad);
}

// Two adjacent results of D (index even, so the pair is one aligned store) through the
// epilogue's code of form Form (epilogue_form): f32 pairs, or bf16x2 rounded to nearest even as
// the CPU rounds.
template <bool DF32, EpilogueForm Form = EpilogueForm::general>
SOL_SM90_DEVICE void epilogue_store_pair(const GemmEpilogueParams& e, u64 index, u32 col, float x0, float x1) {
  const float v0 = epilogue_value_as<Form>(e, x0, index, col);
  const float v1 = epilogue_value_as<Form>(e, x1, index + 1, col + 1);
  if constexpr (DF32)
    *reinterpret_cast<float2*>(static_cast<float*>(e.d) + index) = make_float2(v0, v1);
  else
    *reinterpret_cast<u32*>(static_cast<u16*>(e.d) + index) = pack_bf16x2(v0, v1);
}

// One consumer's 64 rows of a finished tile: through the epilogue to D, or (split_k > 1) the raw
// f32 sums to the split's workspace plane, the epilogue then applied once by the reduction; a
// thread's two rows are checked against the scheduler once.
template <class Plan, class Scheduler, bool DF32, EpilogueForm Form>
SOL_SM90_DEVICE void persistent_store_as(const Accum<Plan::block_n>& acc, u32 consumer, const GemmTileWork& w,
                                         const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  const u32 t = thread_in_warpgroup();
  const u32 row_upper = w.row0 + consumer * Plan::consumer_rows + accum_row(t, 0);
  const bool stored[2] = {Scheduler::row_stored(p, w, row_upper), Scheduler::row_stored(p, w, row_upper + 8)};
#pragma unroll
  for (u32 i = 0; i < Plan::block_n / 2; i += 2) {
    const u32 row = row_upper + (accum_row_half(i) ? 8u : 0u), col = w.col0 + accum_col(t, i);
    if (!stored[accum_row_half(i)] || col >= p.n) continue;
    if (p.split_k == 1) {
      epilogue_store_pair<DF32, Form>(args.epilogue, u64(row) * p.n + col, col, acc.d[i], acc.d[i + 1]);
    } else {
      // col is even and n a multiple of 8: the pair is one aligned 8-byte store.
      *reinterpret_cast<float2*>(args.workspace + (u64(w.split) * args.rows + row) * p.n + col) =
          make_float2(acc.d[i], acc.d[i + 1]);
    }
  }
}

// Whether consumer `consumer`'s rows of tile `w` may leave by TMA: each is a stored row of the
// tile or lies past D (clipped); the same answer on every thread of the warpgroup.
template <class Plan, class Scheduler>
SOL_SM90_DEVICE bool persistent_tma_rows(u32 consumer, const GemmTileWork& w, const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  if (p.split_k > 1) return false;
  if (p.grouping == GemmGrouping::single) return true;
  const u32 row_upper = w.row0 + consumer * Plan::consumer_rows + accum_row(thread_in_warpgroup(), 0);
  const bool ok = Scheduler::row_tma_storable(p, w, row_upper, args.rows) &&
                  Scheduler::row_tma_storable(p, w, row_upper + 8, args.rows);
  return warpgroup_all(consumer, ok);
}

template <class Plan, class Scheduler, EpilogueForm Form>
SOL_SM90_DEVICE void persistent_store_with(const Accum<Plan::block_n>& acc, u32 consumer, u32 base,
                                           const TmaDescriptor* map_d, const GemmTileWork& w,
                                           const PersistentGemmArgs& args, u32& stored_boxes) {
  const GemmEpilogueParams& e = args.epilogue;
  if (persistent_tma_rows<Plan, Scheduler>(consumer, w, args)) {
    const u32 n = args.problem.n;
    const auto value = [&](float x, u32 row, u32 col) {
      return epilogue_value_as<Form>(e, x, u64(row) * n + col, col);
    };
    const u32 row0 = w.row0 + consumer * Plan::consumer_rows;
    if (e.d_f32)
      tma_store_block<Plan, 4>(acc, consumer, base, map_d, row0, w.col0, args.rows, n, stored_boxes, value);
    else
      tma_store_block<Plan, 2>(acc, consumer, base, map_d, row0, w.col0, args.rows, n, stored_boxes, value);
  } else if (e.d_f32) {
    persistent_store_as<Plan, Scheduler, true, Form>(acc, consumer, w, args);
  } else {
    persistent_store_as<Plan, Scheduler, false, Form>(acc, consumer, w, args);
  }
}

// A tile's epilogue through the code of its launch's form (epilogue_form, uniform over the
// launch): the plain GEMM (and every grouped GEMM) stores the sums as they are; alpha, C and
// bias without an activation take the linear code; only silu takes the general code.
template <class Plan, class Scheduler>
SOL_SM90_DEVICE void persistent_store(const Accum<Plan::block_n>& acc, u32 consumer, u32 base,
                                      const TmaDescriptor* map_d, const GemmTileWork& w,
                                      const PersistentGemmArgs& args, u32& stored_boxes) {
  switch (epilogue_form(args.epilogue)) {
    case EpilogueForm::identity:
      persistent_store_with<Plan, Scheduler, EpilogueForm::identity>(acc, consumer, base, map_d, w, args, stored_boxes);
      break;
    case EpilogueForm::linear:
      persistent_store_with<Plan, Scheduler, EpilogueForm::linear>(acc, consumer, base, map_d, w, args, stored_boxes);
      break;
    case EpilogueForm::general:
      persistent_store_with<Plan, Scheduler, EpilogueForm::general>(acc, consumer, base, map_d, w, args, stored_boxes);
      break;
  }
}

template <class Plan, class Scheduler>
SOL_SM90_DEVICE void persistent_consumer(u32 consumer, u32 base, const TmaDescriptor* map_d,
                                         const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  RingCursor<Plan::stages> ring;
  u32 stored_boxes = 0;
  Accum<Plan::block_n> acc;
#pragma unroll 1
  for (u32 t = blockIdx.x; t < Scheduler::tile_count(p); t += gridDim.x) {
    const GemmTileWork w = Scheduler::work(p, t);
    if (w.skip) continue;
#pragma unroll
    for (u32 i = 0; i < Plan::block_n / 2; ++i) acc.d[i] = 0.0f;
    fence_accumulator(acc);  // as in gemm_tile_consumer: keeps the zeros out of the wgmma pipeline
    u32 previous_stage = 0;
#pragma unroll 1
    for (u32 kb = w.kb_begin; kb < w.kb_end; ++kb, ring.advance()) {
      mbar_wait(base + Plan::full_barrier_offset(ring.stage), ring.full_parity());
      fence_accumulator(acc);
      wgmma_fence();
      gemm_k_block_mmas<Plan>(acc, base, ring.stage, consumer);
      wgmma_commit();
      wgmma_wait<1>();
      fence_accumulator(acc);
      if (kb > w.kb_begin) release_stage<Plan>(base, previous_stage);
      previous_stage = ring.stage;
    }
    wgmma_wait<0>();
    fence_accumulator(acc);
    release_stage<Plan>(base, previous_stage);
    persistent_store<Plan, Scheduler>(acc, consumer, base, map_d, w, args, stored_boxes);
  }
  tma_store_drain();
}

template <class Plan, class Scheduler>
SOL_SM90_DEVICE void persistent_fp8_consumer(u32 consumer, u32 base, const TmaDescriptor* map_d,
                                             const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  const u32 t = thread_in_warpgroup();
  RingCursor<Plan::stages> ring;
  u32 stored_boxes = 0, issued = 0;
  Accum<Plan::block_n> sum, partial;
#pragma unroll 1
  for (u32 tile = blockIdx.x; tile < Scheduler::tile_count(p); tile += gridDim.x) {
    const GemmTileWork w = Scheduler::work(p, tile);
    if (w.skip) continue;
#pragma unroll
    for (u32 i = 0; i < Plan::block_n / 2; ++i) sum.d[i] = 0.0f;
    const u32 row_upper = w.row0 + consumer * Plan::consumer_rows + accum_row(t, 0);
    const u32 rows[2] = {row_upper, row_upper + 8};
#pragma unroll 1
    for (u32 kb = w.kb_begin; kb < w.kb_end; ++kb, ring.advance()) {
      const auto load_scales = [&](float (&scale_a)[2], float (&scale_b)[2]) {
#pragma unroll
        for (u32 h = 0; h < 2; ++h)
          scale_a[h] = rows[h] < args.rows ? args.scales_a[fp8_scale_a_index(rows[h], kb, p.k_blocks)] : 0.0f;
        scale_b[0] = args.scales_b[Scheduler::scale_b_index(p, w, w.col0, kb)];
        if constexpr (Plan::block_n > kFp8ScaleBlock)
          scale_b[1] = args.scales_b[Scheduler::scale_b_index(p, w, fp8_second_block_col(w.col0, p.n), kb)];
        else
          scale_b[1] = scale_b[0];
      };
      fp8_consumer_k_block<Plan>(sum, partial, base, consumer, ring.stage, ring.full_parity(), issued, w.col0,
                                 load_scales);
    }
    persistent_store<Plan, Scheduler>(sum, consumer, base, map_d, w, args, stored_boxes);
  }
  fp8_consumer_finish<Plan>(consumer, issued);
  tma_store_drain();
}

// The kernel body: every thread of a CTA of Plan::threads calls it; grid: (CTAs, 1, 1), CTAs a
// multiple of Plan::cluster_m, launched in clusters of (Plan::cluster_m, 1, 1). The CTAs of a
// cluster take consecutive tile indices, which the scheduler maps to vertically adjacent tiles
// of one column tile (the same B slices) and the same K range, so their rings stay in step.
template <class Plan, class Scheduler, bool BlockScaled>
SOL_SM90_DEVICE void gemm_persistent(const TmaDescriptor* map_a, const TmaDescriptor* map_b,
                                     const TmaDescriptor* map_d, const PersistentGemmArgs& args) {
  static_assert(Plan::stages >= 2, "consumers free a stage one K block late: one stage would deadlock");
  static_assert(Plan::cluster_m == Scheduler::cluster_m, "the plan's loads and the scheduler's tiles pair the same CTAs");
  // A grouped GEMM's tiles may be skipped, and a pair with one tile skipped would wait forever
  // for the other's loads and releases: the host never plans one (check_config), and a launch
  // that slips through fails here instead of hanging.
  if constexpr (Plan::cluster_m > 1)
    if (args.problem.grouping != GemmGrouping::single) __trap();
  const u32 base = gemm_tile_setup<Plan>(map_a, map_b, map_d);
  if (warpgroup_index() == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) persistent_producer<Plan, Scheduler>(map_a, map_b, base, args.problem);
    else if (threadIdx.x / 32 == 1) persistent_layout_check<Scheduler>(args);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    if constexpr (BlockScaled)
      persistent_fp8_consumer<Plan, Scheduler>(warpgroup_index() - 1, base, map_d, args);
    else
      persistent_consumer<Plan, Scheduler>(warpgroup_index() - 1, base, map_d, args);
  }
  // No CTA leaves while a peer may still multicast into its ring or free a stage on it.
  if constexpr (Plan::cluster_m > 1) cluster_sync();
}

// The split-K reduction pass: one thread per pair of columns of a result row, the partials summed
// in split order (as the CPU model's gemm_split_reduce_model), then the epilogue, once.
template <class Scheduler, bool DF32>
SOL_SM90_DEVICE void gemm_split_reduce_as(const PersistentGemmArgs& args) {
  const GemmProblemView& p = args.problem;
  const u64 pairs = u64(args.rows) * (p.n / 2);
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs; i += u64(gridDim.x) * blockDim.x) {
    const u32 row = u32(i / (p.n / 2)), col = u32(i % (p.n / 2)) * 2;
    if (!Scheduler::row_valid(p, row)) continue;
    float lo = 0.0f, hi = 0.0f;
#pragma unroll 4
    for (u32 s = 0; s < p.split_k; ++s) {
      const float2 part = *reinterpret_cast<const float2*>(args.workspace + (u64(s) * args.rows + row) * p.n + col);
      lo += part.x;
      hi += part.y;
    }
    epilogue_store_pair<DF32>(args.epilogue, u64(row) * p.n + col, col, lo, hi);
  }
}

template <class Scheduler>
SOL_SM90_DEVICE void gemm_split_reduce(const PersistentGemmArgs& args) {
  if (args.epilogue.d_f32)
    gemm_split_reduce_as<Scheduler, true>(args);
  else
    gemm_split_reduce_as<Scheduler, false>(args);
}

}  // namespace sol::kernels::sm90
