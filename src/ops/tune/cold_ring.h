#pragma once
// `sol tune`'s cold memory: rings past the LLC that the row cases take their tensors from.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/tensor.h"
#include "sol/tuning.h"

namespace sol {

// Memory past the LLC that the row cases take their tensors from, in turn: a run's tensors were
// last touched more than an LLC of traffic earlier, so they come from DRAM as in a prefill,
// whatever the LLC (a guest may report the host's whole L3, hundreds of MiB). Inputs and outputs
// have rings of their own, so no op reads another's codes as bf16 (NaNs, subnormals).
class ColdRing {
 public:
  ColdRing(int64_t bytes, bool random) : buf_(size_t(bytes)), bytes_(bytes) {
    if (!random) {
      std::memset(buf_.data(), 0, size_t(bytes));  // page faults here, not in a timed run
      return;
    }
    // One random 16 MiB piece, repeated: the values only need to be ordinary numbers.
    constexpr int64_t piece = 16L << 20;
    const Tensor first(buf_.data(), DType::bf16, {std::min(piece, bytes) / 2});
    fill_random(first, 11, 1.0);
    for (int64_t at = piece; at < bytes; at += piece)
      std::memcpy(static_cast<char*>(buf_.data()) + at, buf_.data(), size_t(std::min(piece, bytes - at)));
  }
  // The next `shape` of `t`, at the next multiple of 4 KiB into the ring, wrapping to the start
  // when the ring runs out: every byte is taken once before any is taken again.
  Tensor take(DType t, std::initializer_list<int64_t> shape) {
    int64_t n = int64_t(dtype_size(t));
    for (int64_t d : shape) n *= d;
    n = (n + 4095) / 4096 * 4096;
    check(n <= bytes_, "sol tune", "a tensor of ", n, " bytes does not fit the ", bytes_, "-byte ring");
    if (next_ + n > bytes_) next_ = 0;
    void* p = static_cast<char*>(buf_.data()) + next_;
    next_ += n;
    return Tensor(p, t, shape);
  }
  int64_t bytes() const { return bytes_; }

 private:
  Buffer buf_;
  int64_t bytes_, next_ = 0;
};

// 5/4 of the LLC for inputs (in-place rope returns to a slice after that much traffic), 5/8 for
// outputs (each output's return is paced by its inputs too); at least 64 MiB, at most 1 GiB.
inline int64_t cold_ring_bytes(const CoreShape& core) {
  return std::clamp<int64_t>(core.l3_bytes / 4 * 5, 64L << 20, 1L << 30);
}

}  // namespace sol
