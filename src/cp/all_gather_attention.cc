// The all-gather-KV variant (include/sol/cp.h): every rank gathers the whole sequence's K and V
// (one all_gather of the packed k|v shards, then reordered from zig-zag into sequence order),
// and each local query chunk attends to the keys it may see in one single-rank call: causal,
// chunk g (global index) sees keys [0, (g + 1) C) with its queries bottom-right aligned at
// g C; not causal, the whole shard sees the whole sequence. Backward: the same calls under
// flash_attention_backward; dq is final at once, dk and dv of the whole sequence are summed
// in f32 and returned to their owners with one reduce_scatter.
#include <cstring>
#include <vector>

#include "cp/variants.h"
#include "sol/attention.h"
#include "sol/copy.h"

namespace sol::cp::detail {

namespace {

// K and V of the whole sequence, in sequence order.
struct GatheredKV {
  Buffer k, v;
};

GatheredKV gather_kv(const Tensor& k, const Tensor& v, const ShardDims& d, const comm::Group& group) {
  const int n = group.size();
  const int64_t k_bytes = k.nbytes(), kv_bytes = k_bytes + v.nbytes();
  Buffer all(size_t(kv_bytes * n));
  std::byte* base = static_cast<std::byte*>(all.data());
  std::byte* mine = base + kv_bytes * group.rank();
  std::memcpy(mine, k.data(), size_t(k_bytes));
  std::memcpy(mine + k_bytes, v.data(), size_t(v.nbytes()));
  group.all_gather(Tensor(mine, DType::u8, {kv_bytes}), Tensor(base, DType::u8, {kv_bytes * n}));
  GatheredKV g{Buffer(d.dtype, {d.B, d.S2 * n, d.Hkv, d.D}), Buffer(d.dtype, {d.B, d.S2 * n, d.Hkv, d.Dv})};
  for (int r = 0; r < n; ++r) {
    std::byte* block = base + kv_bytes * r;
    zigzag_unshard(Tensor(block, d.dtype, k.shape()), g.k, r, n);
    zigzag_unshard(Tensor(block + k_bytes, d.dtype, v.shape()), g.v, r, n);
  }
  return g;
}

// One single-rank call: local query rows [q0, q0 + rows) against keys [0, keys).
struct Block {
  int64_t q0, rows, keys;
  bool causal;
};

std::vector<Block> blocks_of(const ShardDims& d, int me, int n, bool causal) {
  if (!causal) return {{0, d.S2, d.S2 * n, false}};
  std::vector<Block> blocks;
  for (int c = 0; c < 2; ++c) blocks.push_back({c * d.C, d.C, (chunk_of(c, me, n) + 1) * d.C, true});
  return blocks;
}

}  // namespace

void all_gather_forward(const Forward& t, const ShardDims& d, const comm::Group& group,
                        const RingAttentionOptions& opt) {
  GatheredKV kv;
  timed(opt.stats, kComm, [&] { kv = gather_kv(t.k, t.v, d, group); });
  timed(opt.stats, kCompute, [&] {
    for (const Block& b : blocks_of(d, group.rank(), group.size(), opt.causal))
      flash_attention(t.q.slice(1, b.q0, b.q0 + b.rows), kv.k.tensor().slice(1, 0, b.keys),
                      kv.v.tensor().slice(1, 0, b.keys), t.o.slice(1, b.q0, b.q0 + b.rows),
                      d.has_lse ? t.lse.slice(2, b.q0, b.q0 + b.rows) : Tensor(), block_options(opt, b.causal));
  });
}

void all_gather_backward(const Backward& t, const ShardDims& d, const comm::Group& group,
                         const RingAttentionOptions& opt) {
  const int n = group.size(), me = group.rank();
  const int64_t S = d.S2 * n;
  GatheredKV kv;
  timed(opt.stats, kComm, [&] { kv = gather_kv(t.k, t.v, d, group); });
  const double start = now_seconds();
  Buffer dk_all(DType::f32, {d.B, S, d.Hkv, d.D}), dv_all(DType::f32, {d.B, S, d.Hkv, d.Dv});
  std::memset(dk_all.data(), 0, dk_all.bytes());
  std::memset(dv_all.data(), 0, dv_all.bytes());
  Buffer dk_part(d.dtype, {d.B, S, d.Hkv, d.D}), dv_part(d.dtype, {d.B, S, d.Hkv, d.Dv});
  for (const Block& b : blocks_of(d, me, n, opt.causal)) {
    const Tensor dk_keys(dk_part.data(), d.dtype, {d.B, b.keys, d.Hkv, d.D});
    const Tensor dv_keys(dv_part.data(), d.dtype, {d.B, b.keys, d.Hkv, d.Dv});
    const int64_t q1 = b.q0 + b.rows;
    flash_attention_backward(t.q.slice(1, b.q0, q1), kv.k.tensor().slice(1, 0, b.keys),
                             kv.v.tensor().slice(1, 0, b.keys), t.o.slice(1, b.q0, q1), t.lse.slice(2, b.q0, q1),
                             t.d_o.slice(1, b.q0, q1), t.dq.slice(1, b.q0, q1), dk_keys, dv_keys,
                             block_options(opt, b.causal));
    accumulate_rows(dk_all.tensor().data_as<float>(), S, 0, dk_keys);
    accumulate_rows(dv_all.tensor().data_as<float>(), S, 0, dv_keys);
  }
  if (opt.stats) opt.stats->compute_s += now_seconds() - start;
  // Block r of the reduce_scatter input: rank r's shards of dk then dv.
  const int64_t k_numel = t.k.numel(), kv_numel = k_numel + t.v.numel();
  Buffer blocks(DType::f32, {kv_numel * n}), summed(DType::f32, {kv_numel});
  timed(opt.stats, kComm, [&] {
    float* base = blocks.tensor().data_as<float>();
    for (int r = 0; r < n; ++r) {
      zigzag_shard(dk_all, Tensor(base + kv_numel * r, DType::f32, t.k.shape()), r, n);
      zigzag_shard(dv_all, Tensor(base + kv_numel * r + k_numel, DType::f32, t.v.shape()), r, n);
    }
    group.reduce_scatter(blocks, summed);
  });
  timed(opt.stats, kCompute, [&] {
    store_f32(summed.tensor().data_as<float>(), t.dk);
    store_f32(summed.tensor().data_as<float>() + k_numel, t.dv);
  });
}

}  // namespace sol::cp::detail
