// An SVG timeline of one step: one bar per phase, split into the time the device works, the
// communication it cannot hide, and the pipeline bubble; for a pipelined training step, below
// it the simulated schedule itself, one row per stage, with the gradient sync under the last
// backward passes and what of it stays exposed, then the optimizer step; for decoding with
// expert parallelism, one MoE layer's two micro-batches on the device and on the links.
#include <algorithm>
#include <cstdio>
#include <string>

#include "model/text_format.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_text::escape;
template <class... Args>
std::string fmt(const char* f, Args... args) {
  return model_text::format(f, args...);
}
}  // namespace

namespace {
const char* pass_color(const PipelinePass& pass) {
  bool second = pass.direction == 1;
  switch (pass.kind) {
    case 'F': return second ? "#a0cbe8" : "#4e79a7";
    case 'B': return second ? "#ff9d9a" : "#e15759";
    case 'W': return "#59a14f";
    default: return second ? "#d4a6c8" : "#b07aa1";
  }
}

// Rows of the schedule start at `top`; returns the height used.
std::string schedule_rows(const Prediction& p, int top, int* height) {
  const auto& stages = p.pipeline.timeline;
  constexpr int kWidth = 900, kLabel = 160;
  int row = stages.size() <= 16 ? 14 : stages.size() <= 64 ? 6 : 3;
  double tail = 0;
  for (const PhaseResult& ph : p.phases)
    if (ph.name == "gradient sync" || ph.name == "optimizer") tail += ph.time_s;
  double span = p.pipeline.makespan_s + tail;
  double scale = span > 0 ? (kWidth - kLabel - 40) / span : 0;
  std::string svg = fmt("<text x=\"10\" y=\"%d\" font-size=\"13\">one step, pass by pass: "
                        "%s over %zu stages (makespan %.3f ms, then gradient sync and optimizer "
                        "%.3f ms)</text>\n", top, p.pipeline.schedule.c_str(), stages.size(),
                        p.pipeline.makespan_s * 1e3, tail * 1e3);
  // Past ~20k passes an SVG stops being a picture (and grows to megabytes): stages only.
  size_t passes = 0;
  for (const auto& stage : stages) passes += stage.size();
  bool draw_passes = passes <= 20000;
  if (!draw_passes)
    svg += fmt("<text x=\"%d\" y=\"%d\" font-size=\"11\">%zu passes: too many to draw one by "
               "one; each row shows the stage's busy span</text>\n", kLabel, top + 14, passes);
  int y = top + (draw_passes ? 10 : 24);
  for (size_t s = 0; s < stages.size(); ++s, y += row) {
    if (!draw_passes && !stages[s].empty())
      svg += fmt("<rect data-stage=\"%zu\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                 "fill=\"#4e79a7\"/>\n", s, kLabel + stages[s].front().start_s * scale, y,
                 (stages[s].back().end_s - stages[s].front().start_s) * scale, row - 1);
    if (row >= 6)
      svg += fmt("<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"end\">stage %zu</text>\n",
                 kLabel - 6, y + row - 3, std::min(row, 11), s);
    for (size_t i = 0; draw_passes && i < stages[s].size(); ++i) {
      const PipelinePass& pass = stages[s][i];
      svg += fmt("<rect data-stage=\"%zu\" data-pass=\"%c\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                 "height=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.3\"/>\n",
                 s, pass.kind, kLabel + pass.start_s * scale, y,
                 (pass.end_s - pass.start_s) * scale, row - 1, pass_color(pass));
    }
    if (tail > 0)
      svg += fmt("<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#bab0ac\"/>\n",
                 kLabel + p.pipeline.makespan_s * scale, y, tail * scale, row - 1);
  }
  // The gradient sync runs on the links while the last backward passes compute: the part
  // hidden ends at the makespan, the rest is the exposed sync drawn in the tail above.
  for (const PhaseResult& ph : p.phases) {
    if (ph.name != "gradient sync" || ph.comm_s <= 0) continue;
    double hidden = std::max(0.0, ph.comm_s - ph.time_s);
    y += 4;
    svg += fmt("<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">gradient sync"
               "</text>\n", kLabel - 6, y + 10);
    if (hidden > 0)
      svg += fmt("<rect data-sync=\"hidden\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"12\" "
                 "fill=\"#f1ce63\"/>\n", kLabel + (p.pipeline.makespan_s - hidden) * scale, y,
                 hidden * scale);
    if (ph.time_s > 0)
      svg += fmt("<rect data-sync=\"exposed\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"12\" "
                 "fill=\"#e15759\"/>\n", kLabel + p.pipeline.makespan_s * scale, y,
                 ph.time_s * scale);
    svg += fmt("<text x=\"%d\" y=\"%d\" font-size=\"11\">%.3f ms hidden under the backward "
               "passes, %.3f ms exposed</text>\n", kLabel + 4, y + 26, hidden * 1e3,
               ph.time_s * 1e3);
    y += 30;
  }
  svg += fmt("<text x=\"10\" y=\"%d\"><tspan fill=\"#4e79a7\">&#9632; forward</tspan> "
             "<tspan fill=\"#e15759\">&#9632; backward</tspan> "
             "<tspan fill=\"#59a14f\">&#9632; weight gradient</tspan> "
             "<tspan fill=\"#b07aa1\">&#9632; forward and backward overlapped</tspan> "
             "(lighter: micro-batches entering at the last stage) "
             "<tspan fill=\"#bab0ac\">&#9632; gradient sync + optimizer</tspan></text>\n",
             y + 16);
  *height = y + 24 - top;
  return svg;
}

// One MoE layer of a decode step with two micro-batches (0 and 1): attention (with its norms
// and projections) and the experts on the device, dispatch and combine on the links. Each
// block is the phase's per-layer, per-micro-batch average; the two links of an all-to-all run
// at once, so the busier one is its time. Device: A0 A1 M0 M1; links: D0 D1 C0 C1; M waits for
// its D, C for its M.
struct LayerBlocks { double attention = 0, experts = 0, dispatch = 0, combine = 0; };

LayerBlocks decode_layer_blocks(const Prediction& p) {
  LayerBlocks b;
  double dispatch_up = 0, dispatch_out = 0, combine_up = 0, combine_out = 0;
  for (const OpRecord& r : p.ops) {
    if (r.phase != "decode" || r.count <= 0) continue;
    if (r.name.rfind("head.", 0) == 0 || r.name.rfind("embed.", 0) == 0 ||
        r.name.rfind("mtp.", 0) == 0)
      continue;  // once per step, not per layer
    double each = r.floor_s / r.count;
    bool moe = r.name.rfind("moe.", 0) == 0;
    if (r.kind == "comm" && r.name.rfind("moe.dispatch", 0) == 0)
      (r.link == Link::scale_up ? dispatch_up : dispatch_out) += each;
    else if (r.kind == "comm" && r.name.rfind("moe.combine", 0) == 0)
      (r.link == Link::scale_up ? combine_up : combine_out) += each;
    else if (moe && r.kind != "comm")
      b.experts += each;
    else if (r.name.rfind("attn.", 0) == 0 || r.name.find("_norm") != std::string::npos)
      b.attention += each;
  }
  b.dispatch = std::max(dispatch_up, dispatch_out);
  b.combine = std::max(combine_up, combine_out);
  return b;
}

std::string decode_overlap_rows(const Prediction& p, int top, int* height) {
  LayerBlocks b = decode_layer_blocks(p);
  *height = 0;
  if (b.dispatch <= 0 || b.experts <= 0) return {};
  struct Block { const char* name; int stream, micro; double start, end; const char* color; };
  double a0 = b.attention, a1 = 2 * a0;
  double d0 = a0 + b.dispatch, d1 = std::max(a1, d0) + b.dispatch;
  double m0s = std::max(a1, d0), m0 = m0s + b.experts;
  double m1s = std::max(m0, d1), m1 = m1s + b.experts;
  double c0s = std::max(m0, d1), c0 = c0s + b.combine;
  double c1s = std::max(m1, c0), c1 = c1s + b.combine;
  Block blocks[] = {{"attention 0", 0, 0, 0, a0, "#4e79a7"},
                    {"attention 1", 0, 1, a0, a1, "#a0cbe8"},
                    {"experts 0", 0, 0, m0s, m0, "#59a14f"},
                    {"experts 1", 0, 1, m1s, m1, "#8cd17d"},
                    {"dispatch 0", 1, 0, a0, d0, "#e15759"},
                    {"dispatch 1", 1, 1, std::max(a1, d0), d1, "#ff9d9a"},
                    {"combine 0", 1, 0, c0s, c0, "#b07aa1"},
                    {"combine 1", 1, 1, c1s, c1, "#d4a6c8"}};
  constexpr int kWidth = 900, kLabel = 160, kRow = 22;
  double scale = c1 > 0 ? (kWidth - kLabel - 40) / c1 : 0;
  double serial = 2 * (b.attention + b.dispatch + b.experts + b.combine);
  std::string svg = fmt("<text x=\"10\" y=\"%d\" font-size=\"13\">one MoE layer of a decode "
                        "step, two micro-batches overlapped: %.1f us (one after the other: %.1f "
                        "us)</text>\n", top, c1 * 1e6, serial * 1e6);
  const char* streams[] = {"device", "links"};
  for (int s = 0; s < 2; ++s)
    svg += fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", kLabel - 6,
               top + 12 + s * kRow + 15, streams[s]);
  for (const Block& blk : blocks) {
    int y = top + 12 + blk.stream * kRow;
    double x = kLabel + blk.start * scale, w = (blk.end - blk.start) * scale;
    svg += fmt("<rect data-block=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
               "fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"><title>%s: %.2f us</title></rect>\n",
               blk.name, x, y, w, kRow - 2, blk.color, blk.name, (blk.end - blk.start) * 1e6);
    if (w > 60)
      svg += fmt("<text x=\"%.2f\" y=\"%d\" font-size=\"10\" fill=\"#fff\">%s</text>\n",
                 x + 3, y + 14, blk.name);
  }
  *height = 12 + 2 * kRow + 30;
  svg += fmt("<text x=\"10\" y=\"%d\" font-size=\"11\">micro-batch 0 dark, 1 light: "
             "<tspan fill=\"#4e79a7\">&#9632; attention</tspan> "
             "<tspan fill=\"#e15759\">&#9632; dispatch</tspan> "
             "<tspan fill=\"#59a14f\">&#9632; experts</tspan> "
             "<tspan fill=\"#b07aa1\">&#9632; combine</tspan> (per-layer averages of the decode "
             "phase)</text>\n", top + *height - 6);
  return svg;
}
}  // namespace

