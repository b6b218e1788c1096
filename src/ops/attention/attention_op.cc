// Registry entries `attention` (forward) and `attention-bwd` (backward; its time is the backward
// call alone, the forward that feeds it runs once while the case is built). Shapes: prefill at
// B = 1 (Llama-style MHA and GQA, DeepSeek's MLA prefill heads with Dqk 192 / Dv 128).
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "ops/attention/problem.h"
#include "ops/attention/reference.h"
#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/attention.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

struct AttnShape {
  int64_t batch, sq, skv, hq, hkv, dqk, dv;
  DType dtype;
  bool causal;
  int64_t window_left = -1, window_right = -1;
};

int64_t parse_window_side(const std::string& s, const std::string& all) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size() && v >= -1) return v;
  } catch (const std::exception&) {
  }
  fail("attention", "--window = '", all, "' but expected none or LEFT,RIGHT (each >= 0, or -1: unbounded)");
}

AttnShape parse_shape(const OpParams& p) {
  AttnShape s;
  s.batch = p.integer("batch");
  s.sq = p.integer("sq");
  s.skv = p.integer("skv") == 0 ? s.sq : p.integer("skv");
  s.hq = p.integer("hq");
  s.hkv = p.integer("hkv") == 0 ? s.hq : p.integer("hkv");
  s.dqk = p.integer("dqk");
  s.dv = p.integer("dv") == 0 ? s.dqk : p.integer("dv");
  s.dtype = p.dtype("dtype");
  s.causal = p.integer("causal") != 0;
  const std::string& w = p.text("window");
  if (w != "none") {
    const size_t comma = w.find(',');
    check(comma != std::string::npos, "attention", "--window = '", w, "' but expected none or LEFT,RIGHT");
    s.window_left = parse_window_side(w.substr(0, comma), w);
    s.window_right = parse_window_side(w.substr(comma + 1), w);
  }
  return s;
}

