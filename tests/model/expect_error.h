#pragma once
// Runs `body`, expecting a sol::Error whose message contains every fragment.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "sol/error.h"

namespace sol::test {

template <class F>
void expect_error(F body, std::initializer_list<const char*> fragments) {
  try {
    body();
    ADD_FAILURE() << "expected sol::Error";
  } catch (const Error& e) {
    for (const char* f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

}  // namespace sol::test
