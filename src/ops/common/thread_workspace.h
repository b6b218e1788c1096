#pragma once
// The calling thread's workspace, kept between calls and grown to the largest request: an op that
// needs scratch per call allocates (and faults in) nothing in the steady state. One buffer per
// thread, shared by the ops that take it: none of them may call another that takes it while it
// holds the pointer.
#include <cstddef>

#include "sol/tensor.h"

namespace sol {

inline char* thread_workspace(size_t bytes) {
  thread_local Buffer buf;
  if (buf.bytes() < bytes) buf = Buffer(bytes);
  return static_cast<char*>(buf.data());
}

}  // namespace sol
