// Zig-zag sharding, shard validation and f32 accumulation for the context-parallel variants.
#include "cp/shard_layout.h"

#include <bit>
#include <cstring>

#include "ops/common/validate.h"
#include "sol/copy.h"
#include "sol/error.h"

namespace sol::cp {

void detail::copy_rows(const Tensor& src, const Tensor& dst) {
  const int nd = src.ndim();
  bool same = nd == dst.ndim() && src.dtype() == dst.dtype();
  for (int d = 0; same && d < nd; ++d) same = src.shape(d) == dst.shape(d);
  check(same, "cp copy_rows", "src ", describe_text(src), " and dst ", describe_text(dst), " must have one shape and dtype");
  if (src.empty()) return;
  // Dims [inner, nd) are contiguous in both views: copied as one run of `run` elements.
  int inner = nd;
  int64_t run = 1;
  while (inner > 0 && src.stride(inner - 1) == run && dst.stride(inner - 1) == run) run *= src.shape(--inner);
  const int64_t es = int64_t(dtype_size(src.dtype())), runs = src.numel() / run;
  for (int64_t r = 0; r < runs; ++r) {
    int64_t rest = r, so = 0, dof = 0;
    for (int d = inner - 1; d >= 0; --d) {
      const int64_t i = rest % src.shape(d);
      rest /= src.shape(d);
      so += i * src.stride(d);
      dof += i * dst.stride(d);
    }
    std::memcpy(dst.data_as<char>() + dof * es, src.data_as<const char>() + so * es, size_t(run * es));
  }
}

namespace {

void check_zigzag(const Tensor& full, const Tensor& shard, int rank, int ranks) {
  check(ranks >= 1 && rank >= 0 && rank < ranks, "cp zigzag", "rank ", rank, " outside 0..", ranks - 1);
  check(full.ndim() >= 2 && full.ndim() == shard.ndim() && full.dtype() == shard.dtype(), "cp zigzag",
        "full ", describe_text(full), " and shard ", describe_text(shard), " must have the same rank and dtype");
  check(full.shape(1) % (2 * ranks) == 0 && shard.shape(1) * ranks == full.shape(1), "cp zigzag", "full has ",
        full.shape(1), " tokens and the shard ", shard.shape(1), "; need S divisible by 2 x ", ranks,
        " and shard = S / ", ranks);
  require_no_overlap("cp zigzag", "full", full, "shard", shard);
}

}  // namespace

void zigzag_shard(const Tensor& full, const Tensor& shard, int rank, int ranks) {
  check_zigzag(full, shard, rank, ranks);
  const int64_t C = full.shape(1) / (2 * ranks);
  for (int c = 0; c < 2; ++c) {
    const int64_t at = detail::chunk_of(c, rank, ranks) * C;
    detail::copy_rows(full.slice(1, at, at + C), shard.slice(1, c * C, (c + 1) * C));
  }
}

void zigzag_unshard(const Tensor& shard, const Tensor& full, int rank, int ranks) {
  check_zigzag(full, shard, rank, ranks);
  const int64_t C = full.shape(1) / (2 * ranks);
  for (int c = 0; c < 2; ++c) {
    const int64_t at = detail::chunk_of(c, rank, ranks) * C;
    detail::copy_rows(shard.slice(1, c * C, (c + 1) * C), full.slice(1, at, at + C));
  }
}

namespace detail {

ShardDims check_shards(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                       const Tensor& lse, bool lse_required) {
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}})
    check(t->ndim() == 4 && t->is_contiguous() && t->dtype() == q.dtype(), op, name,
          " must be a contiguous [B, S, H, D] tensor of q's dtype, got ", describe_text(*t));
  check(q.dtype() == DType::f32 || q.dtype() == DType::bf16, op, "dtype must be f32 or bf16, got ",
        dtype_name(q.dtype()));
  ShardDims d;
  d.dtype = q.dtype();
  d.B = q.shape(0);
  d.S2 = q.shape(1);
  d.H = q.shape(2);
  d.D = q.shape(3);
  d.Hkv = k.shape(2);
  d.Dv = v.shape(3);
  d.C = d.S2 / 2;
  check(d.S2 % 2 == 0, op, "the local shard holds ", d.S2, " tokens; zig-zag needs an even count (two chunks)");
  check(k.shape(0) == d.B && k.shape(1) == d.S2 && k.shape(3) == d.D && v.shape(0) == d.B && v.shape(1) == d.S2 &&
            v.shape(2) == d.Hkv,
        op, "k ", shape_text(k), " and v ", shape_text(v), " do not match q ", shape_text(q));
  check(d.Hkv >= 1 && d.H % d.Hkv == 0, op, "q has ", d.H, " heads but k has ", d.Hkv,
        ": H must be a positive multiple of Hkv (GQA / MQA)");
  check(o.shape(0) == d.B && o.shape(1) == d.S2 && o.shape(2) == d.H && o.shape(3) == d.Dv, op, "o is ",
        shape_text(o), " but must be [", d.B, ", ", d.S2, ", ", d.H, ", ", d.Dv, "]");
  d.has_lse = lse.data() != nullptr && !lse.empty();
  check(d.has_lse || !lse_required, op, "lse (the forward's log-sum-exp) is required");
  if (d.has_lse)
    check(lse.dtype() == DType::f32 && lse.is_contiguous() && lse.ndim() == 3 && lse.shape(0) == d.B &&
              lse.shape(1) == d.H && lse.shape(2) == d.S2,
          op, "lse must be f32 [", d.B, ", ", d.H, ", ", d.S2, "], got ", describe_text(lse));
  return d;
}

void check_grads(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                 const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const std::pair<const char*, const Tensor*> pairs[][2] = {
      {{"d_o", &d_o}, {"o", &o}}, {{"dq", &dq}, {"q", &q}}, {{"dk", &dk}, {"k", &k}}, {{"dv", &dv}, {"v", &v}}};
  for (const auto& p : pairs) {
    const Tensor& t = *p[0].second;
    const Tensor& like = *p[1].second;
    bool same = t.ndim() == like.ndim() && t.dtype() == like.dtype() && t.is_contiguous();
    for (int i = 0; same && i < t.ndim(); ++i) same = t.shape(i) == like.shape(i);
    check(same, op, p[0].first, " must be contiguous and shaped like ", p[1].first, " (", describe_text(like),
          "), got ", describe_text(t));
  }
}

AttentionOptions block_options(const RingAttentionOptions& opt, bool causal) {
  AttentionOptions a;
  a.causal = causal;
  a.softmax_scale = opt.softmax_scale;
  return a;
}

void accumulate_rows(float* acc, int64_t S_acc, int64_t row0, const Tensor& part) {
  const int64_t B = part.shape(0), rows = part.shape(1), row = part.shape(2) * part.shape(3);
  const bool bf16 = part.dtype() == DType::bf16;
  for (int64_t b = 0; b < B; ++b) {
    float* dst = acc + (b * S_acc + row0) * row;
    const int64_t n = rows * row, from = b * rows * row;
    if (bf16) {
      const uint16_t* src = part.data_as<const uint16_t>() + from;
      for (int64_t i = 0; i < n; ++i) dst[i] += std::bit_cast<float>(uint32_t(src[i]) << 16);
    } else {
      const float* src = part.data_as<const float>() + from;
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    }
  }
}

void store_f32(const float* src, const Tensor& dst) {
  const Tensor from(const_cast<float*>(src), DType::f32, dst.shape());
  if (dst.dtype() == DType::f32) copy(from, dst);
  else cast(from, dst);
}

}  // namespace detail
}  // namespace sol::cp