std::string prediction_svg(const Prediction& p) {
  constexpr int kWidth = 900, kLabel = 160, kRow = 34, kTop = 50;
  double longest = 0;
  for (const PhaseResult& ph : p.phases) longest = std::max(longest, ph.time_s);
  double scale = longest > 0 ? (kWidth - kLabel - 40) / longest : 0;
  int height = kTop + kRow * int(p.phases.size()) + 50;
  int schedule_height = 0;
  std::string schedule;
  if (!p.pipeline.timeline.empty()) schedule = schedule_rows(p, height + 10, &schedule_height);
  else schedule = decode_overlap_rows(p, height + 10, &schedule_height);
  std::string svg = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "font-family=\"sans-serif\" font-size=\"12\">\n", kWidth + 220,
                        height + (schedule.empty() ? 0 : schedule_height + 20));
  svg += fmt("<text x=\"10\" y=\"20\" font-size=\"14\">%s on %d x %s (%s, %s)</text>\n",
             escape(p.model).c_str(), p.devices, escape(p.hardware).c_str(),
             escape(p.plan).c_str(), escape(p.workload).c_str());
  int y = kTop;
  for (const PhaseResult& ph : p.phases) {
    double device = std::max(0.0, ph.time_s - ph.exposed_comm_s - ph.bubble_s);
    struct Part { double s; const char* color; } parts[] = {
        {device, "#4e79a7"}, {ph.exposed_comm_s, "#e15759"}, {ph.bubble_s, "#bab0ac"}};
    double x = kLabel;
    svg += fmt("<text x=\"10\" y=\"%d\">%s</text>\n", y + 17, escape(ph.name).c_str());
    for (const Part& part : parts) {
      double w = part.s * scale;
      if (w <= 0) continue;
      svg += fmt("<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"24\" fill=\"%s\"/>\n", x, y,
                 w, part.color);
      x += w;
    }
    svg += fmt("<text x=\"%.1f\" y=\"%d\">%.3f ms, %s</text>\n", x + 4, y + 17, ph.time_s * 1e3,
               ph.bottleneck.c_str());
    y += kRow;
  }
  svg += fmt("<text x=\"10\" y=\"%d\"><tspan fill=\"#4e79a7\">&#9632; device work</tspan> "
             "<tspan fill=\"#e15759\">&#9632; exposed communication</tspan> "
             "<tspan fill=\"#bab0ac\">&#9632; pipeline bubble</tspan></text>\n", y + 20);
  svg += schedule;
  svg += "</svg>\n";
  return svg;
}

}  // namespace sol
