#pragma once
// Limits and strict number reading shared by the tile parser, the IR's attribute reader and the
// verifier. The limits keep every recursive walk of a program (parser, verifier, passes,
// interpreter, code generators) far from the stack's end whatever the input.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/escaped_text.h"

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

// Bytes of input echoed in a message (core/escaped_text.h).
inline std::string escaped(std::string_view text) { return escaped_bytes(text); }

}  // namespace sol::tile
