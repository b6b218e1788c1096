// The tuning context: the core's shape, each parameter's default rule, and the tuning in force.
#include "sol/tuning.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "hw/cpu_identity.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

// Where sysfs and sysconf report nothing (some containers): typical server sizes.
constexpr long kFallbackL1 = 32L << 10, kFallbackL2 = 1L << 20, kFallbackL3 = 16L << 20;

// Bytes of one row of a packed A block, or one column of a packed B block: GEMM's KC is 2048
// K values of bf16 (ops/gemm/blocking.h; a constant, since it fixes the summation order).
constexpr int64_t kGemmKcBytes = 2048 * 2;

constexpr TuningParamInfo kInfos[] = {
    {"gemm", "gemm_mc", &TuningParams::gemm_mc, 48, 3072, 48,
     "the packed A block (MC rows x KC) fills L2 (MC for bf16's 4 KiB rows; f32-wide A rows take MC/2)"},
    {"gemm", "gemm_nc", &TuningParams::gemm_nc, 256, 8192, 32,
     "the packed B block (KC x NC columns) is L3/4, at most 4096 columns"},
    {"gemm", "gemm_b_prefetch_bytes", &TuningParams::gemm_b_prefetch_bytes, 0, 256L << 10, 64,
     "L1d/3 in whole 4 KiB: the lines requested ahead stay in L1 beside the A panel and the tile"},
    {"gemm", "gemm_amx_mc", &TuningParams::gemm_amx_mc, 32, 3072, 32,
     "the packed A block (MC rows x KC) fills half of L2, the B panel in use and the next one the rest"},
    {"stream", "stream_min_bytes", &TuningParams::stream_min_bytes, 64L << 10, int64_t(1) << 40, 1,
     "the smaller of LLC/2 and 4 x L2: an output that large cannot stay in the LLC, or in the LLC share a shared host leaves one core"},
    {"softmax", "softmax_pipeline_min_rows", &TuningParams::softmax_pipeline_min_rows, 1, 1 << 20, 1,
     "fixed 32: a thread's bf16 rows pipeline when there are enough to fill the pipeline"},
    {"rows", "row_prefetch_bytes", &TuningParams::row_prefetch_bytes, 0, 64L << 10, 64,
     "L1d/24 in whole KiB: the elementwise rows stream up to three arrays, an eighth of L1 in flight"},
    {"rows", "pass_prefetch_bytes", &TuningParams::pass_prefetch_bytes, 0, 64L << 10, 64,
     "L1d/6 in whole 4 KiB: one or two rows' look-ahead beside the row, its weight and the output in L1 (also a streamed cast's reads, dequant's codes and softmax's f32 rows)"},
    {"rows", "pass_l2_prefetch_bytes", &TuningParams::pass_l2_prefetch_bytes, 0, 256L << 10, 64,
     "L1d/3 in whole 4 KiB: twice the L1 look-ahead, so its requests find their lines on the way to L2 (the norms' rows, and the token quant's where its codes stream)"},
    {"rows", "cast_l2_prefetch_bytes", &TuningParams::cast_l2_prefetch_bytes, 0, 1L << 20, 64,
     "L2/64 in whole 4 KiB, at least 8 KiB: a cast reads up to four lines per line it writes, more than the L1 look-ahead keeps in flight; these requests reach L2 first"},
    {"rows", "rope_pair_tokens", &TuningParams::rope_pair_tokens, 0, 1, 1,
     "fixed 1 (not a cache matter): two tokens far apart per call, two independent streams; 0: one token after another"},
    {"rows", "rope_prefetch_heads", &TuningParams::rope_prefetch_heads, 1, 1024, 1,
     "L1d/768: an L1d/6 look-ahead (the row passes') of 128-byte slices (64-wide bf16)"},
    {"rows", "rope_l2_prefetch_heads", &TuningParams::rope_l2_prefetch_heads, 0, 2048, 1,
     "twice the L1 look-ahead: its requests find their slices on the way to L2"},
    {"rows", "quant_pipeline_groups", &TuningParams::quant_pipeline_groups, 1, 4, 1,
     "fixed 3 (not a cache matter): a group's ~60-cycle reduction and division hide behind encoding"},
};

