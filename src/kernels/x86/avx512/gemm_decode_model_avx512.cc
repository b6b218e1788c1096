// The AMX decode kernels on the scalar tile model (amx_tile_model.h): the code of
// gemm_decode_amx.cc, runnable on any AVX-512 machine, for tests where there is no AMX.
#include "kernels/x86/amx/amx_tile_model.h"
#include "kernels/x86/amx/gemm_decode_amx.h"

namespace sol::kernels {

const AmxDecodeSet kAmxDecodeModel = {
    &amx::configure_decode<amx::ModelTiles>, &amx::ModelTiles::release,
    &amx::bf16_panel<amx::ModelTiles>,       &amx::s8_panel<amx::ModelTiles>,
    &amx::bf16_rows<amx::ModelTiles>,
};

}  // namespace sol::kernels