class AttentionCase : public OpCase {
 public:
  AttentionCase(const AttnShape& s, bool backward, int64_t cold_bytes) : s_(s), bwd_(backward) {
    opt_.causal = s.causal;
    opt_.window_left = s.window_left;
    opt_.window_right = s.window_right;
    // Cold mode needs many sets at distinct addresses, not distinct values: set 0 is filled
    // (and, for the backward, run forward once) and the others are copies of it.
    for (int i = 0; i < sets_for(int64_t(cost().bytes), cold_bytes); ++i) {
      Set set;
      set.q = Buffer(s.dtype, {s.batch, s.sq, s.hq, s.dqk});
      set.k = Buffer(s.dtype, {s.batch, s.skv, s.hkv, s.dqk});
      set.v = Buffer(s.dtype, {s.batch, s.skv, s.hkv, s.dv});
      set.o = Buffer(s.dtype, {s.batch, s.sq, s.hq, s.dv});
      set.lse = Buffer(DType::f32, {s.batch, s.hq, s.sq});
      if (backward) {
        set.d_o = Buffer(s.dtype, {s.batch, s.sq, s.hq, s.dv});
        set.dq = Buffer(s.dtype, {s.batch, s.sq, s.hq, s.dqk});
        set.dk = Buffer(s.dtype, {s.batch, s.skv, s.hkv, s.dqk});
        set.dv = Buffer(s.dtype, {s.batch, s.skv, s.hkv, s.dv});
      }
      if (i == 0) {
        fill_random(set.q, 1, 1.5);
        fill_random(set.k, 2, 1.5);
        fill_random(set.v, 3, 1.0);
        if (backward) {
          fill_random(set.d_o, 4, 1.0);
          flash_attention(set.q, set.k, set.v, set.o, set.lse, opt_);
        }
      } else {
        const Set& first = sets_[0];
        for (auto [dst, src] : {std::pair<const Buffer*, const Buffer*>{&set.q, &first.q}, {&set.k, &first.k},
                                {&set.v, &first.v}, {&set.o, &first.o}, {&set.lse, &first.lse}, {&set.d_o, &first.d_o}})
          if (src->bytes() > 0) std::memcpy(dst->data(), src->data(), src->bytes());
      }
      sets_.push_back(std::move(set));
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "b=" << s_.batch << ",sq=" << s_.sq;
    if (s_.skv != s_.sq) os << ",skv=" << s_.skv;
    os << ",h=" << s_.hq;
    if (s_.hkv != s_.hq) os << "/" << s_.hkv;
    os << ",d=" << s_.dqk;
    if (s_.dv != s_.dqk) os << "/" << s_.dv;
    if (s_.causal) os << ",causal";
    if (s_.window_left >= 0 || s_.window_right >= 0) os << ",window=" << s_.window_left << "," << s_.window_right;
    return os.str();
  }
  std::string dtype() const override { return std::string(dtype_name(s_.dtype)); }

  Cost cost() const override {
    attention_detail::Problem p;
    p.window_left = s_.window_left;
    p.window_right = s_.causal ? 0 : s_.window_right;
    p.seqs.assign(size_t(s_.batch), {s_.sq, s_.skv});
    // Useful work only: the two products over the pairs the mask lets through.
    const double fwd = 2.0 * p.visible_pairs() * double(s_.hq) * double(s_.dqk + s_.dv);
    const double es = double(dtype_size(s_.dtype));
    const double q = double(s_.batch * s_.sq * s_.hq * s_.dqk), kk = double(s_.batch * s_.skv * s_.hkv * s_.dqk);
    const double v = double(s_.batch * s_.skv * s_.hkv * s_.dv), o = double(s_.batch * s_.sq * s_.hq * s_.dv);
    const double lse = 4.0 * double(s_.batch * s_.hq * s_.sq);
    Cost c;
    c.flops = bwd_ ? 2.5 * fwd : fwd;
    // Backward reads q, k, v, o, do, lse and writes dq, dk, dv.
    c.bytes = bwd_ ? (2 * (q + kk + v) + 2 * o) * es + lse : (q + kk + v + o) * es + lse;
    c.compute = s_.dtype == DType::bf16 ? Unit::dot_bf16 : Unit::fma_f32;
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(sets_.size()); }
  void run(int i) override {
    Set& s = sets_[size_t(i)];
    if (bwd_) flash_attention_backward(s.q, s.k, s.v, s.o, s.lse, s.d_o, s.dq, s.dk, s.dv, opt_);
    else flash_attention(s.q, s.k, s.v, s.o, s.lse, opt_);
  }
  CheckResult check() override { return bwd_ ? check_backward() : check_forward(); }

 private:
  struct Set {
    Buffer q, k, v, o, lse, d_o, dq, dk, dv;
  };

  double tolerance() const { return s_.dtype == DType::bf16 ? 1e-2 : 2e-5; }
  reference::AttentionInputs inputs() const { return {&sets_[0].q.tensor(), &sets_[0].k.tensor(), &sets_[0].v.tensor(), opt_}; }

  // Row `at` of a sampled comparison (f32, `width` columns): the reference's values `want` into
  // ref, the op's output row (b, token, h) of t into got.
  void put_row(Buffer& got, Buffer& ref, int64_t at, int64_t width, const double* want, const Buffer& t, int64_t b,
               int64_t token, int64_t h) const {
    for (int64_t d = 0; d < width; ++d) {
      store_from_double(ref.data(), DType::f32, size_t(at * width + d), want[d]);
      store_from_double(got.data(), DType::f32, size_t(at * width + d),
                        load_as_double(t.tensor().ptr({b, token, h, d}), s_.dtype, 0));
    }
  }

  // Large shapes compare a sample of rows (first, last and 6 between, of 3 heads of the first
  // and last sequence): an fp64 reference of all of S = 4096, 32 heads would take minutes.
  CheckResult check_forward() {
    Set& s = sets_[0];
    poison(s.o);
    poison(s.lse);
    run(0);
    const bool all = double(s_.batch * s_.hq) * double(s_.sq) * double(s_.skv) * double(s_.dqk) < 3e8;
    std::vector<std::pair<int64_t, int64_t>> heads;  // (b, h)
    for (int64_t b = 0; b < s_.batch; ++b)
      for (int64_t h = 0; h < s_.hq; ++h)
        if (all || ((b == 0 || b == s_.batch - 1) && (h == 0 || h == s_.hq / 2 || h == s_.hq - 1)))
          heads.push_back({b, h});
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < s_.sq; ++i)
      if (all || s_.sq <= 8) rows.push_back(i);
    if (rows.empty())
      for (int64_t k = 0; k < 8; ++k) rows.push_back(k * (s_.sq - 1) / 7);
    const int64_t n = int64_t(heads.size() * rows.size());
    Buffer got_o(DType::f32, {n, s_.dv}), ref_o(DType::f32, {n, s_.dv}), got_l(DType::f32, {n}), ref_l(DType::f32, {n});
    const auto in = inputs();
    int64_t at = 0;
    std::vector<double> o, l;
    for (auto [b, h] : heads) {
      reference::attention_rows(in, b, h, rows, o, l);
      for (size_t r = 0; r < rows.size(); ++r, ++at) {
        put_row(got_o, ref_o, at, s_.dv, o.data() + r * size_t(s_.dv), s.o, b, rows[r], h);
        store_from_double(ref_l.data(), DType::f32, size_t(at), l[r]);
        store_from_double(got_l.data(), DType::f32, size_t(at), load_as_double(s.lse.tensor().ptr({b, h, rows[r]}), DType::f32, 0));
      }
    }
    CheckResult r = compare_relative(got_o, ref_o, tolerance());
    CheckResult rl = compare_relative(got_l, ref_l, tolerance());
    std::ostringstream os;
    if (!all) os << n << " sampled rows; ";
    os << "o error " << r.error << ", lse error " << rl.error;
    if (!r.pass) os << "; o: " << r.detail;
    if (!rl.pass) os << "; lse: " << rl.detail;
    r.pass = r.pass && rl.pass;
    r.error = std::max(r.error, rl.error);
    r.detail = os.str();
    return r;
  }