unsigned cpuid_family_model(unsigned& model) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  unsigned family = (a >> 8) & 0xF;
  model = (a >> 4) & 0xF;
  if (family == 0xF) family += (a >> 20) & 0xFF;
  if (family == 0x6 || family >= 0xF) model |= ((a >> 16) & 0xF) << 4;
  return family;
}

int64_t round_down(int64_t v, int64_t multiple) { return v / multiple * multiple; }

std::atomic<const Tuning*> g_forced{nullptr};
std::mutex g_load_mutex;
std::atomic<const Tuning*> g_loaded{nullptr};

const Tuning* load_now() {
  const std::string mode = tuning_mode();
  std::string path;
  try {
    path = tuning_cache_path();
  } catch (const Error&) {
    path.clear();  // no cache location: defaults
  }
  auto* t = new Tuning(load_tuning(path, cpu_identity(), core_shape(), mode));
  if (const char* config = std::getenv("SOL_SM90_GEMM_CONFIG")) t->device.sm90_gemm_config = config;
  if (const char* unproven = std::getenv("SOL_SM90_UNPROVEN"))
    t->device.sm90_unproven = std::string(unproven) == "1";
  for (const std::string& m : t->messages) std::cerr << "sol: warning: " << m << "\n";
  return t;
}

}  // namespace

CoreShape core_shape_of(const CpuFeatures& f, unsigned family, unsigned model) {
  (void)model;
  CoreShape s;
  s.l1d_bytes = f.l1d_bytes > 0 ? f.l1d_bytes : kFallbackL1;
  s.l2_bytes = f.l2_bytes > 0 ? f.l2_bytes : kFallbackL2;
  s.l3_bytes = f.l3_bytes > 0 ? f.l3_bytes : kFallbackL3;
  const bool avx512 = f.avx512f && f.os_avx512;
  if (f.vendor == "AuthenticAMD" && family == 0x19 && avx512) {
    s.microarch = "zen4";  // AVX-512 issued as two 256-bit halves
    s.datapath_bits = 256;
  } else if (f.vendor == "AuthenticAMD" && family == 0x1A) {
    s.microarch = "zen5";
    s.datapath_bits = avx512 ? 512 : 256;
  } else if (f.vendor == "GenuineIntel" && avx512) {
    s.microarch = "intel-avx512";
    s.datapath_bits = 512;
    s.bf16_by_fma = true;
  } else {
    s.microarch = "x86-64";
    s.datapath_bits = f.avx2 ? 256 : 128;
  }
  return s;
}

const CoreShape& core_shape() {
  static const CoreShape shape = [] {
    unsigned model = 0;
    const unsigned family = cpuid_family_model(model);
    return core_shape_of(cpu_features(), family, model);
  }();
  return shape;
}

std::span<const TuningParamInfo> tuning_param_infos() { return kInfos; }

void validate_tuning_params(const TuningParams& p) {
  for (const TuningParamInfo& i : kInfos) {
    const int64_t v = p.*i.field;
    check(v >= i.min && v <= i.max && v % i.multiple == 0, "tuning", i.name, " = ", v, " but must be in [",
          i.min, ", ", i.max, "] and a multiple of ", i.multiple);
  }
}

