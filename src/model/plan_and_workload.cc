// Parallel plans and workloads as JSON. A plan states its device count: dp x tp x pp must equal
// it, so a plan that does not divide the devices is caught where it is written.
#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_json::Fields;

// The pipeline simulator steps through every micro-batch of every stage.
constexpr int64_t kMaxMicroBatches = 1 << 16;

Schedule parse_schedule(Fields& f) {
  std::string s = f.text_or("schedule", "1f1b");
  if (s == "1f1b") return Schedule::one_f_one_b;
  if (s == "zb1p") return Schedule::zb1p;
  if (s == "dualpipe") return Schedule::dualpipe;
  f.fail_key("schedule", "\"1f1b\", \"zb1p\" or \"dualpipe\"");
}

Recompute parse_recompute(Fields& f) {
  std::string s = f.text_or("recompute", "none");
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  f.fail_key("recompute", "\"none\", \"selective\" or \"full\"");
}
}  // namespace

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string_view schedule_name(Schedule s) {
  switch (s) {
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::zb1p: return "zb1p";
    case Schedule::dualpipe: return "dualpipe";
  }
  return "?";
}

ParallelPlan parse_parallel_plan(const std::string& text, const std::string& origin) {
  nlohmann::json doc = model_json::parse_document(text, origin);
  Fields f(doc, origin);
  ParallelPlan p;
  p.origin = origin;
  p.key_lines = json_key_lines(text);
  p.name = f.text("name");
  f.text_or("description", "");
  int64_t devices = f.integer("devices");
  // dp may be left out only where it is 1; otherwise the file forgot it.
  int64_t rest = f.integer_or("tp", 1, 1) * f.integer_or("pp", 1, 1);
  if (!f.has("dp") && devices != rest && devices % rest == 0)
    fail(origin, "missing key 'dp' (expected an integer >= 1: devices / (tp x pp) = ",
         devices / rest, ")");
  p.dp = static_cast<int>(f.integer_or("dp", 1, 1));
  p.tp = static_cast<int>(f.integer_or("tp", 1, 1));
  p.pp = static_cast<int>(f.integer_or("pp", 1, 1));
  p.ep = static_cast<int>(f.integer_or("ep", 1, 1));
  check(int64_t(p.dp) * p.tp * p.pp == devices, origin, "dp x tp x pp = ", p.dp, " x ", p.tp,
        " x ", p.pp, " = ", int64_t(p.dp) * p.tp * p.pp, " but devices = ", devices);
  check((p.dp * p.tp) % p.ep == 0, origin, "ep = ", p.ep, " must divide dp x tp = ",
        p.dp * p.tp, " (expert groups are carved from the data- and tensor-parallel devices)");
  p.zero_stage = static_cast<int>(f.integer_or("zero_stage", 0, 0, 3));
  p.schedule = parse_schedule(f);
  p.micro_batches = static_cast<int>(f.integer_or("micro_batches", 1, 1, kMaxMicroBatches));
  p.recompute = parse_recompute(f);
  p.overlap = f.boolean_or("overlap", false);
  p.node_limited_routing = f.boolean_or("node_limited_routing", false);
  p.max_nodes_per_token = static_cast<int>(f.integer_or("max_nodes_per_token", 0, 1));
  p.shared_expert_as_routed = f.boolean_or("shared_expert_as_routed", false);
  p.redundant_experts = static_cast<int>(f.integer_or("redundant_experts", 0, 0));
  p.expert_load_imbalance = f.number_or("expert_load_imbalance", 1, 1);
  if (f.has("dtypes")) {
    Fields d = f.object("dtypes");
    p.gemm_dtype = d.dtype_or("gemm", p.gemm_dtype);
    p.weight_dtype = d.dtype_or("weights", p.weight_dtype);
    p.dispatch_dtype = d.dtype_or("dispatch", p.dispatch_dtype);
    p.combine_dtype = d.dtype_or("combine", p.combine_dtype);
    p.kv_dtype = d.dtype_or("kv_cache", p.kv_dtype);
    d.finish();
  }
  f.accept({"dtypes"});
  f.finish();
  return p;
}

Workload parse_workload(const std::string& text, const std::string& origin) {
  nlohmann::json doc = model_json::parse_document(text, origin);
  Fields f(doc, origin);
  Workload w;
  w.origin = origin;
  w.key_lines = json_key_lines(text);
  w.name = f.text("name");
  f.text_or("description", "");
  std::string kind = f.text("kind");
  if (kind == "training") {
    w.kind = Workload::Kind::training;
    w.seq_len = f.integer("seq_len");
    w.global_batch = f.integer("global_batch");
    w.mtp = f.boolean_or("mtp", false);
  } else if (kind == "inference") {
    w.kind = Workload::Kind::inference;
    // A prefill-only or decode-only workload leaves the other section out.
    if (!f.has("prefill") && !f.has("decode"))
      f.fail_key("prefill", "a prefill or a decode section (or both)");
    if (f.has("prefill")) {
      Fields prefill = f.object("prefill");
      w.prefill_batch = prefill.integer("batch");
      w.prompt_tokens = prefill.integer("prompt_tokens");
      w.kv_cache_hit_rate = prefill.number_or("kv_cache_hit_rate", 0);
      if (w.kv_cache_hit_rate >= 1) prefill.fail_key("kv_cache_hit_rate", "a share in [0, 1)");
      prefill.finish();
    }
    f.accept({"prefill"});
    if (f.has("decode")) {
      Fields decode = f.object("decode");
      w.decode_batch = decode.integer("batch");
      w.context_tokens = decode.integer("context_tokens");
      if (decode.has("mtp_acceptance")) {
        w.mtp_decode = true;
        w.mtp_acceptance = decode.number("mtp_acceptance", 0);
        if (w.mtp_acceptance > 1) decode.fail_key("mtp_acceptance", "a probability in [0, 1]");
      }
      decode.finish();
    }
    f.accept({"decode"});
  } else {
    f.fail_key("kind", "\"training\" or \"inference\"");
  }
  f.finish();
  return w;
}

std::map<std::string, int> json_key_lines(const std::string& text) {
  std::map<std::string, int> lines;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (text[i] != '"') continue;
    size_t end = text.find('"', i + 1);
    if (end == std::string::npos) break;
    size_t after = text.find_first_not_of(" \t\r\n", end + 1);
    if (after != std::string::npos && text[after] == ':')
      lines.emplace(text.substr(i + 1, end - i - 1), line);
    for (size_t j = i + 1; j < end; ++j) line += text[j] == '\n';
    i = end;
  }
  return lines;
}

std::string key_where(const std::string& origin, const std::map<std::string, int>& lines,
                      const std::string& key) {
  auto it = lines.find(key);
  std::string out = origin.empty() ? "(no file)" : origin;
  if (it != lines.end()) out.append(":").append(std::to_string(it->second));
  return out.append(" key '").append(key).append("'");
}

double Workload::tokens_per_decode_step(int64_t depth) const {
  double tokens = 1, accepted = 1;
  if (!mtp_decode) return tokens;
  for (int64_t i = 0; i < depth; ++i) tokens += (accepted *= mtp_acceptance);
  return tokens;
}

}  // namespace sol
