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

}  // namespace sol::cp::detail