  CheckResult check_backward() {
    Set& s = sets_[0];
    for (const Buffer* b : {&s.dq, &s.dk, &s.dv}) poison(*b);
    run(0);
    // dk and dv of one key need every query row of its heads: an fp64 reference of the whole
    // backward at S = 4096 would take many minutes. Large shapes check sampled rows of dq only,
    // and say so.
    if (double(s_.batch * s_.hq) * double(s_.sq) * double(s_.skv) * double(s_.dqk) >= 3e8) return check_dq_sampled();
    Buffer rq(DType::f32, s.dq.tensor().shape()), rk(DType::f32, s.dk.tensor().shape()), rv(DType::f32, s.dv.tensor().shape());
    reference::attention_backward(inputs(), s.d_o, rq, rk, rv);
    CheckResult worst{true, 0, tolerance(), ""};
    std::ostringstream os;
    for (auto [name, got, ref] : {std::tuple<const char*, Buffer*, Buffer*>{"dq", &s.dq, &rq}, {"dk", &s.dk, &rk}, {"dv", &s.dv, &rv}}) {
      CheckResult r = compare_relative(*got, *ref, tolerance());
      os << (os.tellp() ? ", " : "") << name << " error " << r.error;
      if (!r.pass) os << " (" << r.detail << ")";
      worst.pass = worst.pass && r.pass;
      worst.error = std::max(worst.error, r.error);
    }
    worst.detail = os.str();
    return worst;
  }

  CheckResult check_dq_sampled() {
    Set& s = sets_[0];
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < 8; ++k) rows.push_back(k * (s_.sq - 1) / 7);
    const int64_t heads[] = {0, s_.hq / 2, s_.hq - 1};
    const int64_t n = int64_t(3 * rows.size());
    Buffer got(DType::f32, {n, s_.dqk}), ref(DType::f32, {n, s_.dqk});
    std::vector<double> dq;
    int64_t at = 0;
    for (int64_t h : heads) {
      reference::attention_dq_rows(inputs(), s.d_o, 0, h, rows, dq);
      for (size_t r = 0; r < rows.size(); ++r, ++at)
        put_row(got, ref, at, s_.dqk, dq.data() + r * size_t(s_.dqk), s.dq, 0, rows[r], h);
    }
    CheckResult r = compare_relative(got, ref, tolerance());
    r.detail = std::to_string(n) + " sampled rows of dq (dk, dv not checked at this size): error " +
               std::to_string(r.error) + (r.pass ? "" : "; " + r.detail);
    return r;
  }

  AttnShape s_;
  bool bwd_;
  AttentionOptions opt_;
  std::vector<Set> sets_;
};

