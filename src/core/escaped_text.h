#pragma once
// Bytes of an input echoed in an error message: printable ASCII as is, anything else (and the
// backslash) as \xNN, so a NUL, a control byte or half a UTF-8 character can neither cut nor
// garble the message. Shared by the tile parser and the model's JSON readers.
#include <string>
#include <string_view>

namespace sol {

inline std::string escaped_bytes(std::string_view text, bool keep_newlines = false) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u < 0x7f && c != '\\') || (keep_newlines && c == '\n')) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace sol
