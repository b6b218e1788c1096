// oneDNN anchor: matmul at its best as its documentation describes it — the primitive created
// once per shape and run many times, weights declared with format_tag::any and reordered once
// into the blocked layout the primitive chose.
#include "runners.h"

#if SOL_ANCHORS_HAVE_ONEDNN

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace sol_bench {

namespace {

using dnnl::memory;

memory::data_type onednn_type(sol::DType t) {
  switch (t) {
    case sol::DType::f32: return memory::data_type::f32;
    case sol::DType::bf16: return memory::data_type::bf16;
    case sol::DType::i8: return memory::data_type::s8;
    case sol::DType::i32: return memory::data_type::s32;
    default: return memory::data_type::undef;
  }
}

class OnednnRunner : public GemmRunner {
 public:
  explicit OnednnRunner(const GemmCase& c) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    const memory::dim n = c.shape.n, k = c.shape.k;
    const bool nt = c.shape.layout == sol::Layout::nt;
    groups_.resize(size_t(c.groups()));
    for (int g = 0; g < c.groups(); ++g) {
      if (c.m(g) == 0) continue;
      Group& gr = groups_[size_t(g)];
      const memory::dim m = c.m(g);
      // Logical weights are [K, N]; an nt matrix [N, K] row-major is that with strides (1, K).
      const memory::desc a_md({m, k}, onednn_type(c.in), memory::format_tag::ab);
      const memory::desc b_any({k, n}, onednn_type(c.in), memory::format_tag::any);
      const memory::desc b_user({k, n}, onednn_type(c.in), nt ? memory::format_tag::ba : memory::format_tag::ab);
      const memory::desc d_md({m, n}, onednn_type(c.out), memory::format_tag::ab);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, d_md), engine_);
      if (impl_.empty()) impl_ = pd.impl_info_str();
      gr.matmul = dnnl::matmul(pd);
      for (int s = 0; s < c.sets; ++s) {
        memory user(b_user, engine_, c.b[size_t(s)][size_t(g)].data());
        memory weights(pd.weights_desc(), engine_);
        dnnl::reorder(user, weights).execute(stream_, user, weights);
        gr.d.emplace_back(c.out, std::initializer_list<int64_t>{m, n});
        gr.args.push_back({{DNNL_ARG_SRC, memory(a_md, engine_, c.a[size_t(s)][size_t(g)].data())},
                           {DNNL_ARG_WEIGHTS, weights},
                           {DNNL_ARG_DST, memory(d_md, engine_, gr.d.back().data())}});
      }
    }
    stream_.wait();
  }

  void run(int set) override {
    for (Group& gr : groups_)
      if (!gr.args.empty()) gr.matmul.execute(stream_, gr.args[size_t(set)]);
    stream_.wait();
  }

  sol::Tensor output(int g) const override { return groups_[size_t(g)].d[0].tensor(); }
  std::string detail() const override { return impl_; }

 private:
  struct Group {
    dnnl::matmul matmul;
    std::vector<sol::Buffer> d;                                // per set
    std::vector<std::unordered_map<int, memory>> args;         // per set
  };
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<Group> groups_;
  std::string impl_;
};

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

std::unique_ptr<GemmRunner> make_onednn_runner(const GemmCase& c, std::string* why_not) {
  if (onednn_type(c.in) == memory::data_type::undef || onednn_type(c.out) == memory::data_type::undef) {
    *why_not = "dtype not wired to oneDNN here";
    return nullptr;
  }
  try {
    return std::make_unique<OnednnRunner>(c);
  } catch (const dnnl::error& e) {
    *why_not = std::string("oneDNN: ") + e.what();
    return nullptr;
  }
}

void set_onednn_threads(int threads) { omp_set_num_threads(threads); }

std::string onednn_description() {
  const dnnl::version_t* v = dnnl::version();
  std::ostringstream os;
  os << "oneDNN " << v->major << "." << v->minor << "." << v->patch << " (ISA " << isa_name(dnnl::get_effective_cpu_isa()) << ")";
  return os.str();
}

}  // namespace sol_bench

#else

namespace sol_bench {
std::unique_ptr<GemmRunner> make_onednn_runner(const GemmCase&, std::string* why_not) {
  *why_not = "not built (oneDNN not found)";
  return nullptr;
}
void set_onednn_threads(int) {}
std::string onednn_description() { return "oneDNN: not built"; }
}  // namespace sol_bench

#endif
