#pragma once
// One attention call, validated and described uniformly for fixed-length and varlen batches:
// a list of sequences, each with its row offsets into every tensor, and the mask rule.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sol/attention.h"
#include "sol/tensor.h"

namespace sol::attention_detail {

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The rows of one [.., tokens, heads, dim] tensor: the address of (sequence, token, head).
struct HeadRows {
  char* base = nullptr;
  int64_t es = 0;             // bytes per element
  int64_t token_stride = 0;   // elements
  int64_t head_stride = 0;    // elements
  std::vector<int64_t> seq_offset;  // elements, per sequence
  char* row(int64_t seq, int64_t token, int64_t head) const {
    return base + (seq_offset[size_t(seq)] + token * token_stride + head * head_stride) * es;
  }
};

struct Sequence {
  int64_t sq = 0, skv = 0;
};

// Keys [lo, hi) that one query sees, or queries [lo, hi) that see one key.
struct Range {
  int64_t lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
};

struct Problem {
  DType dtype = DType::f32;
  bool bf16 = false;
  int64_t hq = 0, hkv = 0, group = 1, dqk = 0, dv = 0;
  float scale = 1;
  int64_t window_left = -1, window_right = -1;  // resolved: causal -> right = 0
  std::vector<Sequence> seqs;

  // Bottom-right aligned window (FlashAttention >= 2.1), see sol/attention.h.
  Range keys_of_query(const Sequence& s, int64_t i) const {
    const int64_t diag = i + s.skv - s.sq;
    Range r{0, s.skv};
    if (window_left >= 0) r.lo = std::clamp<int64_t>(diag - window_left, 0, s.skv);
    if (window_right >= 0) r.hi = std::clamp<int64_t>(diag + window_right + 1, 0, s.skv);
    return r;
  }
  Range queries_of_key(const Sequence& s, int64_t j) const {
    const int64_t off = s.skv - s.sq;
    Range r{0, s.sq};
    if (window_right >= 0) r.lo = std::clamp<int64_t>(j - off - window_right, 0, s.sq);
    if (window_left >= 0) r.hi = std::clamp<int64_t>(j - off + window_left + 1, 0, s.sq);
    return r;
  }
  // The columns row i sees: the keys of query i (query_rows), else the queries that see key i.
  Range visible(const Sequence& s, bool query_rows, int64_t i) const {
    return query_rows ? keys_of_query(s, i) : queries_of_key(s, i);
  }
  // (query, key) pairs of rows [r0, r1) (queries or keys, as in visible()): one head.
  double pairs_of_rows(const Sequence& s, bool query_rows, int64_t r0, int64_t r1) const;
  // (query, key) pairs the mask lets through, summed over sequences (one head).
  double visible_pairs() const;
};

// Validates the forward's arguments (op names the caller in messages) and describes them.
// rows receive q, k, v, o in that order; lse_rows (token stride = the Sq index stride).
struct Operands {
  HeadRows q, k, v, o, lse;
  bool has_lse = false;
};
Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                     const Tensor& lse, bool lse_required, const AttentionOptions& opt, Operands& rows);

// Describes one more tensor shaped like `like` (d_o like o, dq like q, ...), checking it matches;
// kv_tokens: its tokens are keys (dk, dv), indexed by cu_seqlens_k when varlen.
HeadRows describe_like(const char* op, const char* name, const Tensor& t, const char* like_name,
                       const Tensor& like, const AttentionOptions& opt, const Problem& p, bool kv_tokens);

}  // namespace sol::attention_detail
