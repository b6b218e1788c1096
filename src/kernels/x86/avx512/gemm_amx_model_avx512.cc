// The AMX GEMM kernels on the scalar tile model (amx_tile_model.h): the same kernel code as
// gemm_amx.cc, runnable on any AVX-512 machine, for tests of the AMX path where there is no AMX.
#include "kernels/x86/amx/amx_tile_model.h"
#include "kernels/x86/amx/gemm_tile_amx.h"

namespace sol::kernels {

const AmxKernelSet kAmxModel = {
    &amx::configure_tiles<amx::ModelTiles>,
    &amx::ModelTiles::release,
    &amx::gemm_tile_bf16<amx::ModelTiles>,
    &amx::gemm_tile_s8<amx::ModelTiles>,
};

}  // namespace sol::kernels
