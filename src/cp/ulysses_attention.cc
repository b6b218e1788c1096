// The Ulysses variant (include/sol/cp.h): all_to_all from sequence shards to head shards, one
// single-rank attention on the whole sequence for this rank's heads, all_to_all back.
//
// Every tensor crossing is described by a Part: this rank's zig-zag shard (tokens on
// token_axis, heads on head_axis) and the whole-sequence tensor of this rank's heads. One
// exchange packs all parts of a direction into one byte block per peer, so q, k and v (or o
// and lse) travel in a single all_to_all.
//
// GQA with fewer K/V heads than ranks (Hkv < n, n % Hkv == 0): the n / Hkv ranks whose query
// heads share one K/V head each receive a copy of it, and their dk / dv (each the share of
// its own query heads) come back and are summed in f32 by the owner of the tokens.
#include <cstring>
#include <vector>

#include "cp/variants.h"
#include "sol/attention.h"
#include "sol/error.h"

namespace sol::cp::detail {

namespace {

struct Part {
  Tensor shard;  // [.., 2C tokens, .., H heads, ..] on this rank
  Tensor whole;  // [.., S tokens, .., `heads` heads, ..]
  int token_axis, head_axis;
  int64_t heads;      // heads each peer gets: H / n, or 1 for a K/V head shared by ranks
  int64_t share = 1;  // ranks that get the same heads (n / Hkv for shared K/V heads)
  int64_t first_head(int peer) const { return peer / share * heads; }
  Tensor heads_of(int peer) const { return shard.slice(head_axis, first_head(peer), first_head(peer) + heads); }
};

// The shard's shape with one peer's heads.
std::vector<int64_t> piece_shape(const Part& p) {
  std::vector<int64_t> s(p.shard.shape().begin(), p.shard.shape().end());
  s[size_t(p.head_axis)] = p.heads;
  return s;
}

int64_t piece_bytes(const Part& p) { return p.shard.nbytes() / p.shard.shape(p.head_axis) * p.heads; }

int64_t block_bytes(const std::vector<Part>& parts) {
  int64_t b = 0;
  for (const Part& p : parts) b += piece_bytes(p);
  return b;
}

// acc (f32, laid out like `like`: contiguous) += piece, over the elements of like's view `at`.
void add_piece(const Tensor& piece, float* acc, const Tensor& like, const Tensor& at) {
  const int64_t rows = piece.numel() / piece.shape(-1), len = piece.shape(-1);
  const int64_t base = (static_cast<const char*>(at.data()) - static_cast<const char*>(like.data())) /
                       int64_t(dtype_size(like.dtype()));
  const bool bf16 = piece.dtype() == DType::bf16;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, off = base;
    for (int d = at.ndim() - 2; d >= 0; --d) {
      off += rest % at.shape(d) * at.stride(d);
      rest /= at.shape(d);
    }
    float* dst = acc + off;
    if (bf16) {
      const uint16_t* src = piece.data_as<const uint16_t>() + r * len;
      for (int64_t e = 0; e < len; ++e) dst[e] += bf16_to_f32(src[e]);
    } else {
      const float* src = piece.data_as<const float>() + r * len;
      for (int64_t e = 0; e < len; ++e) dst[e] += src[e];
    }
  }
}

// Tokens of rank r's shard (a piece) <-> their places in the whole sequence.
void piece_to_whole(const Tensor& piece, const Part& p, int r, int n, int64_t C) {
  for (int c = 0; c < 2; ++c) {
    const int64_t g = chunk_of(c, r, n) * C;
    copy_rows(piece.slice(p.token_axis, c * C, (c + 1) * C), p.whole.slice(p.token_axis, g, g + C));
  }
}
void whole_to_piece(const Part& p, const Tensor& piece, int r, int n, int64_t C) {
  for (int c = 0; c < 2; ++c) {
    const int64_t g = chunk_of(c, r, n) * C;
    copy_rows(p.whole.slice(p.token_axis, g, g + C), piece.slice(p.token_axis, c * C, (c + 1) * C));
  }
}

// shards -> wholes: piece p of every shard (heads [p H/n, (p+1) H/n)) goes to rank p.
void sequence_to_heads(const std::vector<Part>& parts, const comm::Group& group, int64_t C) {
  const int n = group.size();
  const int64_t block = block_bytes(parts);
  Buffer out(size_t(block * n)), in(size_t(block * n));
  std::byte* o = static_cast<std::byte*>(out.data());
  std::byte* i = static_cast<std::byte*>(in.data());
  for (int peer = 0; peer < n; ++peer) {
    int64_t at = block * peer;
    for (const Part& p : parts) {
      copy_rows(p.heads_of(peer), Tensor(o + at, p.shard.dtype(), piece_shape(p)));
      at += piece_bytes(p);
    }
  }
  group.all_to_all(Tensor(o, DType::u8, {block * n}), Tensor(i, DType::u8, {block * n}));
  for (int r = 0; r < n; ++r) {
    int64_t at = block * r;
    for (const Part& p : parts) {
      piece_to_whole(Tensor(i + at, p.shard.dtype(), piece_shape(p)), p, r, n, C);
      at += piece_bytes(p);
    }
  }
}

// wholes -> shards: the tokens of rank r go back to it; piece p lands in the heads of peer p
// (summed over the peers that share them).
void heads_to_sequence(const std::vector<Part>& parts, const comm::Group& group, int64_t C) {
  const int n = group.size();
  const int64_t block = block_bytes(parts);
  Buffer out(size_t(block * n)), in(size_t(block * n));
  std::byte* o = static_cast<std::byte*>(out.data());
  std::byte* i = static_cast<std::byte*>(in.data());
  for (int r = 0; r < n; ++r) {
    int64_t at = block * r;
    for (const Part& p : parts) {
      whole_to_piece(p, Tensor(o + at, p.shard.dtype(), piece_shape(p)), r, n, C);
      at += piece_bytes(p);
    }
  }
  group.all_to_all(Tensor(o, DType::u8, {block * n}), Tensor(i, DType::u8, {block * n}));
  std::vector<Buffer> sums(parts.size());
  for (size_t k = 0; k < parts.size(); ++k)
    if (parts[k].share > 1) {
      sums[k] = Buffer(DType::f32, parts[k].shard.shape());
      std::memset(sums[k].data(), 0, sums[k].bytes());
    }
  for (int peer = 0; peer < n; ++peer) {
    int64_t at = block * peer;
    for (size_t k = 0; k < parts.size(); ++k) {
      const Part& p = parts[k];
      const Tensor piece(i + at, p.shard.dtype(), piece_shape(p));
      if (p.share > 1) add_piece(piece, sums[k].tensor().data_as<float>(), p.shard, p.heads_of(peer));
      else copy_rows(piece, p.heads_of(peer));
      at += piece_bytes(p);
    }
  }
  for (size_t k = 0; k < parts.size(); ++k)
    if (parts[k].share > 1) store_f32(sums[k].tensor().data_as<float>(), parts[k].shard);
}

void check_heads(const char* op, const ShardDims& d, int n) {
  check(d.H % n == 0 && (d.Hkv % n == 0 || n % d.Hkv == 0), op, "variant ulysses shards heads over ", n,
        " ranks: H = ", d.H, " must be divisible by ", n, " and Hkv = ", d.Hkv, " must divide or be divisible by ", n);
}

// Whole-sequence tensors of this rank's heads; K/V heads shared by `kv_share` ranks when Hkv < n.
struct Wholes {
  int64_t S, Hh, Hkvh, kv_share;
  Buffer q, k, v, o, lse;
  Wholes(const ShardDims& d, int n)
      : S(d.S2 * n), Hh(d.H / n), Hkvh(d.Hkv >= n ? d.Hkv / n : 1), kv_share(d.Hkv >= n ? 1 : n / d.Hkv),
        q(d.dtype, {d.B, S, Hh, d.D}), k(d.dtype, {d.B, S, Hkvh, d.D}), v(d.dtype, {d.B, S, Hkvh, d.Dv}),
        o(d.dtype, {d.B, S, Hh, d.Dv}), lse(DType::f32, {d.B, Hh, S}) {}
  Part query_heads(const Tensor& shard, const Buffer& whole) const { return {shard, whole.tensor(), 1, 2, Hh}; }
  Part kv_heads(const Tensor& shard, const Buffer& whole) const {
    return {shard, whole.tensor(), 1, 2, Hkvh, kv_share};
  }
  Part lse_heads(const Tensor& shard, const Buffer& whole) const { return {shard, whole.tensor(), 2, 1, Hh}; }
};

}  // namespace

