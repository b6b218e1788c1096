// A per-op roofline of a prediction, one panel per phase: log-log, arithmetic intensity
// (FLOP per byte of memory traffic) across, FLOP/s at the floor up. The roofs are the device's
// matrix peaks and its memory bandwidth; every op sits on its roof by construction (its floor is
// compute or memory bound), so the picture shows which side of the ridge each op falls and how
// much of the phase it takes (dot area). Transfers have no FLOPs and are summed in the caption.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/text_format.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_text::escape;
template <class... Args>
std::string fmt(const char* f, Args... args) {
  return model_text::format(f, args...);
}

const char* kind_color(const std::string& kind) {
  static const std::map<std::string, const char*> colors = {
      {"gemm", "#4e79a7"},    {"attention", "#f28e2b"}, {"norm", "#59a14f"},
      {"elementwise", "#b07aa1"}, {"routing", "#edc948"}, {"embedding", "#9c755f"}};
  auto it = colors.find(kind);
  return it == colors.end() ? "#79706e" : it->second;
}

struct Axes {
  double x0, x1, y0, y1;  // decades shown: 10^x0 .. 10^x1 FLOP/B, 10^y0 .. 10^y1 FLOP/s
  int left, top, width, height;
  double px(double intensity) const {
    return left + (std::log10(intensity) - x0) / (x1 - x0) * width;
  }
  double py(double rate) const {
    return top + height - (std::log10(rate) - y0) / (y1 - y0) * height;
  }
};

struct Roof {
  std::string label;
  double peak;
};

// Labels must not cover each other: each op label takes the first of a few places around its dot
// whose box (10 px text, ~6 px a character) meets no label placed before it, the roofs' included.
// Boxes closer than a pixel count as meeting, so that no two touch once printed to 0.1 px.
constexpr double kLabelCharWidth = 6, kLabelHeight = 11, kLabelGap = 1;
struct LabelBox {
  double x, y, w, h;  // x, y: the text's start and baseline
  bool meets(const LabelBox& o) const {
    return x < o.x + o.w + kLabelGap && o.x < x + w + kLabelGap && y - h < o.y + kLabelGap &&
           o.y - o.h < y + kLabelGap;
  }
};

LabelBox place_label(std::vector<LabelBox>& placed, double cx, double cy, double radius,
                     size_t chars) {
  double w = kLabelCharWidth * double(chars);
  std::vector<LabelBox> tries;
  for (int step = 0; step < 8; ++step) {
    double dy = radius + 2 + step * kLabelHeight;
    tries.push_back({cx + radius + 2, cy - dy, w, kLabelHeight});
    tries.push_back({cx + radius + 2, cy + dy + kLabelHeight, w, kLabelHeight});
    tries.push_back({cx - radius - 2 - w, cy - dy, w, kLabelHeight});
    tries.push_back({cx - radius - 2 - w, cy + dy + kLabelHeight, w, kLabelHeight});
  }
  for (const LabelBox& t : tries) {
    bool clear = std::none_of(placed.begin(), placed.end(), [&](const LabelBox& o) { return t.meets(o); });
    if (clear) {
      placed.push_back(t);
      return t;
    }
  }
  placed.push_back(tries.back());
  return tries.back();
}

