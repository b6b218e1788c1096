// sol model --model M --hw H [--plan P] [--workload W] [--json] [--svg FILE] [--roofline FILE]
//           [--ops N]
// sol model sweep --param NAME --values a,b,c ... — one parameter over values, one row each.
// sol model loop [--report FILE] — predict the ops of a `sol report` and show the error.
// sol model card --model M [--seq-len N] [--context N] — weights, KV cache, FLOPs per token.
// sol model calibrate --report FILE [--out FILE] — an efficiency layer from kernel records.
// The co-design model: per-phase floor times of a training step or an inference request.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>

#include "cli.h"
#include "model_cli.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/model_loop.h"

namespace sol::cli {

namespace {
struct ModelArgs {
  std::string model, hw, plan, workload = "chat", svg, roofline, param, calibration, out;
  int threads = 0;  // sol model calibrate --threads
  std::string report = "sol-report/report.json";
  std::vector<std::string> values;
  bool json = false;
  int ops = 0;  // --ops N: the N largest ops of each phase
  long long seq_len = 4096, context = 4096;  // sol model card
};

struct Inputs {
  ModelConfig model;
  HardwareSpec hw;
  ParallelPlan plan;
  Workload workload;
  bool auto_plan = false;
};

Inputs load_inputs(const ModelArgs& a) {
  Inputs in{load_model_config(a.model), load_hardware_spec(a.hw), {}, load_workload(a.workload)};
  if (!a.calibration.empty())
    in.hw.efficiency = std::make_shared<const Efficiency>(load_efficiency(a.calibration));
  in.auto_plan = a.plan.empty();
  in.plan = in.auto_plan ? default_plan(in.model, in.hw, in.workload) : load_parallel_plan(a.plan);
  return in;
}

double parse_number(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  fail("sol model sweep", what, ": expected a non-negative number, got '", text, "'");
}

// A value of an integer parameter: whole and within what the field holds (the JSON readers'
// bound), never truncated (1.5 -> 1) or converted out of range.
int64_t whole(double v, const char* name, double max = 2147483647) {
  check(v == std::floor(v) && v <= max, "sol model sweep", "--param ", name, ": expected an integer in [0, ",
        int64_t(max), "], got ", v);
  return int64_t(v);
}

// Each sweepable parameter writes one field of the inputs.
using Setter = std::function<void(Inputs&, double)>;
const std::map<std::string, Setter>& sweep_params() {
  static const std::map<std::string, Setter> params = {
      {"dp", [](Inputs& in, double v) { in.plan.dp = int(whole(v, "dp")); }},
      {"tp", [](Inputs& in, double v) { in.plan.tp = int(whole(v, "tp")); }},
      {"pp", [](Inputs& in, double v) { in.plan.pp = int(whole(v, "pp")); }},
      {"ep", [](Inputs& in, double v) { in.plan.ep = int(whole(v, "ep")); }},
      {"micro_batches", [](Inputs& in, double v) { in.plan.micro_batches = int(whole(v, "micro_batches", 65536)); }},
      {"expert_load_imbalance", [](Inputs& in, double v) { in.plan.expert_load_imbalance = v; }},
      {"global_batch", [](Inputs& in, double v) { in.workload.global_batch = whole(v, "global_batch"); }},
      {"seq_len", [](Inputs& in, double v) { in.workload.seq_len = whole(v, "seq_len"); }},
      {"decode_batch", [](Inputs& in, double v) { in.workload.decode_batch = whole(v, "decode_batch"); }},
      {"context_tokens", [](Inputs& in, double v) { in.workload.context_tokens = whole(v, "context_tokens"); }},
      {"prefill_batch", [](Inputs& in, double v) { in.workload.prefill_batch = whole(v, "prefill_batch"); }},
      {"scale_up_gb_s", [](Inputs& in, double v) { in.hw.scale_up_bandwidth = v * 1e9; }},
      {"scale_out_gb_s", [](Inputs& in, double v) { in.hw.scale_out_bandwidth = v * 1e9; }},
      {"memory_gb_s", [](Inputs& in, double v) { in.hw.memory_bandwidth = v * 1e9; }},
  };
  return params;
}

void check_plan_shape(const ParallelPlan& p) {
  check(p.dp >= 1 && p.tp >= 1 && p.pp >= 1 && p.ep >= 1 && p.micro_batches >= 1,
        "sol model sweep", "plan degrees must be >= 1");
  check(p.expert_load_imbalance >= 1, "sol model sweep", "expert_load_imbalance must be >= 1, "
        "got ", p.expert_load_imbalance);
  check(int64_t(p.dp) * p.tp % p.ep == 0, "sol model sweep", "ep = ", p.ep, " must divide dp x tp = ",
        int64_t(p.dp) * p.tp);
}

void run_single(const ModelArgs& a) {
  Inputs in = load_inputs(a);
  Prediction p = predict(in.model, in.hw, in.plan, in.workload);
  // With an efficiency layer: the floor prediction beside the calibrated one; pictures and
  // the ops table show the calibrated times.
  Prediction floor = p;
  if (in.hw.efficiency) {
    HardwareSpec bare = in.hw;
    bare.efficiency.reset();
    floor = predict(in.model, bare, in.plan, in.workload);
  }
  if (!a.svg.empty()) {
    std::ofstream out(a.svg);
    check(out.good(), "sol model", "cannot write --svg ", a.svg);
    out << prediction_svg(p);
  }
  if (!a.roofline.empty()) {
    std::ofstream out(a.roofline);
    check(out.good(), "sol model", "cannot write --roofline ", a.roofline);
    out << prediction_roofline_svg(p, in.hw);
  }
  if (a.json) {
    if (in.hw.efficiency)
      fmt::print("{{\n\"floor\": {},\n\"calibrated\": {}\n}}\n", prediction_json(floor),
                 prediction_json(p));
    else
      fmt::print("{}\n", prediction_json(p));
    return;
  }
  if (in.auto_plan)
    fmt::print("plan auto: dp {} tp {} pp {} ep {}, gemm {}\n", in.plan.dp, in.plan.tp,
               in.plan.pp, in.plan.ep, dtype_name(in.plan.gemm_dtype));
  if (in.hw.confidence == "low")
    fmt::print("note: hardware {} is marked low-confidence (figures not from a primary source)\n",
               in.hw.name);
  fmt::print("{}", prediction_table(floor));
  if (in.hw.efficiency) fmt::print("{}", calibrated_table(floor, p, *in.hw.efficiency));
  fmt::print("{}", prediction_ops_table(p, a.ops));
}

void run_sweep(const ModelArgs& a) {
  auto it = sweep_params().find(a.param);
  if (it == sweep_params().end()) {
    std::string known;
    for (const auto& [name, setter] : sweep_params()) known += (known.empty() ? "" : ", ") + name;
    fail("sol model sweep", "--param '", a.param, "' is not sweepable (known: ", known, ")");
  }
  check(!a.values.empty(), "sol model sweep", "--values needs at least one value");
  Inputs base = load_inputs(a);
  nlohmann::json rows = nlohmann::json::array();
  int predicted = 0;
  int width = std::max<int>(14, int(a.param.size()));
  if (!a.json)
    fmt::print("{:>{}} {:>8} {:>14} {:>14} {:>14} {:>8}  {}\n", a.param, width, "devices",
               "step/TPOT ms", "tokens/s", "tok/s/device", "MFU %", "bottleneck");
  for (const std::string& text : a.values) {
    Inputs in = base;
    // A value that is malformed, does not fit or breaks the plan is a row of the answer, not
    // the end of it.
    Prediction p;
    try {
      it->second(in, parse_number(text, "--values"));
      check_plan_shape(in.plan);
      p = predict(in.model, in.hw, in.plan, in.workload);
    } catch (const Error& e) {
      if (a.json)
        rows.push_back({{"sweep", {{"param", a.param}, {"value", text}}}, {"error", e.what()}});
      else
        fmt::print("{:>{}} {:>8}  {}\n", text, width, in.plan.devices(), e.what());
      continue;
    }
    ++predicted;
    std::string bottleneck = p.phases.empty() ? "none" : p.phases.back().bottleneck;
    for (const PhaseResult& ph : p.phases)
      if (ph.name == "forward+backward" || ph.name == "decode") bottleneck = ph.bottleneck;
    if (a.json) {
      nlohmann::json record = nlohmann::json::parse(prediction_json(p));
      record["sweep"] = {{"param", a.param}, {"value", text}};
      record.erase("ops");
      rows.push_back(record);
    } else {
      fmt::print("{:>{}} {:>8} {:>14.3f} {:>14.0f} {:>14.1f} {:>8.1f}  {}\n", text, width, p.devices,
                 p.step_s * 1e3, p.tokens_per_s, p.tokens_per_s_per_device, 100 * p.mfu,
                 bottleneck);
    }
  }
  if (a.json) fmt::print("{}\n", rows.dump(2));
  check(predicted > 0, "sol model sweep", "no value of --param ", a.param, " gave a prediction");
}

// "dram size, in cache" etc.: where a prediction's numbers came from.
std::string loop_source(const PredictedOp& p) {
  std::string s = p.regime;
  if (p.in_cache_bound) s += ", own in-cache time";
  if (p.single_peer) s += " (single peer!)";
  return s;
}

void run_loop(const ModelArgs& a) {
  MachineProfile machine = load_or_measure_machine(false);  // a bare array of records uses it
  std::vector<LoopRecord> ops;
  read_loop_records(a.report, machine, ops);
  std::vector<PredictedOp> preds = predict_loop(machine, ops);
  std::vector<double> all_err, multi_err;
  std::map<std::string, std::vector<double>> by_op;
  for (const auto& p : preds) {
    if (p.peers == 0 || !p.dropped.empty()) continue;
    all_err.push_back(std::fabs(p.error_pct));
    by_op[p.measured.op].push_back(std::fabs(p.error_pct));
    if (!p.single_peer) multi_err.push_back(std::fabs(p.error_pct));
  }
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& p : preds)
      rows.push_back({{"op", p.measured.op}, {"shape", p.measured.shape}, {"dtype", p.measured.dtype},
                      {"threads", p.measured.threads}, {"measured_s", p.measured.measured_s},
                      {"floor_s", p.floor_s}, {"efficiency", p.efficiency}, {"peers", p.peers},
                      {"regime", p.regime}, {"peer_efficiency", p.peer_efficiency},
                      {"in_cache_s", p.measured.in_cache_s}, {"in_cache_bound", p.in_cache_bound},
                      {"single_peer", p.single_peer}, {"dropped", p.dropped},
                      {"predicted_s", p.predicted_s}, {"error_pct", p.error_pct}});
    fmt::print("{}\n", rows.dump(2));
    return;
  }
  fmt::print("{:<13} {:<28} {:<18} {:>3} {:>10} {:>10} {:>10} {:>6} {:>8}  {}\n", "op", "shape",
             "dtype", "thr", "floor ms", "measured", "predicted", "peers", "error %", "from");
  for (const auto& p : preds) {
    const LoopRecord& m = p.measured;
    std::string shape = m.shape.size() > 28 ? m.shape.substr(0, 25) + "..." : m.shape;
    if (!p.dropped.empty() || p.peers == 0)
      fmt::print("{:<13} {:<28} {:<18} {:>3} {:>10.3f} {:>10.3f} {:>10} {:>6} {:>8}  {}\n", m.op,
                 shape, m.dtype, m.threads, p.floor_s * 1e3, m.measured_s * 1e3, "-", p.peers, "-",
                 p.dropped.empty() ? "no peer" : "dropped: " + p.dropped);
    else
      fmt::print("{:<13} {:<28} {:<18} {:>3} {:>10.3f} {:>10.3f} {:>10.3f} {:>6} {:>+8.1f}  {}\n",
                 m.op, shape, m.dtype, m.threads, p.floor_s * 1e3, m.measured_s * 1e3,
                 p.predicted_s * 1e3, p.peers, p.error_pct, loop_source(p));
  }
  auto median_of = [](std::vector<double> e) {
    std::sort(e.begin(), e.end());
    size_t h = e.size() / 2;
    return e.size() % 2 ? e[h] : 0.5 * (e[h - 1] + e[h]);
  };
  auto summary = [&](const std::vector<double>& e, const std::string& what) {
    if (e.empty()) return;
    fmt::print("{:>3} ops predicted {:<26} median |error| {:5.1f}%, worst {:5.1f}%\n", e.size(), what + ":",
               median_of(e), *std::max_element(e.begin(), e.end()));
  };
  fmt::print("\n");
  summary(all_err, "(all)");
  summary(multi_err, "from two or more peers");
  for (const auto& [op, e] : by_op) summary(e, op);
}