std::vector<ParamSpec> attention_params() {
  return {
      {"batch", "sequences", "1", ParamSpec::size},
      {"sq", "query tokens per sequence", "2048", ParamSpec::size},
      {"skv", "key tokens per sequence (0: = sq)", "0", ParamSpec::size},
      {"hq", "query heads", "32", ParamSpec::size},
      {"hkv", "key/value heads (0: = hq; GQA when fewer)", "0", ParamSpec::size},
      {"dqk", "head dim of q and k", "128", ParamSpec::size},
      {"dv", "head dim of v (0: = dqk)", "0", ParamSpec::size},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      {"causal", "1: causal mask (bottom-right aligned)", "0", ParamSpec::integer},
      {"window", "none or LEFT,RIGHT (flash-attn window_size; -1 unbounded)", "none", ParamSpec::text},
  };
}

using Case = std::map<std::string, std::string>;

}  // namespace

void register_attention_ops() {
  // Prefill shapes of issue 4. The report runs the cases marked for it (small: the report's
  // whole table runs at 1 and 2 threads); `sol bench attention` runs them all.
  const Case s512{{"sq", "512"}, {"hq", "16"}}, s2048_causal{{"sq", "2048"}, {"hq", "16"}, {"causal", "1"}};
  OpInfo fwd;
  fwd.name = "attention";
  fwd.summary = "flash attention forward (online softmax; GQA, causal, sliding window, varlen via the API)";
  fwd.params = attention_params();
  fwd.bench_table = {s512,
                     {{"sq", "512"}, {"hq", "16"}, {"causal", "1"}},
                     {{"sq", "2048"}, {"hq", "16"}},
                     s2048_causal,
                     {{"sq", "2048"}, {"causal", "1"}},
                     {{"sq", "2048"}, {"hkv", "8"}, {"causal", "1"}},
                     {{"sq", "4096"}},
                     {{"sq", "4096"}, {"causal", "1"}},
                     {{"sq", "4096"}, {"hkv", "8"}, {"causal", "1"}},
                     {{"sq", "4096"}, {"hq", "16"}, {"dqk", "192"}, {"dv", "128"}, {"causal", "1"}}};
  fwd.report_table = {s512, s2048_causal};
  fwd.check_table = {
      {{"sq", "1"}, {"skv", "1"}, {"hq", "1"}, {"dqk", "64"}},
      {{"sq", "17"}, {"skv", "33"}, {"hq", "4"}, {"hkv", "2"}, {"dqk", "64"}, {"causal", "1"}, {"dtype", "f32"}},
      {{"sq", "40"}, {"skv", "17"}, {"hq", "2"}, {"dqk", "128"}, {"causal", "1"}},
      {{"sq", "100"}, {"skv", "130"}, {"hq", "3"}, {"dqk", "192"}, {"dv", "128"}, {"window", "20,5"}},
      {{"batch", "2"}, {"sq", "70"}, {"hq", "8"}, {"hkv", "1"}, {"dqk", "256"}, {"dv", "256"}, {"causal", "1"},
       {"window", "33,0"}, {"dtype", "f32"}},
  };
  fwd.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<AttentionCase>(parse_shape(p), false, cold_bytes);
  };
  register_op(std::move(fwd));

  OpInfo bwd;
  bwd.name = "attention-bwd";
  bwd.summary = "flash attention backward: dq, dk, dv from the saved lse (deterministic for any thread count)";
  bwd.params = attention_params();
  // The report's backward case stays small: its check runs the fp64 reference over every row.
  const Case b512{{"sq", "512"}, {"hq", "4"}, {"causal", "1"}};
  bwd.bench_table = {b512,
                     {{"sq", "2048"}, {"hq", "16"}},
                     {{"sq", "2048"}, {"hq", "16"}, {"causal", "1"}},
                     {{"sq", "4096"}},
                     {{"sq", "4096"}, {"causal", "1"}}};
  bwd.report_table = {b512};
  bwd.check_table = {
      {{"sq", "1"}, {"skv", "1"}, {"hq", "1"}, {"dqk", "64"}},
      {{"sq", "17"}, {"skv", "33"}, {"hq", "4"}, {"hkv", "2"}, {"dqk", "64"}, {"causal", "1"}, {"dtype", "f32"}},
      {{"sq", "40"}, {"skv", "17"}, {"hq", "2"}, {"dqk", "128"}, {"causal", "1"}},
      {{"sq", "77"}, {"skv", "130"}, {"hq", "3"}, {"dqk", "192"}, {"dv", "128"}, {"window", "20,5"}},
  };
  bwd.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<AttentionCase>(parse_shape(p), true, cold_bytes);
  };
  register_op(std::move(bwd));
}

}  // namespace sol
