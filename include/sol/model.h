#pragma once
// The co-design model: (model, hardware, parallel plan, workload) -> the time every operator and
// every transfer must take at the hardware's physical limit, composed into a training step or an
// inference request. Inputs are JSON files (models/, hardware/, plans/, workloads/) parsed
// strictly: an unknown key, a missing key or a wrong type throws sol::Error naming the file,
// the key, what was expected and what was got. docs/model.md explains every formula.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol {

// A transformer in the Hugging Face config.json vocabulary (Llama, Qwen, Mixtral, DeepSeek).
struct ModelConfig {
  std::string name, source;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t intermediate = 0, vocab = 0;
  bool tied_embeddings = false;
  // Multi-head latent attention (DeepSeek-V2/V3): present when kv_lora_rank > 0.
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  // Mixture of experts: present when routed_experts > 0.
  int64_t routed_experts = 0, shared_experts = 0, experts_per_token = 0;
  int64_t moe_intermediate = 0, shared_intermediate = 0;  // per expert; shared: all shared
  int64_t first_dense_layers = 0, moe_layer_freq = 1;
  int64_t expert_groups = 0, groups_per_token = 0;  // group-limited routing (n_group, topk_group)
  int64_t mtp_layers = 0;                           // multi-token-prediction modules

  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_moe() const { return routed_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  int64_t moe_layer_count() const;
  double total_params() const;      // every weight, embeddings included, MTP excluded
  double activated_params() const;  // per token
};

// The efficiency layer: for each kind of work the model schedules, the fraction of its floor
// that real kernels reach. Calibrated only from kernel-level measurements (Sol's own records,
// or the anchors' published kernel tables), never from end-to-end step times (docs/model.md).
struct EfficiencyRow {
  std::string work;        // work class: gemm.f8e4m3.decode, ep.dispatch.scale_out.decode, ...
  double efficiency = 0;   // floor / measured time of this kernel on this shape
  std::string kernel, shape, measured, source;  // what was measured, and where it is published
};
struct Efficiency {
  std::string name, origin, description;
  std::vector<EfficiencyRow> rows;
  // Share of the SMs a communication kernel takes from computation it overlaps (DeepEP's
  // normal kernels run on a fixed number of SMs); 0 on a CPU.
  double comm_sm_fraction = 0;
  std::string comm_sm_source;
  // The median efficiency of the rows of `work`, else of the nearest calibrated class (a
  // grouped GEMM borrows the plain GEMM of its dtype and shape class, then the class's prefix:
  // gemm.bf16.mid -> gemm.bf16 -> gemm). `used` gets the class that answered; 1 and "" when none
  // did (the floor stands, and the caller lists the class as uncalibrated).
  double fraction(const std::string& work, std::string* used = nullptr) const;
};
Efficiency parse_efficiency(const std::string& text, const std::string& origin);
// NAME (hardware/calibration/NAME.json) or a path.
Efficiency load_efficiency(const std::string& name_or_path);
std::string efficiency_json(const Efficiency& e);

// One kernel measurement of Sol's (`sol report` / `sol bench --json` record) as the efficiency
// layer reads it: its work class, its floor (the record's, against the ceilings paired in the
// same run) and its measured time.
struct KernelSample {
  std::string op, shape, dtype, work;
  int threads = 1;
  double floor_s = 0, time_s = 0;
  std::string dropped;  // why it is not a row ("" when it is): an uncertain ceiling, ...
};
// report.json of `sol report` (an object with "records") or the array `sol bench --json` and
// `sol report --json` print. threads > 0 keeps only records at that thread count. Throws
// sol::Error naming the file, the record and the key.
std::vector<KernelSample> read_kernel_samples(const std::string& path, int threads = 0);
// The efficiency layer of the samples not dropped: one row per sample.
Efficiency efficiency_from_samples(const std::vector<KernelSample>& samples,
                                   const std::string& name, const std::string& source);
// A sample's time as the efficiency layer predicts it: floor / fraction(work).
double calibrated_time(const Efficiency& e, const KernelSample& s);
// The work class of a Sol op record (gemm m=16 bf16 -> gemm.bf16.decode, rmsnorm -> memory).
std::string sol_op_work_class(const std::string& op, const std::string& dtype,
                              const std::string& shape, const std::string& bound);

// One accelerator (or this CPU) and the links around it. Rates per device, per direction.
struct HardwareSpec {
  std::string name, source, confidence;  // confidence: "high" or "low"
  double flops_bf16 = 0, flops_fp8 = 0, flops_f32 = 0;  // dense FLOP/s; 0 = not supported
  double memory_bandwidth = 0;                          // B/s
  double memory_bytes = 0;
  int scale_up_size = 1;            // devices sharing one scale-up domain (NVLink, HCCS)
  double scale_up_bandwidth = 0;    // B/s per device, one direction
  double scale_up_latency_s = 0;
  double scale_out_bandwidth = 0;   // B/s per device, one direction (IB, RoCE)
  double scale_out_latency_s = 0;
  // Null: every op at its floor. Set: each op's floor divided by its work class's efficiency.
  std::shared_ptr<const Efficiency> efficiency;

