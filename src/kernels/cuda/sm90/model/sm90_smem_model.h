#pragma once
// CPU model of a CTA's shared memory, its mbarriers and TMA tile loads, written from the PTX ISA
// and CUDA driver descriptions rather than from the layout functions the device code calls:
// the TMA side places 16-byte chunks by row and chunk index ("swizzle 16B chunks within an
// N-byte span", the chunk index XORed with the row index modulo N/16, rows grouped so the
// pattern spans 8 x 128 bytes), while the wgmma side (sm90_wgmma_model.h) reads through
// sm90_swizzle.h's address function. If the two descriptions disagree, a model test fails.

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/sm90/sm90_swizzle.h"
#include "sol/error.h"

namespace sol::kernels::sm90::model {

struct SharedMemory {
  std::vector<u8> bytes;
  explicit SharedMemory(std::size_t n) : bytes(n, 0xFF) {}  // poisoned, as the device's is undefined
  u8* at(u32 address, u32 size) {
    check(std::size_t(address) + size <= bytes.size(), "sm90 model", "shared access [", address, ", +", size,
          ") beyond the ", bytes.size(), " bytes of the CTA");
    return bytes.data() + address;
  }
};

// An mbarrier: completes a phase when the pending arrivals are zero and the transaction bytes
// are settled; try_wait(parity) is true once the phase of that parity has completed, i.e. while
// the current (incomplete) phase has the other parity.
class Mbarrier {
 public:
  explicit Mbarrier(u32 arrivals = 1) : arrivals_(arrivals), pending_(arrivals) {}
  void arrive() {
    check(pending_ > 0, "sm90 model", "mbarrier arrival beyond its count");
    --pending_;
    complete_if_settled();
  }
  void arrive_expect_tx(u32 bytes) {
    tx_ += bytes;
    arrive();
  }
  void complete_tx(u32 bytes) {
    tx_ -= bytes;
    complete_if_settled();
  }
  bool try_wait(u32 parity) const { return (phase_ & 1u) != parity; }
  u64 completed_phases() const { return phase_; }

 private:
  void complete_if_settled() {
    if (pending_ == 0 && tx_ == 0) {
      ++phase_;
      pending_ = arrivals_;
    }
  }
  u32 arrivals_;
  u32 pending_;
  long long tx_ = 0;
  u64 phase_ = 0;
};

// A row-major 2D global tensor: `rows` rows of `cols` elements, `row_stride_bytes` apart.
struct GlobalTensor2d {
  const u8* data;
  u32 element_bytes;
  u64 cols;
  u64 rows;
  u64 row_stride_bytes;
};

// Where byte b of row r of a TMA box lies in shared memory: rows one after another, each row's
// 16-byte chunks permuted by the swizzle (the same layout for loads and stores). The
// constructor checks what the model covers: full-span rows, 1024-byte aligned swizzled boxes.
struct BoxLayout {
  u32 row_bytes, chunks, rows_per_line;
  Swizzle swizzle;
  BoxLayout(u32 box_cols, u32 element_bytes, u32 smem_addr, Swizzle sw, const char* what) : swizzle(sw) {
    row_bytes = box_cols * element_bytes;
    const u32 span = sw == Swizzle::none ? row_bytes : swizzle_bytes(sw);
    if (sw != Swizzle::none) {
      check(row_bytes == span, "sm90 model", what, " box rows of ", row_bytes, " bytes with a ", span,
            "-byte swizzle (only full-span rows are modelled)");
      check(smem_addr % (8 * 128) == 0, "sm90 model", "swizzled ", what, " shared address ", smem_addr,
            " is not 1024-byte aligned");
    }
    chunks = span / 16;           // 16-byte chunks in one swizzled row
    rows_per_line = 128 / span;   // rows sharing one 128-byte line of the pattern
  }
  u32 at(u32 r, u32 b) const {
    u32 chunk = b / 16;
    if (swizzle != Swizzle::none) chunk ^= (r / rows_per_line) % chunks;
    return r * row_bytes + chunk * 16 + b % 16;
  }
};

// cp.async.bulk.tensor.2d with a box of box_cols x box_rows elements at element coordinates
// (c0 along cols, c1 along rows): elements outside the tensor arrive as zero bytes, the box
// lands row after row from `dst`, each row's 16-byte chunks permuted by the swizzle. Returns the
// bytes credited to the mbarrier (the whole box, in or out of bounds).
inline u32 tma_load_2d(SharedMemory& smem, u32 dst, const GlobalTensor2d& g, u32 box_cols, u32 box_rows, long long c0,
                       long long c1, Swizzle swizzle) {
  const BoxLayout box(box_cols, g.element_bytes, dst, swizzle, "TMA load");
  const u32 row_bytes = box.row_bytes;
  u8* out = smem.at(dst, row_bytes * box_rows);
  for (u32 r = 0; r < box_rows; ++r) {
    const long long gr = c1 + r;
    for (u32 b = 0; b < row_bytes; ++b) {
      const long long gc = c0 + b / g.element_bytes;
      const bool inside = gr >= 0 && gc >= 0 && u64(gr) < g.rows && u64(gc) < g.cols;
      const u8 v = inside ? g.data[u64(gr) * g.row_stride_bytes + u64(gc) * g.element_bytes + b % g.element_bytes] : 0;
      out[box.at(r, b)] = v;
    }
  }
  return row_bytes * box_rows;
}

// A row-major 2D global tensor a TMA store writes, with one write counter per element (the
// models check that every result is written exactly once).
struct GlobalOut2d {
  u8* data;
  u32 element_bytes;
  u64 cols;
  u64 rows;
  u64 row_stride_bytes;
  std::vector<u32>* writes = nullptr;  // cols * rows counters, or null
};

// cp.async.bulk.tensor.2d.global.shared::cta: the box of box_cols x box_rows elements at `src`,
// laid out as a load lands it (rows one after another, each row's 16-byte chunks permuted by the
// swizzle), written to the tensor at (c0, c1); elements outside the tensor are not written.
inline void tma_store_2d(SharedMemory& smem, u32 src, const GlobalOut2d& g, u32 box_cols, u32 box_rows, long long c0,
                         long long c1, Swizzle swizzle) {
  const BoxLayout box(box_cols, g.element_bytes, src, swizzle, "TMA store");
  const u32 row_bytes = box.row_bytes;
  const u8* in = smem.at(src, row_bytes * box_rows);
  for (u32 r = 0; r < box_rows; ++r) {
    const long long gr = c1 + r;
    for (u32 e = 0; e < box_cols; ++e) {
      const long long gc = c0 + e;
      if (gr < 0 || gc < 0 || u64(gr) >= g.rows || u64(gc) >= g.cols) continue;
      for (u32 b = e * g.element_bytes; b < (e + 1) * g.element_bytes; ++b) {
        g.data[u64(gr) * g.row_stride_bytes + u64(gc) * g.element_bytes + b % g.element_bytes] = in[box.at(r, b)];
      }
      if (g.writes) ++(*g.writes)[u64(gr) * g.cols + u64(gc)];
    }
  }
}

}  // namespace sol::kernels::sm90::model
