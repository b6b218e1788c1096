// Low-latency mode (decode): dispatch straight into the packed per-expert layout, and the
// weighted combine.
//
// Dispatch n uses buffer b = n % 2 of every rank:
//   1. Wait until every peer has posted dispatch n−1 (so it finished reading this rank's counts
//      slot b of dispatch n−2), write this rank's per-expert counts into slot b and raise
//      ll_posted = n. A rank posts n only after it is done with its results of dispatch n−2
//      (the contract), so buffer b is free once every peer has posted n.
//   2. Wait for every peer's ll_posted = n; a source's rows for expert e start after the rows of
//      lower sources (their counts are in their slots). Write every (token, expert) row, and its
//      source slot t·top_k + j, into the expert's packed rows; raise ll_sent = n.
//   3. Receive (at once, or in wait()): every peer's ll_sent = n; recv_count from the slots.
// The fixed cost is these two flag rounds: each a cache line written by one core and read by
// the others.
//
// Combine m writes into buffer c = m % 2 of each source: it waits until the source has entered
// combine m−1 (so it finished reducing combine m−2 from region c), posts llc_posted = m, copies
// every packed row back to slot t·top_k + j of its source, raises llc_sent = m, waits for every
// peer's, and reduces out[t] = Σ_j w[t, j]·slot(t, j) in f32.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ep/buffer_state.h"
#include "ep/weighted_sum.h"
#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "core/parallel.h"
#include "sol/error.h"
#include "sol/quant.h"

namespace sol::ep {

namespace {

void require_2d(const char* op, const char* arg, const Tensor& t, DType dtype, int64_t rows, int64_t cols) {
  if (t.ndim() != 2 || t.dtype() != dtype || !t.is_contiguous() || (rows >= 0 && t.shape(0) != rows) ||
      t.shape(1) != cols)
    fail(op, arg, " must be a contiguous ", dtype_name(dtype), " [", rows >= 0 ? std::to_string(rows) : "T",
         ", ", cols, "] tensor, got ", describe_text(t));
}

}  // namespace

void LowLatencyHandle::wait() {
  if (!pending_) return;
  buffer_->low_latency_receive(*this);
}

LowLatencyResult Buffer::low_latency_dispatch(const Tensor& x, const Tensor& topk_idx, LowLatencyHandle& handle,
                                              bool async) {
  const char* op = "ep::low_latency_dispatch";
  State& s = *state_;
  check(s.ll_max > 0, op, "the buffer was built without low-latency mode (low_latency_max_tokens = 0)");
  check(!s.ll_in_flight, op, "the previous low-latency dispatch has not been waited for");
  require_2d(op, "topk_idx", topk_idx, DType::i32, -1, s.K);
  const int64_t T = topk_idx.shape(0);
  check(T <= s.ll_max, op, "topk_idx has ", T, " tokens but the buffer holds low_latency_max_tokens = ", s.ll_max);
  require_2d(op, "x", x, DType::bf16, T, s.H);
  const int R = s.R, me = s.me;
  const int64_t K = s.K, L = s.L, E = s.E, rb = s.row_bytes, sc = s.scale_cols, slots = s.ll_slots;
  const int32_t* idx = topk_idx.data_as<const int32_t>();

  std::vector<int32_t>& cnt = s.ll_expert_counts;
  std::fill(cnt.begin(), cnt.end(), 0);
  for (int64_t i = 0; i < T * K; ++i) {
    const int32_t e = idx[i];
    if (e == -1) continue;
    if (e < 0 || e >= E) fail(op, "topk_idx[", i / K, ", ", i % K, "] = ", e, " is outside [0, ", E, ") and not -1");
    ++cnt[size_t(e)];
  }
  // fp8: each token is quantized once, before it is copied to its experts.
  const std::byte* payload = static_cast<const std::byte*>(x.data());
  const float* scales = nullptr;
  if (s.fp8) {
    Tensor q(s.ll_quant.data(), DType::f8e4m3, {T, s.H});
    Tensor qs(s.ll_quant_scales.data(), DType::f32, {T, sc});
    quant_fp8_per_token(x, q, qs);
    payload = s.ll_quant.data();
    scales = s.ll_quant_scales.data();
  }

  const uint64_t n = ++s.ll_seq;
  const int b = int(n & 1);
  for (int p = 0; p < R; ++p)
    if (p != me) s.wait_flag(p, s.flags_of(p).ll_posted, n - 1, op, "low-latency dispatch call");
  std::copy(cnt.begin(), cnt.end(), reinterpret_cast<int32_t*>(s.own(s.off_ll_meta[b])));
  s.flags().ll_posted.value.store(n, std::memory_order_release);
  for (int p = 0; p < R; ++p)
    if (p != me) s.wait_flag(p, s.flags_of(p).ll_posted, n, op, "low-latency dispatch call (counts posted)");
  // Where this rank's rows for each expert start: after the rows of lower sources.
  for (int64_t e = 0; e < E; ++e) {
    if (cnt[size_t(e)] == 0) continue;
    int64_t start = 0;
    for (int p = 0; p < me; ++p) start += reinterpret_cast<const int32_t*>(s.peer(p, s.off_ll_meta[b]))[e];
    s.ll_offsets[size_t(e)] = start;
  }
  // Row of each (token, choice), in token order per expert.
  std::vector<int64_t>& pos = s.ll_pos;
  for (int64_t i = 0; i < T * K; ++i) {
    const int32_t e = idx[i];
    pos[size_t(i)] = e < 0 ? -1 : s.ll_offsets[size_t(e)]++;
  }
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "ep");
  parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = idx[t * K + j];
        if (e < 0) continue;
        const int d = int(e / L);
        const int64_t row = (e % L) * slots + pos[size_t(t * K + j)];
        mk.copy(s.peer(d, s.off_ll_x[b]) + row * rb, payload + t * rb, rb, false, /*fence=*/true);
        if (sc) std::memcpy(s.peer(d, s.off_ll_scales[b]) + row * sc * 4, scales + t * sc, size_t(sc) * 4);
        reinterpret_cast<int32_t*>(s.peer(d, s.off_ll_src[b]))[row] = int32_t(t * K + j);
      }
  });
  s.flags().ll_sent.value.store(n, std::memory_order_release);

  handle.buffer_ = this;
  handle.seq_ = n;
  handle.tokens_ = T;
  handle.pending_ = true;
  s.ll_in_flight = true;
  if (!async) low_latency_receive(handle);

  LowLatencyResult r;
  r.recv_x = Tensor(s.own(s.off_ll_x[b]), config_.dtype, {L, slots, s.H});
  if (s.fp8) r.recv_x_scales = Tensor(s.own(s.off_ll_scales[b]), DType::f32, {L, slots, sc});
  r.recv_count = Tensor(s.ll_count[b].data(), DType::i32, {L});
  return r;
}

