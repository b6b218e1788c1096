#pragma once
// Which attention blocks a rank computes at one ring step, shared by the forward and the
// backward. Rank `me` holds query chunks me and 2n-1-me; at this step it holds the K/V shard
// of rank `src` (chunks src and 2n-1-src), stored as rows [0, C) and [C, 2C).
//
// Causal, with zig-zag chunks, every step is at most two single-rank calls (usually one):
//   src == me: q rows [0, C) against k rows [0, C), causal;
//              q rows [C, 2C) against k rows [0, 2C), causal. Bottom-right alignment puts query i
//              of that chunk at key C + i: it sees all of chunk me and its own chunk up to i.
//   src < me:  q rows [0, 2C) against k rows [0, C), full (both query chunks come after chunk
//              src; chunk 2n-1-src comes after both query chunks).
//   src > me:  q rows [C, 2C) against k rows [0, 2C), full (chunk 2n-1-me comes after both key
//              chunks; chunk me comes before both).
// Every rank does the same work per step: 2 C^2 (query, key) pairs.
// Not causal: q rows [0, 2C) against k rows [0, 2C), full.
//
// ring_pieces cuts those blocks into a few pieces of query rows, because the comm core moves
// bytes only when polled and a K/V shard larger than its mailbox ring needs both ends to poll
// several times: with one call per step the transfer could finish only once both ranks had
// ended their step, so every step waited for the slower rank. Polled between pieces, the shard
// arrives while both compute, and a rank may run up to about a step ahead of its neighbour
// without waiting. A causal piece keeps the block's bottom-right alignment by taking only the
// keys up to its last query's diagonal (fewer keys to pack, the same pairs).
#include <algorithm>
#include <cstdint>
#include <vector>

namespace sol::cp::detail {

struct RingBlock {
  int64_t q0, q1, k0, k1;
  bool causal;
};

inline std::vector<RingBlock> ring_blocks(int me, int src, int64_t C, bool causal) {
  if (!causal) return {{0, 2 * C, 0, 2 * C, false}};
  if (src == me) return {{0, C, 0, C, true}, {C, 2 * C, 0, 2 * C, true}};
  if (src < me) return {{0, 2 * C, 0, C, false}};
  return {{C, 2 * C, 0, 2 * C, false}};
}

// About kPolls pieces per step, none under kMinRows query rows (each piece re-packs its keys).
inline std::vector<RingBlock> ring_pieces(int me, int src, int64_t C, bool causal) {
  constexpr int64_t kPolls = 3, kMinRows = 512;
  const std::vector<RingBlock> blocks = ring_blocks(me, src, C, causal);
  int64_t step_rows = 0;
  for (const RingBlock& b : blocks) step_rows += b.q1 - b.q0;
  const int64_t target = std::max(kMinRows, (step_rows + kPolls - 1) / kPolls);
  std::vector<RingBlock> pieces;
  for (const RingBlock& b : blocks) {
    const int64_t rows = b.q1 - b.q0, count = std::max<int64_t>(1, (rows + target - 1) / target);
    for (int64_t p = 0; p < count; ++p) {
      const int64_t lo = rows * p / count, hi = rows * (p + 1) / count;
      const int64_t keys = b.causal ? hi + (b.k1 - b.k0) - rows : b.k1 - b.k0;
      pieces.push_back({b.q0 + lo, b.q0 + hi, b.k0, b.k0 + keys, b.causal});
    }
  }
  return pieces;
}

}  // namespace sol::cp::detail
