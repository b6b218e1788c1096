// Registry entry for mla-decode-absorbed: one MLA layer's absorbed decode over a dense latent
// cache (DeepSeek-V3's widths by default, any widths by parameter); cost, and the check against
// the fp64 reference.
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ops/attention/mla_absorbed_reference.h"
#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/dtype.h"
#include "sol/error.h"
#include "sol/mla_absorbed.h"
#include "sol/registry.h"

namespace sol {

namespace {

struct AbsorbedShape {
  int64_t batch, seqlen, heads, nope, rope, latent, v;
  DType dtype;
  int64_t dq() const { return nope + rope; }
  int64_t dk() const { return latent + rope; }
  // What the op reads: q, each sequence's L cached rows (the spare rows are not read) and every
  // head's two weight matrices, once each.
  double bytes_read() const {
    const double e = double(dtype_size(dtype)), b = double(batch), h = double(heads);
    return e * (b * h * double(dq()) + b * double(seqlen * dk()) + h * double(dq() * dk() + latent * v));
  }
};

AbsorbedShape absorbed_shape(const OpParams& p) {
  AbsorbedShape s;
  s.batch = p.integer("batch");
  s.seqlen = p.integer("seqlen");
  s.heads = p.integer("heads");
  s.nope = p.integer("nope");
  s.rope = p.integer("rope");
  s.latent = p.integer("latent");
  s.v = p.integer("v");
  s.dtype = p.dtype("dtype");
  sol::check(s.batch >= 0 && s.seqlen >= 0 && s.heads >= 1 && s.nope >= 0 && s.rope >= 0 && s.latent >= 1 &&
                 s.v >= 1 && s.dq() >= 1,
             "mla-decode-absorbed", "batch, seqlen, nope, rope >= 0 and heads, latent, v, nope + rope >= 1 required");
  sol::check(s.dtype == DType::bf16 || s.dtype == DType::f32, "mla-decode-absorbed", "--dtype = ",
             dtype_name(s.dtype), " but must be bf16 or f32");
  return s;
}

Cost absorbed_cost(const AbsorbedShape& s) {
  const double b = double(s.batch), h = double(s.heads), l = double(s.seqlen);
  Cost c;
  c.flops = 2 * b * h * (double(s.dq() * s.dk()) + l * double(s.dk() + s.latent) + double(s.latent * s.v));
  c.bytes = s.bytes_read() + b * h * double(s.v) * double(dtype_size(s.dtype));
  // Decode products have few rows (B per head, H per sequence): the vector dot unit, not AMX
  // tiles; the weights and the cache make the op memory-bound at every decode shape.
  c.compute = s.dtype == DType::f32 ? Unit::fma_f32 : Unit::dot_bf16;
  c.memory = Unit::mem_read;
  return c;
}

// One input set: the query, the cache rows (with spare rows past seqlen, poisoned, as a cache
// buffer has them) and the weights, plain (for the reference) and packed.
struct Operands {
  Buffer q, cache, w_uk, w_uv;
  std::vector<PackedMatrix> uk, uv;
};

class MlaAbsorbedCase : public OpCase {
 public:
  MlaAbsorbedCase(const AbsorbedShape& s, int64_t cold_bytes) : s_(s) {
    const int sets = sets_for(int64_t(bytes_read()), cold_bytes);
    for (int k = 0; k < sets; ++k) sets_.push_back(make_set(uint64_t(k)));
    out_ = Buffer(s.dtype, {s.batch, s.heads, s.v});
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "b=" << s_.batch << ",seqlen=" << s_.seqlen << ",heads=" << s_.heads << ",nope=" << s_.nope
       << ",rope=" << s_.rope << ",latent=" << s_.latent << ",v=" << s_.v;
    return os.str();
  }
  std::string dtype() const override { return std::string(dtype_name(s_.dtype)); }
  Cost cost() const override { return absorbed_cost(s_); }
  int input_sets() const override { return int(sets_.size()); }
  void run(int set) override {
    const Operands& o = sets_[size_t(set)];
    mla_decode_absorbed(o.q, o.uk, latent(o), o.uv, scale(), out_);
  }
  CheckResult check() override {
    poison(out_);
    run(0);
    const Operands& o = sets_[0];
    Buffer ref(DType::f32, {s_.batch, s_.heads, s_.v});
    reference::mla_decode_absorbed(o.q, o.w_uk, latent(o), o.w_uv, scale(), ref);
    return compare_relative(out_, ref, s_.dtype == DType::f32 ? 1e-5 : 1e-2);
  }

