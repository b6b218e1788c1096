#pragma once
// The tuning context: what the core is (microarchitecture, vector datapath, caches) and the
// speed-only parameters of each op family, with where each value came from.
//
// Defaults are derived from the cache sizes (default_tuning_params). `sol tune` times the
// candidates of each parameter on this machine and caches the winners in tuning.json beside the
// machine profile, keyed by the CPU's identity; tuning() applies them. SOL_TUNING=defaults
// ignores the cache. No parameter may change a result bit: each only moves blocking, row
// pipelining, prefetch distances or store kind (tests/hw/test_tuning_bits.cc sweeps them all). What does fix a
// summation order (GEMM's KC and decode chunk) is a constant, the same on every machine.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace sol {

struct CpuFeatures;

// What the core is, from CPUID.
struct CoreShape {
  std::string microarch;   // "zen4", "zen5", "intel-avx512", "x86-64" (anything else)
  int datapath_bits = 256; // width of one vector execution unit: Zen 4 splits AVX-512 in two
  // bf16 products run faster as f32 FMAs than by the core's bf16 dot product (Intel's AVX-512
  // cores: vdpbf16ps zmm issues every ~2 cycles against two FMAs a cycle; Zen's dot product
  // does twice an FMA's work). Picks GEMM's FMA variant (kPrefersFmaBf16); changes bits.
  bool bf16_by_fma = false;
  long l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
};
CoreShape core_shape_of(const CpuFeatures& f, unsigned family, unsigned model);
const CoreShape& core_shape();  // this machine, detected once

// Every tunable parameter. Read once per op call (tuning().params), passed down.
struct TuningParams {
  int64_t gemm_mc = 0;                  // rows of A packed per GEMM block (a multiple of 48), at 4 bytes
                                        // a K step; A of 8 (f32, f32 pairs) takes half
  int64_t gemm_nc = 0;                  // columns of B per GEMM block (a multiple of 32)
  int64_t gemm_b_prefetch_bytes = 0;    // how far ahead a B panel's first reader requests it
  int64_t gemm_amx_mc = 0;              // rows of A packed per AMX GEMM block (a multiple of 32)
  int64_t stream_min_bytes = 0;         // outputs this large or larger take non-temporal stores
  int64_t softmax_pipeline_min_rows = 0;  // a thread's rows before bf16 softmax pipelines them
  int64_t row_prefetch_bytes = 0;       // L1 look-ahead of the elementwise row kernels, per stream
  int64_t pass_prefetch_bytes = 0;      // L1 look-ahead of a row pass reading from memory
  int64_t pass_l2_prefetch_bytes = 0;   // L2 look-ahead of the norms' output-and-next-row loop and
                                        // of the token quant's abs-max (streamed codes)
  int64_t cast_l2_prefetch_bytes = 0;   // L2 look-ahead of a streamed cast's reads (0: none)
  int64_t rope_pair_tokens = 0;         // 1: rope rotates two tokens per call, head by head; 0: one
  int64_t rope_prefetch_heads = 0;      // rope slices requested ahead of the one rotated
  int64_t rope_l2_prefetch_heads = 0;   // rope slices requested into L2 ahead (0: none)
  int64_t quant_pipeline_groups = 0;    // groups normalised ahead of the one encoded (fused rmsnorm + fp8)
  bool operator==(const TuningParams&) const = default;
};

// One parameter: its family, name, the field, its valid range, and the rule its default follows.
struct TuningParamInfo {
  const char* family;  // "gemm", "stream", "softmax", "rows"
  const char* name;    // the key in tuning.json and `sol hw`
  int64_t TuningParams::*field;
  int64_t min, max, multiple;
  const char* rule;
};
std::span<const TuningParamInfo> tuning_param_infos();
// Throws sol::Error naming the parameter when a value is out of range or off its multiple.
void validate_tuning_params(const TuningParams& p);

// Derived from the caches only: no machine's measurements are built in.
TuningParams default_tuning_params(const CoreShape& core);

