// Ring attention with zig-zag sharding (include/sol/cp.h). The K/V shard travels as one
// contiguous buffer (k then v); two such buffers alternate between "in use" and "arriving".
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "sol/attention.h"
#include "sol/copy.h"
#include "sol/cp.h"
#include "sol/error.h"

namespace sol::cp {

namespace {

int64_t chunk_of(int local_chunk, int rank, int ranks) { return local_chunk == 0 ? rank : 2 * ranks - 1 - rank; }

void check_zigzag(const Tensor& full, const Tensor& shard, int rank, int ranks) {
  check(ranks >= 1 && rank >= 0 && rank < ranks, "cp zigzag", "rank ", rank, " outside 0..", ranks - 1);
  check(full.ndim() >= 2 && full.ndim() == shard.ndim() && full.dtype() == shard.dtype(), "cp zigzag",
        "full ", full.describe(), " and shard ", shard.describe(), " must have the same rank and dtype");
  check(full.shape(1) % (2 * ranks) == 0 && shard.shape(1) * ranks == full.shape(1), "cp zigzag", "full has ",
        full.shape(1), " tokens and the shard ", shard.shape(1), "; need S divisible by 2 x ", ranks,
        " and shard = S / ", ranks);
}

// o_acc, lse_acc (f32) merged with one partial result for query rows [row0, row0 + C).
void merge(float* o_acc, float* lse_acc, const Tensor& o_part, const float* lse_part, int64_t B, int64_t S2,
           int64_t C, int64_t H, int64_t Dv, int64_t row0) {
  const bool bf16 = o_part.dtype() == DType::bf16;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < C; ++i) {
        const float lp = lse_part[(b * H + h) * C + i];
        if (lp == -std::numeric_limits<float>::infinity()) continue;
        float& la = lse_acc[(b * H + h) * S2 + row0 + i];
        float* acc = o_acc + ((b * S2 + row0 + i) * H + h) * Dv;
        const int64_t part_at = ((b * C + i) * H + h) * Dv;
        const float m = std::max(la, lp);
        const float wa = la == -std::numeric_limits<float>::infinity() ? 0.f : std::exp(la - m);
        const float wp = std::exp(lp - m);
        const float sum = wa + wp;
        const float ca = wa / sum, cp = wp / sum;
        for (int64_t d = 0; d < Dv; ++d) {
          const float x = bf16 ? bf16_to_f32(o_part.data_as<uint16_t>()[part_at + d]) : o_part.data_as<float>()[part_at + d];
          acc[d] = acc[d] * ca + x * cp;
        }
        la = m + std::log(sum);
      }
}

}  // namespace

void zigzag_shard(const Tensor& full, const Tensor& shard, int rank, int ranks) {
  check_zigzag(full, shard, rank, ranks);
  const int64_t C = full.shape(1) / (2 * ranks);
  for (int c = 0; c < 2; ++c) {
    const int64_t at = chunk_of(c, rank, ranks) * C;
    copy(full.slice(1, at, at + C), shard.slice(1, c * C, (c + 1) * C));
  }
}

void zigzag_unshard(const Tensor& shard, const Tensor& full, int rank, int ranks) {
  check_zigzag(full, shard, rank, ranks);
  const int64_t C = full.shape(1) / (2 * ranks);
  for (int c = 0; c < 2; ++c) {
    const int64_t at = chunk_of(c, rank, ranks) * C;
    copy(shard.slice(1, c * C, (c + 1) * C), full.slice(1, at, at + C));
  }
}

void ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                    const comm::Group& group, const RingAttentionOptions& opt) {
  const char* op = "ring_attention";
  for (const Tensor* t : {&q, &k, &v, &o})
    check(t->ndim() == 4 && t->is_contiguous() && t->dtype() == q.dtype(), op,
          "q, k, v, o must be contiguous [B, S, H, D] tensors of one dtype, got ", t->describe());
  check(q.dtype() == DType::f32 || q.dtype() == DType::bf16, op, "dtype must be f32 or bf16, got ", dtype_name(q.dtype()));
  const int64_t B = q.shape(0), S2 = q.shape(1), H = q.shape(2), D = q.shape(3), Hkv = k.shape(2), Dv = v.shape(3);
  check(S2 % 2 == 0, op, "the local shard holds ", S2, " tokens; zig-zag needs an even count (two chunks)");
  check(k.shape(0) == B && k.shape(1) == S2 && k.shape(3) == D && v.shape(0) == B && v.shape(1) == S2 &&
            v.shape(2) == Hkv,
        op, "k ", k.shape_string(), " and v ", v.shape_string(), " do not match q ", q.shape_string());
  check(o.shape(0) == B && o.shape(1) == S2 && o.shape(2) == H && o.shape(3) == Dv, op, "o is ", o.shape_string(),
        " but must be [", B, ", ", S2, ", ", H, ", ", Dv, "]");
  const bool want_lse = lse.data() != nullptr && !lse.empty();
  if (want_lse)
    check(lse.dtype() == DType::f32 && lse.is_contiguous() && lse.ndim() == 3 && lse.shape(0) == B &&
              lse.shape(1) == H && lse.shape(2) == S2,
          op, "lse must be f32 [", B, ", ", H, ", ", S2, "], got ", lse.describe());
  const int n = group.size(), me = group.rank();
  const int64_t C = S2 / 2;
  const DType dt = q.dtype();
  const size_t k_bytes = size_t(k.nbytes()), kv_bytes = k_bytes + size_t(v.nbytes());

  std::vector<Buffer> kv;
  kv.emplace_back(kv_bytes);
  kv.emplace_back(kv_bytes);
  std::memcpy(kv[0].data(), k.data(), k_bytes);
  std::memcpy(static_cast<std::byte*>(kv[0].data()) + k_bytes, v.data(), size_t(v.nbytes()));
  Buffer o_acc(DType::f32, {B, S2, H, Dv}), lse_acc(DType::f32, {B, H, S2});
  Buffer o_part(dt, {B, C, H, Dv}), lse_part(DType::f32, {B, H, C});
  std::memset(o_acc.data(), 0, o_acc.bytes());
  std::fill_n(lse_acc.tensor().data_as<float>(), B * H * S2, -std::numeric_limits<float>::infinity());

  AttentionOptions full_opt, causal_opt;
  full_opt.softmax_scale = causal_opt.softmax_scale = opt.softmax_scale;
  causal_opt.causal = true;
  for (int step = 0; step < n; ++step) {
    const int src = ((me - step) % n + n) % n;
    Buffer& cur = kv[size_t(step % 2)];
    Buffer& next = kv[size_t((step + 1) % 2)];
    comm::Work work;
    if (step + 1 < n) {
      const comm::P2POp ops[] = {{comm::P2POp::send, Tensor(cur.data(), DType::u8, {int64_t(kv_bytes)}), (me + 1) % n},
                                 {comm::P2POp::recv, Tensor(next.data(), DType::u8, {int64_t(kv_bytes)}), (me + n - 1) % n}};
      work = group.batch_isend_irecv(ops);
      work.completed();
    }
    const Tensor k_cur(cur.data(), dt, k.shape());
    const Tensor v_cur(static_cast<std::byte*>(cur.data()) + k_bytes, dt, v.shape());
    for (int qa = 0; qa < 2; ++qa)
      for (int kb = 0; kb < 2; ++kb) {
        const int64_t qc = chunk_of(qa, me, n), kc = chunk_of(kb, src, n);
        if (opt.causal && qc < kc) continue;
        flash_attention(q.slice(1, qa * C, (qa + 1) * C), k_cur.slice(1, kb * C, (kb + 1) * C),
                        v_cur.slice(1, kb * C, (kb + 1) * C), o_part, lse_part,
                        opt.causal && qc == kc ? causal_opt : full_opt);
        if (step + 1 < n) work.completed();  // keep the next shard moving
        merge(o_acc.tensor().data_as<float>(), lse_acc.tensor().data_as<float>(), o_part,
              lse_part.tensor().data_as<float>(), B, S2, C, H, Dv, qa * C);
      }
    if (step + 1 < n) work.wait();
  }
  if (dt == DType::f32) copy(o_acc, o);
  else cast(o_acc, o);
  if (want_lse) copy(lse_acc, lse);
}

}  // namespace sol::cp
