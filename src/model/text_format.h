#pragma once
// printf-style formatting into a std::string and XML escaping, for the model's text table and
// SVG pictures (render_text.cc, render_svg.cc, render_roofline.cc). One line of output at a
// time: lines longer than the buffer are cut, never overflow.
#include <cstdio>
#include <string>

namespace sol::model_text {

inline std::string format(const char* f, auto... args) {
  char buf[768];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// For SVG text and attribute values.
inline std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace sol::model_text
