// The work classes of the efficiency layer: what kind of kernel runs an op, so that one
// measured kernel stands for every op of its kind. GEMM shape classes follow where a GEMM's
// efficiency changes: at most 128 rows it streams its weights (memory bound on every device
// here), from 2048 rows it runs near the matrix peak, in between it is neither.
#include "model/accounting.h"

namespace sol::model_detail {

namespace {
std::string shape_class(double rows) {
  if (rows <= 128) return "decode";
  if (rows < 2048) return "mid";
  return "large";
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

std::string work_class(const OpCost& op, PassKind pass, const OpTime& floor) {
  switch (op.kind) {
    case OpKind::gemm: {
      std::string dtype(dtype_name(op.dtype));
      // Routed experts run grouped kernels even where a device holds one expert.
      if (op.groups > 1 || op.name.rfind("moe.experts_", 0) == 0)
        return "grouped_gemm." + dtype + "." + shape_class(op.rows / op.groups);
      return "gemm." + dtype + "." + shape_class(op.rows);
    }
    case OpKind::attention:
      if (pass == PassKind::decode)
        return std::string(op.name == "attn.core_latent" ? "mla" : "attention") + ".decode." +
               (floor.compute_s >= floor.memory_s ? "compute" : "memory");
      return pass == PassKind::backward ? "attention.bwd" : "attention.fwd";
    case OpKind::comm: {
      std::string link(link_name(op.link));
      if (starts_with(op.name, "moe.dispatch") || starts_with(op.name, "moe.combine")) {
        std::string which = starts_with(op.name, "moe.dispatch") ? "dispatch" : "combine";
        return "ep." + which + "." + link + (pass == PassKind::decode ? ".decode" : "");
      }
      if (starts_with(op.name, "pp.")) return "pp.p2p";
      return "allreduce." + link;
    }
    default:
      return "memory";
  }
}

}  // namespace sol::model_detail
