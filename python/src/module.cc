// sol._sol: the extension module behind `import sol`.
#include "bindings.h"

NB_MODULE(_sol, m) {
  m.doc() = "Sol's operators over numpy / DLPack arrays (the C++ library is the source of truth)";
  solpy::bind_errors(m);
  solpy::bind_arrays(m);
  solpy::bind_system(m);
  solpy::bind_data_ops(m);
  solpy::bind_gemm(m);
  solpy::bind_quant(m);
  solpy::bind_layer_ops(m);
  solpy::bind_moe(m);
  solpy::bind_attention(m);
  solpy::bind_mla(m);
  solpy::bind_comm(m);
  solpy::bind_ep(m);
  solpy::bind_engram(m);
  solpy::bind_cp(m);
  solpy::bind_tile(m);
  solpy::bind_pp(m);
}
