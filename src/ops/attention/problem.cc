#include "ops/attention/problem.h"

#include <cmath>
#include <string>

#include "ops/common/validate.h"
#include "sol/error.h"

namespace sol::attention_detail {

namespace {

bool varlen_of(const char* op, const AttentionOptions& opt) {
  check((opt.cu_seqlens_q == nullptr) == (opt.cu_seqlens_k == nullptr), op,
        "cu_seqlens_q and cu_seqlens_k must be given together (varlen) or not at all");
  return opt.cu_seqlens_q != nullptr;
}

// cu_seqlens: i32 [B + 1], cu[0] = 0, non-decreasing, cu[B] = total tokens.
std::vector<int64_t> read_cu(const char* op, const char* name, const Tensor& cu, int64_t total, const char* total_of) {
  check(cu.dtype() == DType::i32, op, name, ".dtype = ", dtype_name(cu.dtype()), " but must be i32");
  check(cu.ndim() == 1 && cu.shape(0) >= 1, op, name, ".shape = ", shape_text(cu), " but must be [B + 1]");
  require_data(op, name, cu);
  std::vector<int64_t> v(size_t(cu.shape(0)));
  for (int64_t i = 0; i < cu.shape(0); ++i)
    v[size_t(i)] = *reinterpret_cast<const int32_t*>(cu.data_as<const char>() + i * cu.stride(0) * 4);
  check(v[0] == 0, op, name, "[0] = ", v[0], " but must be 0");
  for (size_t i = 1; i < v.size(); ++i)
    check(v[i] >= v[i - 1], op, name, "[", i, "] = ", v[i], " is less than ", name, "[", i - 1, "] = ", v[i - 1],
          " (offsets must not decrease)");
  check(v.back() == total, op, name, "[", v.size() - 1, "] = ", v.back(), " but ", total_of, " has ", total,
        " tokens");
  return v;
}

void require_dense_last(const char* op, const char* name, const Tensor& t) {
  check(t.ndim() == 0 || t.shape(-1) <= 1 || t.stride(-1) == 1, op, name,
        " must be dense in its last dimension, got strides of ", describe_text(t));
  require_data(op, name, t);
}

void require_dtype(const char* op, const char* name, const Tensor& t, DType want, const char* why) {
  check(t.dtype() == want, op, name, ".dtype = ", dtype_name(t.dtype()), " but ", why);
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t x : d) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
  return s + "]";
}

bool shape_is(const Tensor& t, std::initializer_list<int64_t> d) {
  if (t.ndim() != int(d.size())) return false;
  int i = 0;
  for (int64_t x : d)
    if (t.shape(i++) != x) return false;
  return true;
}

// Offsets of each sequence's first token; token / head strides for [B, S, H, D] or [T, H, D].
HeadRows rows_of(const Tensor& t, bool varlen, const std::vector<int64_t>& cu, size_t batch) {
  HeadRows r;
  r.base = t.data_as<char>();
  r.es = int64_t(dtype_size(t.dtype()));
  r.token_stride = t.stride(varlen ? 0 : 1);
  r.head_stride = t.stride(varlen ? 1 : 2);
  r.seq_offset.resize(batch);
  for (size_t b = 0; b < batch; ++b) r.seq_offset[b] = varlen ? cu[b] * t.stride(0) : int64_t(b) * t.stride(0);
  return r;
}

struct Layout {
  bool varlen = false;
  std::vector<int64_t> cu_q, cu_k;
  size_t batch = 0;
};

Layout layout_of(const char* op, const Tensor& q, const Tensor& k, const AttentionOptions& opt) {
  Layout l;
  l.varlen = varlen_of(op, opt);
  const int want = l.varlen ? 3 : 4;
  const char* form = l.varlen ? " but must be [total_q, Hq, Dqk] (varlen)" : " but must be [B, Sq, Hq, Dqk]";
  check(q.ndim() == want, op, "q.shape = ", shape_text(q), form);
  check(k.ndim() == want, op, "k.shape = ", shape_text(k),
        l.varlen ? " but must be [total_k, Hkv, Dqk] (varlen)" : " but must be [B, Skv, Hkv, Dqk]");
  if (l.varlen) {
    l.cu_q = read_cu(op, "cu_seqlens_q", *opt.cu_seqlens_q, q.shape(0), "q");
    l.cu_k = read_cu(op, "cu_seqlens_k", *opt.cu_seqlens_k, k.shape(0), "k");
    check(l.cu_q.size() == l.cu_k.size(), op, "cu_seqlens_q has ", l.cu_q.size(), " entries but cu_seqlens_k has ",
          l.cu_k.size(), " (both must be [B + 1])");
    l.batch = l.cu_q.size() - 1;
  } else {
    check(k.shape(0) == q.shape(0), op, "q.shape[0] = ", q.shape(0), " but k.shape[0] = ", k.shape(0),
          " (batch sizes must match)");
    l.batch = size_t(q.shape(0));
  }
  return l;
}

}  // namespace

