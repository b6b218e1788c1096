#pragma once
// The op registry. Each op registers its name, parameters (with defaults), shape tables, and a
// factory for one case (one shape): the case owns its buffers and knows its cost, how to run,
// and how to check itself against the op's plain reference. `sol bench`, `sol check` and
// `sol report` only walk this registry: adding an op never touches the CLI.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sol/dtype.h"
#include "sol/roofline.h"
#include "sol/tensor.h"

namespace sol {

struct ParamSpec {
  std::string name;           // "n", "m", "from"
  std::string help;
  std::string default_value;  // used when the user names no value
  enum Kind { integer, size, dtype, text, device } kind = integer;  // size accepts K/M/G suffixes
};

// The `device` parameter of an op that runs on a GPU too: where its case puts its operands
// (cpu, cuda = cuda:0, cuda:N). OpCase::device() then says so, and `sol bench` times the case
// with CUDA events and pairs it with the device's ceilings (docs/howto/add-an-op.md).
inline ParamSpec device_param() {
  return {"device", "where the operands live: cpu, cuda, cuda:N", "cpu", ParamSpec::device};
}

// Parameter values by name, as strings; typed getters validate and throw sol::Error naming the
// op and the parameter.
class OpParams {
 public:
  OpParams() = default;
  OpParams(std::string op, std::map<std::string, std::string> values)
      : op_(std::move(op)), values_(std::move(values)) {}
  const std::string& op() const { return op_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::string& text(const std::string& name) const;
  int64_t integer(const std::string& name) const;  // accepts K/M/G (binary) suffixes
  DType dtype(const std::string& name) const;
  // "cpu", "cuda" (cuda:0) or "cuda:N"; a CUDA device that does not exist (or none at all) is a
  // sol::Error naming the op, the parameter and the reason discovery gave.
  Device device(const std::string& name) const;
  void set(const std::string& name, std::string value) { values_[name] = std::move(value); }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::string op_;
  std::map<std::string, std::string> values_;
};

// Parses "64M" -> 67108864; binary suffixes K, M, G (also Ki, Mi, Gi); throws sol::Error.
int64_t parse_size(const std::string& text, const std::string& what);
// "cpu" -> cpu, "cuda" -> cuda:0, "cuda:N" -> cuda:N; anything else is a sol::Error. Does not
// ask whether the device exists (OpParams::device does).
Device parse_device(const std::string& text, const std::string& what);

struct CheckResult {
  bool pass = false;
  double error = 0;      // relative error norm ||out - ref|| / ||ref|| (0 = bit exact)
  double tolerance = 0;
  std::string detail;    // what differed, when it failed
};

class OpCase {
 public:
  virtual ~OpCase() = default;
  virtual std::string shape() const = 0;  // "n=67108864"
  virtual std::string dtype() const = 0;  // "f32" or "f32->bf16"
  virtual Cost cost() const = 0;
  // Where the operands live. A case on cuda:N is timed with CUDA events on the device's current
  // stream and held to the device's ceilings; its run() only enqueues work on that stream.
  virtual Device device() const { return Device::cpu(); }
  // Number of distinct input/output sets the case allocated (cold mode rotates through them).
  virtual int input_sets() const { return 1; }
  virtual void run(int set) = 0;
  // Poison outputs, run the op, compare with the reference.
  virtual CheckResult check() = 0;
  // Another implementation of the same op on the same operands (cuBLASLt for a GEMM on a GPU),
  // which `sol bench` times right beside the op and holds to the op's floor, on one row with it:
  // its name ("cuBLASLt 13.1.0 bf16"), or "" when the case has none. run_anchor enqueues one run
  // of it on input set `set` (a case without an anchor throws sol::Error).
  virtual std::string anchor() const { return ""; }
  virtual void run_anchor(int set);
};

struct OpInfo {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  // Default cases for `sol bench OP` and `sol report` (partial maps; defaults fill the rest).
  std::vector<std::map<std::string, std::string>> bench_table;
  // The cases `sol report` runs, when they must be fewer than the bench table (the report runs
  // every op at 1 and 2 threads and has a time budget); empty: the whole bench table.
  std::vector<std::map<std::string, std::string>> report_table;
  // Small and odd cases `sol check` runs (sizes 0, 1, primes, unaligned...).
  std::vector<std::map<std::string, std::string>> check_table;
  // The parameter that counts the op's independent rows (tokens, batch, elements), if any:
  // `sol bench` shrinks it to time the op with its data in cache (BenchRecord::in_cache_*),
  // which shows whether memory or the op's own instructions hold it short of its floor. Empty:
  // no in-cache figure (an op whose bytes do not shrink with its rows, e.g. a gather from a
  // table larger than the cache). register_op checks that it names one of `params`.
  std::string rows_param;
  // Builds one case. `cold_bytes` > 0 asks for enough input sets to cover that many bytes.
  std::function<std::unique_ptr<OpCase>(const OpParams&, int64_t cold_bytes)> make;
  // The cost of the case `make` would build for these (resolved) parameters, without building
  // it (no buffers): for costing a workload's calls of the op (sol.op_cost, sol.profile). Empty:
  // only a built case knows its cost.
  std::function<Cost(const OpParams&)> cost;
};

void register_op(OpInfo info);                // throws on a duplicate name
const std::vector<OpInfo>& registered_ops();  // in registration order
const OpInfo& find_op(const std::string& name);  // throws sol::Error listing the known ops
// Fills defaults and rejects parameters the op does not have.
OpParams resolve_params(const OpInfo& op, const std::map<std::string, std::string>& given);

}  // namespace sol
