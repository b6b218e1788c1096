#pragma once
// Sol's tile language: write a kernel as a grid of tile programs in C++ (this builder) or in
// the text form (sol/tile_ir.h), check it with the reference interpreter, compile it to a
// shared object that calls Sol's micro-kernels, and run it on tensors.
//
//   tile::Builder b("scale");
//   tile::Value n = b.dim("N");
//   auto x = b.tensor("X", DType::f32, {n}), y = b.tensor("Y", DType::f32, {n});
//   auto [bx] = b.grid<1>({{"bx", ceildiv(n, 64)}});
//   auto t = b.fragment("t", DType::f32, {64});
//   b.copy(x(bx * 64), t);
//   b.parallel({"i"}, t, [&](auto i) { b.assign(t(i[0]), t(i[0]) * 2.0); });
//   b.copy(t, y(bx * 64));
//   auto kernel = tile::compile(b.finish());
//   (*kernel)({x_tensor, y_tensor});
#include <array>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "sol/tensor.h"
#include "sol/tile_ir.h"

namespace sol::tile {

class Value {
 public:
  Value(Expr e) : e_(std::move(e)) {}
  Value(int v) : e_(make_int(v)) {}
  Value(int64_t v) : e_(make_int(v)) {}
  Value(double v) : e_(make_real(v)) {}
  const Expr& expr() const { return e_; }

 private:
  Expr e_;
};

Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator%(const Value& a, const Value& b);
Value operator<(const Value& a, const Value& b);
Value operator<=(const Value& a, const Value& b);
Value ceildiv(const Value& a, const Value& b);
Value max(const Value& a, const Value& b);
Value min(const Value& a, const Value& b);
Value select(const Value& cond, const Value& a, const Value& b);
Value exp2(const Value& a);
Value exp(const Value& a);
Value log(const Value& a);
Value rsqrt(const Value& a);
Value sqrt(const Value& a);
Value abs(const Value& a);
Value to_float(const Value& a);

// A tensor or tile, optionally at an offset; as a Value it is an element load.
class Region {
 public:
  Region(std::string name, std::vector<Value> index = {});
  const Ref& ref() const { return ref_; }
  operator Value() const { return make_load(ref_.name, ref_.index); }

 private:
  Ref ref_;
};

struct Handle {
  std::string name;
  template <class... I> Region operator()(const I&... index) const { return Region(name, {Value(index)...}); }
  operator Region() const { return Region(name); }
};

struct GemmFlags {
  bool trans_a = false, trans_b = false, clear = false;
};
struct LoopOptions {
  int stages = 0;       // > 1: software-pipelined (the next tile's loads are issued early)
  bool unroll = false;  // fully unrolled (constant trip count)
};

class Builder {
 public:
  using Loc = std::source_location;
  explicit Builder(std::string kernel_name, Loc loc = Loc::current());

  Value dim(const std::string& name);
  Handle tensor(const std::string& name, DType dtype, std::vector<Value> shape);
  std::vector<Value> grid(std::vector<std::pair<std::string, Value>> axes);
  template <size_t N> std::array<Value, N> grid(std::vector<std::pair<std::string, Value>> axes) {
    std::vector<Value> v = grid(std::move(axes));
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::array<Value, N>{v.at(I)...}; }(
        std::make_index_sequence<N>());
  }

  Handle fragment(const std::string& name, DType dtype, std::vector<int64_t> shape, Loc loc = Loc::current());
  Handle scratch(const std::string& name, DType dtype, std::vector<int64_t> shape, Loc loc = Loc::current());
  void fill(const Region& dst, const Value& v, Loc loc = Loc::current());
  void copy(const Region& src, const Region& dst, Loc loc = Loc::current());
  void cast(const Region& src, const Region& dst, Loc loc = Loc::current());
  void gemm(const Region& a, const Region& b, const Region& c, GemmFlags f = {}, Loc loc = Loc::current());
  void reduce_sum(const Region& src, const Region& dst, int axis, bool clear = true, Loc loc = Loc::current());
  void reduce_max(const Region& src, const Region& dst, int axis, bool clear = true, Loc loc = Loc::current());
  void for_range(const std::string& var, const Value& lo, const Value& hi, const std::function<void(Value)>& body,
                 LoopOptions opt = {}, Loc loc = Loc::current());
  void parallel(std::vector<std::string> vars, const Handle& over,
                const std::function<void(const std::vector<Value>&)>& body, Loc loc = Loc::current());
  void assign(const Region& dst, const Value& v, Loc loc = Loc::current());