TuningParams default_tuning_params(const CoreShape& core) {
  TuningParams p;
  p.gemm_mc = std::clamp<int64_t>(round_down(core.l2_bytes / kGemmKcBytes, 48), 48, 1536);
  p.gemm_nc = std::clamp<int64_t>(round_down(core.l3_bytes / 4 / kGemmKcBytes, 32), 256, 4096);
  p.gemm_amx_mc = std::clamp<int64_t>(round_down(core.l2_bytes / 2 / kGemmKcBytes, 32), 32, 1536);
  p.gemm_b_prefetch_bytes = std::max<int64_t>(4096, round_down(core.l1d_bytes / 3, 4096));
  // A guest reports the host socket's whole L3, shared with tenants it cannot see; what stays
  // cached for an op's consumer is its private L2 and a core's share of the LLC, about one to
  // three L2s on current server parts. So the LLC/2 rule holds only up to 4 x L2.
  p.stream_min_bytes = std::max<int64_t>(64L << 10, std::min<int64_t>(core.l3_bytes / 2, 4 * core.l2_bytes));
  p.softmax_pipeline_min_rows = 32;
  p.row_prefetch_bytes = std::max<int64_t>(1024, round_down(core.l1d_bytes / 24, 1024));
  p.pass_prefetch_bytes = std::max<int64_t>(4096, round_down(core.l1d_bytes / 6, 4096));
  p.pass_l2_prefetch_bytes = std::max<int64_t>(8192, round_down(core.l1d_bytes / 3, 4096));
  p.cast_l2_prefetch_bytes = std::max<int64_t>(8192, round_down(core.l2_bytes / 64, 4096));
  p.rope_pair_tokens = 1;
  p.rope_prefetch_heads = std::clamp<int64_t>(core.l1d_bytes / 768, 8, 1024);
  p.rope_l2_prefetch_heads = 2 * p.rope_prefetch_heads;
  p.quant_pipeline_groups = 3;
  return p;
}

std::string tuning_mode() {
  const char* env = std::getenv("SOL_TUNING");
  const std::string v = env ? env : "";
  if (v.empty() || v == "cached") return "cached";
  if (v == "defaults") return "defaults";
  fail("SOL_TUNING", "unknown value '", v, "': expected cached or defaults");
}

const Tuning& tuning() {
  if (const Tuning* f = g_forced.load(std::memory_order_acquire)) return *f;
  if (const Tuning* t = g_loaded.load(std::memory_order_acquire)) return *t;
  std::lock_guard lock(g_load_mutex);
  if (const Tuning* t = g_loaded.load(std::memory_order_acquire)) return *t;
  const Tuning* t = load_now();
  g_loaded.store(t, std::memory_order_release);
  return *t;
}

// The previous Tuning is never freed: an op on another thread may still hold it. It is kept in
// a list that is itself never destroyed, so it stays reachable (LeakSanitizer reports nothing).
void reload_tuning() {
  static auto* retired = new std::vector<const Tuning*>;
  std::lock_guard lock(g_load_mutex);
  if (const Tuning* old = g_loaded.exchange(load_now(), std::memory_order_acq_rel)) retired->push_back(old);
}

ScopedTuning::ScopedTuning(const TuningParams& params) : previous_(g_forced.load()), mine_(nullptr) {
  validate_tuning_params(params);
  Tuning t = previous_ ? *previous_ : tuning();
  t.params = params;
  t.source = "forced (ScopedTuning)";
  for (TuningChoice& c : t.choices)
    for (const TuningParamInfo& i : kInfos)
      if (c.name == i.name) c.value = params.*i.field;
  mine_ = new Tuning(std::move(t));
  g_forced.store(mine_, std::memory_order_release);
}

ScopedTuning::ScopedTuning(const DeviceTuning& device) : previous_(g_forced.load()), mine_(nullptr) {
  Tuning t = previous_ ? *previous_ : tuning();
  t.device = device;
  t.source = "forced (ScopedTuning)";
  mine_ = new Tuning(std::move(t));
  g_forced.store(mine_, std::memory_order_release);
}

ScopedTuning::~ScopedTuning() {
  g_forced.store(previous_, std::memory_order_release);
  delete mine_;
}

}  // namespace sol