void add_input_options(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--model", a.model, "Model: a name under models/ or a config.json path (required)");
  cmd->add_option("--hw", a.hw, "Hardware: a name under hardware/, a JSON path, or 'this' (required)");
  cmd->add_option("--plan", a.plan, "Parallel plan: a name under plans/ or a path (default: "
                                    "the smallest plan that fits)");
  cmd->add_option("--workload", a.workload, "Workload: a name under workloads/ or a path")
      ->capture_default_str();
  cmd->add_flag("--json", a.json, "Print JSON instead of the table");
  cmd->add_option("--calibration", a.calibration, "Efficiency layer: a name under "
                  "hardware/calibration/ or a path (written by `sol model calibrate`); the "
                  "floor and the calibrated prediction are printed side by side");
}
}  // namespace

void add_model(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ModelArgs>();
  auto* cmd = app.add_subcommand("model", "Co-design model: a model's step on any cluster at the "
                                          "physical limit (per-phase table, JSON, SVG)");
  add_input_options(cmd, *args);
  cmd->add_option("--svg", args->svg, "Write an SVG timeline of the phases to this file");
  cmd->add_option("--ops", args->ops, "Also print the N largest ops of each phase by floor time")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--roofline", args->roofline,
                  "Write an SVG per-op roofline (one panel per phase) to this file");
  auto* sweep = cmd->add_subcommand("sweep", "Vary one parameter: plan degrees, batch, context, "
                                             "link or memory bandwidth");
  sweep->fallthrough();
  sweep->add_option("--param", args->param, "The parameter to vary")->required();
  sweep->add_option("--values", args->values, "Comma-separated values")->required()->delimiter(',');
  auto* loop = cmd->add_subcommand("loop", "Close the loop on this machine: predict each op of a "
                                           "`sol report` from its floor and its peers' efficiency");
  loop->add_option("--report", args->report, "report.json written by `sol report`")
      ->capture_default_str();
  loop->add_flag("--json", args->json, "Print JSON instead of the table");
  auto* card = cmd->add_subcommand("card", "What a model is: weights per part, total and active, "
                                          "KV cache and FLOPs per token (no hardware, no plan)");
  card->fallthrough();
  card->add_option("--seq-len", args->seq_len, "Training sequence length for FLOPs per token")
      ->capture_default_str()->check(CLI::Range(1LL, 1LL << 40));
  card->add_option("--context", args->context, "Decode context for FLOPs per token")
      ->capture_default_str()->check(CLI::Range(0LL, 1LL << 40));
  auto* calibrate = cmd->add_subcommand("calibrate", "Build an efficiency layer from kernel "
                                                    "records (sol report / sol bench --json)");
  calibrate->add_option("--report", args->report, "report.json of `sol report`, or the records "
                        "`sol bench --json` prints")->capture_default_str();
  calibrate->add_option("--threads", args->threads, "Only records at this thread count (0: all)")
      ->check(CLI::Range(0, 4096));
  calibrate->add_option("--out", args->out, "Write the efficiency layer (JSON) to this file");
  calibrate->add_flag("--json", args->json, "Print the efficiency layer as JSON");
  cmd->callback([args, sweep, loop, card, calibrate, &exit_code] {
    if (calibrate->parsed()) {
      run_model_calibrate(args->report, args->threads, args->out, args->json);
    } else if (card->parsed()) {
      run_model_card(args->model, args->seq_len, args->context, args->json);
    } else if (loop->parsed()) {
      run_loop(*args);
    } else {
      check(!args->model.empty() && !args->hw.empty(), "sol model", "--model and --hw are required");
      if (sweep->parsed()) run_sweep(*args);
      else run_single(*args);
    }
    exit_code = kOk;
  });
}

}  // namespace sol::cli