void Buffer::low_latency_receive(LowLatencyHandle& handle) {
  const char* op = "ep::low_latency_dispatch (wait)";
  State& s = *state_;
  const int R = s.R, me = s.me;
  const uint64_t n = handle.seq_;
  const int b = int(n & 1);
  for (int p = 0; p < R; ++p)
    if (p != me) s.wait_flag(p, s.flags_of(p).ll_sent, n, op, "low-latency dispatch call (rows written)");
  for (int64_t le = 0; le < s.L; ++le) {
    int64_t total = 0;
    int64_t* block = s.ll_block[b].data() + le * (R + 1);
    for (int p = 0; p < R; ++p) {
      block[p] = total;
      total += reinterpret_cast<const int32_t*>(s.peer(p, s.off_ll_meta[b]))[me * s.L + le];
    }
    block[R] = total;
    s.ll_count[b][size_t(le)] = int32_t(total);
  }
  handle.pending_ = false;
  s.ll_in_flight = false;
}

void Buffer::low_latency_combine(const Tensor& y, const Tensor& topk_idx, const Tensor& topk_weights,
                                 const LowLatencyHandle& handle, const Tensor& out) {
  const char* op = "ep::low_latency_combine";
  State& s = *state_;
  check(handle.buffer_ == this, op, "the handle does not come from a low-latency dispatch on this buffer");
  check(!handle.pending_, op, "the dispatch of this handle has not been waited for");
  check(handle.seq_ + 2 > s.ll_seq, op, "the handle's receive buffer has been reused by a later dispatch (",
        "handle of call ", handle.seq_, ", latest call ", s.ll_seq, ")");
  const int R = s.R, me = s.me;
  const int64_t K = s.K, L = s.L, H = s.H, slots = s.ll_slots, T = handle.tokens_;
  if (y.ndim() != 3 || y.dtype() != DType::bf16 || !y.is_contiguous() || y.shape(0) != L || y.shape(1) != slots ||
      y.shape(2) != H)
    fail(op, "y must be a contiguous bf16 [", L, ", ", slots, ", ", H, "] tensor, got ", describe_text(y));
  require_2d(op, "topk_idx", topk_idx, DType::i32, T, K);
  require_2d(op, "topk_weights", topk_weights, DType::f32, T, K);
  require_2d(op, "out", out, DType::bf16, T, H);

  const int b = int(handle.seq_ & 1);
  const uint64_t m = ++s.llc_seq;
  const int c = int(m & 1);
  for (int p = 0; p < R; ++p)
    if (p != me) s.wait_flag(p, s.flags_of(p).llc_posted, m - 1, op, "low-latency combine call");
  s.flags().llc_posted.value.store(m, std::memory_order_release);
  const int64_t row = H * 2;
  const std::byte* ys = static_cast<const std::byte*>(y.data());
  const int32_t* src = reinterpret_cast<const int32_t*>(s.own(s.off_ll_src[b]));
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "ep");
  parallel_ranges(L * slots, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t le = r0 / slots; le < L && le * slots < r1; ++le) {
      const int64_t* block = s.ll_block[b].data() + le * (R + 1);
      for (int p = 0; p < R; ++p) {
        const int64_t i0 = std::max(le * slots + block[p], r0), i1 = std::min(le * slots + block[p + 1], r1);
        std::byte* region = s.peer(p, s.off_ll_combine[c]);
        for (int64_t i = i0; i < i1; ++i) mk.copy(region + src[i] * row, ys + i * row, row, false, /*fence=*/true);
      }
    }
  });
  s.flags().llc_sent.value.store(m, std::memory_order_release);
  for (int p = 0; p < R; ++p)
    if (p != me) s.wait_flag(p, s.flags_of(p).llc_sent, m, op, "low-latency combine call (rows written back)");

  const int32_t* idx = topk_idx.data_as<const int32_t>();
  const float* w = topk_weights.data_as<const float>();
  const uint16_t* region = reinterpret_cast<const uint16_t*>(s.own(s.off_ll_combine[c]));
  uint16_t* o = out.data_as<uint16_t>();
  parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<const uint16_t*> rows(static_cast<size_t>(K));
    std::vector<float> weights(static_cast<size_t>(K));
    for (int64_t t = t0; t < t1; ++t) {
      int count = 0;
      for (int64_t j = 0; j < K; ++j) {
        if (idx[t * K + j] < 0) continue;
        rows[size_t(count)] = region + (t * K + j) * H;
        weights[size_t(count++)] = w[t * K + j];
      }
      weighted_sum_bf16(o + t * H, rows.data(), weights.data(), count, H);
    }
  });
}

}  // namespace sol::ep
