// The AMX GEMM kernels on the matrix unit (compiled with -mamx-*; called only where hw reports
// AMX usable: CPU support, XCR0 and the kernel's ARCH_REQ_XCOMP_PERM grant).
#include "kernels/x86/amx/amx_tile_hw.h"
#include "kernels/x86/amx/gemm_tile_amx.h"

namespace sol::kernels {

const AmxKernelSet kAmxHardware = {
    &amx::configure_tiles<amx::HardwareTiles>,
    &amx::HardwareTiles::release,
    &amx::gemm_tile_bf16<amx::HardwareTiles>,
    &amx::gemm_tile_s8<amx::HardwareTiles>,
};

}  // namespace sol::kernels
