#pragma once
// Byte-stream copy micro-kernels. dst and src must not overlap; any alignment.
// `nontemporal`: the caller streams more than the LLC holds, so stores bypass the cache
// (no read-for-ownership of dst lines: ~1.5x on write-heavy streams); the kernel fences.
#include <cstdint>

namespace sol::kernels {
void copy_bytes_portable(void* dst, const void* src, int64_t bytes);
void copy_bytes_avx2(void* dst, const void* src, int64_t bytes, bool nontemporal);
// fence = false: non-temporal stores are left unordered; the caller issues one _mm_sfence()
// after a batch of copies (an sfence per row stalls until the row's lines have drained: ~2x
// for MoE permute's 14 KiB rows).
void copy_bytes_avx512(void* dst, const void* src, int64_t bytes, bool nontemporal, bool fence = true);
// The fence those batches end with (sfence), per level.
void stream_fence_avx2();
void stream_fence_avx512();
}  // namespace sol::kernels
