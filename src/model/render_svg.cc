// An SVG timeline of one step: one bar per phase, split into the time the device works, the
// communication it cannot hide, and the pipeline bubble.
#include <algorithm>
#include <cstdio>
#include <string>

#include "sol/model.h"

namespace sol {

namespace {
std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}
}  // namespace

std::string prediction_svg(const Prediction& p) {
  constexpr int kWidth = 900, kLabel = 160, kRow = 34, kTop = 50;
  double longest = 0;
  for (const PhaseResult& ph : p.phases) longest = std::max(longest, ph.time_s);
  double scale = longest > 0 ? (kWidth - kLabel - 40) / longest : 0;
  int height = kTop + kRow * int(p.phases.size()) + 50;
  std::string svg = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "font-family=\"sans-serif\" font-size=\"12\">\n", kWidth, height);
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
  svg += "</svg>\n";
  return svg;
}

}  // namespace sol
