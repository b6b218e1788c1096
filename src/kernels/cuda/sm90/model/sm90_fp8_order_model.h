#pragma once
// CPU model of the fp8 consumers' issue turns (sm90_gemm_fp8_block.cuh): the two named barriers
// as pass counts, driven by sm90_gemm_fp8_order.h's rules. A consumer whose turn has not been
// passed cannot issue (the model's scheduler then tries another role, and reports a deadlock if
// none can move); a barrier holding two passes (the partner could not tell them apart) or a pass
// left at the end is an error.

#include "kernels/cuda/sm90/sm90_gemm_fp8_order.h"
#include "sol/error.h"

namespace sol::kernels::sm90::model {

class Fp8Turns {
 public:
  explicit Fp8Turns(u32 consumers) : ordered_(consumers == 2) {}

  // Whether consumer `c` may issue its next block now; it takes its turn when it may.
  bool try_take(u32 c) {
    if (!ordered_ || !fp8_waits_turn(c, issued_[c])) return true;
    if (passes_[c] == 0) return false;
    --passes_[c];
    return true;
  }

  // Consumer `c` has issued a block: it passes the turn.
  void passed(u32 c) {
    if (!ordered_) return;
    ++issued_[c];
    check(++passes_[1 - c] == 1, "sm90 model", "consumer ", c, " passed the turn twice before consumer ", 1 - c,
          " took it");
  }

  // Both consumers done: consumer 0 takes the last pass, and no barrier holds one.
  void finish() {
    if (!ordered_) return;
    if (fp8_takes_last_turn(0, issued_[0])) {
      check(passes_[0] == 1, "sm90 model", "consumer 0's last turn was never passed");
      --passes_[0];
    }
    check(passes_[0] == 0 && passes_[1] == 0, "sm90 model", "turn barriers left holding ", passes_[0], " and ",
          passes_[1], " passes");
  }

 private:
  bool ordered_;
  u32 issued_[2] = {0, 0};
  u32 passes_[2] = {0, 0};
};

}  // namespace sol::kernels::sm90::model