 private:
  float scale() const { return 1.0f / float(std::sqrt(double(s_.dq()))); }
  int64_t spare() const { return 3; }  // rows past seqlen in each sequence's block, never read
  double bytes_read() const { return s_.bytes_read(); }
  Tensor latent(const Operands& o) const {
    const int64_t rows = s_.seqlen + spare();
    const int64_t shape[3] = {s_.batch, s_.seqlen, s_.dk()}, strides[3] = {rows * s_.dk(), s_.dk(), 1};
    return Tensor(o.cache.data(), s_.dtype, shape, strides);
  }
  Operands make_set(uint64_t k) const {
    Operands o;
    o.q = Buffer(s_.dtype, {s_.batch, s_.heads, s_.dq()});
    fill_random(o.q, 31 + 7 * k, 1.0);
    o.cache = Buffer(s_.dtype, {s_.batch, s_.seqlen + spare(), s_.dk()});
    poison(o.cache);
    if (s_.batch * s_.seqlen > 0) {
      Buffer rows(s_.dtype, {s_.batch, s_.seqlen, s_.dk()});
      fill_random(rows, 41 + 7 * k, 1.0);
      const int64_t row_bytes = s_.seqlen * s_.dk() * int64_t(dtype_size(s_.dtype));
      for (int64_t b = 0; b < s_.batch; ++b)
        std::memcpy(static_cast<char*>(o.cache.data()) + b * (row_bytes + spare() * s_.dk() * int64_t(dtype_size(s_.dtype))),
                    static_cast<const char*>(rows.data()) + b * row_bytes, size_t(row_bytes));
    }
    o.w_uk = Buffer(s_.dtype, {s_.heads, s_.dk(), s_.dq()});
    fill_random(o.w_uk, 51 + 7 * k, 1.0 / std::sqrt(double(s_.dq())));
    o.w_uv = Buffer(s_.dtype, {s_.heads, s_.v, s_.latent});
    fill_random(o.w_uv, 61 + 7 * k, 1.0 / std::sqrt(double(s_.latent)));
    for (int64_t h = 0; h < s_.heads; ++h) {
      o.uk.push_back(pack_b(o.w_uk.tensor().slice(0, h, h + 1).reshape({s_.dk(), s_.dq()}), Layout::nt));
      o.uv.push_back(pack_b(o.w_uv.tensor().slice(0, h, h + 1).reshape({s_.v, s_.latent}), Layout::nt));
    }
    return o;
  }

  AbsorbedShape s_;
  std::vector<Operands> sets_;
  Buffer out_;
};

}  // namespace

void register_mla_absorbed_ops() {
  OpInfo op;
  op.name = "mla-decode-absorbed";
  op.summary = "MLA decode with absorbed W_UK / W_UV over a dense latent cache of any widths (one call per layer)";
  op.params = {
      {"batch", "sequences (one new token each)", "1", ParamSpec::size},
      {"seqlen", "cached rows per sequence (L)", "4096", ParamSpec::size},
      {"heads", "query heads (H)", "128", ParamSpec::integer},
      {"nope", "q/k head dims without rope", "128", ParamSpec::integer},
      {"rope", "rope dims (q and the latent row)", "64", ParamSpec::integer},
      {"latent", "c_kv width (kv_lora_rank)", "512", ParamSpec::integer},
      {"v", "value head dim", "128", ParamSpec::integer},
      {"dtype", "bf16 | f32", "bf16", ParamSpec::dtype},
  };
  // DeepSeek-V3 (128 heads, or 16 per GPU at TP 8) and the small DeepseekV3 config of the
  // patched-model benchmark (docs/perf/models.md: 8 heads, kv_lora 256, rope 32, nope 64, v 64).
  op.bench_table = {
      {},
      {{"heads", "16"}, {"batch", "32"}, {"seqlen", "1024"}},
      {{"heads", "8"}, {"nope", "64"}, {"rope", "32"}, {"latent", "256"}, {"v", "64"}, {"seqlen", "72"}},
      {{"batch", "16"}, {"heads", "8"}, {"nope", "64"}, {"rope", "32"}, {"latent", "256"}, {"v", "64"},
       {"seqlen", "72"}},
  };
  op.report_table = {
      {{"seqlen", "1024"}},
      {{"batch", "16"}, {"heads", "8"}, {"nope", "64"}, {"rope", "32"}, {"latent", "256"}, {"v", "64"},
       {"seqlen", "72"}},
  };
  op.check_table = {
      {{"seqlen", "1"}, {"heads", "3"}, {"nope", "5"}, {"rope", "3"}, {"latent", "7"}, {"v", "6"}},
      {{"batch", "2"}, {"seqlen", "17"}, {"heads", "8"}, {"nope", "64"}, {"rope", "32"}, {"latent", "256"},
       {"v", "64"}},
      {{"batch", "3"}, {"seqlen", "37"}, {"heads", "5"}, {"nope", "24"}, {"rope", "8"}, {"latent", "40"},
       {"v", "20"}, {"dtype", "f32"}},
      {{"batch", "2"}, {"seqlen", "130"}, {"heads", "16"}},
      {{"batch", "0"}, {"seqlen", "64"}, {"heads", "2"}},
      {{"batch", "2"}, {"seqlen", "0"}, {"heads", "2"}, {"nope", "8"}, {"rope", "4"}, {"latent", "16"},
       {"v", "8"}},
  };
  op.rows_param = "batch";
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<MlaAbsorbedCase>(absorbed_shape(p), cold_bytes);
  };
  op.cost = [](const OpParams& p) { return absorbed_cost(absorbed_shape(p)); };
  register_op(std::move(op));
}

}  // namespace sol
