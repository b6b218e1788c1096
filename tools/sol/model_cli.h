#pragma once
// The `sol model` subcommands beside the prediction itself (cmd_model.cc registers them).
#include <string>

namespace sol::cli {

// sol model card --model M [--seq-len N] [--context N] [--json]
void run_model_card(const std::string& model, long long seq_len, long long context, bool json);
// sol model calibrate --report FILE [--threads N] [--out FILE] [--json]
void run_model_calibrate(const std::string& report, int threads, const std::string& out, bool json);

}  // namespace sol::cli
