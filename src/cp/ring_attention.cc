// Ring attention forward (include/sol/cp.h). The K/V shard travels as one contiguous buffer
// (k then v); two such buffers alternate between "in use" and "arriving". The blocks of each
// step come from ring_plan.h; their partial outputs are merged in f32 by log-sum-exp.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cp/ring_plan.h"
#include "cp/variants.h"
#include "sol/attention.h"

namespace sol::cp::detail {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

// o_acc [B, S2, H, Dv], lse_acc [B, H, S2] (f32) merged with one partial result for query
// rows [row0, row0 + rows): o_part [B, rows, H, Dv], lse_part [B, H, rows].
//   lse = log(exp(lse_a) + exp(lse_b)),  o = o_a exp(lse_a - lse) + o_b exp(lse_b - lse)
void merge_partial(float* o_acc, float* lse_acc, const Tensor& o_part, const float* lse_part, const ShardDims& d,
                   int64_t row0) {
  const int64_t rows = o_part.shape(1), H = d.H, Dv = d.Dv;
  const bool bf16 = o_part.dtype() == DType::bf16;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const float lp = lse_part[(b * H + h) * rows + i];
        if (lp == kNegInf) continue;  // the block hid every key from this row
        float& la = lse_acc[(b * H + h) * d.S2 + row0 + i];
        float* acc = o_acc + ((b * d.S2 + row0 + i) * H + h) * Dv;
        const int64_t part_at = ((b * rows + i) * H + h) * Dv;
        const float m = std::max(la, lp);
        const float wa = la == kNegInf ? 0.f : std::exp(la - m);
        const float wp = std::exp(lp - m);
        const float sum = wa + wp;
        const float ca = wa / sum, cp = wp / sum;
        if (bf16) {
          const uint16_t* x = o_part.data_as<const uint16_t>() + part_at;
          for (int64_t e = 0; e < Dv; ++e) acc[e] = acc[e] * ca + std::bit_cast<float>(uint32_t(x[e]) << 16) * cp;
        } else {
          const float* x = o_part.data_as<const float>() + part_at;
          for (int64_t e = 0; e < Dv; ++e) acc[e] = acc[e] * ca + x[e] * cp;
        }
        la = m + std::log(sum);
      }
}

void ring_forward(const Forward& t, const ShardDims& d, const comm::Group& group, const RingAttentionOptions& opt) {
  const int n = group.size(), me = group.rank();
  const size_t k_bytes = size_t(t.k.nbytes()), kv_bytes = k_bytes + size_t(t.v.nbytes());

  Buffer kv[2] = {Buffer(kv_bytes), Buffer(kv_bytes)};
  timed(opt.stats, kComm, [&] {
    std::memcpy(kv[0].data(), t.k.data(), k_bytes);
    std::memcpy(static_cast<std::byte*>(kv[0].data()) + k_bytes, t.v.data(), size_t(t.v.nbytes()));
  });
  Buffer o_acc(DType::f32, {d.B, d.S2, d.H, d.Dv}), lse_acc(DType::f32, {d.B, d.H, d.S2});
  Buffer o_part(d.dtype, {d.B, d.S2, d.H, d.Dv}), lse_part(DType::f32, {d.B, d.H, d.S2});
  std::memset(o_acc.data(), 0, o_acc.bytes());
  std::fill_n(lse_acc.tensor().data_as<float>(), d.B * d.H * d.S2, kNegInf);

  for (int step = 0; step < n; ++step) {
    const int src = ((me - step) % n + n) % n;
    Buffer& cur = kv[step % 2];
    Buffer& next = kv[(step + 1) % 2];
    comm::Work work;
    const bool passing = step + 1 < n;
    if (passing)
      timed(opt.stats, kComm, [&] {
        const comm::P2POp ops[] = {
            {comm::P2POp::send, Tensor(cur.data(), DType::u8, {int64_t(kv_bytes)}), (me + 1) % n},
            {comm::P2POp::recv, Tensor(next.data(), DType::u8, {int64_t(kv_bytes)}), (me + n - 1) % n}};
        work = group.batch_isend_irecv(ops);
        work.completed();
      });
    const Tensor k_cur(cur.data(), d.dtype, t.k.shape());
    const Tensor v_cur(static_cast<std::byte*>(cur.data()) + k_bytes, d.dtype, t.v.shape());
    // Pieces only while a shard is in flight: the last step has nothing to poll for.
    const std::vector<RingBlock> blocks =
        passing ? ring_pieces(me, src, d.C, opt.causal) : ring_blocks(me, src, d.C, opt.causal);
    for (const RingBlock& blk : blocks) {
      const int64_t rows = blk.q1 - blk.q0;
      const Tensor o_rows(o_part.data(), d.dtype, {d.B, rows, d.H, d.Dv});
      const Tensor lse_rows(lse_part.data(), DType::f32, {d.B, d.H, rows});
      timed(opt.stats, kCompute, [&] {
        flash_attention(t.q.slice(1, blk.q0, blk.q1), k_cur.slice(1, blk.k0, blk.k1),
                        v_cur.slice(1, blk.k0, blk.k1), o_rows, lse_rows, block_options(opt, blk.causal));
      });
      if (passing) timed(opt.stats, kComm, [&] { work.completed(); });  // keep the next shard moving
      timed(opt.stats, kCompute, [&] {
        merge_partial(o_acc.tensor().data_as<float>(), lse_acc.tensor().data_as<float>(), o_rows,
              lse_rows.data_as<float>(), d, blk.q0);
      });
    }
    if (passing)
      timed(opt.stats, kComm, [&] {
        note_shard(opt.stats, work.completed());
        work.wait();
      });
  }
  timed(opt.stats, kCompute, [&] {
    store_f32(o_acc.tensor().data_as<float>(), t.o);
    if (d.has_lse) std::memcpy(t.lse.data(), lse_acc.data(), lse_acc.bytes());
  });
}

}  // namespace sol::cp::detail