  double flops(DType t) const;  // throws sol::Error for a dtype the device cannot multiply
};

enum class Schedule { one_f_one_b, zb1p, dualpipe };
std::string_view schedule_name(Schedule s);

// One pass of a simulated pipeline schedule on one stage (simulate_pipeline below).
struct PipelinePass {
  double start_s = 0, end_s = 0;
  char kind = 'F';         // F forward, B backward (full or input gradient), W weight gradient,
                           // X a forward and a backward overlapped (DualPipe's F&B)
  int micro_batch = 0;     // the forward's (X) or the backward's micro-batch; W: -1
  int direction = 0;       // DualPipe: 0 enters at stage 0, 1 at the last stage
};

// What the forward keeps for the backward. none: every op's inputs in bf16. selective
// (DeepSeek-V3's recipe): GEMM inputs only, in the GEMM dtype; norms, activations functions and
// attention scores are recomputed. full: each layer's input only; the backward re-runs the
// forward.
enum class Recompute { none, selective, full };
std::string_view recompute_name(Recompute r);

struct ParallelPlan {
  std::string name;
  std::string origin;  // the file it was read from (named in validate_plan's messages)
  std::map<std::string, int> key_lines;  // line of each key in that file (messages name it)
  int dp = 1, tp = 1, pp = 1, ep = 1;  // ep groups are carved from dp x tp
  int zero_stage = 0;                  // 0..3: what is sharded over dp
  Schedule schedule = Schedule::one_f_one_b;
  int micro_batches = 1;               // per step (training)
  Recompute recompute = Recompute::none;
  bool overlap = false;                // comm hidden behind compute (DualPipe / two micro-batches)
  bool node_limited_routing = false;   // a token reaches at most max_nodes_per_token nodes
  int max_nodes_per_token = 0;         // 0: the model's groups_per_token
  bool shared_expert_as_routed = false;
  // Extra expert copies placed beside the routed (and routed shared) ones, as DeepSeek's
  // deployments host redundant experts: experts placed must be a multiple of ep.
  int redundant_experts = 0;
  // Token-expert pairs of the busiest expert-parallel device over the average (1: balanced).
  // Its expert GEMMs and its all-to-all traffic scale by it, and everyone waits for it.
  double expert_load_imbalance = 1;
  DType gemm_dtype = DType::bf16, weight_dtype = DType::bf16;
  DType dispatch_dtype = DType::bf16, combine_dtype = DType::bf16, kv_dtype = DType::bf16;

