#pragma once
// One function per area binds its part of the API on the extension module (module.cc calls
// them in order). An op binding is one m.def in its family's file: import the arguments
// (input / output, arrays.h), allocate the outputs the caller did not pass (output_or_new),
// call the C++ op inside released(...) (no GIL), return the outputs. data_ops.cc is the
// smallest example.
#include <nanobind/nanobind.h>

namespace solpy {

void bind_errors(nanobind::module_& m);
void bind_arrays(nanobind::module_& m);     // the output allocator hook (sol.torch)
void bind_system(nanobind::module_& m);     // threads, hw, bench, check, report, registry
void bind_data_ops(nanobind::module_& m);   // copy, cast, embedding
void bind_gemm(nanobind::module_& m);       // plain, packed, int8, fp8, grouped
void bind_quant(nanobind::module_& m);      // fp8 per token / per block, dequant
void bind_layer_ops(nanobind::module_& m);  // norms, activations, softmax, rope
void bind_moe(nanobind::module_& m);        // routing, permute, sampling
void bind_attention(nanobind::module_& m);  // flash attention forward / backward
void bind_mla(nanobind::module_& m);        // MLA decode (FlashMLA)
void bind_comm(nanobind::module_& m);       // the sol.comm submodule
void bind_ep(nanobind::module_& m);         // the sol.ep submodule (after comm)
void bind_engram(nanobind::module_& m);     // the sol.engram submodule (after comm)
void bind_cp(nanobind::module_& m);         // the sol.cp submodule (after comm)
void bind_tile(nanobind::module_& m);       // the sol.tile submodule
void bind_pp(nanobind::module_& m);         // the sol.pp submodule (after comm)

}  // namespace solpy
