#pragma once
// What every harness holds each input to: it succeeds, or it throws sol::Error whose message
// names where the input went wrong and echoes no raw unprintable byte. Anything else (another
// exception, a crash, a sanitizer report) is a finding: abort() so libFuzzer saves the input.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "sol/error.h"

namespace sol::fuzz {

[[noreturn]] inline void finding(const char* what, std::string_view detail) {
  std::fprintf(stderr, "FUZZ FINDING: %s: %.*s\n", what, int(detail.size()), detail.data());
  std::abort();
}

// The message must contain one of `names` (a file name, "line", the argument) and only
// printable ASCII or newlines.
inline void check_message(const Error& e, std::initializer_list<std::string_view> names) {
  const std::string_view m = e.what();
  bool named = false;
  for (std::string_view n : names) named = named || m.find(n) != std::string_view::npos;
  if (!named) finding("sol::Error does not name the file, line or argument", m);
  for (char c : m) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u >= 0x7f) finding("sol::Error echoes a raw unprintable byte", m);
  }
}

// Runs fn; sol::Error is checked, any other exception is a finding.
template <class Fn>
void expect_clean(Fn&& fn, std::initializer_list<std::string_view> names) {
  try {
    fn();
  } catch (const Error& e) {
    check_message(e, names);
  } catch (const std::exception& e) {
    finding("an exception other than sol::Error escaped", e.what());
  }
}

}  // namespace sol::fuzz
