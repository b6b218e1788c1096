// sol model card: what a model is (weights, KV cache, FLOPs per token), no hardware or plan.
#include <fmt/format.h>

#include "model_cli.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol::cli {

void run_model_card(const std::string& model, long long seq_len, long long context, bool json) {
  check(!model.empty(), "sol model card", "--model is required");
  ModelCard card = model_card(load_model_config(model), seq_len, context);
  fmt::print("{}\n", json ? model_card_json(card) : model_card_table(card));
}

}  // namespace sol::cli
