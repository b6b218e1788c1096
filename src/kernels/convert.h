#pragma once
// Bulk element-type conversion, one entry point per ISA (internal to the library).
//
// Pairs: any from/to among f32, bf16, f16, f8e4m3, f8e5m2. A pair of two different types
// gives, element for element, exactly what the scalar functions of sol/dtype.h give
// (narrow -> f32 is exact, so narrow -> narrow is f32_to_<to>(<from>_to_f32(x)): one
// rounding); the identity pair copies the bits unchanged (signalling NaNs included).
// The NaN, rounding and overflow rules are spelled out in src/core/convert.cc.
//
// n elements, contiguous; src and dst may have any alignment but must not overlap. Nothing
// outside dst[0, n) is written. An unsupported pair throws sol::Error (from convert_scalar,
// to which the vector entry points hand such pairs).
//
// nontemporal: the caller streams a tensor much larger than the caches. The kernel then
// writes whole 64-byte lines with streaming stores (after a short head that brings dst to a
// 64-byte boundary; a dst that is not even element-aligned gets ordinary stores) and ends with
// _mm_sfence() itself, so the data is globally visible in order when it returns. Its reads then
// request the source prefetch_bytes ahead of the block converted (0: none; speed only).
//
// The vector paths assume nothing about MXCSR: they use explicit-rounding instructions and
// integer code, so FTZ, DAZ and the rounding-control field do not change their results.
// convert_avx2 needs AVX2 + FMA + F16C; convert_avx512 needs AVX-512 F/BW/VL/DQ + BF16.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {

bool convert_supported(DType from, DType to);

void convert_scalar(const void* src, DType from, void* dst, DType to, int64_t n);
void convert_avx2(const void* src, DType from, void* dst, DType to, int64_t n, bool nontemporal,
                  int64_t prefetch_bytes);
// prefetch_bytes / l2_prefetch_bytes: how far ahead a streamed conversion requests its source
// into L1 and into L2 (0: not at all; speed only).
void convert_avx512(const void* src, DType from, void* dst, DType to, int64_t n, bool nontemporal,
                    int64_t prefetch_bytes, int64_t l2_prefetch_bytes = 0);

}  // namespace sol::kernels
