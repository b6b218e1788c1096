// The AMX decode kernels on the matrix unit (compiled with -mamx-*; called only where hw
// reports AMX usable).
#include "kernels/x86/amx/amx_tile_hw.h"
#include "kernels/x86/amx/gemm_decode_amx.h"

namespace sol::kernels {

const AmxDecodeSet kAmxDecodeHardware = {
    &amx::configure_decode<amx::HardwareTiles>, &amx::HardwareTiles::release,
    &amx::bf16_panel<amx::HardwareTiles>,       &amx::s8_panel<amx::HardwareTiles>,
    &amx::bf16_rows<amx::HardwareTiles>,
};

}  // namespace sol::kernels