void ulysses_forward(const Forward& t, const ShardDims& d, const comm::Group& group, const RingAttentionOptions& opt) {
  const int n = group.size();
  check_heads("ring_attention", d, n);
  Wholes w(d, n);
  timed(opt.stats, kComm, [&] {
    sequence_to_heads({w.query_heads(t.q, w.q), w.kv_heads(t.k, w.k), w.kv_heads(t.v, w.v)}, group, d.C);
  });
  timed(opt.stats, kCompute, [&] { flash_attention(w.q, w.k, w.v, w.o, w.lse, block_options(opt, opt.causal)); });
  std::vector<Part> back = {w.query_heads(t.o, w.o)};
  if (d.has_lse) back.push_back(w.lse_heads(t.lse, w.lse));
  timed(opt.stats, kComm, [&] { heads_to_sequence(back, group, d.C); });
}

void ulysses_backward(const Backward& t, const ShardDims& d, const comm::Group& group,
                      const RingAttentionOptions& opt) {
  const int n = group.size();
  check_heads("ring_attention_backward", d, n);
  Wholes w(d, n);
  Buffer d_o(d.dtype, {d.B, w.S, w.Hh, d.Dv}), dq(d.dtype, {d.B, w.S, w.Hh, d.D}),
      dk(d.dtype, {d.B, w.S, w.Hkvh, d.D}), dv(d.dtype, {d.B, w.S, w.Hkvh, d.Dv});
  timed(opt.stats, kComm, [&] {
    sequence_to_heads({w.query_heads(t.q, w.q), w.kv_heads(t.k, w.k), w.kv_heads(t.v, w.v), w.query_heads(t.o, w.o),
                       w.query_heads(t.d_o, d_o), w.lse_heads(t.lse, w.lse)},
                      group, d.C);
  });
  timed(opt.stats, kCompute, [&] {
    flash_attention_backward(w.q, w.k, w.v, w.o, w.lse, d_o, dq, dk, dv, block_options(opt, opt.causal));
  });
  timed(opt.stats, kComm, [&] {
    heads_to_sequence({w.query_heads(t.dq, dq), w.kv_heads(t.dk, dk), w.kv_heads(t.dv, dv)}, group, d.C);
  });
}

}  // namespace sol::cp::detail
