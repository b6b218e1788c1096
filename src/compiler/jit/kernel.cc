// compile(): lower, emit, build (or find) the shared object, load it; and the loaded kernel,
// which binds tensors to the runtime ABI at each call. Loaded kernels stay loaded for the
// process's life (the in-memory cache holds them; dlclose would invalidate shared handles).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "compiler/bind.h"
#include "compiler/ir/rewrite.h"
#include "compiler/jit/jit.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/threads.h"
#include "sol/tile.h"

namespace sol::tile {

namespace {

// The calling thread's scratch for the arenas of a launch, kept and grown across launches (see
// sol_rt::Launch::scratch). A kernel may run on the calling thread while another thread runs
// another: each host thread has its own.
char* scratch(int64_t bytes) {
  struct Block {
    void* data = nullptr;
    int64_t size = 0;
    ~Block() { std::free(data); }
  };
  thread_local Block block;
  if (block.size < bytes) {
    std::free(block.data);
    block.size = 0;
    block.data = std::aligned_alloc(4096, size_t(std::max<int64_t>(bytes, 4096)));
    check(block.data != nullptr, "tile kernel", "cannot allocate ", bytes, " bytes of scratch");
    block.size = std::max<int64_t>(bytes, 4096);
  }
  return static_cast<char*>(block.data);
}

class LoadedKernel : public Kernel {
 public:
  LoadedKernel(Program lowered, std::string path) : p_(std::move(lowered)), path_(std::move(path)) {
    void* h = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    check(h != nullptr, "tile jit", "cannot load ", path_, ": ", ::dlerror());
    auto abi = reinterpret_cast<int (*)()>(::dlsym(h, "sol_tile_abi"));
    entry_ = reinterpret_cast<sol_rt::KernelEntry>(::dlsym(h, "sol_tile_main"));
    check(abi && entry_, "tile jit", path_, " is not a Sol tile kernel");
    check(abi() == sol_rt::kAbiVersion, "tile jit", path_, " was built for runtime ABI ", abi(), ", not ",
          sol_rt::kAbiVersion);
    walk(p_.body, [&](const Stmt& s) { widened_ = widened_ || (s.kind == Stmt::alloc && s.has("widened")); });
  }

  void operator()(std::span<const Tensor> args) const override {
    bind_dims(p_, args);  // validates dtypes, ranks and dims
    std::vector<sol_rt::TensorArg> a(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      a[i].data = args[i].data();
      for (int d = 0; d < args[i].ndim(); ++d) {
        a[i].shape[d] = args[i].shape(d);
        a[i].stride[d] = args[i].stride(d);
      }
    }
    const sol_rt::Runtime& rt = runtime_table();
    check(!widened_ || rt.gemm_tile_bf16_widened, "tile kernel", p_.name,
          " was compiled for bf16 A tiles widened to f32, which no tile kernel of the ISA level in force (",
          isa_name(active_isa()), ") reads; compile it again under this level");
    const int threads = num_threads();
    const int64_t stride = (std::stoll(p_.attrs.at("arena")) + 4095) / 4096 * 4096;
    sol_rt::Launch launch{a.data(), int(a.size()), &rt, threads, scratch(threads * stride), stride};
    entry_(&launch);
  }
  const Program& program() const override { return p_; }
  const std::string& library_path() const override { return path_; }

 private:
  Program p_;
  std::string path_;
  sol_rt::KernelEntry entry_ = nullptr;
  bool widened_ = false;  // calls gemm_tile_bf16_widened
};

}  // namespace

std::shared_ptr<const Kernel> compile(const Program& p, const CompileOptions& opt, CompileInfo* info) {
  const auto t0 = std::chrono::steady_clock::now();
  check(opt.target == Target::cpu, "tile compile", "only the cpu target can be loaded and run here (cuda: emit only)");
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Kernel>> loaded;
  CompileInfo local;
  CompileInfo& out = info ? *info : local;
  out = {};
  // The in-memory cache is keyed by the input program's text and the target's data: a hit skips
  // the passes too.
  const CpuTarget cpu = opt.cpu ? *opt.cpu : cpu_target_here();
  const std::string memo_key = print(p) + "\n--widen-bf16-a " + (cpu.widen_bf16_a ? "1" : "0");
  auto done = [&] { out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = loaded.find(memo_key);
    if (it != loaded.end() && opt.dump_after.empty() && opt.memory_cache) {
      out.memory_hit = true;
      done();
      return it->second;
    }
  }
  CompileOptions resolved = opt;
  resolved.cpu = cpu;
  Program lowered = lower(p, resolved);
  const std::string ir = print(lowered);
  // The generated source is part of the key: a change of the code generator (same IR, other
  // C++) must not find the object an older generator built.
  const std::string source = emit_cpp(lowered);
  out.key = cache_key(ir + "\n" + source, "cpu", compile_flags());
  const BuiltObject obj = build_object(out.key, source, p.name);
  out.disk_hit = obj.from_disk;
  auto kernel = std::make_shared<const LoadedKernel>(std::move(lowered), obj.path);
  std::lock_guard<std::mutex> g(mu);
  loaded[memo_key] = kernel;
  done();
  return kernel;
}

}  // namespace sol::tile
