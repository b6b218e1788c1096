#pragma once
// An attention test shape (batch, lengths, heads, head dims, mask) shared by the forward and
// backward tests, with its description for failure messages and its AttentionOptions.
#include <cstdint>
#include <string>

#include "sol/attention.h"

namespace sol::testing_attention {

struct Shape {
  int64_t b, sq, skv, hq, hkv, dqk, dv;
  bool causal = false;
  int64_t left = -1, right = -1;
  std::string describe() const {
    return "b=" + std::to_string(b) + " sq=" + std::to_string(sq) + " skv=" + std::to_string(skv) +
           " h=" + std::to_string(hq) + "/" + std::to_string(hkv) + " d=" + std::to_string(dqk) + "/" +
           std::to_string(dv) + (causal ? " causal" : "") + " window=" + std::to_string(left) + "," +
           std::to_string(right);
  }
  AttentionOptions options() const {
    AttentionOptions o;
    o.causal = causal;
    o.window_left = left;
    o.window_right = right;
    return o;
  }
};

}  // namespace sol::testing_attention
