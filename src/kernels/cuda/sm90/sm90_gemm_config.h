#pragma once
// Which sm90 GEMM configuration runs a shape: block sizes, ring stages, split-K, chosen by a
// stated cost model over a table of candidates (data, not branches), and the budget checks every
// configuration must pass (shared memory, registers, TMA box rules). Host-only plain C++: the
// launcher, `sol` and the offline tests all call it, so a shape's configuration is the same
// wherever it is asked for.
//
// The model, per candidate (one CTA per SM: every candidate's ring uses most of the 227 KiB):
//   tiles      = sum over groups of ceil(m_g / block_m) * ceil(n / block_n), times split_k;
//   waves      = ceil(tiles / CTAs), CTAs = SMs rounded down to whole clusters;
//   mma time   = waves * 2 block_m block_n (k / split_k) / (peak per SM * n-efficiency):
//                padding rows and idle SMs of the last wave are paid for;
//   L2 time    = sum over tiles of (block_m + block_n / cluster_m) (k / split_k) element bytes / L2
//                bandwidth (with B multicast, cluster_m = 2, a B stage leaves L2 once per pair);
//   HBM time   = the operands' unique bytes and the output / HBM bandwidth;
//   SM time    = waves * one tile's operand bytes / what one SM can pull (kSmBandwidthShare times
//                its even share of HBM): a shape on few SMs cannot reach HBM's rate;
//   reduce     = split_k > 1: every split writes and re-reads an f32 partial tile through HBM;
//   time       = max(mma, L2, HBM, SM time) + reduce (the pipeline overlaps the first four).
// The candidate with the least time wins; ties go to fewer tiles, then more stages.
//
// n-efficiency: a wgmma of width N streams A's 64 x 32-byte slice from shared memory once per
// N columns, so narrow N loses issue slots to operand traffic; kNarrowNPenalty columns is the
// cost charged for it.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/sm90/sm90_gemm_boxes.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_tma_rules.h"
#include "sol/error.h"

namespace sol::kernels::sm90 {

// The numbers of one sm90 device the model needs. from_device fills them from the driver's
// attributes; h200() is the datasheet part, for planning without a device.
struct Sm90Target {
  std::uint32_t sms = 132;
  std::uint32_t smem_per_block = 227 * 1024;  // the opt-in maximum of dynamic shared memory
  std::uint32_t regs_per_sm = 65536;
  double dense_bf16_tflops = 989.4;
  double dense_fp8_tflops = 1978.9;
  double hbm_gb_s = 4800;
  // L2 -> SM bandwidth summed over SMs: a placeholder until `sol hw` measures it on the device
  // (what DeepGEMM's published fp8 rates imply for 128 x 128 tiles without multicast).
  double l2_gb_s = 10000;
  // Whether the chooser may pick configurations built and checked offline that have not yet run
  // on a device: B multicast (cluster_m = 2) and the block-scaled 128 x 192 tile. Until a device
  // run proves them they run only when named (forced_config, the sweep, first-run gpu tests).
  bool unproven = false;