std::string panel(const std::string& phase, const std::vector<const OpRecord*>& ops,
                  double comm_s, const std::vector<Roof>& roofs, double bandwidth,
                  int top) {
  constexpr int kLeft = 80, kWidth = 700, kHeight = 300;
  double peak_max = 0;
  for (const Roof& r : roofs) peak_max = std::max(peak_max, r.peak);
  double lo_i = 1e30, hi_i = 0, total = comm_s;
  for (const OpRecord* op : ops) {
    double intensity = op->flops / op->bytes;
    lo_i = std::min(lo_i, intensity);
    hi_i = std::max(hi_i, intensity);
    total += op->floor_s;
  }
  double ridge = peak_max / bandwidth;
  Axes ax{std::floor(std::log10(std::min(lo_i, ridge / 10))),
          std::ceil(std::log10(std::max(hi_i, ridge * 10))), 0, 0, kLeft, top + 30, kWidth,
          kHeight};
  ax.y1 = std::ceil(std::log10(peak_max) + 0.2);
  ax.y0 = std::min(ax.y1 - 3, std::floor(std::log10(bandwidth * std::pow(10.0, ax.x0))));
  std::string svg = fmt("<g data-phase=\"%s\">\n", escape(phase).c_str());
  svg += fmt("<text x=\"%d\" y=\"%d\" font-size=\"14\">%s: %zu ops, %.3f ms of op floors, "
             "%.3f ms of link time (not drawn)</text>\n",
             kLeft, top + 18, escape(phase).c_str(), ops.size(), (total - comm_s) * 1e3,
             comm_s * 1e3);
  svg += fmt("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
             "stroke=\"#999\"/>\n", ax.left, ax.top, ax.width, ax.height);
  for (double d = ax.x0; d <= ax.x1; d += 1)
    svg += fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">1e%.0f</text>\n",
               ax.px(std::pow(10.0, d)), ax.top + ax.height + 14, d);
  for (double d = ax.y0; d <= ax.y1; d += 1)
    svg += fmt("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">1e%.0f</text>\n",
               ax.left - 4, ax.py(std::pow(10.0, d)) + 3, d);
  svg += fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">FLOP per byte</text>\n",
             ax.left + ax.width / 2, ax.top + ax.height + 30);
  svg += fmt("<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" "
             "text-anchor=\"middle\">FLOP/s at the floor</text>\n",
             ax.top + ax.height / 2, ax.top + ax.height / 2);
  // Memory roof up to each ridge, then the flat compute roof of each dtype. The roofs' labels
  // are placed first: the op labels go where they meet none of them.
  double lo = std::pow(10.0, ax.x0), hi = std::pow(10.0, ax.x1);
  std::vector<LabelBox> labels;
  for (const Roof& r : roofs) {
    double knee = r.peak / bandwidth;
    svg += fmt("<polyline data-roof=\"%s\" data-peak=\"%g\" points=\"%.1f,%.1f %.1f,%.1f "
               "%.1f,%.1f\" fill=\"none\" stroke=\"#333\" stroke-width=\"1.2\"/>\n",
               escape(r.label).c_str(), r.peak, ax.px(lo), ax.py(lo * bandwidth), ax.px(knee),
               ax.py(r.peak), ax.px(hi), ax.py(r.peak));
    const std::string text = fmt("%s %.0f TFLOP/s (ridge %.0f FLOP/B)", r.label.c_str(), r.peak / 1e12, knee);
    const double w = kLabelCharWidth * double(text.size());
    const LabelBox b{ax.px(hi) - 4 - w, ax.py(r.peak) - 4, w, kLabelHeight};
    labels.push_back(b);
    svg += fmt("<text data-label=\"%.1f %.1f %.1f %.1f\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
               "text-anchor=\"end\">%s</text>\n", b.x, b.y, b.w, b.h, b.x + b.w, b.y, escape(text).c_str());
  }
  const std::string memory = fmt("memory %.0f GB/s", bandwidth / 1e9);
  const LabelBox m{ax.px(lo) + 4, ax.py(lo * bandwidth) - 6, kLabelCharWidth * double(memory.size()), kLabelHeight};
  labels.push_back(m);
  svg += fmt("<text data-label=\"%.1f %.1f %.1f %.1f\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s</text>\n",
             m.x, m.y, m.w, m.h, m.x, m.y, escape(memory).c_str());
  // Biggest ops last, so small ones stay visible; the five largest are named.
  std::vector<const OpRecord*> order = ops;
  std::sort(order.begin(), order.end(),
            [](const OpRecord* a, const OpRecord* b) { return a->floor_s < b->floor_s; });
  for (size_t i = 0; i < order.size(); ++i) {
    const OpRecord& op = *order[i];
    double intensity = op.flops / op.bytes, rate = op.flops / op.floor_s;
    double share = total > 0 ? op.floor_s / total : 0;
    double radius = 3 + 25 * std::sqrt(share);
    svg += fmt("<circle data-op=\"%s\" data-bound=\"%s\" data-intensity=\"%.6g\" "
               "data-flop-s=\"%.6g\" data-share=\"%.4f\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" "
               "fill=\"%s\" fill-opacity=\"0.6\" stroke=\"#222\" stroke-width=\"0.5\">"
               "<title>%s (%s): %.3g FLOP/B, %.3g TFLOP/s, %.3f ms, %.1f%%</title></circle>\n",
               escape(op.name).c_str(), op.bound.c_str(), intensity, rate, share,
               ax.px(intensity), ax.py(rate), radius, kind_color(op.kind),
               escape(op.name).c_str(), op.bound.c_str(), intensity, rate / 1e12,
               op.floor_s * 1e3, 100 * share);
    if (i + 5 >= order.size()) {
      std::string text = fmt("%s %.0f%%", op.name.c_str(), 100 * share);
      LabelBox b = place_label(labels, ax.px(intensity), ax.py(rate), radius, text.size());
      svg += fmt("<text data-label=\"%.1f %.1f %.1f %.1f\" x=\"%.1f\" y=\"%.1f\" "
                 "font-size=\"10\">%s</text>\n", b.x, b.y, b.w, b.h, b.x, b.y,
                 escape(text).c_str());
    }
  }
  svg += "</g>\n";
  return svg;
}
}  // namespace

