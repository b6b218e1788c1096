// Registry entry `tile-program`: any tile program file, benchmarked like every other op.
//
//   sol bench tile-program --file examples/tile/gemm_bf16.tile --dims M=2048,N=2048,K=2048
//
// Every dim of the program must be given; each parameter gets a random tensor of its shape and
// dtype. Cost: the flops are the gemm work on data (2 m n k per executed gemm, counted by walking
// the grid and loop bounds, a loop whose body never names its variable in closed form, with
// m, n, k clipped to what the operands' copies filled from the tensors, as the compiled kernel
// skips the padding: 2 M N K for a GEMM of any shape), on the bf16 or f32 unit of the gemm's
// operands; the bytes are every tensor once. A program without gemm is memory-bound by that
// count. The check runs the compiled kernel and the reference interpreter on the same inputs and
// compares every tensor (the interpreter is scalar: keep checked shapes small).
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "compiler/bind.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/tile.h"

namespace sol {

namespace {

std::map<std::string, int64_t> parse_dims(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    sol::check(eq != std::string::npos && eq > 0, "tile-program", "--dims wants NAME=VALUE,... (got '", item, "')");
    out[item.substr(0, eq)] = parse_size(item.substr(eq + 1), "tile-program --dims " + item.substr(0, eq));
  }
  return out;
}

struct GemmWork {
  double bf16 = 0, f32 = 0;
};

// What the walk knows while it counts: tensor shapes, and per tile how much of it holds data
// (its last copy from a tensor fills only the part inside the tensor; anything else that
// writes a tile fills all of it).
struct Walk {
  const tile::Program& p;
  std::map<std::string, std::vector<int64_t>> tensor_shape;
  std::map<std::string, std::vector<int64_t>> filled;
  tile::Env env;
};

void copied_in(Walk& w, const tile::Stmt& s) {
  const tile::Stmt& t = *w.p.alloc(s.refs[1].name);
  const std::vector<int64_t>& shape = w.tensor_shape.at(s.refs[0].name);
  const size_t lead = shape.size() - t.shape.size();
  bool live = true;
  std::vector<int64_t> off;
  for (size_t d = 0; d < shape.size(); ++d) {
    off.push_back(tile::eval_index(s.refs[0].index[d], w.env));
    if (d < lead) live = live && off[d] >= 0 && off[d] < shape[d];
  }
  std::vector<int64_t>& f = w.filled[t.name];
  f.assign(t.shape.size(), 0);
  for (size_t d = 0; d < t.shape.size() && live; ++d)
    f[d] = std::clamp<int64_t>(shape[lead + d] - off[lead + d], 0, t.shape[d]);
}

bool uses(const tile::Expr& e, const std::string& var) {
  if (!e) return false;
  if (e->kind == tile::ExprNode::var && e->name == var) return true;
  return std::any_of(e->args.begin(), e->args.end(), [&](const tile::Expr& a) { return uses(a, var); });
}

// Whether any expression, index or nested loop bound under these statements names `var` (a
// nested loop or parallel that reuses the name counts too: the answer only has to be safe).
bool uses(const std::vector<tile::Stmt>& body, const std::string& var) {
  for (const tile::Stmt& s : body) {
    if (s.name == var && s.kind == tile::Stmt::loop) return true;
    if (std::find(s.vars.begin(), s.vars.end(), var) != s.vars.end()) return true;
    for (const tile::Expr& e : s.exprs)
      if (uses(e, var)) return true;
    for (const tile::Ref& r : s.refs)
      for (const tile::Expr& e : r.index)
        if (uses(e, var)) return true;
    if (uses(s.body, var)) return true;
  }
  return false;
}

void count(Walk& w, const std::vector<tile::Stmt>& body, GemmWork& work);

// A loop whose body never names its variable does the same thing every trip, except that the
// first trip may read tiles filled before the loop. Every write sets a tile's filled part from
// the environment alone, so the state after the first trip is a fixed point: trips 2..n all
// count what trip 2 counts, in closed form however many they are.
void count_loop(Walk& w, const tile::Stmt& s, GemmWork& work) {
  const int64_t lo = tile::eval_index(s.exprs[0], w.env), hi = tile::eval_index(s.exprs[1], w.env);
  if (hi - lo >= 3 && !uses(s.body, s.name)) {
    w.env[s.name] = lo;
    count(w, s.body, work);
    const GemmWork before = work;
    count(w, s.body, work);
    const double more = double(hi - lo - 2);
    work.bf16 += more * (work.bf16 - before.bf16);
    work.f32 += more * (work.f32 - before.f32);
  } else {
    for (int64_t i = lo; i < hi; ++i) {
      w.env[s.name] = i;
      count(w, s.body, work);
    }
  }
  w.env.erase(s.name);
}

// Gemm flops of every cell, loops walked with their bounds evaluated per cell, each gemm
// clipped to the filled part of its operands: the work on data, as the compiled kernel skips
// the zero padding of ragged edges (so 2 M N K for a GEMM of any shape).
void count(Walk& w, const std::vector<tile::Stmt>& body, GemmWork& work) {
  for (const tile::Stmt& s : body) {
    switch (s.kind) {
      case tile::Stmt::copy:
        if (w.tensor_shape.count(s.refs[0].name)) copied_in(w, s);
        else if (!w.tensor_shape.count(s.refs[1].name)) w.filled[s.refs[1].name] = w.p.alloc(s.refs[1].name)->shape;
        break;
      case tile::Stmt::fill:
      case tile::Stmt::parallel:
        w.filled[s.refs[0].name] = w.p.alloc(s.refs[0].name)->shape;
        break;
      case tile::Stmt::cast:
      case tile::Stmt::reduce:
        w.filled[s.refs[1].name] = w.p.alloc(s.refs[1].name)->shape;
        break;
      case tile::Stmt::gemm: {
        const tile::Stmt &a = *w.p.alloc(s.refs[0].name), &b = *w.p.alloc(s.refs[1].name);
        const bool ta = s.has("trans_a"), tb = s.has("trans_b");
        auto filled = [&](const tile::Stmt& t, int d) {
          auto it = w.filled.find(t.name);
          return it == w.filled.end() ? t.shape[size_t(d)] : it->second[size_t(d)];
        };
        const double m = double(filled(a, ta ? 1 : 0)), n = double(filled(b, tb ? 0 : 1));
        const double k = double(std::min(filled(a, ta ? 0 : 1), filled(b, tb ? 1 : 0)));
        (a.dtype == DType::bf16 ? work.bf16 : work.f32) += 2.0 * m * n * k;
        w.filled[s.refs[2].name] = w.p.alloc(s.refs[2].name)->shape;
        break;
      }
      case tile::Stmt::loop:
        count_loop(w, s, work);
        break;
      default: break;
    }
  }
}

class TileProgramCase : public OpCase {
 public:
  TileProgramCase(const std::string& file, const std::string& dims, int64_t cold_bytes) {
    sol::check(!file.empty(), "tile-program", "give the program with --file FILE.tile (examples/tile/)");
    std::ifstream in(file);
    sol::check(bool(in), "tile-program", "cannot read ", file);
    std::ostringstream text;
    text << in.rdbuf();
    program_ = tile::parse(text.str(), file);
    tile::verify(program_);
    dims_ = parse_dims(dims);
    for (const std::string& d : program_.dims())
      sol::check(dims_.count(d) != 0, "tile-program", file, ": give dim ", d, " in --dims (the program's dims: ",
            dim_list(), ")");
    const std::vector<std::string> names = program_.dims();
    for (const auto& [name, v] : dims_)
      sol::check(std::find(names.begin(), names.end(), name) != names.end(), "tile-program",
            file, ": --dims names ", name, " but the program's dims are ", dim_list());
    kernel_ = tile::compile(program_);
    cost_ = compute_cost();
    for (int i = 0; i < sets_for(int64_t(cost_.bytes), cold_bytes); ++i) {
      std::vector<Buffer> set;
      for (size_t t = 0; t < program_.params.size(); ++t) {
        set.emplace_back(program_.params[t].dtype, shape_of(program_.params[t]));
        fill_random(set.back(), 1000 * uint64_t(i) + t + 1, 1.0);
      }
      sets_.push_back(std::move(set));
    }
  }
  std::string shape() const override {
    std::string s = program_.name;
    for (const std::string& d : program_.dims()) s += "," + d + "=" + std::to_string(dims_.at(d));
    return s;
  }
  std::string dtype() const override {
    std::string s;
    for (const tile::Param& q : program_.params) {
      if (!s.empty()) s += ',';
      s += dtype_name(q.dtype);
    }
    return s;
  }
  Cost cost() const override { return cost_; }
  int input_sets() const override { return int(sets_.size()); }
  void run(int i) override {
    std::vector<Tensor> args;
    for (const Buffer& b : sets_[size_t(i)]) args.push_back(b.tensor());
    (*kernel_)(args);
  }
  CheckResult check() override {
    std::vector<Buffer>& set = sets_[0];
    std::vector<Buffer> ref;
    std::vector<Tensor> ref_t;
    for (size_t t = 0; t < set.size(); ++t) {
      fill_random(set[t], t + 1, 1.0);
      ref.emplace_back(set[t].tensor().dtype(), set[t].tensor().shape());
      std::memcpy(ref.back().data(), set[t].data(), size_t(set[t].tensor().nbytes()));
      ref_t.push_back(ref.back().tensor());
    }
    run(0);
    tile::interpret(program_, ref_t);
    CheckResult worst{true, 0, 1e-2, ""};
    for (size_t t = 0; t < set.size(); ++t) {
      CheckResult r = compare_relative(set[t], ref[t], 1e-2);
      if (!r.pass) {
        r.detail = program_.params[t].name + ": " + r.detail;
        return r;
      }
      if (r.error > worst.error) worst = r;
    }
    return worst;
  }

