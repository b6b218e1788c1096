#include "roofline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace sol::cli {

namespace {

constexpr double kW = 560, kH = 420, kPad = 60;

// Maps a value range onto a panel with log10 axes.
struct LogAxes {
  double x0, x1, y0, y1;  // data range (log10)
  double left, top;       // panel origin in the SVG
  double px(double x) const { return left + kPad + (std::log10(x) - x0) / (x1 - x0) * (kW - 1.5 * kPad); }
  double py(double y) const { return top + kH - kPad - (std::log10(y) - y0) / (y1 - y0) * (kH - 1.5 * kPad); }
  bool inside(double x, double y) const {
    return x > 0 && y > 0 && std::log10(x) >= x0 && std::log10(x) <= x1 && std::log10(y) >= y0 &&
           std::log10(y) <= y1;
  }
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string frame(const LogAxes& a, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel) {
  std::string s;
  double l = a.left + kPad, r = a.left + kW - kPad / 2, t = a.top + kPad / 2, b = a.top + kH - kPad;
  s += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#333'/>\n", l, t, r - l, b - t);
  s += fmt::format("<text x='{}' y='{}' font-size='14' text-anchor='middle'>{}</text>\n", (l + r) / 2, a.top + 20, escape(title));
  s += fmt::format("<text x='{}' y='{}' font-size='12' text-anchor='middle'>{}</text>\n", (l + r) / 2, b + 40, escape(xlabel));
  s += fmt::format("<text x='{}' y='{}' font-size='12' text-anchor='middle' transform='rotate(-90 {} {})'>{}</text>\n",
                   a.left + 15, (t + b) / 2, a.left + 15, (t + b) / 2, escape(ylabel));
  for (int e = int(std::ceil(a.x0)); !xlabel.empty() && e <= int(std::floor(a.x1)); ++e) {
    double x = a.px(std::pow(10.0, e));
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#ddd'/><text x='{}' y='{}' font-size='10' text-anchor='middle'>1e{}</text>\n",
                     x, t, x, b, x, b + 14, e);
  }
  for (int e = int(std::ceil(a.y0)); e <= int(std::floor(a.y1)); ++e) {
    double y = a.py(std::pow(10.0, e));
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#ddd'/><text x='{}' y='{}' font-size='10' text-anchor='end'>1e{}</text>\n",
                     l, y, r, y, l - 4, y + 3, e);
  }
  return s;
}

std::string point(const LogAxes& a, double x, double y, const std::string& label, bool bad) {
  if (!a.inside(x, y)) return "";
  return fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='4' fill='{}'/><text x='{:.1f}' y='{:.1f}' font-size='9'>{}</text>\n",
                     a.px(x), a.py(y), bad ? "#d00" : "#1565c0", a.px(x) + 6, a.py(y) - 4, escape(label));
}

std::string label_of(const BenchRecord& r) {
  return fmt::format("{} {} {} t{} {:.0f}%", r.op, r.dtype, r.shape, r.threads, r.sol_pct);
}

}  // namespace

std::string roofline_svg(const MachineProfile& m, const std::vector<BenchRecord>& records) {
  std::string s = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n", 2 * kW, kH);
  const int all = m.cores > 0 ? m.cores : 1;

  // Panel 1: roofline in FLOP/s over FLOP/byte, ceilings at all threads.
  LogAxes roof{-2, 4, 9, 14, 0, 0};
  s += frame(roof, fmt::format("Roofline ({} threads)", all), "arithmetic intensity (FLOP/byte)", "FLOP/s");
  const char* colors[] = {"#2e7d32", "#6a1b9a", "#c62828", "#ef6c00", "#00838f"};
  int ci = 0;
  const Ceiling& bw = m.get(Unit::mem_copy);
  for (Unit cu : {Unit::fma_f32, Unit::dot_bf16, Unit::dot_s8, Unit::amx_bf16, Unit::amx_int8}) {
    const Ceiling& c = m.get(cu);
    if (!c.available || !bw.available) continue;
    double ridge = c.all_threads / bw.all_threads;  // intensity where the roof meets the slope
    const char* col = colors[ci++ % 5];
    s += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}'/>\n", col,
                     roof.px(1e-2), roof.py(bw.all_threads * 1e-2), roof.px(ridge), roof.py(c.all_threads),
                     roof.px(1e4), roof.py(c.all_threads));
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' font-size='10' fill='{}'>{} {:.0f} GFLOP/s</text>\n",
                     roof.px(1e2), roof.py(c.all_threads) - 4, col, unit_name(cu), c.all_threads / 1e9);
  }
  if (bw.available)
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' font-size='10' fill='#555'>mem_copy {:.0f} GB/s</text>\n",
                     roof.px(2e-2), roof.py(bw.all_threads * 2e-2) - 6, bw.all_threads / 1e9);
  for (const auto& r : records)
    if (r.cost.flops > 0 && r.cost.bytes > 0)
      s += point(roof, r.cost.flops / r.cost.bytes, r.cost.flops / r.timing.median_s, label_of(r), r.sol_pct > 100);

  // Panel 2: data movement. One column per record (their byte counts are too alike to spread
  // them on a size axis), achieved bytes/s on a log axis, memory ceilings as dashed lines.
  std::vector<const BenchRecord*> moves;
  for (const auto& r : records)
    if (r.cost.flops == 0 && r.cost.bytes > 0) moves.push_back(&r);
  LogAxes mem{0, 1, 9, 12, kW, 0};
  s += frame(mem, "Data movement (no FLOPs): achieved bytes/s", "", "bytes/s");
  const double l = kW + kPad, w = kW - 1.5 * kPad;
  for (Unit u : {Unit::mem_copy, Unit::mem_read, Unit::l2_read}) {
    const Ceiling& c = m.get(u);
    if (!c.available) continue;
    for (double v : {c.one_thread, c.all_threads}) {
      if (!mem.inside(1.0, v)) continue;
      s += fmt::format("<line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' stroke='#999' stroke-dasharray='4 3'/><text x='{:.1f}' y='{:.1f}' font-size='9' fill='#555'>{} {} {:.0f} GB/s</text>\n",
                       l, mem.py(v), l + w, mem.py(v), l + 2, mem.py(v) - 3, unit_name(u),
                       v == c.one_thread ? "1t" : "all", v / 1e9);
    }
  }
  for (size_t i = 0; i < moves.size(); ++i) {
    const BenchRecord& r = *moves[i];
    double x = l + w * (double(i) + 0.5) / double(moves.size()), y = mem.py(r.cost.bytes / r.timing.median_s);
    s += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='4' fill='{}'/><text x='{:.1f}' y='{:.1f}' font-size='9' transform='rotate(-90 {:.1f} {:.1f})'>{}</text>\n",
                     x, y, r.sol_pct > 100 ? "#d00" : "#1565c0", x + 8, y + 3, x + 8, y + 3,
                     escape(fmt::format("{} {} t{} {:.0f}%", r.op, r.dtype, r.threads, r.sol_pct)));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace sol::cli
