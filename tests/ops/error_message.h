#pragma once
// What a call throws, as text: the sol::Error message, or "(no error)" when it returns. Tests
// compare messages (not just the exception type) so an error that names the wrong argument fails.
#include <functional>
#include <string>

#include "sol/error.h"

namespace sol::testing_errors {

inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace sol::testing_errors