 private:
  std::string dim_list() const {
    std::string s;
    for (const std::string& d : program_.dims()) s += (s.empty() ? "" : ", ") + d;
    return s;
  }
  std::vector<int64_t> shape_of(const tile::Param& q) const {
    std::vector<int64_t> shape;
    for (const tile::Expr& e : q.shape) shape.push_back(tile::eval_index(e, dims_));
    return shape;
  }
  Cost compute_cost() const {
    Walk walk{program_, {}, {}, dims_};
    for (const tile::Param& q : program_.params) walk.tensor_shape[q.name] = shape_of(q);
    std::vector<int64_t> extent;
    int64_t cells = 1;
    for (const tile::GridAxis& a : program_.grid) {
      extent.push_back(tile::eval_index(a.extent, walk.env));
      cells *= std::max<int64_t>(extent.back(), 0);
    }
    GemmWork w;
    for (int64_t c = 0; c < cells; ++c) {
      int64_t rest = c;
      for (size_t i = 0; i < extent.size(); ++i) {
        walk.env[program_.grid[i].name] = rest % extent[i];
        rest /= extent[i];
      }
      walk.filled.clear();
      count(walk, program_.body, w);
    }
    Cost cost;
    cost.flops = w.bf16 + w.f32;
    cost.compute = w.bf16 >= w.f32 ? Unit::dot_bf16 : Unit::fma_f32;
    cost.memory = Unit::mem_read;
    for (const tile::Param& q : program_.params) {
      double n = double(dtype_size(q.dtype));
      for (int64_t d : shape_of(q)) n *= double(d);
      cost.bytes += n;
    }
    return cost;
  }

  tile::Program program_;
  tile::Env dims_;
  std::shared_ptr<const tile::Kernel> kernel_;
  Cost cost_;
  std::vector<std::vector<Buffer>> sets_;
};

}  // namespace

void register_tile_program_op() {
  OpInfo op;
  op.name = "tile-program";
  op.summary = "any tile program: --file FILE.tile --dims NAME=VALUE,... (docs/compiler.md); SOL% from its gemm work";
  op.params = {{"file", "tile program (text form)", "", ParamSpec::text},
               {"dims", "values of the program's dims, NAME=VALUE,... (K/M/G suffixes)", "", ParamSpec::text}};
  // No tables: the program is the user's (so `sol report` and `sol check` skip this op;
  // `sol bench tile-program --file F --dims ... --check` checks it).
  op.bench_table = {};
  op.check_table = {};
  op.report_table = {};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<TileProgramCase>(p.text("file"), p.text("dims"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
