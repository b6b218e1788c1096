#pragma once
// Byte-stream copy micro-kernels. dst and src must not overlap; any alignment.
// `nontemporal`: the caller streams more than the LLC holds, so stores bypass the cache
// (no read-for-ownership of dst lines: ~1.5x on write-heavy streams); the kernel fences.
#include <cstdint>

namespace sol::kernels {
void copy_bytes_portable(void* dst, const void* src, int64_t bytes);
void copy_bytes_avx2(void* dst, const void* src, int64_t bytes, bool nontemporal);
void copy_bytes_avx512(void* dst, const void* src, int64_t bytes, bool nontemporal);
}  // namespace sol::kernels
