// Pipeline bubbles, as tabulated in the DeepSeek-V3 technical report (table 2):
//   1F1B      bubble (PP-1)(F+B)          parameters 1x   activations PP
//   ZB1P      bubble (PP-1)(F+B-2W)       parameters 1x   activations PP
//   DualPipe  bubble (PP/2-1)(F&B+B-3W)   parameters 2x   activations PP+1
#include <algorithm>

#include "sol/model.h"

namespace sol {

PipelineCost pipeline_cost(Schedule s, int pp, int micro_batches, double f, double b, double w,
                           double fb) {
  PipelineCost c;
  double stages = pp;
  switch (s) {
    case Schedule::one_f_one_b:
      c.bubble_s = (stages - 1) * (f + b);
      c.inflight_microbatches = stages;
      break;
    case Schedule::zb1p:
      c.bubble_s = (stages - 1) * (f + b - 2 * w);
      c.inflight_microbatches = stages;
      break;
    case Schedule::dualpipe:
      c.bubble_s = (stages / 2 - 1) * (fb + b - 3 * w);
      c.param_copies = pp > 1 ? 2 : 1;
      c.inflight_microbatches = stages + 1;
      break;
  }
  // A step with fewer micro-batches than stages never fills the pipeline.
  c.inflight_microbatches = std::min(c.inflight_microbatches, double(micro_batches));
  c.bubble_s = std::max(0.0, c.bubble_s);
  return c;
}

}  // namespace sol
