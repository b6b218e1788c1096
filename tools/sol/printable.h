#pragma once
// A message as the terminal should see it: bytes of the input that it echoes (a name typed on
// the command line, a byte of a file) are kept when they are printable ASCII or part of a
// well-formed UTF-8 character, and written \xNN otherwise, so a control byte cannot act on the
// terminal and half a character cannot garble what follows.
#include <string>
#include <string_view>

namespace sol::cli {

// Length of the well-formed UTF-8 sequence starting at s[i] (2-4), or 0.
inline size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (c >= 0xf5 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  if (n == 3 && ((c == 0xe0 && b(i + 1) < 0xa0) || (c == 0xed && b(i + 1) >= 0xa0))) return 0;  // overlong, surrogate
  if (n == 4 && ((c == 0xf0 && b(i + 1) < 0x90) || (c == 0xf4 && b(i + 1) >= 0x90))) return 0;  // overlong, > U+10FFFF
  return n;
}

inline std::string printable(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t') {
      out += s[i++];
    } else if (const size_t n = c >= 0x80 ? utf8_length(s, i) : 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace sol::cli
