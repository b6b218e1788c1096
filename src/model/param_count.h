#pragma once
// Weight counts of the parts of a transformer, shared by ModelConfig's totals, the memory
// accounting and the model card. Norm weights (a few vectors per layer) are left out.
#include "sol/model.h"

namespace sol::model_detail {

double attention_params(const ModelConfig& m);                // one layer, all heads
inline double mlp_params(const ModelConfig& m, double width) {  // gate, up and down
  return 3.0 * m.hidden * width;
}
inline double router_params(const ModelConfig& m) { return double(m.hidden) * m.routed_experts; }
double embedding_params(const ModelConfig& m);  // input embedding and the LM head unless tied
// One multi-token-prediction module (DeepSeek-V3): the [h; embedding] projection and one MoE
// layer; embedding and head are shared with the main model. `active`: routed experts per token.
double mtp_module_params(const ModelConfig& m, bool active);

}  // namespace sol::model_detail
