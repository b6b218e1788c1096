#include <immintrin.h>

#include <cstring>

#include "kernels/copy.h"

namespace sol::kernels {

// 4 zmm per iteration: enough loads in flight to keep the line-fill buffers busy; more did not
// help on a single stream. The head is peeled so every store is 64-byte aligned (a streaming
// store must be, and aligned regular stores never split a line).
void stream_fence_avx512() { _mm_sfence(); }

void copy_bytes_avx512(void* dst, const void* src, int64_t bytes, bool nontemporal, bool fence) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  if (bytes < 256) {
    std::memcpy(d, s, size_t(bytes > 0 ? bytes : 0));
    return;
  }
  int64_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  std::memcpy(d, s, size_t(head));
  d += head, s += head, bytes -= head;
  int64_t body = bytes & ~int64_t(255);
  if (nontemporal) {
    for (int64_t i = 0; i < body; i += 256) {
      __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
      __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
    }
    if (fence) _mm_sfence();
  } else {
    for (int64_t i = 0; i < body; i += 256) {
      __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
      __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
      _mm512_store_si512(d + i, a);
      _mm512_store_si512(d + i + 64, b);
      _mm512_store_si512(d + i + 128, c);
      _mm512_store_si512(d + i + 192, e);
    }
  }
  std::memcpy(d + body, s + body, size_t(bytes - body));
}

}  // namespace sol::kernels
