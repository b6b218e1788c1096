#include "ops/attention/reference.h"

#include <cmath>
#include <limits>
#include <utility>

namespace sol::reference {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
int64_t cu(const Tensor* t, int64_t i) { return int64_t(static_cast<const int32_t*>(t->data())[i]); }
bool is_varlen(const AttentionOptions& o) { return o.cu_seqlens_q != nullptr; }

// Scores of query row i against every key (-inf where masked); true when any key is seen.
bool scores(const AttentionInputs& in, int64_t b, int64_t i, const std::vector<double>& q,
            const std::vector<double>& k, std::vector<double>& s) {
  const int64_t skv = in.skv(b), d = in.dqk();
  bool any = false;
  s.assign(size_t(skv), -kInf);
  for (int64_t j = 0; j < skv; ++j) {
    if (!in.sees(b, i, j)) continue;
    double dot = 0;
    for (int64_t x = 0; x < d; ++x) dot += q[size_t(i * d + x)] * k[size_t(j * d + x)];
    s[size_t(j)] = dot * in.scale();
    any = true;
  }
  return any;
}

// Softmax of one score row: p (0 where masked) and lse; NaN scores make the whole row NaN.
double softmax(std::vector<double>& s) {
  double mx = -kInf;
  for (double x : s) mx = std::isnan(x) || std::isnan(mx) ? std::nan("") : std::max(mx, x);
  double sum = 0;
  for (double& x : s) {
    x = x == -kInf ? 0.0 : std::exp(x - mx);
    sum += x;
  }
  for (double& x : s) x /= sum;
  return mx + std::log(sum);
}

// dP = dO V^T of query row i (go: dO of the head, v: V of its kv head) into dp; returns
// delta = sum_j P dP (= dO . O).
double score_grads(const std::vector<double>& go, const std::vector<double>& v, int64_t i, int64_t skv, int64_t dv,
                   const std::vector<double>& p, std::vector<double>& dp) {
  double delta = 0;
  for (int64_t j = 0; j < skv; ++j) {
    dp[size_t(j)] = 0;
    for (int64_t x = 0; x < dv; ++x) dp[size_t(j)] += go[size_t(i * dv + x)] * v[size_t(j * dv + x)];
    delta += p[size_t(j)] * dp[size_t(j)];
  }
  return delta;
}
}  // namespace

int64_t AttentionInputs::batch() const { return is_varlen(opt) ? opt.cu_seqlens_q->shape(0) - 1 : q->shape(0); }
int64_t AttentionInputs::sq(int64_t b) const {
  return is_varlen(opt) ? cu(opt.cu_seqlens_q, b + 1) - cu(opt.cu_seqlens_q, b) : q->shape(1);
}
int64_t AttentionInputs::skv(int64_t b) const {
  return is_varlen(opt) ? cu(opt.cu_seqlens_k, b + 1) - cu(opt.cu_seqlens_k, b) : k->shape(1);
}
double AttentionInputs::scale() const {
  return opt.softmax_scale ? double(*opt.softmax_scale) : 1.0 / std::sqrt(double(dqk()));
}

bool AttentionInputs::sees(int64_t b, int64_t i, int64_t j) const {
  const int64_t diag = i + skv(b) - sq(b);  // bottom-right alignment
  if (opt.causal && j > diag) return false;
  if (!opt.causal && opt.window_right >= 0 && j > diag + opt.window_right) return false;
  if (opt.window_left >= 0 && j < diag - opt.window_left) return false;
  return true;
}

int64_t AttentionInputs::token_row(bool kv, int64_t b, int64_t token) const {
  if (is_varlen(opt)) return cu(kv ? opt.cu_seqlens_k : opt.cu_seqlens_q, b) + token;
  return b * (kv ? k->shape(1) : q->shape(1)) + token;
}

std::vector<double> AttentionInputs::head(const Tensor& t, bool kv, int64_t b, int64_t h) const {
  const int64_t n = kv ? skv(b) : sq(b), d = t.shape(-1);
  std::vector<double> m(size_t(n * d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t x = 0; x < d; ++x) {
      const void* p = is_varlen(opt) ? t.ptr({token_row(kv, b, i), h, x}) : t.ptr({b, i, h, x});
      m[size_t(i * d + x)] = load_as_double(p, t.dtype(), 0);
    }
  return m;
}

void attention_rows(const AttentionInputs& in, int64_t b, int64_t h, const std::vector<int64_t>& rows,
                    std::vector<double>& o, std::vector<double>& lse) {
  const int64_t kvh = h / (in.hq() / in.hkv()), dv = in.dv(), skv = in.skv(b);
  const std::vector<double> q = in.head(*in.q, false, b, h), k = in.head(*in.k, true, b, kvh),
                            v = in.head(*in.v, true, b, kvh);
  o.assign(rows.size() * size_t(dv), 0.0);
  lse.assign(rows.size(), -kInf);
  std::vector<double> p;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!scores(in, b, rows[r], q, k, p)) continue;
    lse[r] = softmax(p);
    for (int64_t j = 0; j < skv; ++j)
      for (int64_t x = 0; x < dv; ++x) o[r * size_t(dv) + size_t(x)] += p[size_t(j)] * v[size_t(j * dv + x)];
  }
}

