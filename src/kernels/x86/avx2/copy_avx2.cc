#include <immintrin.h>

#include <cstring>

#include "kernels/copy.h"

namespace sol::kernels {

// Same structure as the AVX-512 kernel with 32-byte vectors: 4 ymm (128 B) per iteration,
// stores aligned to 32 bytes after a peeled head.
void copy_bytes_avx2(void* dst, const void* src, int64_t bytes, bool nontemporal) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  if (bytes < 128) {
    std::memcpy(d, s, size_t(bytes > 0 ? bytes : 0));
    return;
  }
  int64_t head = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, size_t(head));
  d += head, s += head, bytes -= head;
  int64_t body = bytes & ~int64_t(127);
  for (int64_t i = 0; i < body; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    auto* o = reinterpret_cast<__m256i*>(d + i);
    if (nontemporal) {
      _mm256_stream_si256(o, a), _mm256_stream_si256(o + 1, b);
      _mm256_stream_si256(o + 2, c), _mm256_stream_si256(o + 3, e);
    } else {
      _mm256_store_si256(o, a), _mm256_store_si256(o + 1, b);
      _mm256_store_si256(o + 2, c), _mm256_store_si256(o + 3, e);
    }
  }
  if (nontemporal) _mm_sfence();
  std::memcpy(d + body, s + body, size_t(bytes - body));
}

void stream_fence_avx2() { _mm_sfence(); }

}  // namespace sol::kernels