std::string prediction_roofline_svg(const Prediction& p, const HardwareSpec& hw) {
  constexpr int kPanel = 380, kWidth = 940;
  std::vector<Roof> roofs;
  if (hw.flops_fp8 > 0) roofs.push_back({"fp8", hw.flops_fp8});
  if (hw.flops_bf16 > 0) roofs.push_back({"bf16", hw.flops_bf16});
  if (hw.flops_f32 > 0) roofs.push_back({"f32", hw.flops_f32});
  std::vector<std::string> phases;
  std::map<std::string, std::vector<const OpRecord*>> ops;
  std::map<std::string, double> comm;
  for (const OpRecord& r : p.ops) {
    if (std::find(phases.begin(), phases.end(), r.phase) == phases.end())
      phases.push_back(r.phase);
    if (r.kind == "comm") comm[r.phase] += r.floor_s;
    else if (r.flops > 0 && r.bytes > 0 && r.floor_s > 0) ops[r.phase].push_back(&r);
  }
  bool drawable = !roofs.empty() && hw.memory_bandwidth > 0;
  int panels = 0;
  for (const std::string& ph : phases) panels += drawable && !ops[ph].empty() ? 1 : 0;
  int height = 60 + kPanel * std::max(panels, 1);
  std::string svg = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "font-family=\"sans-serif\" font-size=\"12\">\n", kWidth, height);
  svg += fmt("<text x=\"10\" y=\"20\" font-size=\"15\">Per-op roofline: %s on %d x %s (%s, %s)"
             "</text>\n", escape(p.model).c_str(), p.devices, escape(p.hardware).c_str(),
             escape(p.plan).c_str(), escape(p.workload).c_str());
  svg += "<text x=\"10\" y=\"38\" font-size=\"11\">dot area: share of the phase's op floors; "
         "<tspan fill=\"#4e79a7\">gemm</tspan> <tspan fill=\"#f28e2b\">attention</tspan> "
         "<tspan fill=\"#59a14f\">norm</tspan> <tspan fill=\"#b07aa1\">elementwise</tspan> "
         "<tspan fill=\"#edc948\">routing</tspan></text>\n";
  int top = 50;
  for (const std::string& ph : phases) {
    if (!drawable || ops[ph].empty()) continue;
    svg += panel(ph, ops[ph], comm[ph], roofs, hw.memory_bandwidth, top);
    top += kPanel;
  }
  if (panels == 0)
    svg += fmt("<text x=\"10\" y=\"80\">no operator with FLOPs and bytes to draw%s</text>\n",
               drawable ? "" : " (the hardware has no matrix peak or no memory bandwidth)");
  svg += "</svg>\n";
  return svg;
}

}  // namespace sol