void attention_forward(const AttentionInputs& in, const Tensor& o, const Tensor& lse) {
  const bool varlen = is_varlen(in.opt);
  std::vector<double> out, l;
  for (int64_t b = 0; b < in.batch(); ++b)
    for (int64_t h = 0; h < in.hq(); ++h) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < in.sq(b); ++i) rows.push_back(i);
      attention_rows(in, b, h, rows, out, l);
      for (int64_t i = 0; i < in.sq(b); ++i) {
        const int64_t t = in.token_row(false, b, i);
        for (int64_t x = 0; x < in.dv(); ++x)
          store_from_double(o.data(), o.dtype(), size_t((t * in.hq() + h) * in.dv() + x), out[size_t(i * in.dv() + x)]);
        const int64_t at = varlen ? h * o.shape(0) + t : (b * in.hq() + h) * in.sq(b) + i;
        store_from_double(lse.data(), lse.dtype(), size_t(at), l[size_t(i)]);
      }
    }
}

void attention_backward(const AttentionInputs& in, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv) {
  // Sums in fp64, stored once at the end; outputs are contiguous, so a flat index addresses them.
  std::vector<double> gq(size_t(dq.numel()), 0.0), gk(size_t(dk.numel()), 0.0), gv(size_t(dv.numel()), 0.0);
  const int64_t group = in.hq() / in.hkv(), dqk = in.dqk(), dvv = in.dv();
  for (int64_t b = 0; b < in.batch(); ++b)
    for (int64_t h = 0; h < in.hq(); ++h) {
      const int64_t kvh = h / group, skv = in.skv(b);
      const std::vector<double> q = in.head(*in.q, false, b, h), k = in.head(*in.k, true, b, kvh),
                                v = in.head(*in.v, true, b, kvh), go = in.head(d_o, false, b, h);
      std::vector<double> p, dp(static_cast<size_t>(skv));
      for (int64_t i = 0; i < in.sq(b); ++i) {
        if (!scores(in, b, i, q, k, p)) continue;  // the row sees nothing: no gradient
        softmax(p);
        // dS = P (dP - delta).
        const double delta = score_grads(go, v, i, skv, dvv, p, dp);
        const size_t qrow = size_t((in.token_row(false, b, i) * in.hq() + h) * dqk);
        for (int64_t j = 0; j < skv; ++j) {
          if (!in.sees(b, i, j)) continue;
          const double ds = p[size_t(j)] * (dp[size_t(j)] - delta) * in.scale();
          const size_t krow = size_t((in.token_row(true, b, j) * in.hkv() + kvh) * dqk);
          const size_t vrow = size_t((in.token_row(true, b, j) * in.hkv() + kvh) * dvv);
          for (int64_t x = 0; x < dvv; ++x) gv[vrow + size_t(x)] += p[size_t(j)] * go[size_t(i * dvv + x)];
          for (int64_t x = 0; x < dqk; ++x) {
            gq[qrow + size_t(x)] += ds * k[size_t(j * dqk + x)];
            gk[krow + size_t(x)] += ds * q[size_t(i * dqk + x)];
          }
        }
      }
    }
  for (auto [t, g] : {std::pair<const Tensor*, std::vector<double>*>{&dq, &gq}, {&dk, &gk}, {&dv, &gv}})
    for (size_t i = 0; i < g->size(); ++i) store_from_double(t->data(), t->dtype(), i, (*g)[i]);
}

void attention_dq_rows(const AttentionInputs& in, const Tensor& d_o, int64_t b, int64_t h,
                       const std::vector<int64_t>& rows, std::vector<double>& dq) {
  const int64_t kvh = h / (in.hq() / in.hkv()), dqk = in.dqk(), dvv = in.dv(), skv = in.skv(b);
  const std::vector<double> q = in.head(*in.q, false, b, h), k = in.head(*in.k, true, b, kvh),
                            v = in.head(*in.v, true, b, kvh), go = in.head(d_o, false, b, h);
  dq.assign(rows.size() * size_t(dqk), 0.0);
  std::vector<double> p, dp(static_cast<size_t>(skv));
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t i = rows[r];
    if (!scores(in, b, i, q, k, p)) continue;
    softmax(p);
    const double delta = score_grads(go, v, i, skv, dvv, p, dp);
    for (int64_t j = 0; j < skv; ++j) {
      if (!in.sees(b, i, j)) continue;
      const double ds = p[size_t(j)] * (dp[size_t(j)] - delta) * in.scale();
      for (int64_t x = 0; x < dqk; ++x) dq[r * size_t(dqk) + size_t(x)] += ds * k[size_t(j * dqk + x)];
    }
  }
}

}  // namespace sol::reference