  Program finish();

 private:
  Stmt& add(Stmt s, Loc loc);
  void reduce(const char* kind, const Region& src, const Region& dst, int axis, bool clear, Loc loc);
  Program p_;
  std::vector<std::vector<Stmt>*> open_;
};

// ---- checking, lowering, compiling ----

// Shapes, dtypes, names, bounds and layouts; throws sol::Error "kernel NAME, line L: ...".
void verify(const Program& p);
// Runs the program on tensors (one per parameter, in order) with scalar code: the meaning
// every compiled kernel is checked against. Single-threaded, f32 arithmetic (f64 gemm sums).
void interpret(const Program& p, std::span<const Tensor> args);

enum class Target { cpu, cuda };
// What the CPU target's micro-kernels want of the tiles they read: data, chosen once per
// compile. compile() (and `sol compile`, sol.tile.lower) default to this machine's at the ISA
// level in force (cpu_target_here(): the core's bf16 route, as sol::gemm takes it); lower()
// alone reads no machine and defaults to CpuTarget{}; tests and golden files fix it by hand.
struct CpuTarget {
  // A bf16 tile read as gemm's A holds its values widened to f32 (the tile kernels multiply
  // bf16 by f32 FMAs on cores whose FMA pipes outrun their bf16 dot product), not bf16 pairs.
  bool widen_bf16_a = false;
};
CpuTarget cpu_target_here();
struct CompileOptions {
  Target target = Target::cpu;
  std::optional<CpuTarget> cpu;         // unset: see CpuTarget
  std::vector<std::string> dump_after;  // pass names, or "all"
  std::ostream* dump = nullptr;         // where dumps go (stderr when null)
  bool memory_cache = true;             // false: skip the in-process cache (the disk cache still applies)
};

// The passes of the CPU pipeline, and of a target's pipeline, in order.
std::vector<std::string> pass_names();
std::vector<std::string> pass_names_for(Target target);
// Verifies, then runs the pass pipeline for the target; the result is what code generation reads.
Program lower(const Program& p, const CompileOptions& opt = {});
// Source of the lowered program: C++ for the CPU (calls the micro-kernels through
// src/compiler/runtime/sol_tile_runtime.h), from lower() with Target::cpu.
std::string emit_cpp(const Program& lowered);
// CUDA C++ for Hopper (sm_90a), from lower() with Target::cuda: a __global__ sol_tile_kernel
// (one block per cell) and an extern "C" host launcher sol_tile_launch; includes only
// src/compiler/runtime/sol_tile_cuda.cuh. Compiled with nvcc, not run by Sol yet (no GPU
// runtime in this build). docs/compiler.md, "CUDA target".
std::string emit_cuda(const Program& lowered);

class Kernel {
 public:
  virtual ~Kernel() = default;
  // One tensor per parameter, in order; dims are bound from the shapes (and must agree).
  virtual void operator()(std::span<const Tensor> args) const = 0;
  void operator()(std::initializer_list<Tensor> args) const { (*this)(std::span<const Tensor>(args.begin(), args.size())); }
  virtual const Program& program() const = 0;  // as lowered
  virtual const std::string& library_path() const = 0;
};

struct CompileInfo {
  bool memory_hit = false, disk_hit = false;
  double seconds = 0;  // wall time of compile(), compiler included
  std::string key;     // the cache key (hex)
};

// Lowers, emits C++, compiles with the system compiler into the JIT cache (SOL_JIT_CACHE_DIR,
// default $XDG_CACHE_HOME/sol/jit or ~/.cache/sol/jit) and loads the result. Repeated calls
// with the same program hit an in-memory cache, other processes the on-disk one.
std::shared_ptr<const Kernel> compile(const Program& p, const CompileOptions& opt = {}, CompileInfo* info = nullptr);

}  // namespace sol::tile
