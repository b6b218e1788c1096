#pragma once
// Qualifiers and integer types shared by the sm90 headers. They compile in three places: NVRTC
// (no host standard headers exist there), nvcc, and the host compiler (the layout math and the
// CPU model of the kernels). So no <cstdint>: the fixed-width names come from builtin types.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOL_SM90_HD __host__ __device__ __forceinline__
#define SOL_SM90_DEVICE __device__ __forceinline__
#else
#define SOL_SM90_HD inline
#endif

namespace sol::kernels::sm90 {

using u8 = unsigned char;
using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
static_assert(sizeof(u32) == 4 && sizeof(u64) == 8, "sm90: 32- and 64-bit integer widths");

}  // namespace sol::kernels::sm90
