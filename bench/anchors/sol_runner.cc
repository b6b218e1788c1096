// Sol as the benchmark runs it: weights packed once (at "model load"), D written per set.
#include <vector>

#include "runners.h"
#include "sol/error.h"
#include "sol/gemm.h"

namespace sol_bench {

namespace {

class SolRunner : public GemmRunner {
 public:
  explicit SolRunner(const GemmCase& c) : c_(c) {
    packed_.resize(size_t(c.sets));
    d_.resize(size_t(c.sets));
    for (int s = 0; s < c.sets; ++s)
      for (int g = 0; g < c.groups(); ++g) {
        if (c.m(g) == 0) {
          packed_[size_t(s)].emplace_back();
          d_[size_t(s)].emplace_back();
          continue;
        }
        packed_[size_t(s)].push_back(sol::pack_b(c.b[size_t(s)][size_t(g)], c.shape.layout));
        d_[size_t(s)].emplace_back(c.out, std::initializer_list<int64_t>{c.m(g), c.shape.n});
      }
  }

  void run(int set) override {
    const size_t s = size_t(set);
    for (int g = 0; g < c_.groups(); ++g)
      if (c_.m(g) > 0) sol::gemm(c_.a[s][size_t(g)], packed_[s][size_t(g)], d_[s][size_t(g)]);
  }

  sol::Tensor output(int g) const override { return d_[0][size_t(g)].tensor(); }

 private:
  const GemmCase& c_;
  std::vector<std::vector<sol::PackedMatrix>> packed_;
  std::vector<std::vector<sol::Buffer>> d_;
};

}  // namespace

std::unique_ptr<GemmRunner> make_sol_runner(const GemmCase& c, std::string* why_not) {
  try {
    return std::make_unique<SolRunner>(c);
  } catch (const sol::Error& e) {
    *why_not = e.what();
    return nullptr;
  }
}

}  // namespace sol_bench
