// AVX-512 row gather with a software prefetch about kGatherPrefetchBytes ahead in the
// concatenated source rows (kernels/gather.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gather.h"

namespace sol::kernels {

namespace {

// The source position `kGatherPrefetchBytes` ahead of the copy, for rows longer than that
// distance, advanced as the copy advances. (Computing it afresh per cache line took a 64-bit
// division each time: for 512-byte rows that cost as much as the copy itself.)
struct AheadInStream {
  const char* const* src;
  int64_t rows, row_bytes, r = 0, off = 0;
  void advance(int64_t bytes) {
    off += bytes;
    while (off >= row_bytes && r < rows) off -= row_bytes, ++r;
  }
  void prefetch_line() {
    if (r < rows && src[r]) _mm_prefetch(src[r] + off, _MM_HINT_T0);
    advance(64);
  }
};

// 256 bytes at off of s to d (d + off 64-byte aligned).
[[gnu::always_inline]] inline void copy_block(char* d, const char* s, int64_t off, bool nontemporal) {
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

// dst = src, 64-byte aligned destination blocks of 256 bytes (streaming stores must be aligned;
// regular ones then never split a line). `per_block` runs before each block is loaded.
template <class PerBlock>
void copy_row(char* d, const char* s, int64_t row_bytes, bool nontemporal, PerBlock&& per_block) {
  const int64_t head = std::min<int64_t>(row_bytes, int64_t((64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63));
  if (head > 0) std::memcpy(d, s, size_t(head));  // calls even of 0 bytes cost ~10% on short rows
  int64_t off = head;
  for (; off + 256 <= row_bytes; off += 256) {
    per_block(off);
    copy_block(d, s, off, nontemporal);
  }
  if (off < row_bytes) std::memcpy(d + off, s + off, size_t(row_bytes - off));
}

// Two rows (da <- sa, db <- sb, both sources non-null, da and db at the same offset in a
// line) with their 256-byte blocks in turn: two independent read streams and two write streams.
// `per_block(off)` runs before each pair of blocks.
template <class PerBlock>
void copy_two_rows(char* da, const char* sa, char* db, const char* sb, int64_t row_bytes, bool nontemporal,
                   PerBlock&& per_block) {
  const int64_t head = std::min<int64_t>(row_bytes, int64_t((64 - (reinterpret_cast<uintptr_t>(da) & 63)) & 63));
  if (head > 0) std::memcpy(da, sa, size_t(head)), std::memcpy(db, sb, size_t(head));
  int64_t off = head;
  for (; off + 256 <= row_bytes; off += 256) {
    per_block(off);
    copy_block(da, sa, off, nontemporal);
    copy_block(db, sb, off, nontemporal);
  }
  if (off < row_bytes) {
    std::memcpy(da + off, sa + off, size_t(row_bytes - off));
    std::memcpy(db + off, sb + off, size_t(row_bytes - off));
  }
}

}  // namespace

void gather_rows_avx512(char* dst, int64_t dst_stride, const char* const* src, int64_t rows, int64_t row_bytes,
                        bool nontemporal) {
  if (row_bytes <= kGatherPrefetchBytes / 2) {
    // Short rows: when a row starts, prefetch the whole row that lies the prefetch distance
    // ahead (measured on 512-byte rows: 1.3-1.6x faster than prefetching line by line).
    const int64_t ahead = kGatherPrefetchBytes / row_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      if (r + ahead < rows && src[r + ahead])
        for (int64_t p = 0; p < row_bytes; p += 64) _mm_prefetch(src[r + ahead] + p, _MM_HINT_T0);
      char* d = dst + r * dst_stride;
      if (!src[r]) std::memset(d, 0, size_t(row_bytes));
      else copy_row(d, src[r], row_bytes, nontemporal, [](int64_t) {});
    }
  } else {
    // Two rows per step, row r with row r + half (their destinations half the range apart):
    // two independent streams each way, which this machine reads and writes ~15-20% faster
    // than one (docs/perf/layer-ops.md). Each half keeps its own prefetch stream.
    const int64_t half = rows / 2;
    AheadInStream ahead_a{src, half, row_bytes}, ahead_b{src + half, half, row_bytes};
    ahead_a.advance(kGatherPrefetchBytes);
    ahead_b.advance(kGatherPrefetchBytes);
    for (int64_t k = 0; k < half; ++k) {
      const int64_t a = k, b = k + half;
      char* da = dst + a * dst_stride;
      char* db = dst + b * dst_stride;
      int64_t done = 0;  // bytes of this pair's rows the prefetch positions have moved past
      if (src[a] && src[b] && (reinterpret_cast<uintptr_t>(da) & 63) == (reinterpret_cast<uintptr_t>(db) & 63)) {
        copy_two_rows(da, src[a], db, src[b], row_bytes, nontemporal, [&](int64_t off) {
          ahead_a.advance(off - done);
          ahead_b.advance(off - done);
          for (int p = 0; p < 4; ++p) ahead_a.prefetch_line(), ahead_b.prefetch_line();
          done = off + 256;
        });
      } else {  // a padding row (zeros) or rows at different offsets in a line: one at a time
        for (const int64_t r : {a, b}) {
          char* d = dst + r * dst_stride;
          if (!src[r]) std::memset(d, 0, size_t(row_bytes));
          else copy_row(d, src[r], row_bytes, nontemporal, [](int64_t) {});
        }
      }
      ahead_a.advance(row_bytes - done);
      ahead_b.advance(row_bytes - done);
    }
    if (rows % 2 != 0) {  // the odd last row
      char* d = dst + (rows - 1) * dst_stride;
      if (!src[rows - 1]) std::memset(d, 0, size_t(row_bytes));
      else copy_row(d, src[rows - 1], row_bytes, nontemporal, [](int64_t) {});
    }
  }
  if (nontemporal) _mm_sfence();
}

}  // namespace sol::kernels
