// Ring attention backward (include/sol/cp.h).
//
// Each block is the single-rank flash_attention_backward with the merged forward's o and lse:
// P = exp(S - lse) is then the full-sequence probability and D = rowsum(dO * O) the
// full-sequence one, so the block's dq, dk, dv are exactly its share of the full gradients.
// dq stays home and is summed in f32. dk and dv belong to the K/V shard's owner: an f32
// accumulator travels with the shard around the ring (each rank adds its blocks' share and
// passes it on one step behind the shard), and after n steps it arrives back at its owner
// complete.
//
// Messages per step and neighbour, in the order both ends post them: the K/V shard of the
// next step (posted first, overlapping this step's blocks), then this step's dk/dv
// accumulator (posted after the blocks, overlapping the next step's first block).
#include <cstring>

#include "cp/ring_plan.h"
#include "cp/variants.h"
#include "sol/attention.h"

namespace sol::cp::detail {

namespace {

Tensor bytes_of(const Buffer& b) { return Tensor(b.data(), DType::u8, {int64_t(b.bytes())}); }

}  // namespace

void ring_backward(const Backward& t, const ShardDims& d, const comm::Group& group, const RingAttentionOptions& opt) {
  const int n = group.size(), me = group.rank();
  const int next_rank = (me + 1) % n, prev_rank = (me + n - 1) % n;
  const size_t k_bytes = size_t(t.k.nbytes()), kv_bytes = k_bytes + size_t(t.v.nbytes());
  const int64_t k_numel = t.k.numel(), kv_numel = k_numel + t.v.numel();

  Buffer kv[2] = {Buffer(kv_bytes), Buffer(kv_bytes)};
  timed(opt.stats, kComm, [&] {
    std::memcpy(kv[0].data(), t.k.data(), k_bytes);
    std::memcpy(static_cast<std::byte*>(kv[0].data()) + k_bytes, t.v.data(), size_t(t.v.nbytes()));
  });
  // dk then dv of the shard in hand, f32 so that n partial sums lose nothing to rounding.
  Buffer dkv[2] = {Buffer(DType::f32, {kv_numel}), Buffer(DType::f32, {kv_numel})};
  std::memset(dkv[0].data(), 0, dkv[0].bytes());
  Buffer dq_acc(DType::f32, {d.B, d.S2, d.H, d.D});
  std::memset(dq_acc.data(), 0, dq_acc.bytes());
  Buffer dq_part(d.dtype, {d.B, d.S2, d.H, d.D}), dk_part(d.dtype, {d.B, d.S2, d.Hkv, d.D}),
      dv_part(d.dtype, {d.B, d.S2, d.Hkv, d.Dv});

  comm::Work dkv_work;  // the accumulator of the previous step: out to next_rank, in from prev_rank
  bool dkv_pending = false;
  for (int step = 0; step < n; ++step) {
    const int src = ((me - step) % n + n) % n;
    Buffer& cur = kv[step % 2];
    comm::Work kv_work;
    const bool passing = step + 1 < n;
    if (passing)
      timed(opt.stats, kComm, [&] {
        const comm::P2POp ops[] = {{comm::P2POp::send, bytes_of(cur), next_rank},
                                   {comm::P2POp::recv, bytes_of(kv[(step + 1) % 2]), prev_rank}};
        kv_work = group.batch_isend_irecv(ops);
        kv_work.completed();
      });
    const Tensor k_cur(cur.data(), d.dtype, t.k.shape());
    const Tensor v_cur(static_cast<std::byte*>(cur.data()) + k_bytes, d.dtype, t.v.shape());
    float* dkv_acc = dkv[step % 2].tensor().data_as<float>();
    for (const RingBlock& blk : ring_pieces(me, src, d.C, opt.causal)) {
      BlockGrads g;
      timed(opt.stats, kCompute, [&] { g = block_backward(t, d, k_cur, v_cur, blk, opt, dq_part, dk_part, dv_part); });
      if (passing) timed(opt.stats, kComm, [&] { kv_work.completed(); });
      timed(opt.stats, kCompute, [&] { accumulate_rows(dq_acc.tensor().data_as<float>(), d.S2, blk.q0, g.dq); });
      if (dkv_pending) {  // this shard's accumulator, from the previous rank
        timed(opt.stats, kComm, [&] { dkv_work.wait(); });
        dkv_pending = false;
      }
      timed(opt.stats, kCompute, [&] {
        accumulate_rows(dkv_acc, d.S2, blk.k0, g.dk);
        accumulate_rows(dkv_acc + k_numel, d.S2, blk.k0, g.dv);
      });
    }
    if (n > 1)  // pass the accumulator on; after the last step it goes home
      timed(opt.stats, kComm, [&] {
        const comm::P2POp ops[] = {{comm::P2POp::send, bytes_of(dkv[step % 2]), next_rank},
                                   {comm::P2POp::recv, bytes_of(dkv[(step + 1) % 2]), prev_rank}};
        dkv_work = group.batch_isend_irecv(ops);
        dkv_work.completed();
        dkv_pending = true;
      });
    if (passing)
      timed(opt.stats, kComm, [&] {
        note_shard(opt.stats, kv_work.completed());
        kv_work.wait();
      });
  }
  if (dkv_pending) timed(opt.stats, kComm, [&] { dkv_work.wait(); });
  const float* mine = dkv[n > 1 ? n % 2 : 0].tensor().data_as<float>();
  timed(opt.stats, kCompute, [&] {
    store_f32(dq_acc.tensor().data_as<float>(), t.dq);
    store_f32(mine, t.dk);
    store_f32(mine + k_numel, t.dv);
  });
}

BlockGrads block_backward(const Backward& t, const ShardDims& d, const Tensor& k, const Tensor& v,
                          const RingBlock& blk, const RingAttentionOptions& opt, const Buffer& dq_part,
                          const Buffer& dk_part, const Buffer& dv_part) {
  const int64_t rows = blk.q1 - blk.q0, keys = blk.k1 - blk.k0;
  BlockGrads g{Tensor(dq_part.data(), d.dtype, {d.B, rows, d.H, d.D}),
               Tensor(dk_part.data(), d.dtype, {d.B, keys, d.Hkv, d.D}),
               Tensor(dv_part.data(), d.dtype, {d.B, keys, d.Hkv, d.Dv})};
  flash_attention_backward(t.q.slice(1, blk.q0, blk.q1), k.slice(1, blk.k0, blk.k1), v.slice(1, blk.k0, blk.k1),
                           t.o.slice(1, blk.q0, blk.q1), t.lse.slice(2, blk.q0, blk.q1),
                           t.d_o.slice(1, blk.q0, blk.q1), g.dq, g.dk, g.dv, block_options(opt, blk.causal));
  return g;
}

}  // namespace sol::cp::detail
