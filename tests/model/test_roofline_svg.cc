// The per-op roofline picture: every drawn op sits on (never above) the roof of the device it
// was predicted for, memory-bound ops left of the ridge, and odd inputs still give valid SVG.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <regex>
#include <string>

#include "model_files.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::shipped;

struct Dot {
  std::string op, bound;
  double intensity = 0, rate = 0;
};

std::vector<Dot> dots(const std::string& svg) {
  std::regex circle(R"re(<circle data-op="([^"]*)" data-bound="([^"]*)" data-intensity="([^"]*)" data-flop-s="([^"]*)")re");
  std::vector<Dot> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[1], (*it)[2], std::stod((*it)[3]), std::stod((*it)[4])});
  return out;
}

TEST(ModelRoofline, EveryOpSitsOnItsRoof) {
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  Prediction p = predict(load_model_config(shipped("models", "deepseek-v3")), h800,
                         load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800")),
                         load_workload(shipped("workloads", "ep-decode-speed-limit")));
  std::string svg = prediction_roofline_svg(p, h800);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("data-phase=\"prefill\""), std::string::npos);
  EXPECT_NE(svg.find("data-phase=\"decode\""), std::string::npos);
  EXPECT_NE(svg.find("data-roof=\"fp8\" data-peak=\"1.9789e+15\""), std::string::npos);
  size_t drawable = std::count_if(p.ops.begin(), p.ops.end(), [](const OpRecord& r) {
    return r.kind != "comm" && r.flops > 0 && r.bytes > 0;
  });
  std::vector<Dot> all = dots(svg);
  ASSERT_EQ(all.size(), drawable);
  double bw = h800.memory_bandwidth;
  for (const Dot& d : all) {
    double roof = std::min(h800.flops_fp8, d.intensity * bw);
    EXPECT_LE(d.rate, roof * (1 + 1e-5)) << d.op;
    if (d.bound == "memory") {
      EXPECT_NEAR(d.rate, d.intensity * bw, 1e-5 * d.rate) << d.op;  // on the memory slope
      EXPECT_LT(d.intensity, h800.flops_fp8 / bw) << d.op;
    }
  }
  // Decode's absorbed MLA attention reads the latent cache: memory bound on an H800.
  auto latent = std::find_if(all.begin(), all.end(), [](const Dot& d) { return d.op == "attn.core_latent"; });
  ASSERT_NE(latent, all.end());
  EXPECT_EQ(latent->bound, "memory");
}

TEST(ModelRoofline, NothingToDrawStillGivesValidSvg) {
  Prediction empty;
  empty.model = "m<&>";
  HardwareSpec hw;
  hw.name = "none";
  std::string svg = prediction_roofline_svg(empty, hw);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("no operator with FLOPs and bytes to draw"), std::string::npos);
  EXPECT_NE(svg.find("m&lt;&amp;&gt;"), std::string::npos);  // names are escaped
  EXPECT_EQ(svg.find("<circle"), std::string::npos);
}

// The named ops' labels never cover one another (boxes as the renderer sizes them), in any
// phase of a training step, a decode and a dense model.
TEST(ModelRoofline, LabelsDoNotOverlap) {
  struct Case { const char* model; const char* hw; const char* plan; const char* workload; };
  for (const Case& c : {Case{"deepseek-v3", "h800", "deepseek-v3-decode-ep320-h800", "chat"},
                        Case{"deepseek-v3", "h800", "deepseek-v3-train-h800", "pretrain-4k"},
                        Case{"llama-3-70b", "h100", "llama-3-70b-train-h100", "pretrain-4k-small"}}) {
    HardwareSpec hw = load_hardware_spec(shipped("hardware", c.hw));
    Prediction p = predict(load_model_config(shipped("models", c.model)), hw,
                           load_parallel_plan(shipped("plans", c.plan)),
                           load_workload(shipped("workloads", c.workload)));
    std::string svg = prediction_roofline_svg(p, hw);
    // Each phase's <g> up to its first </g>, found by search: libstdc++'s regex matches a lazy
    // [\s\S]*? by recursing once per character, which overflows the stack under ASan.
    std::regex label(R"re(data-label="([^ ]+) ([^ ]+) ([^ ]+) ([^"]+)")re");
    int labels = 0;
    for (size_t at = svg.find("<g data-phase=\""); at != std::string::npos;
         at = svg.find("<g data-phase=\"", at + 1)) {
      const size_t end = svg.find("</g>", at);
      ASSERT_NE(end, std::string::npos) << c.plan << ": a phase group is not closed";
      std::string text = svg.substr(at, end + 4 - at);
      std::vector<std::array<double, 4>> boxes;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), label); it != std::sregex_iterator(); ++it)
        boxes.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
      labels += int(boxes.size());
      for (size_t i = 0; i < boxes.size(); ++i)
        for (size_t j = i + 1; j < boxes.size(); ++j) {
          const auto &a = boxes[i], &b = boxes[j];
          bool overlap = a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] - a[3] < b[1] && b[1] - b[3] < a[1];
          EXPECT_FALSE(overlap) << c.plan << ": labels " << i << " and " << j;
        }
    }
    EXPECT_GE(labels, 5) << c.plan;
  }
}

}  // namespace
}  // namespace sol
