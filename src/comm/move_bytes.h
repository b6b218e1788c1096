#pragma once
// Bulk byte movement for comm: small messages by memcpy (no thread start-up, no dispatch),
// large ones by sol::copy (vector kernels, non-temporal stores past the LLC).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/copy.h"
#include "sol/tensor.h"

namespace sol::comm::detail {

inline void move_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (bytes < (size_t(64) << 10)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  sol::copy(Tensor(const_cast<void*>(src), DType::i8, {int64_t(bytes)}),
            Tensor(dst, DType::i8, {int64_t(bytes)}));
}

// The same, for a copy whose caller knows better than the copy's own size whether the
// destination can stay in cache: a collective that writes 8 MiB parts of a 16 MiB output
// streams them (`stream`: non-temporal stores, no read-for-ownership of the destination).
inline void move_bytes(void* dst, const void* src, size_t bytes, bool stream) {
  if (!stream || bytes < (size_t(64) << 10) || dst == src) {
    move_bytes(dst, src, bytes);
    return;
  }
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "comm");
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  parallel_ranges(int64_t(bytes), 4096, [&](int64_t b, int64_t e) { mk.copy(d + b, s + b, e - b, true, true); });
}

// Part i of n of a range of `count` elements; boundaries on multiples of 16 elements so
// neighbouring parts never share a cache line.
inline int64_t part_begin(int64_t count, int i, int n) {
  if (i <= 0) return 0;
  if (i >= n) return count;
  int64_t b = (count * i / n + 15) / 16 * 16;
  return b < count ? b : count;
}

}  // namespace sol::comm::detail