  int devices() const { return dp * tp * pp; }
};

struct Workload {
  enum class Kind { training, inference } kind = Kind::training;
  std::string name;
  std::string origin;                    // the file it was read from
  std::map<std::string, int> key_lines;  // line of each key in that file
  // training: sequences of seq_len tokens, global_batch sequences per step
  int64_t seq_len = 0, global_batch = 0;
  bool mtp = false;  // train the model's multi-token-prediction modules too
  // inference: per data-parallel replica; a batch of 0 leaves that phase out (prefill-only,
  // decode-only workloads)
  int64_t prefill_batch = 0, prompt_tokens = 0, decode_batch = 0, context_tokens = 0;
  double kv_cache_hit_rate = 0;  // share of prompt tokens whose KV is already cached
  // Decoding with the model's MTP modules as the draft (DeepSeek-V3 section 5.4.3): each step
  // verifies 1 + depth positions per sequence and keeps 1 + a + a^2 + ... + a^depth tokens.
  bool mtp_decode = false;
  double mtp_acceptance = 0;  // probability that a draft token is accepted
  // Tokens one decode step keeps per sequence with `depth` MTP modules: 1 without MTP.
  double tokens_per_decode_step(int64_t depth) const;
};

// ---- inputs ---------------------------------------------------------------------------

// `text` is the JSON, `origin` names it in messages (a file path).
// The line of the first occurrence of each "key": in a JSON text (for messages; 1-based).
std::map<std::string, int> json_key_lines(const std::string& text);
// "origin:line key 'k'" for messages about a key of a plan or workload file.
std::string key_where(const std::string& origin, const std::map<std::string, int>& lines,
                      const std::string& key);
ModelConfig parse_model_config(const std::string& text, const std::string& origin);
HardwareSpec parse_hardware_spec(const std::string& text, const std::string& origin);
ParallelPlan parse_parallel_plan(const std::string& text, const std::string& origin);
Workload parse_workload(const std::string& text, const std::string& origin);

// NAME (a shipped file: models/NAME.json, ...) or a path to a JSON file. Shipped files are
// looked up under $SOL_DATA_DIR, then above the running executable, then above the current
// directory. load_hardware_spec("this") measures (or reads the cached profile of) this machine.
ModelConfig load_model_config(const std::string& name_or_path);
HardwareSpec load_hardware_spec(const std::string& name_or_path);
ParallelPlan load_parallel_plan(const std::string& name_or_path);
Workload load_workload(const std::string& name_or_path);
std::vector<std::string> shipped_names(const std::string& kind);  // kind: "models", ...

// "This machine" as a device: the measured ceilings of `sol hw` (all threads), no links.
HardwareSpec hardware_from_machine(const MachineProfile& machine);

// Throws sol::Error when the plan cannot run the model on the hardware: degrees that do not
// divide the devices, heads or experts, a schedule's constraints, a missing dtype.
void validate_plan(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                   const Workload& w);
// The smallest plan that holds the workload (inference: EP over all devices for MoE, TP within
// a scale-up domain for dense; training: DualPipe/1F1B over enough nodes).
ParallelPlan default_plan(const ModelConfig& m, const HardwareSpec& hw, const Workload& w);

// ---- outputs --------------------------------------------------------------------------

enum class Link { none, scale_up, scale_out };
std::string_view link_name(Link l);

// One operator (or one transfer) of one phase, per device, summed over its repetitions.
struct OpRecord {
  std::string phase, name, kind;  // kind: gemm, attention, norm, routing, embedding, comm, ...
  double count = 0;               // repetitions in the phase (layers x micro-batches x passes)
  double flops = 0, bytes = 0, link_bytes = 0;  // totals per device
  Link link = Link::none;
  double floor_s = 0;             // total floor time of all repetitions (calibrated when the
                                  // hardware carries an efficiency layer)
  std::string bound;              // compute, memory, link
  std::string work;               // its work class in the efficiency layer
};

struct PhaseResult {
  std::string name;          // forward+backward, optimizer, prefill, decode, ...
  double time_s = 0;         // what the phase costs in the composed step
  double compute_s = 0;      // sum of floors of compute-bound ops
  double memory_s = 0;       // sum of floors of memory-bound ops
  double comm_s = 0;         // link time (links run concurrently: the busier one)
  double exposed_comm_s = 0; // link time not hidden behind compute
  double bubble_s = 0;       // pipeline idle time
  std::string bottleneck;    // compute, memory, scale_up, scale_out, bubble
};

struct MemoryUse {  // bytes per device
  double params = 0, grads = 0, optimizer = 0, activations = 0, kv_cache = 0;
  double total() const { return params + grads + optimizer + activations + kv_cache; }
  double capacity = 0;
};

struct Prediction {
  std::string model, hardware, plan, workload;
  Workload::Kind kind = Workload::Kind::training;
  int devices = 1;
  std::vector<PhaseResult> phases;
  std::vector<OpRecord> ops;
  MemoryUse memory;
  double step_s = 0;                 // training step, or one decode step
  double tokens_per_s = 0, tokens_per_s_per_device = 0;
  double model_flops_per_token = 0;  // useful FLOPs (training: fwd + bwd)
  double mfu = 0;                    // model FLOP/s over the plan's GEMM-dtype peak
  double ttft_s = 0, tpot_s = 0;     // inference
  double tpot_link_limit_s = 0;      // decode: TPOT if only link bandwidth counted (no
                                     // compute, no latency): the EP speed limit
  // Training with pp > 1: one stage's chunk times and the schedule's bubble, simulated and
  // by the report's closed form (they agree for uniform chunks; see docs/model.md).
  struct Pipeline {
    std::string schedule;
    double f_s = 0, b_s = 0, w_s = 0, fb_s = 0;
    double simulated_bubble_s = 0, formula_bubble_s = 0, makespan_s = 0;
    double peak_inflight = 0;
    std::vector<std::vector<PipelinePass>> timeline;  // the simulated schedule, per stage
  } pipeline;
  // Training: the step as researchers break it down. One chunk (one micro-batch on the slowest
  // stage): forward, backward for the inputs, backward for the weights; then the steady-state
  // body (micro_batches chunks, 1F1B's or DualPipe's), the schedule's bubble, the exposed
  // gradient sync and the optimizer. MFU against the named peaks, causal attention counting
  // the unmasked half and non-causal all of it (0 where the device has no such peak).
  struct Training {
    double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;
    double body_s = 0, bubble_s = 0, grad_sync_s = 0, optimizer_s = 0;
    double tokens_per_day_per_device = 0;
    double mfu_bf16_causal = 0, mfu_bf16_non_causal = 0, mfu_fp8_causal = 0, mfu_fp8_non_causal = 0;
  } training;
  // Serving: throughput per scale-up domain (a node), prefill and decode apart.
  struct Serving {
    double prefill_tokens_per_s = 0, prefill_tokens_per_s_per_node = 0;
    double decode_tokens_per_s_per_node = 0;
    int devices_per_node = 1;
  } serving;
};

// Throws sol::Error for an invalid plan or a workload that does not fit in memory.
Prediction predict(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                   const Workload& w);

// Closed forms the validation cases check (docs/model.md).
double kv_cache_bytes_per_token(const ModelConfig& m, DType kv_dtype);
// Forward + backward FLOPs of one token in a sequence of seq_len (causal attention), LM head
// included, MTP modules when `mtp`.
// causal: each token attends to (i + 1) keys, the unmasked half; otherwise to all seq_len.
double training_flops_per_token(const ModelConfig& m, int64_t seq_len, bool mtp,
                                bool causal = true);
// Forward FLOPs of one new token attending to `context` cached keys (MLA: absorbed, over the
// latent cache), LM head included: what one decoded token costs.
double decode_flops_per_token(const ModelConfig& m, int64_t context);

// What a model is, without hardware or plan (`sol model card`): weights per part and layer,
// totals, KV cache per token and FLOPs per token.
struct ModelCard {
  struct Part {
    std::string name;
    double per_layer = 0;         // weights of one instance
    int64_t layers = 0;           // instances
    double total = 0, active = 0;  // all instances; active: what one token multiplies by
  };
  std::string model;
  std::vector<Part> parts;  // embedding, attention, dense MLP, router, experts, head, MTP
  double total_params = 0, active_params = 0;  // MTP modules excluded, as DeepSeek counts
  double mtp_params = 0;
  double kv_bytes_per_token = 0;  // bf16 cache, all layers
  int64_t seq_len = 0, context = 0;
  double train_flops_causal = 0, train_flops_non_causal = 0, train_flops_causal_mtp = 0;
  double decode_flops = 0;  // at `context`
};
ModelCard model_card(const ModelConfig& m, int64_t seq_len, int64_t context);
std::string model_card_table(const ModelCard& c);
std::string model_card_json(const ModelCard& c);

// Pipeline bubble of one step (DeepSeek-V3 report, table 2). f, b, w: the time of one stage's
// forward chunk, full backward chunk and weight-gradient part of the backward; fb: a forward
// and a backward chunk run overlapped (DualPipe).
struct PipelineCost {
  double bubble_s = 0;
  double param_copies = 1;     // DualPipe keeps two copies of the parameters
  double inflight_microbatches = 0;  // activations of this many micro-batches live at once
};
PipelineCost pipeline_cost(Schedule s, int pp, int micro_batches, double f, double b, double w,
                           double fb);

// The same schedules run pass by pass (src/model/pipeline_sim.cc): the time from the first
// forward to the last weight gradient, the largest idle time of any stage, and the most
// micro-batches whose activations one stage holds at once. Throws sol::Error for a schedule
// that cannot run (DualPipe: odd pp or micro_batches, micro_batches < 2 x pp).
struct PipelineSimulation {
  double makespan_s = 0;
  double bubble_s = 0;
  double peak_inflight = 0;
  std::vector<std::vector<PipelinePass>> stages;  // every pass of every stage, in time order
};
PipelineSimulation simulate_pipeline(Schedule s, int pp, int micro_batches, double f, double b,
                                     double w, double fb);

// Renderers: the per-phase table, the JSON record, an SVG timeline of the phases.
std::string prediction_table(const Prediction& p);
// The `top` ops of each phase by floor time (FLOPs, bytes, link bytes, floor, share, bound);
// empty when top <= 0.
std::string prediction_ops_table(const Prediction& p, int top);
std::string prediction_json(const Prediction& p);
// Floor and calibrated prediction side by side: per phase, the step's figures, and each work
// class with the efficiency it got and the class that answered (or "floor" when none did).
std::string calibrated_table(const Prediction& floor, const Prediction& calibrated,
                             const Efficiency& e);
std::string prediction_svg(const Prediction& p);
// A per-op roofline, one log-log panel per phase: each op at (FLOP per byte, FLOP/s at its
// floor) under the device's matrix peaks and memory bandwidth, dot area its share of the phase.
std::string prediction_roofline_svg(const Prediction& p, const HardwareSpec& hw);

}  // namespace sol