  static Sm90Target h200() { return {}; }
};

enum class GemmKernelKind { bf16, e4m3, e4m3_block_scaled };

inline const char* kernel_kind_name(GemmKernelKind k) {
  switch (k) {
    case GemmKernelKind::bf16: return "bf16";
    case GemmKernelKind::e4m3: return "e4m3";
    case GemmKernelKind::e4m3_block_scaled: return "e4m3 block-scaled";
  }
  return "?";
}

// One GEMM or one grouped GEMM: group_m holds each group's rows (a single entry for one GEMM;
// a 0 is an empty expert).
struct GemmProblem {
  std::vector<std::int64_t> group_m;
  std::int64_t n = 0, k = 0;
  GemmKernelKind kind = GemmKernelKind::bf16;
  std::uint32_t out_bytes = 2;  // bf16 D
  // B [n, k] (K-major, layout nt) or, bf16 only, B [k, n] read MN-major (layout nn): the same
  // stage bytes and wgmma count, B's TMA boxes differ (64 columns by block_k rows of K each).
  OperandMajor b_major = OperandMajor::k;
  // A grouped GEMM (contiguous or masked layout), even of one group: its tiles may be skipped on
  // the device (padding blocks, rows past masked_m), so it never takes B multicast.
  bool grouped = false;
};

struct Sm90GemmConfig {
  std::uint32_t block_m = 128, block_n = 128, block_k = 64, stages = 4, consumers = 2, split_k = 1;
  std::uint32_t cluster_m = 1;  // 2: B multicast to two vertically adjacent tiles (sm90_gemm_plan.h)
  std::uint32_t threads = 384;
  std::uint32_t smem_bytes = 0;       // dynamic shared memory the launch asks for
  std::uint32_t consumer_regs = kConsumerRegs;  // setmaxnreg of the consumers
  std::uint32_t producer_regs = kProducerRegs;
  std::uint32_t consumer_regs_needed = 0;  // the model's estimate, checked against consumer_regs
  std::int64_t tiles = 0, waves = 0;
  double predicted_us = 0, floor_us = 0;  // the model's time and the shape's own floor
};

// The candidate table: the tile shapes the kernels instantiate (GemmTilePlan: one m64 row block
// per consumer warpgroup; wgmma N of 64, 128 or 256; the block-scaled kernel's N is its 128-wide
// scale block, or 192 over two of them: 17% fewer operand bytes per FLOP than 128, where 256
// would need 296 registers for its two accumulator sets) and the split-K factors tried for
// shapes too small to fill the SMs.
struct TileCandidate {
  std::uint32_t block_m, block_n;
};
inline constexpr TileCandidate kTileCandidates[] = {{64, 64},  {64, 128},  {64, 256}, {128, 64},
                                                    {128, 128}, {128, 192}, {128, 256}};
inline constexpr std::uint32_t kSplitCandidates[] = {1, 2, 3, 4, 6, 8, 16};
inline constexpr std::uint32_t kClusterCandidates[] = {1, 2};
inline constexpr std::uint32_t kMaxStages = 8, kMinStages = 2;
inline constexpr std::uint32_t kMinKBlocksPerSplit = 4;  // a split shorter than this never fills its ring
inline constexpr std::uint32_t kNarrowNPenalty = 16;
inline constexpr std::uint32_t kRegOverhead = 40;  // addresses, loop state, descriptors, scales
inline constexpr std::uint32_t kBarrierBytesPerStage = 16;
inline constexpr double kSmBandwidthShare = 2.0;

inline std::uint32_t element_bytes(GemmKernelKind k) { return k == GemmKernelKind::bf16 ? 2 : 1; }

inline bool kind_allows(GemmKernelKind kind, const TileCandidate& t) {
  if (kind == GemmKernelKind::e4m3_block_scaled) return t.block_n == 128 || (t.block_n == 192 && t.block_m == 128);
  return t.block_n != 192;
}

// A tile not yet run on a device (Sm90Target::unproven): the block-scaled 128 x 192.
inline bool tile_unproven(GemmKernelKind kind, const TileCandidate& t) {
  return kind == GemmKernelKind::e4m3_block_scaled && t.block_n == 192;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Shared memory of a ring of `stages` for a tile: A and B stages (one 128-byte swizzled row of K
// per tile row), the per-row A scales of the block-scaled kernel, two mbarriers per stage, the
// TMA-store epilogue's staging (kStoreBuffers boxes of 8 KiB per consumer: 16 KiB per m64 row
// block, for bf16 and f32 D alike) and one swizzle period to align the base (as
// GemmTilePlan::smem_bytes).
inline std::uint32_t ring_smem_bytes(GemmKernelKind kind, std::uint32_t block_m, std::uint32_t block_n,
                                     std::uint32_t stages) {
  std::uint32_t per_stage = (block_m + block_n) * 128 + kBarrierBytesPerStage;
  if (kind == GemmKernelKind::e4m3_block_scaled) per_stage += block_m * 4;
  return stages * per_stage + store_staging_bytes(block_m) + 1024;
}

// The block-scaled 128 x 192 tile needs exactly kConsumerRegs (2 x 96 + kRegOverhead): any
// state added to its consumers must come out of the overhead or move it past the budget.
inline std::uint32_t consumer_regs_needed(GemmKernelKind kind, std::uint32_t block_n) {
  // A consumer thread holds 64 x block_n / 128 f32 accumulators; the block-scaled kernel keeps a
  // second set, the tensor cores' partial sum before its promotion.
  const std::uint32_t acc = block_n / 2;
  return (kind == GemmKernelKind::e4m3_block_scaled ? 2 * acc : acc) + kRegOverhead;
}

inline double gemm_flops(const GemmProblem& p) {
  double rows = 0;
  for (std::int64_t m : p.group_m) rows += double(m);
  return 2.0 * rows * double(p.n) * double(p.k);
}

// The shape's floor on `t`: max(FLOPs / peak, bytes once / HBM).
inline double gemm_floor_us(const GemmProblem& p, const Sm90Target& t) {
  const double eb = element_bytes(p.kind);
  double rows = 0, live_groups = 0;
  for (std::int64_t m : p.group_m) {
    rows += double(m);
    live_groups += m > 0;
  }
  const double bytes = rows * double(p.k) * eb + live_groups * double(p.n) * double(p.k) * eb +
                       rows * double(p.n) * p.out_bytes;
  const double peak = p.kind == GemmKernelKind::bf16 ? t.dense_bf16_tflops : t.dense_fp8_tflops;
  return std::max(gemm_flops(p) / (peak * 1e6), bytes / (t.hbm_gb_s * 1e3));
}

// Throws sol::Error naming the broken budget. Checks what the kernel and the driver will check
// (shared memory, threads, registers, TMA boxes), so a configuration that passes launches.
inline void check_config(const Sm90GemmConfig& c, const GemmProblem& p, const Sm90Target& t) {
  const char* op = "sm90 gemm config";
  check(c.consumers >= 1 && c.consumers <= 2 && c.block_m == 64 * c.consumers, op, "block_m = ", c.block_m,
        " with ", c.consumers, " consumers: each consumer warpgroup owns one m64 row block");
  const bool scaled = p.kind == GemmKernelKind::e4m3_block_scaled;
  check(c.block_n == 64 || c.block_n == 128 || c.block_n == 256 || (scaled && c.block_n == 192), op, "block_n = ",
        c.block_n, " but wgmma N is 64, 128 or 256 here (192: the block-scaled kernel only)");
  check(!scaled || c.block_n == 128 || (c.block_n == 192 && c.block_m == 128), op,
        "the block-scaled kernel's block_n must be its 128-wide scale block, or 192 over two with block_m 128, "
        "got ", c.block_m, " x ", c.block_n);
  check(c.block_k * element_bytes(p.kind) == 128, op, "block_k = ", c.block_k, " is not one 128-byte row");
  check(c.stages >= kMinStages && c.stages <= kMaxStages, op, "stages = ", c.stages, " but must be ", kMinStages,
        "..", kMaxStages, " (consumers free a stage one K block late)");
  check(c.smem_bytes == ring_smem_bytes(p.kind, c.block_m, c.block_n, c.stages), op, "smem_bytes = ",
        c.smem_bytes, " does not match the ring");
  check(c.smem_bytes <= t.smem_per_block, op, "shared memory ", c.smem_bytes, " B exceeds the device's ",
        t.smem_per_block, " B");
  check(c.threads == 128 * (1 + c.consumers), op, "threads = ", c.threads);
  check(c.producer_regs * 128 + c.consumer_regs * 128 * c.consumers <= t.regs_per_sm, op, "register split ",
        c.producer_regs, " / ", c.consumer_regs, " over ", c.threads, " threads exceeds ", t.regs_per_sm);
  check(c.consumer_regs % 8 == 0 && c.consumer_regs <= 256 && c.producer_regs >= 24, op,
        "setmaxnreg values must be multiples of 8 in 24..256");
  check(c.consumer_regs_needed <= c.consumer_regs, op, "consumers need about ", c.consumer_regs_needed,
        " registers but get ", c.consumer_regs);
  const std::int64_t k_blocks = ceil_div(p.k, c.block_k);
  check(c.split_k >= 1 && k_blocks >= c.split_k, op, "split_k = ", c.split_k, " but K has ", k_blocks,
        " blocks");
  check(c.cluster_m == 1 || c.cluster_m == 2, op, "cluster_m = ", c.cluster_m, " but B multicast pairs at most 2 tiles");
  if (c.cluster_m > 1) {
    // The pair's rings run in lockstep: both tiles must exist and load the same K blocks.
    check(p.group_m.size() == 1 && !p.grouped, op, "B multicast (cluster_m = ", c.cluster_m,
          ") is for one GEMM: a grouped GEMM's tiles may be skipped, which would break the pair's lockstep");
    check(p.b_major == OperandMajor::k, op, "B multicast splits a K-major B stage; B stored [K, N] is not split");
    const std::int64_t m_tiles = ceil_div(p.group_m[0], c.block_m);
    check(m_tiles % c.cluster_m == 0, op, "m = ", p.group_m[0], " gives ", m_tiles, " row tiles of ", c.block_m,
          " but B multicast pairs them: the count must be a multiple of ", c.cluster_m);
  }
  // The TMA boxes of A and B at a 16-byte-aligned base with rows k elements apart.
  const std::uint64_t stride = std::uint64_t(p.k);
  check(stride * element_bytes(p.kind) % 16 == 0, op, "K = ", p.k, " gives a row stride of ",
        stride * element_bytes(p.kind), " bytes; TMA needs a multiple of 16");
  std::int64_t rows = 0;
  for (std::int64_t m : p.group_m) rows += m;
  TmaBox a, b;
  a.global_address = b.global_address = 1024;
  a.rank = b.rank = 2;
  a.element_bytes = b.element_bytes = element_bytes(p.kind);
  a.dims[0] = b.dims[0] = std::uint64_t(p.k);
  a.dims[1] = std::uint64_t(std::max<std::int64_t>(rows, 1));
  b.dims[1] = std::uint64_t(p.n);
  a.strides_bytes[1] = b.strides_bytes[1] = stride * element_bytes(p.kind);
  a.box[0] = b.box[0] = c.block_k;
  a.box[1] = c.block_m;
  b.box[1] = c.block_n / c.cluster_m;  // each CTA of a cluster loads its slice
  a.swizzle = b.swizzle = Swizzle::b128;
  if (p.b_major == OperandMajor::mn) {
    check(p.kind == GemmKernelKind::bf16, op, "B stored [K, N] with ", kernel_kind_name(p.kind),
          ": fp8 wgmma reads K-major operands only");
    check(c.block_n % 64 == 0, op, "block_n = ", c.block_n, " is not whole 64-column boxes of an MN-major B");
    b.dims[0] = std::uint64_t(p.n);
    b.dims[1] = std::uint64_t(p.k);
    b.strides_bytes[1] = std::uint64_t(p.n) * element_bytes(p.kind);
    b.box[0] = 128 / element_bytes(p.kind);
    b.box[1] = c.block_k;
  }
  check_tma_box(a, "sm90 gemm config: A");
  check_tma_box(b, "sm90 gemm config: B");
  check(p.out_bytes == 2 || p.out_bytes == 4, op, "D has ", p.out_bytes, "-byte elements but must be bf16 or f32");
  check(c.block_n % store_box_cols(p.out_bytes) == 0, op, "block_n = ", c.block_n, " is not whole ",
        store_box_cols(p.out_bytes), "-column boxes of the TMA-store epilogue");
  gemm_store_box(reinterpret_cast<const void*>(std::uintptr_t(1024)), std::uint64_t(std::max<std::int64_t>(rows, 1)),
                 std::uint64_t(p.n), p.out_bytes, "sm90 gemm config: D");
}

// The modelled time of one candidate (microseconds), with its tiles and waves.
inline Sm90GemmConfig model_candidate(const GemmProblem& p, const Sm90Target& t, TileCandidate tile,
                                      std::uint32_t split, std::uint32_t stages, std::uint32_t cluster = 1) {
  Sm90GemmConfig c;
  c.cluster_m = cluster;
  c.block_m = tile.block_m;
  c.block_n = tile.block_n;
  c.consumers = tile.block_m / 64;
  c.threads = 128 * (1 + c.consumers);
  c.block_k = 128 / element_bytes(p.kind);
  c.stages = stages;
  c.split_k = split;
  c.smem_bytes = ring_smem_bytes(p.kind, c.block_m, c.block_n, stages);
  c.consumer_regs_needed = consumer_regs_needed(p.kind, c.block_n);
  const double eb = element_bytes(p.kind), k_split = double(p.k) / split;
  std::int64_t tiles = 0;
  double live_groups = 0, rows = 0;
  for (std::int64_t m : p.group_m) {
    tiles += ceil_div(m, c.block_m) * ceil_div(p.n, c.block_n);
    live_groups += m > 0;
    rows += double(m);
  }
  c.tiles = tiles * split;
  const std::int64_t ctas = std::max<std::int64_t>(t.sms / cluster * cluster, cluster);
  c.waves = ceil_div(c.tiles, ctas);
  const double peak = p.kind == GemmKernelKind::bf16 ? t.dense_bf16_tflops : t.dense_fp8_tflops;
  const double n_eff = double(c.block_n) / double(c.block_n + kNarrowNPenalty);
  const double mma_us = double(c.waves) * 2.0 * c.block_m * c.block_n * k_split / (peak * 1e6 / t.sms * n_eff);
  const double l2_us =
      double(c.tiles) * (c.block_m + double(c.block_n) / cluster) * k_split * eb / (t.l2_gb_s * 1e3);
  const double hbm_us = (rows * double(p.k) * eb + live_groups * double(p.n) * double(p.k) * eb +
                         rows * double(p.n) * p.out_bytes) / (t.hbm_gb_s * 1e3);
  const double sm_gb_s = kSmBandwidthShare * t.hbm_gb_s / t.sms;
  const double sm_us = double(c.waves) * (c.block_m + c.block_n) * k_split * eb / (sm_gb_s * 1e3);
  const double reduce_us = split > 1 ? 2.0 * split * rows * double(p.n) * 4 / (t.hbm_gb_s * 1e3) : 0;
  c.predicted_us = std::max({mma_us, l2_us, hbm_us, sm_us}) + reduce_us;
  c.floor_us = gemm_floor_us(p, t);
  return c;
}

inline void check_problem(const GemmProblem& p) {
  const char* op = "sm90 gemm config";
  check(!p.group_m.empty(), op, "no groups");
  for (std::int64_t m : p.group_m) check(m >= 0, op, "a group has ", m, " rows");
  check(p.n > 0 && p.k > 0, op, "n = ", p.n, ", k = ", p.k, " but both must be positive");
  check(p.n % 8 == 0, op, "n = ", p.n, " is not a multiple of 8 (the kernel stores D rows 16-byte aligned)");
}

// The best valid candidate for `p` on `t`. Every candidate is checked; one that breaks a budget
// is skipped, and a shape no candidate fits is a sol::Error naming the first reason.
inline Sm90GemmConfig choose_config(const GemmProblem& p, const Sm90Target& t) {
  check_problem(p);
  const std::int64_t k_blocks = ceil_div(p.k, 128 / element_bytes(p.kind));
  Sm90GemmConfig best;
  bool found = false;
  std::string first_reason;
  for (const TileCandidate& tile : kTileCandidates) {
    if (!kind_allows(p.kind, tile)) continue;
    std::uint32_t stages = kMaxStages;
    while (stages > kMinStages && ring_smem_bytes(p.kind, tile.block_m, tile.block_n, stages) > t.smem_per_block)
      --stages;
    for (std::uint32_t split : kSplitCandidates) {
      if (split > 1 && k_blocks < std::int64_t(split) * kMinKBlocksPerSplit) break;
      const std::uint32_t ring = std::uint32_t(std::max<std::int64_t>(
          kMinStages, std::min<std::int64_t>(stages, ceil_div(k_blocks, split))));
      for (std::uint32_t cluster : kClusterCandidates) {
        if (!t.unproven && (cluster > 1 || tile_unproven(p.kind, tile))) continue;
        Sm90GemmConfig c = model_candidate(p, t, tile, split, ring, cluster);
        try {
          check_config(c, p, t);
        } catch (const Error& e) {
          if (first_reason.empty()) first_reason = e.what();
          continue;
        }
        // Ties: fewer tiles, more stages, then no cluster (the simpler launch).
        const bool better = !found || c.predicted_us < best.predicted_us * (1 - 1e-9) ||
                            (c.predicted_us <= best.predicted_us * (1 + 1e-9) &&
                             (c.tiles < best.tiles ||
                              (c.tiles == best.tiles &&
                               (c.stages > best.stages || (c.stages == best.stages && c.cluster_m < best.cluster_m)))));
        if (better) best = c, found = true;
      }
    }
  }
  if (!found) fail("sm90 gemm config", "no configuration fits: ", first_reason);
  return best;
}

// A configuration named rather than chosen, for measuring the candidates on a device
// ($SOL_SM90_GEMM_CONFIG, read by the launcher's plan): "BMxBN", optionally ":s<stages>",
// ":k<split>" and ":c<cluster>", e.g. "128x128:s4:k1:c2". Stages default to as many as shared
// memory holds (at most the K blocks of a split), split and cluster to 1 (c2: B multicast, which
// the chooser picks only where Sm90Target::unproven allows). The result passes check_config or this throws sol::Error
// naming the spec and the broken budget; the model's time is filled in as for a chosen one.
inline Sm90GemmConfig forced_config(const GemmProblem& p, const Sm90Target& t, const std::string& spec) {
  const char* op = "sm90 gemm config";
  check_problem(p);
  unsigned bm = 0, bn = 0, stages = 0, split = 1, cluster = 1;
  std::size_t at = 0;
  const auto number = [&](unsigned& v) {
    const std::size_t from = at;
    v = 0;
    while (at < spec.size() && spec[at] >= '0' && spec[at] <= '9' && v < 100000) v = v * 10 + unsigned(spec[at++] - '0');
    return at > from;
  };
  bool ok = number(bm) && at < spec.size() && spec[at++] == 'x' && number(bn);
  while (ok && at < spec.size()) {
    ok = spec[at++] == ':' && at < spec.size();
    if (!ok) break;
    const char key = spec[at++];
    ok = (key == 's' && number(stages)) || (key == 'k' && number(split)) || (key == 'c' && number(cluster));
  }
  check(ok && bm > 0 && bn > 0 && split > 0 && cluster > 0, op, "config '", spec,
        "' is not BMxBN[:s<stages>][:k<split>][:c<cluster>] (e.g. 128x256:s4:k1:c2)");
  const std::int64_t k_blocks = ceil_div(p.k, 128 / element_bytes(p.kind));
  if (stages == 0) {
    stages = kMaxStages;
    while (stages > kMinStages && ring_smem_bytes(p.kind, bm, bn, stages) > t.smem_per_block) --stages;
    stages = std::uint32_t(std::max<std::int64_t>(kMinStages, std::min<std::int64_t>(stages, ceil_div(k_blocks, split))));
  }
  Sm90GemmConfig c = model_candidate(p, t, TileCandidate{bm, bn}, split, stages, cluster);
  try {
    check_config(c, p, t);
  } catch (const Error& e) {
    fail(op, "config '", spec, "' does not fit this shape: ", e.what());
  }
  return c;
}

}  // namespace sol::kernels::sm90