double Problem::pairs_of_rows(const Sequence& s, bool query_rows, int64_t r0, int64_t r1) const {
  double n = 0;
  for (int64_t i = r0; i < r1; ++i) {
    const Range r = visible(s, query_rows, i);
    if (!r.empty()) n += double(r.hi - r.lo);
  }
  return n;
}

double Problem::visible_pairs() const {
  double n = 0;  // whole numbers far below 2^53: the sums are exact in any order
  for (const Sequence& s : seqs) n += pairs_of_rows(s, true, 0, s.sq);
  return n;
}

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                     const Tensor& lse, bool lse_required, const AttentionOptions& opt, Operands& rows) {
  const Layout l = layout_of(op, q, k, opt);
  const int hd = l.varlen ? 1 : 2;  // head dim index
  Problem p;
  p.dtype = q.dtype();
  check(p.dtype == DType::f32 || p.dtype == DType::bf16, op, "q.dtype = ", dtype_name(p.dtype),
        " but must be f32 or bf16");
  p.bf16 = p.dtype == DType::bf16;
  require_dtype(op, "k", k, p.dtype, "must match q.dtype");
  require_dtype(op, "v", v, p.dtype, "must match q.dtype");
  require_dtype(op, "o", o, p.dtype, "must match q.dtype");
  p.hq = q.shape(hd);
  p.hkv = k.shape(hd);
  p.dqk = q.shape(hd + 1);
  check(k.shape(hd + 1) == p.dqk, op, "q has head dim ", p.dqk, " but k has ", k.shape(hd + 1), " (Dqk must match)");
  check(v.ndim() == q.ndim(), op, "v.shape = ", shape_text(v), " but must have ", q.ndim(), " dims like k");
  p.dv = v.shape(hd + 1);
  for (int d = 0; d <= hd; ++d)
    check(v.shape(d) == k.shape(d), op, "v.shape = ", shape_text(v), " but k.shape = ", shape_text(k),
          " (all but the head dim must match)");
  check(p.hkv >= 1 && p.hq % p.hkv == 0, op, "q has ", p.hq, " heads but k has ", p.hkv,
        ": Hq must be a positive multiple of Hkv (GQA / MQA)");
  check(p.hq >= 1, op, "q has 0 heads");
  p.group = p.hq / p.hkv;
  for (auto [name, d] : {std::pair<const char*, int64_t>{"Dqk", p.dqk}, {"Dv", p.dv}})
    check(d >= 8 && d <= 256 && d % 8 == 0, op, name, " = ", d, " but must be a multiple of 8 in [8, 256]");

  const int64_t sq = l.varlen ? 0 : q.shape(1), skv = l.varlen ? 0 : k.shape(1);
  const int64_t lead = q.shape(0);
  const bool o_ok = l.varlen ? shape_is(o, {lead, p.hq, p.dv}) : shape_is(o, {lead, sq, p.hq, p.dv});
  check(o_ok, op, "o.shape = ", shape_text(o), " but must be ",
        l.varlen ? dims({lead, p.hq, p.dv}) : dims({lead, sq, p.hq, p.dv}));
  rows.has_lse = lse_required || lse.data() != nullptr || lse.ndim() != 0;
  if (rows.has_lse) {
    require_dtype(op, "lse", lse, DType::f32, "must be f32");
    const bool lse_ok = l.varlen ? shape_is(lse, {p.hq, lead}) : shape_is(lse, {lead, p.hq, sq});
    check(lse_ok, op, "lse.shape = ", shape_text(lse), " but must be ",
          l.varlen ? dims({p.hq, lead}) + " (varlen: [Hq, total_q])" : dims({lead, p.hq, sq}));
  }
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}})
    require_dense_last(op, name, *t);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    require_no_overlap(op, "o", o, name, *t);
    if (rows.has_lse) require_no_overlap(op, "lse", lse, name, *t);
  }
  if (rows.has_lse) {
    require_data(op, "lse", lse);
    require_no_overlap(op, "lse", lse, "o", o);
  }

  check(opt.window_left >= -1 && opt.window_right >= -1, op, "window = (", opt.window_left, ", ", opt.window_right,
        ") but each side must be >= 0 or -1 (unbounded)");
  p.window_left = opt.window_left;
  p.window_right = opt.causal ? 0 : opt.window_right;
  p.scale = opt.softmax_scale ? *opt.softmax_scale : float(1.0 / std::sqrt(double(p.dqk)));
  check(std::isfinite(p.scale) && p.scale > 0, op, "softmax_scale = ", p.scale, " but must be finite and > 0");

  p.seqs.resize(l.batch);
  for (size_t b = 0; b < l.batch; ++b)
    p.seqs[b] = l.varlen ? Sequence{l.cu_q[b + 1] - l.cu_q[b], l.cu_k[b + 1] - l.cu_k[b]} : Sequence{sq, skv};
  rows.q = rows_of(q, l.varlen, l.cu_q, l.batch);
  rows.k = rows_of(k, l.varlen, l.cu_k, l.batch);
  rows.v = rows_of(v, l.varlen, l.cu_k, l.batch);
  rows.o = rows_of(o, l.varlen, l.cu_q, l.batch);
  if (rows.has_lse) {
    HeadRows& r = rows.lse;
    r.base = lse.data_as<char>();
    r.es = 4;
    r.token_stride = lse.stride(l.varlen ? 1 : 2);
    r.head_stride = lse.stride(l.varlen ? 0 : 1);
    r.seq_offset.resize(l.batch);
    for (size_t b = 0; b < l.batch; ++b)
      r.seq_offset[b] = l.varlen ? l.cu_q[b] * lse.stride(1) : int64_t(b) * lse.stride(0);
  }
  return p;
}

HeadRows describe_like(const char* op, const char* name, const Tensor& t, const char* like_name,
                       const Tensor& like, const AttentionOptions& opt, const Problem& p, bool kv_tokens) {
  require_dtype(op, name, t, p.dtype, "must match q.dtype");
  require_same_shape(op, name, t, like_name, like);
  require_dense_last(op, name, t);
  const bool varlen = opt.cu_seqlens_q != nullptr;
  std::vector<int64_t> cu;
  if (varlen) {
    const Tensor& c = kv_tokens ? *opt.cu_seqlens_k : *opt.cu_seqlens_q;
    for (int64_t i = 0; i < c.shape(0); ++i)
      cu.push_back(*reinterpret_cast<const int32_t*>(c.data_as<const char>() + i * c.stride(0) * 4));
  }
  return rows_of(t, varlen, cu, p.seqs.size());
}

}  // namespace sol::attention_detail
