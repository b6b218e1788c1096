// The Ulysses variant (include/sol/cp.h): all_to_all from sequence shards to head shards, one
// single-rank attention on the whole sequence for this rank's heads, all_to_all back.
//
// Every tensor crossing is described by a Part: this rank's zig-zag shard (tokens on
// token_axis, heads on head_axis) and the whole-sequence tensor of this rank's heads. One
// exchange packs all parts of a direction into one byte block per peer, so q, k and v (or o
// and lse) travel in a single all_to_all.
#include <vector>

#include "cp/variants.h"
#include "sol/attention.h"
#include "sol/error.h"

namespace sol::cp::detail {

namespace {

struct Part {
  Tensor shard;  // [.., 2C tokens, .., H heads, ..] on this rank
  Tensor whole;  // [.., S tokens, .., H / n heads, ..]
  int token_axis, head_axis;
};

// The shard's shape with H / n heads: one peer's piece of it.
std::vector<int64_t> piece_shape(const Part& p, int n) {
  std::vector<int64_t> s(p.shard.shape().begin(), p.shard.shape().end());
  s[size_t(p.head_axis)] /= n;
  return s;
}

int64_t piece_bytes(const Part& p, int n) { return p.shard.nbytes() / n; }

int64_t block_bytes(const std::vector<Part>& parts, int n) {
  int64_t b = 0;
  for (const Part& p : parts) b += piece_bytes(p, n);
  return b;
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
  const int64_t block = block_bytes(parts, n);
  Buffer out(size_t(block * n)), in(size_t(block * n));
  std::byte* o = static_cast<std::byte*>(out.data());
  std::byte* i = static_cast<std::byte*>(in.data());
  for (int peer = 0; peer < n; ++peer) {
    int64_t at = block * peer;
    for (const Part& p : parts) {
      const int64_t h = p.shard.shape(p.head_axis) / n;
      copy_rows(p.shard.slice(p.head_axis, peer * h, (peer + 1) * h), Tensor(o + at, p.shard.dtype(), piece_shape(p, n)));
      at += piece_bytes(p, n);
    }
  }
  group.all_to_all(Tensor(o, DType::u8, {block * n}), Tensor(i, DType::u8, {block * n}));
  for (int r = 0; r < n; ++r) {
    int64_t at = block * r;
    for (const Part& p : parts) {
      piece_to_whole(Tensor(i + at, p.shard.dtype(), piece_shape(p, n)), p, r, n, C);
      at += piece_bytes(p, n);
    }
  }
}

// wholes -> shards: the tokens of rank r go back to it; piece p lands in heads of group p.
void heads_to_sequence(const std::vector<Part>& parts, const comm::Group& group, int64_t C) {
  const int n = group.size();
  const int64_t block = block_bytes(parts, n);
  Buffer out(size_t(block * n)), in(size_t(block * n));
  std::byte* o = static_cast<std::byte*>(out.data());
  std::byte* i = static_cast<std::byte*>(in.data());
  for (int r = 0; r < n; ++r) {
    int64_t at = block * r;
    for (const Part& p : parts) {
      whole_to_piece(p, Tensor(o + at, p.shard.dtype(), piece_shape(p, n)), r, n, C);
      at += piece_bytes(p, n);
    }
  }
  group.all_to_all(Tensor(o, DType::u8, {block * n}), Tensor(i, DType::u8, {block * n}));
  for (int peer = 0; peer < n; ++peer) {
    int64_t at = block * peer;
    for (const Part& p : parts) {
      const int64_t h = p.shard.shape(p.head_axis) / n;
      copy_rows(Tensor(i + at, p.shard.dtype(), piece_shape(p, n)), p.shard.slice(p.head_axis, peer * h, (peer + 1) * h));
      at += piece_bytes(p, n);
    }
  }
}

void check_heads(const char* op, const ShardDims& d, int n) {
  check(d.H % n == 0 && d.Hkv % n == 0, op, "variant ulysses shards heads over ", n, " ranks: H = ", d.H,
        " and Hkv = ", d.Hkv, " must both be divisible by ", n);
}

// Whole-sequence tensors of this rank's heads.
struct Wholes {
  int64_t S, Hh, Hkvh;
  Buffer q, k, v, o, lse;
  Wholes(const ShardDims& d, int n)
      : S(d.S2 * n), Hh(d.H / n), Hkvh(d.Hkv / n), q(d.dtype, {d.B, S, Hh, d.D}), k(d.dtype, {d.B, S, Hkvh, d.D}),
        v(d.dtype, {d.B, S, Hkvh, d.Dv}), o(d.dtype, {d.B, S, Hh, d.Dv}), lse(DType::f32, {d.B, Hh, S}) {}
};

Part token_major(const Tensor& shard, const Buffer& whole) { return {shard, whole.tensor(), 1, 2}; }
Part lse_part(const Tensor& shard, const Buffer& whole) { return {shard, whole.tensor(), 2, 1}; }

}  // namespace

void ulysses_forward(const Forward& t, const ShardDims& d, const comm::Group& group, const RingAttentionOptions& opt) {
  const int n = group.size();
  check_heads("ring_attention", d, n);
  Wholes w(d, n);
  timed(opt.stats, kComm, [&] {
    sequence_to_heads({token_major(t.q, w.q), token_major(t.k, w.k), token_major(t.v, w.v)}, group, d.C);
  });
  timed(opt.stats, kCompute, [&] { flash_attention(w.q, w.k, w.v, w.o, w.lse, block_options(opt, opt.causal)); });
  std::vector<Part> back = {token_major(t.o, w.o)};
  if (d.has_lse) back.push_back(lse_part(t.lse, w.lse));
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
    sequence_to_heads({token_major(t.q, w.q), token_major(t.k, w.k), token_major(t.v, w.v), token_major(t.o, w.o),
                       token_major(t.d_o, d_o), lse_part(t.lse, w.lse)},
                      group, d.C);
  });
  timed(opt.stats, kCompute, [&] {
    flash_attention_backward(w.q, w.k, w.v, w.o, w.lse, d_o, dq, dk, dv, block_options(opt, opt.causal));
  });
  timed(opt.stats, kComm, [&] {
    heads_to_sequence({token_major(t.dq, dq), token_major(t.dk, dk), token_major(t.dv, dv)}, group, d.C);
  });
}

}  // namespace sol::cp::detail