// How a parameter got its value: the default, or a measured winner with its speedup.
struct TuningChoice {
  std::string name;
  int64_t value = 0, default_value = 0;
  bool tuned = false;   // from tuning.json
  double speedup = 1;   // default's median time over the chosen value's (>= 1 when tuned)
  std::string workload; // what was timed
};

// Choices of the device kernels that are not measured per CPU: read once with the context (from
// the environment), forced in tests and sweeps by ScopedTuning(DeviceTuning).
struct DeviceTuning {
  // $SOL_SM90_GEMM_CONFIG: the persistent sm90 GEMM configuration every device GEMM runs instead
  // of the chooser's, "BMxBN[:s<stages>][:k<split>][:c<cluster>]" (a shape it does not fit is a
  // sol::Error at the call); empty: the chooser. For measuring candidates on a device
  // (bench_gemm_sweep).
  std::string sm90_gemm_config;
  // $SOL_SM90_UNPROVEN=1: the chooser may pick the sm90 GEMM configurations that have not yet
  // run on a device (Sm90Target::unproven: B multicast, the block-scaled 128 x 192 tile).
  bool sm90_unproven = false;
  bool operator==(const DeviceTuning&) const = default;
};

struct Tuning {
  CoreShape core;
  TuningParams params;
  DeviceTuning device;
  std::vector<TuningChoice> choices;  // one per tuning_param_infos() entry
  std::string source;                 // "defaults", "tuned <when> (path)", ...
  std::vector<std::string> messages;  // why a cache (or part of it) was not used
};

// The tuning in force: a ScopedTuning's if one is alive, else the one loaded at first use
// (SOL_TUNING unset or "cached": tuning.json's entry for this CPU where valid, defaults
// otherwise; "defaults": defaults). Thread-safe; messages go to stderr once.
const Tuning& tuning();
// Reads tuning.json again (after `sol tune` wrote it).
void reload_tuning();

// Builds a Tuning from the cache file at `path` for the CPU `identity` in SOL_TUNING `mode`
// ("cached" or "defaults"); a missing, corrupt or stale file gives defaults with a message.
Tuning load_tuning(const std::string& path, const std::string& identity, const CoreShape& core,
                   const std::string& mode);
std::string tuning_cache_path();  // tuning.json beside machine_cache_path()
std::string tuning_mode();        // SOL_TUNING, validated: "cached" or "defaults"

// Forces parameters for this scope (tests, the tuner); nests; not for concurrent use.
class ScopedTuning {
 public:
  explicit ScopedTuning(const TuningParams& params);
  // Forces the device choices, the parameters in force kept.
  explicit ScopedTuning(const DeviceTuning& device);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  const Tuning* previous_;
  Tuning* mine_;
};

// ---- sol tune -------------------------------------------------------------------------------

// One parameter's candidates and the workload that times them.
struct TuneCase {
  std::string param;                 // a tuning_param_infos() name
  std::vector<int64_t> candidates;   // include the default
  std::string workload;              // what run() does, for the record
  std::function<void()> run;         // one timed run at the parameters in force
};

struct TuneOutcome {
  std::string param, workload;
  int64_t value = 0, default_value = 0;
  double speedup = 1;                       // default median / chosen median
  std::vector<std::pair<int64_t, double>> medians;  // candidate, median seconds
};

// Times every candidate of `c` in `rounds` interleaved rounds (candidate order rotated each
// round, so a noisy neighbour's burst lands on all of them), each run on the calling thread's
// CPU clock, with `base` for the other parameters. Keeps the default unless another candidate's
// median is at least `margin` faster.
TuneOutcome tune_case(const TuneCase& c, const TuningParams& base, int rounds = 7, double margin = 1.03);

// Writes the outcomes for this CPU into tuning.json (other CPUs' entries kept).
void save_tuning(const std::string& path, const std::string& identity, const std::vector<TuneOutcome>& outcomes);

}  // namespace sol
