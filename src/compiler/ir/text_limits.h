#pragma once
// Limits and strict number reading shared by the tile parser, the IR's attribute reader and the
// verifier. The limits keep every recursive walk of a program (parser, verifier, passes,
// interpreter, code generators) far from the stack's end whatever the input.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace sol::tile {

inline constexpr int kMaxExprDepth = 200;   // nested parentheses, minus signs, operators
inline constexpr int kMaxBlockDepth = 64;   // nested for / parallel blocks

// The whole of `text` as a decimal int64 (an optional leading '-'); false when anything else
// is there or the value does not fit.
inline bool parse_whole_int(std::string_view text, int64_t& value) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, value);
  return r.ec == std::errc() && r.ptr == end && !text.empty();
}

// Bytes of input echoed in a message: printable ASCII as is, anything else as \\xNN, so a NUL
// or half a UTF-8 character cannot cut or garble the message.
inline std::string escaped(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace sol::tile
