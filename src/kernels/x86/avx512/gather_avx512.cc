// AVX-512 row gather with a prefetch that runs ahead across row boundaries (kernels/gather.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gather.h"

namespace sol::kernels {

namespace {

// The source byte `ahead` bytes past offset `off` of row r, in the concatenated source rows
// (null when that is past the last row or in a zero row).
const char* ahead_of(const char* const* src, int64_t rows, int64_t row_bytes, int64_t r, int64_t off) {
  off += kGatherPrefetchBytes;
  r += off / row_bytes;
  return r < rows && src[r] ? src[r] + off % row_bytes : nullptr;
}

}  // namespace

void gather_rows_avx512(char* dst, int64_t dst_stride, const char* const* src, int64_t rows, int64_t row_bytes,
                        bool nontemporal) {
  for (int64_t r = 0; r < rows; ++r) {
    char* d = dst + r * dst_stride;
    const char* s = src[r];
    if (!s) {
      std::memset(d, 0, size_t(row_bytes));
      continue;
    }
    // Peel to a 64-byte aligned destination (streaming stores must be; regular ones then never
    // split a line), copy 256-byte blocks, then the tail.
    const int64_t head = std::min<int64_t>(row_bytes, int64_t((64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63));
    std::memcpy(d, s, size_t(head));
    int64_t off = head;
    for (; off + 256 <= row_bytes; off += 256) {
      for (int64_t p = 0; p < 256; p += 64)
        if (const char* f = ahead_of(src, rows, row_bytes, r, off + p)) _mm_prefetch(f, _MM_HINT_T0);
      const __m512i a = _mm512_loadu_si512(s + off), b = _mm512_loadu_si512(s + off + 64);
      const __m512i c = _mm512_loadu_si512(s + off + 128), e = _mm512_loadu_si512(s + off + 192);
      if (nontemporal) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + off), a);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + off + 64), b);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + off + 128), c);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + off + 192), e);
      } else {
        _mm512_store_si512(d + off, a);
        _mm512_store_si512(d + off + 64, b);
        _mm512_store_si512(d + off + 128, c);
        _mm512_store_si512(d + off + 192, e);
      }
    }
    std::memcpy(d + off, s + off, size_t(row_bytes - off));
  }
  if (nontemporal) _mm_sfence();
}

}  // namespace sol::kernels
