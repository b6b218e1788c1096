#pragma once
// `sol comm bench ring-attention`: context-parallel attention (every variant of sol::cp) against
// the attention floor and against single-rank flash attention, with how much of the
// communication was hidden behind compute.
//
// Shape per size: B = 1, H = Hkv = ranks (one head per rank, the least Ulysses can shard),
// D = Dv = 128, causal, --dtype f32 or bf16. The size is the bytes of one rank's K/V shard
// (k and v: the message the ring passes each step); S = ranks x size / (2 H D dtype-size).
// Sizes are clamped to [64 KiB, 4 MiB] (2 ranks, bf16: S from 128 to 8192).
//
// Per size, every rank at once (so each rank has one core, as in the timed runs):
//   floor      = FLOPs per rank / the dot_bf16 (or fma_f32) ceiling measured right before,
//                FLOPs = 2 x visible (query, key) pairs x H x (D + Dv) over ranks;
//   1-rank FA  = flash_attention on the whole sequence; vs-FA = per-rank throughput of the
//                variant against it: (t_FA / ranks) / t (the "85% per rank");
//   comm alone = the variant's transfers without compute (ring: ranks-1 K/V rotations;
//                all_gather_kv: the all_gather; ulysses: both all_to_alls);
//   exposed    = per call, the slowest rank's wall time minus the most compute time
//                (RingAttentionStats.compute_s) any rank spent in that call, median over calls:
//                the communication no rank hid (time in communication calls alone would count
//                waiting for a neighbour that computes longer, i.e. imbalance, as communication);
//   hidden     = 1 - exposed / comm alone (0 when nothing overlaps);
//   arrived    = ring: K/V shards (all ranks, all timed calls) wholly received by the time their
//                step's compute ended (RingAttentionStats.shards_arrived): hidden entirely, and
//                a count that time slices lost to other processes move far less than times.
// Times are medians over batches of the slowest rank; the first call of each variant is
// checked against the sharded 1-rank result (rel. error; counted wrong above bf16/f32
// tolerance).
#include <string_view>

#include "sol/comm_bench.h"

namespace sol::comm {

inline constexpr const char* kCpBenchOps[] = {"ring-attention"};

bool is_cp_bench_op(std::string_view op);
// Collective; rank 0 prints the table (or JSON). Returns the number of wrong results.
int64_t cp_bench(const Group& group, const CommBenchOptions& options, bool json);

}  // namespace sol::comm
