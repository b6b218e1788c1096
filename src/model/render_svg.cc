// An SVG timeline of one step: one bar per phase, split into the time the device works, the
// communication it cannot hide, and the pipeline bubble; for a pipelined training step, below
// it the simulated schedule itself, one row per stage, followed by the gradient sync and the
// optimizer step.
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
