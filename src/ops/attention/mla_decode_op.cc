// Registry entry for mla-decode: DeepSeek-V3 decode shapes over a paged latent cache whose
// pages are shuffled in the block table, bf16 or FP8 cache; cost, and the check of sampled
// query rows against the fp64 reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "ops/attention/mla_reference.h"
#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/common/splitmix.h"
#include "sol/error.h"
#include "sol/mla.h"
#include "sol/registry.h"
#include "sol/threads.h"

namespace sol {

namespace {

struct MlaShape {
  int64_t batch, seqlen, s_q, heads;
  bool fp8, causal;
};

// Sequence b's cache length: the first is `seqlen`, the others spread over (3/4 seqlen, seqlen]
// so that a batch mixes lengths (and most are not page multiples).
int64_t length_of(const MlaShape& s, int64_t b) {
  return b == 0 ? s.seqlen : s.seqlen - int64_t(splitmix64(uint64_t(b) * 7919) % uint64_t(s.seqlen / 4 + 1));
}

class MlaDecodeCase : public OpCase {
 public:
  MlaDecodeCase(const MlaShape& s, int64_t cold_bytes) : s_(s) {
    sol::check(s.batch >= 0 && s.seqlen >= 0 && s.s_q >= 1 && s.heads >= 1, "mla-decode",
          "batch, seqlen >= 0 and sq, heads >= 1 required");
    sol::check(s.seqlen < (int64_t(1) << 30), "mla-decode", "--seqlen = ", s.seqlen, " is too large");
    const int64_t b = s.batch;
    seqlens_ = Buffer(DType::i32, {b});
    int64_t pages = 0, max_blocks = 1;
    for (int64_t i = 0; i < b; ++i) {
      const int64_t len = length_of(s, i);
      seqlens_.tensor().data_as<int32_t>()[i] = int32_t(len);
      const int64_t p = (len + kMlaPageSize - 1) / kMlaPageSize;
      pages += p;
      max_blocks = std::max(max_blocks, p);
    }
    const int64_t row = s.fp8 ? kMlaFp8TokenBytes : kMlaHeadDimQk;
    const DType kv_type = s.fp8 ? DType::f8e4m3 : DType::bf16;
    const int64_t set_bytes = std::max<int64_t>(1, pages * kMlaPageSize * row * int64_t(dtype_size(kv_type)));
    const int sets = pages == 0 ? 1 : sets_for(set_bytes, cold_bytes);
    // One pool of pages; set k uses pages [k * pages, (k + 1) * pages), shuffled in its table.
    kv_ = Buffer(kv_type, {std::max<int64_t>(1, pages * sets), kMlaPageSize, 1, row});
    fill_pages(pages);
    for (int k = 1; k < sets; ++k)
      std::memcpy(static_cast<char*>(kv_.data()) + k * set_bytes, kv_.data(), size_t(set_bytes));
    for (int k = 0; k < sets; ++k) {
      std::vector<int32_t> ids(static_cast<size_t>(pages));
      std::iota(ids.begin(), ids.end(), int32_t(k * pages));
      for (size_t i = ids.size(); i > 1; --i)
        std::swap(ids[i - 1], ids[splitmix64(uint64_t(k) * 1000003 + i) % i]);
      tables_.emplace_back(DType::i32, std::initializer_list<int64_t>{b, max_blocks});
      int32_t* t = tables_.back().tensor().data_as<int32_t>();
      std::fill(t, t + b * max_blocks, 0);
      size_t next = 0;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < (seqlens_.tensor().data_as<int32_t>()[i] + kMlaPageSize - 1) / kMlaPageSize; ++j)
          t[i * max_blocks + j] = ids[next++];
    }
    q_ = Buffer(DType::bf16, {b, s.s_q, s.heads, kMlaHeadDimQk});
    fill_random(q_, 11, 4.0);
    out_ = Buffer(DType::bf16, {b, s.s_q, s.heads, kMlaHeadDimV});
    lse_ = Buffer(DType::f32, {b, s.heads, s.s_q});
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "b=" << s_.batch << ",seqlen=" << s_.seqlen << ",sq=" << s_.s_q << ",heads=" << s_.heads
       << (s_.causal ? ",causal" : "");
    return os.str();
  }
  std::string dtype() const override { return s_.fp8 ? "bf16 q, fp8 cache" : "bf16"; }
  Cost cost() const override {
    double pairs = 0, tokens = 0;
    for (int64_t b = 0; b < s_.batch; ++b) {
      const int64_t len = length_of(s_, b);
      tokens += double(len);
      for (int64_t i = 0; i < s_.s_q; ++i)
        pairs += double(s_.heads) * double(std::max<int64_t>(0, len - (s_.causal ? s_.s_q - 1 - i : 0)));
    }
    Cost c;
    c.flops = 2 * pairs * (kMlaHeadDimQk + kMlaHeadDimV);
    const double rows = double(s_.batch * s_.s_q * s_.heads);
    c.bytes = rows * kMlaHeadDimQk * 2 + tokens * (s_.fp8 ? kMlaFp8TokenBytes : 2 * kMlaHeadDimQk) +
              rows * kMlaHeadDimV * 2 + rows * 4;
    c.compute = Unit::dot_bf16;
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(tables_.size()); }
  void run(int set) override {
    // FlashMLA's pattern: the schedule is made once per decode step (here: per call).
    const MlaMetadata meta = get_mla_metadata(seqlens_, int(s_.s_q * s_.heads));
    mla_decode_with_kvcache(q_, kv_, tables_[size_t(set)], seqlens_, kMlaHeadDimV, scale(), s_.causal, meta, out_,
                            lse_);
  }
  CheckResult check() override {
    poison(out_);
    poison(lse_);
    run(0);
    // Sampled rows (all of them for small cases): first, last and spread between.
    const int64_t rows = s_.batch * s_.s_q * s_.heads;
    const int64_t samples = std::min<int64_t>(rows, s_.seqlen * rows > (int64_t(1) << 20) ? 12 : rows);
    Buffer got(DType::f32, {samples, kMlaHeadDimV}), ref(DType::f32, {samples, kMlaHeadDimV});
    double row[kMlaHeadDimV], lse_ref;
    std::ostringstream problems;
    std::vector<double> cache;
    int64_t cached_b = -1;
    for (int64_t n = 0; n < samples; ++n) {
      const int64_t r = samples == rows ? n : (samples == 1 ? 0 : n * (rows - 1) / (samples - 1));
      const int64_t b = r / (s_.s_q * s_.heads), i = r / s_.heads % s_.s_q, h = r % s_.heads;
      if (b != cached_b) {
        cache = reference::mla_sequence_cache(kv_, tables_[0], seqlens_, b);
        cached_b = b;
      }
      reference::mla_decode_row(q_, cache, scale(), s_.causal, b, i, h, row, &lse_ref);
      for (int d = 0; d < kMlaHeadDimV; ++d) {
        got.tensor().data_as<float>()[n * kMlaHeadDimV + d] =
            bf16_to_f32(out_.tensor().data_as<uint16_t>()[r * kMlaHeadDimV + d]);
        ref.tensor().data_as<float>()[n * kMlaHeadDimV + d] = float(row[d]);
      }
      const float lse = lse_.tensor().data_as<float>()[(b * s_.heads + h) * s_.s_q + i];
      const bool same = std::isinf(lse_ref) ? lse == float(lse_ref)
                                            : std::fabs(double(lse) - lse_ref) <= 1e-4 * std::max(1.0, std::fabs(lse_ref));
      if (!same && problems.tellp() == 0)
        problems << "lse of row (b=" << b << ", i=" << i << ", h=" << h << ") = " << lse << " but reference "
                 << lse_ref;
    }
    CheckResult r = compare_relative(got, ref, 1e-2);
    if (!problems.str().empty()) {
      r.pass = false;
      r.detail = r.detail.empty() ? problems.str() : r.detail + "; " + problems.str();
    }
    if (samples < rows) r.detail = (r.detail.empty() ? "" : r.detail + "; ") + std::to_string(samples) + " sampled rows";
    return r;
  }

