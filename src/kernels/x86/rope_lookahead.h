#pragma once
// Rope's look-ahead, shared by the vector levels (kernels/rope.h): which slice lies a distance
// ahead of a head, the L1 and L2 requests for it, the tables of one position split into even and
// odd elements, and the head loop of the whole-line kernel, each level bringing its own
// arithmetic for one slice. Include only from a level's rope_*.cc: everything is in an anonymous
// namespace, so no code of another level links to it.
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/rope.h"

namespace sol::kernels {
namespace {

// The tables of one position split into even and odd elements: a rotated pair (x[2j], x[2j+1])
// reads c and s at index j of both halves, so a level that splits a slice's words into their
// even and odd values needs no permute, and computes x[i] c[i] + x[i ^ 1] s[i] with the scalar
// path's two operations in its order, bit for bit.
struct SplitTables {
  alignas(64) float c_even[256], c_odd[256], s_even[256], s_odd[256];
  SplitTables(const float* c, const float* s, int64_t d) {
    for (int64_t j = 0; j < d / 2; ++j) {
      c_even[j] = c[2 * j], c_odd[j] = c[2 * j + 1];
      s_even[j] = s[2 * j], s_odd[j] = s[2 * j + 1];
    }
  }
};

template <int L>
[[gnu::always_inline]] inline void prefetch_lines(const char* p) {
  for (int l = 0; l < L; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

// The slice `ahead` heads past head h of a token at x: in the token, else in the next token's
// heads (at next; none when next is null or the slice lies past them).
[[gnu::always_inline]] inline const char* slice_ahead(const char* x, const char* next, int64_t h, int64_t ahead,
                                                      int64_t heads, int64_t stride) {
  const int64_t a = h + ahead;
  if (a < heads) return x + a * stride;
  return next && a - heads < heads ? next + (a - heads) * stride : nullptr;
}

// The L2 look-ahead: the slices are short runs at a large stride, which the L2 streamer does not
// follow, and an L1 request for a line coming from memory holds one of the core's few L1 miss
// buffers until it arrives. Requesting the slice into L2 further ahead first turns the L1
// requests into L2 hits, which free their buffers early (docs/perf/layer-ops.md).
// Through asm volatile: GCC drops a loop whose body is only __builtin_prefetch.
[[gnu::always_inline]] inline void prefetch_l2(const char* p, int64_t bytes) {
  if (p)
    for (int64_t b = 0; b < bytes; b += 64) asm volatile("prefetcht1 (%0)" : : "r"(p + b));
}

// Head h's requests in the general head loop: the slice ahead2 heads ahead into L2 (none at 0),
// the one `ahead` heads ahead into L1, both running on into the next token's heads.
[[gnu::always_inline]] inline void request_ahead(const char* x, const char* next, int64_t h, int64_t heads,
                                                 int64_t stride, int64_t bytes, int64_t ahead, int64_t ahead2) {
  if (ahead2 > 0) prefetch_l2(slice_ahead(x, next, h, ahead2, heads, stride), bytes);
  if (const char* fetch = slice_ahead(x, next, h, ahead, heads, stride))
    for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(fetch + b, _MM_HINT_T0);
}

// One token in a level's general head loop: its slices, its position's tables (plain, and split
// up to split_d for a level's split kernel; 0: none), where its prefetches run on to.
struct TokenHeads {
  char* x;
  const float* c;
  const float* s;
  const char* next;
  SplitTables tables;
  TokenHeads(const RopeToken& t, int64_t split_d)
      : x(static_cast<char*>(t.x)), c(t.c), s(t.s), next(static_cast<const char*>(t.next)), tables(t.c, t.s, split_d) {}
  // Head h's slice, its requests (request_ahead) issued.
  [[gnu::always_inline]] char* requested(int64_t h, int64_t heads, int64_t stride, int64_t bytes, int64_t ahead,
                                         int64_t ahead2) const {
    request_ahead(x, next, h, heads, stride, bytes, ahead, ahead2);
    return x + h * stride;
  }
};

// One token of the whole-line kernel: its tables (a level's type, with kLines and
// rotate(char* slice) over that many lines of 32 bf16), its slices, where its prefetches run on to.
template <class Tables>
struct LineToken {
  Tables tables;
  char* x;
  const char* next;
  explicit LineToken(const RopeToken& t)
      : tables(SplitTables(t.c, t.s, 32 * Tables::kLines)),
        x(static_cast<char*>(t.x)),
        next(static_cast<const char*>(t.next)) {}
};

// The whole-line kernel's head loop, one token or two interleaved head by head (head h of the
// first, then of the second): request_ahead's requests with no test per head, in three runs of
// heads: while the L1 look-ahead is in this token, while it is in the next token's heads (when
// there is one), and past those; the L2 requests go beside them in each run.
template <class Tables, class... Tokens>
void rotate_tokens_lines(int64_t stride, int64_t heads, int64_t ahead, int64_t ahead2, const Tokens&... tok) {
  constexpr int L = Tables::kLines;
  auto l2 = [&](const LineToken<Tables>& t, int64_t h) {
    if (ahead2 > 0) prefetch_l2(slice_ahead(t.x, t.next, h, ahead2, heads, stride), 64 * L);
  };
  const int64_t in_token = std::max<int64_t>(0, heads - ahead);
  const int64_t in_next = std::clamp<int64_t>(2 * heads - ahead, in_token, heads);
  int64_t h = 0;
  for (; h < in_token; ++h)
    ([&] {
      l2(tok, h);
      prefetch_lines<L>(tok.x + (h + ahead) * stride);
      tok.tables.rotate(tok.x + h * stride);
    }(), ...);
  for (; h < in_next; ++h)
    ([&] {
      l2(tok, h);
      if (tok.next) prefetch_lines<L>(tok.next + (h + ahead - heads) * stride);  // the next token's head
      tok.tables.rotate(tok.x + h * stride);
    }(), ...);
  for (; h < heads; ++h)
    ([&] {
      l2(tok, h);
      tok.tables.rotate(tok.x + h * stride);
    }(), ...);
}

}  // namespace
}  // namespace sol::kernels