 private:
  static float scale() { return 1.0f / std::sqrt(192.0f); }

  void fill_pages(int64_t pages) {
    if (pages == 0) return;
    if (!s_.fp8) {
      fill_random(Tensor(kv_.data(), DType::bf16, {pages * kMlaPageSize * kMlaHeadDimQk}), 21, 1.0);
      return;
    }
    Buffer bf(DType::bf16, {pages, kMlaPageSize, 1, kMlaHeadDimQk});
    fill_random(bf, 21, 1.0);
    mla_quantize_kv_cache_fp8(bf, Tensor(kv_.data(), DType::f8e4m3, {pages, kMlaPageSize, 1, kMlaFp8TokenBytes}));
  }

  MlaShape s_;
  Buffer seqlens_, kv_, q_, out_, lse_;
  std::vector<Buffer> tables_;
};

}  // namespace

void register_mla_ops() {
  OpInfo op;
  op.name = "mla-decode";
  op.summary = "MLA decode over a paged latent cache (FlashMLA semantics), bf16 or FP8 cache, split-KV";
  op.params = {
      {"batch", "sequences", "1", ParamSpec::size},
      {"seqlen", "cache length of sequence 0 (the others: within its last quarter)", "4096", ParamSpec::size},
      {"sq", "new query tokens per sequence (s_q)", "1", ParamSpec::integer},
      {"heads", "query heads (h_q)", "128", ParamSpec::integer},
      {"cache", "bf16 | fp8 (656-byte FlashMLA format)", "bf16", ParamSpec::text},
      {"causal", "1: causal mask among the s_q new tokens", "1", ParamSpec::integer},
  };
  op.bench_table = {
      {},
      {{"cache", "fp8"}},
      {{"batch", "8"}, {"seqlen", "2048"}, {"sq", "2"}},
      {{"batch", "32"}, {"seqlen", "1024"}, {"cache", "fp8"}},
      {{"heads", "16"}, {"seqlen", "8192"}},
      {{"heads", "16"}, {"seqlen", "8192"}, {"cache", "fp8"}},
      {{"heads", "16"}, {"batch", "8"}, {"sq", "2"}, {"cache", "fp8"}},
      {{"heads", "16"}, {"batch", "32"}, {"seqlen", "1024"}},
      {{"heads", "16"}, {"batch", "32"}, {"seqlen", "8192"}, {"cache", "fp8"}},
  };
  // sol report runs every op at 1 and 2 threads under a time budget: one compute-bound and one
  // bandwidth-leaning case.
  op.report_table = {
      {{"seqlen", "2048"}},
      {{"heads", "16"}, {"batch", "8"}, {"seqlen", "2048"}, {"sq", "2"}, {"cache", "fp8"}},
  };
  op.check_table = {
      {{"seqlen", "1"}, {"heads", "3"}},
      {{"batch", "3"}, {"seqlen", "200"}, {"sq", "2"}, {"heads", "5"}},
      {{"batch", "2"}, {"seqlen", "130"}, {"sq", "2"}, {"heads", "16"}, {"cache", "fp8"}},
      {{"batch", "2"}, {"seqlen", "321"}, {"heads", "17"}, {"causal", "0"}, {"sq", "3"}},
      {{"batch", "0"}, {"seqlen", "64"}},
      {{"batch", "2"}, {"seqlen", "0"}, {"heads", "4"}},
  };
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    MlaShape s;
    s.batch = p.integer("batch");
    s.seqlen = p.integer("seqlen");
    s.s_q = p.integer("sq");
    s.heads = p.integer("heads");
    const std::string& cache = p.text("cache");
    check(cache == "bf16" || cache == "fp8", "mla-decode", "--cache = '", cache, "' but expected bf16 or fp8");
    s.fp8 = cache == "fp8";
    s.causal = p.integer("causal") != 0;
    return std::make_unique<MlaDecodeCase>(s, cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
