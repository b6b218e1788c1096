#include "sol/moe_permute.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/combine.h"
#include "kernels/convert.h"
#include "kernels/move_bytes.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "ops/moe/moe_backends.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

template <class Id>
void check_ids(const char* op, const Tensor& idx, int64_t experts) {
  const Id* e = idx.data_as<const Id>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    check(e[i] >= -1 && e[i] < experts, op, "topk_idx[", i / idx.shape(1), ", ", i % idx.shape(1), "] = ", e[i],
          " outside [0, ", experts, ") (or -1 for not routed here)");
}

// Checks the routing and gives its expert ids as i32: i64 ids (DeepEP's type), once known to
// lie in [-1, experts), are narrowed into `narrowed`.
const int32_t* validate_routing(const char* op, const Tensor& idx, int64_t experts, int64_t alignment,
                                std::vector<int32_t>& narrowed) {
  check(idx.ndim() == 2 && (idx.dtype() == DType::i32 || idx.dtype() == DType::i64) && idx.is_contiguous(), op,
        "topk_idx = ", describe_text(idx), " but expected contiguous [tokens, k] i32 or i64");
  check(experts >= 1 && experts <= INT32_MAX, op, "experts = ", experts, " but must be in [1, 2^31)");
  check(alignment >= 1, op, "alignment = ", alignment, " but must be >= 1");
  if (idx.dtype() == DType::i32) {
    check_ids<int32_t>(op, idx, experts);
    return idx.data_as<const int32_t>();
  }
  check_ids<int64_t>(op, idx, experts);
  const int64_t* wide = idx.data_as<const int64_t>();
  narrowed.assign(wide, wide + idx.numel());
  return narrowed.data();
}

// First row of each expert's block, padded; the last entry is the total.
std::vector<int64_t> block_starts(const int32_t* e, const Tensor& idx, int64_t experts, int64_t alignment) {
  std::vector<int64_t> count(static_cast<size_t>(experts), 0), start(static_cast<size_t>(experts + 1), 0);
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (e[i] >= 0) ++count[size_t(e[i])];
  for (int64_t x = 0; x < experts; ++x)
    start[size_t(x + 1)] = start[size_t(x)] + (count[size_t(x)] + alignment - 1) / alignment * alignment;
  return start;
}

}  // namespace

int64_t moe_permuted_rows(const Tensor& idx, int64_t experts, int64_t alignment) {
  if (!idx.device().is_cpu()) {
    const Buffer host = moe_routing_on_host("moe_permuted_rows", idx);
    return moe_permuted_rows(host.tensor(), experts, alignment);
  }
  std::vector<int32_t> narrowed;
  const int32_t* e = validate_routing("moe_permuted_rows", idx, experts, alignment, narrowed);
  return block_starts(e, idx, experts, alignment).back();
}

Buffer moe_routing_on_host(const char* op, const Tensor& idx) {
  check(idx.ndim() == 2 && idx.is_contiguous(), op, "topk_idx = ", describe_text(idx),
        " but expected contiguous [tokens, k] i32 or i64");
  Buffer host(idx.dtype(), {idx.shape(0), idx.shape(1)});
  transfer(idx, host.tensor());
  return host;
}

int64_t moe_permute_plan(const Tensor& x, const Tensor& idx, int64_t experts, int64_t alignment,
                         const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of, int32_t* ro,
                         int32_t* gl) {
  const char* op = "moe_permute";
  std::vector<int32_t> narrowed;
  const int32_t* e = validate_routing(op, idx, experts, alignment, narrowed);
  const int64_t tokens = idx.shape(0), k = idx.shape(1);
  check(x.ndim() == 2 && x.shape(0) == tokens && x.is_contiguous(), op, "x = ", describe_text(x),
        " but expected contiguous [", tokens, ", hidden]");
  const std::vector<int64_t> start = block_starts(e, idx, experts, alignment);
  const int64_t rows = start.back(), h = x.shape(1);
  check(x_perm.ndim() == 2 && x_perm.shape(0) == rows && x_perm.shape(1) == h && x_perm.dtype() == x.dtype() &&
            x_perm.is_contiguous(),
        op, "x_perm = ", describe_text(x_perm), " but expected contiguous [", rows, ", ", h, "] ", dtype_name(x.dtype()),
        " (moe_permuted_rows gives the row count)");
  check(grouped_layout.ndim() == 1 && grouped_layout.shape(0) == rows && grouped_layout.dtype() == DType::i32 &&
            grouped_layout.is_contiguous(),
        op, "grouped_layout = ", describe_text(grouped_layout), " but expected contiguous [", rows, "] i32");
  check(row_of.ndim() == 2 && row_of.shape(0) == tokens && row_of.shape(1) == k && row_of.dtype() == DType::i32 &&
            row_of.is_contiguous(),
        op, "row_of = ", describe_text(row_of), " but expected contiguous [", tokens, ", ", k, "] i32");
  require_no_overlap(op, "x", x, "x_perm", x_perm);

  // The plan: a serial pass over T * k entries (tiny next to the rows it moves).
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t x_ = 0; x_ < experts; ++x_)
    for (int64_t r = start[size_t(x_)]; r < start[size_t(x_ + 1)]; ++r) gl[r] = -1;
  for (int64_t i = 0; i < tokens * k; ++i) {
    if (e[i] < 0) {
      ro[i] = -1;
      continue;
    }
    const int64_t r = next[size_t(e[i])]++;
    ro[i] = int32_t(r);
    gl[r] = e[i];
  }
  return rows;
}

const OpBackends<PermuteEntry>& permute_backends() {
  static const OpBackends<PermuteEntry> b{moe_permute_cpu, SOL_CUDA_ENTRY(moe_permute_cuda)};
  return b;
}

const OpBackends<UnpermuteEntry>& unpermute_backends() {
  static const OpBackends<UnpermuteEntry> b{moe_unpermute_cpu, SOL_CUDA_ENTRY(moe_unpermute_cuda)};
  return b;
}

void moe_permute(const Tensor& x, const Tensor& idx, int64_t experts, int64_t alignment, const Tensor& x_perm,
                 const Tensor& grouped_layout, const Tensor& row_of) {
  const char* op = "moe_permute";
  require_same_device(op, "topk_idx", idx, "x", x);
  require_same_device(op, "topk_idx", idx, "x_perm", x_perm);
  require_same_device(op, "topk_idx", idx, "grouped_layout", grouped_layout);
  require_same_device(op, "topk_idx", idx, "row_of", row_of);
  backend_entry(permute_backends(), op, idx.device())(x, idx, experts, alignment, x_perm, grouped_layout, row_of);
}

void moe_permute_cpu(const Tensor& x, const Tensor& idx, int64_t experts, int64_t alignment, const Tensor& x_perm,
                     const Tensor& grouped_layout, const Tensor& row_of) {
  int32_t* ro = row_of.data_as<int32_t>();
  int32_t* gl = grouped_layout.data_as<int32_t>();
  const int64_t rows = moe_permute_plan(x, idx, experts, alignment, x_perm, grouped_layout, row_of, ro, gl);
  const int64_t tokens = idx.shape(0), k = idx.shape(1), h = x.shape(1);
  const int64_t row_bytes = h * int64_t(dtype_size(x.dtype()));
  const bool stream = should_stream(rows * row_bytes);
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "moe_permute");
  // Token order: each row of x is read from memory once and copied to its k rows while it sits
  // in L1 (row order reads it k times: 8 x 14 KiB per token for DeepSeek-V3, measured ~8%
  // slower on one thread under load). Streamed copies go without a fence per row (an
  // sfence after every 14 KiB row waits for its lines to drain: ~15% of permute); one fence
  // per thread orders them before the op returns.
  char* out = x_perm.data_as<char>();
  parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const char* s = x.data_as<const char>() + t * row_bytes;
      for (int64_t j = 0; j < k; ++j) {
        if (ro[t * k + j] < 0) continue;
        char* dst = out + ro[t * k + j] * row_bytes;
        mk.copy(dst, s, row_bytes, stream, /*fence=*/false);  // levels without mk.fence order each copy
      }
    }
    if (mk.fence && stream) mk.fence();
  });
  for (int64_t r = 0; r < rows; ++r)
    if (gl[r] < 0) std::memset(out + r * row_bytes, 0, size_t(row_bytes));
}

void moe_unpermute_validate(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out) {
  const char* op = "moe_unpermute";
  check(row_of.ndim() == 2 && row_of.dtype() == DType::i32 && row_of.is_contiguous(), op, "row_of = ",
        describe_text(row_of), " but expected contiguous [tokens, k] i32");
  const int64_t tokens = row_of.shape(0), k = row_of.shape(1);
  check(y_perm.ndim() == 2 && y_perm.is_contiguous() && (y_perm.dtype() == DType::f32 || y_perm.dtype() == DType::bf16),
        op, "y_perm = ", describe_text(y_perm), " but expected contiguous [rows, hidden] f32 or bf16");
  const int64_t h = y_perm.shape(1);
  check(w.ndim() == 2 && w.shape(0) == tokens && w.shape(1) == k && w.dtype() == DType::f32 && w.is_contiguous(), op,
        "topk_weights = ", describe_text(w), " but expected contiguous [", tokens, ", ", k, "] f32");
  check(out.ndim() == 2 && out.shape(0) == tokens && out.shape(1) == h && out.is_contiguous() &&
            (out.dtype() == DType::f32 || out.dtype() == DType::bf16),
        op, "out = ", describe_text(out), " but expected contiguous [", tokens, ", ", h, "] f32 or bf16");
  require_same_device(op, "row_of", row_of, "y_perm", y_perm);
  require_same_device(op, "row_of", row_of, "topk_weights", w);
  require_same_device(op, "row_of", row_of, "out", out);
  require_no_overlap(op, "y_perm", y_perm, "out", out);
}

void moe_unpermute_check_rows(const int32_t* ro, int64_t tokens, int64_t k, int64_t rows) {
  for (int64_t i = 0; i < tokens * k; ++i)
    check(ro[i] >= -1 && ro[i] < rows, "moe_unpermute", "row_of[", i / k, ", ", i % k, "] = ", ro[i], " outside [0, ",
          rows, ")");
}

void moe_unpermute(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out) {
  moe_unpermute_validate(y_perm, row_of, w, out);
  backend_entry(unpermute_backends(), "moe_unpermute", row_of.device())(y_perm, row_of, w, out);
}

void moe_unpermute_cpu(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out) {
  const int64_t tokens = row_of.shape(0), k = row_of.shape(1), h = y_perm.shape(1);
  const int32_t* ro = row_of.data_as<const int32_t>();
  moe_unpermute_check_rows(ro, tokens, k, y_perm.shape(0));
  const float* wt = w.data_as<const float>();
  const kernels::CombineKernels& ck = select_kernels(kernels::combine_kernel_table(), "moe_unpermute");
  if (ck.weighted_row_sum) {
    const int64_t ys = h * int64_t(dtype_size(y_perm.dtype()));
    const bool stream = should_stream(out.numel() * int64_t(dtype_size(out.dtype())));
    const TuningParams& tp = tuning().params;  // read once per call
    parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
      // Token t's rows and token t + 1's (whose first lines t's sweep requests), swapped each token.
      std::vector<const void*> rows(static_cast<size_t>(k)), next(static_cast<size_t>(k));
      auto rows_of = [&](int64_t t, std::vector<const void*>& to) {
        for (int64_t j = 0; j < k; ++j) {
          const int32_t r = ro[t * k + j];
          to[size_t(j)] = r < 0 ? nullptr : y_perm.data_as<const char>() + int64_t(r) * ys;
        }
      };
      rows_of(t0, rows);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t next_k = t + 1 < t1 ? k : 0;
        if (next_k) rows_of(t + 1, next);
        ck.weighted_row_sum(rows.data(), wt + t * k, k, next.data(), next_k, y_perm.dtype(),
                            out.data_as<char>() + t * h * int64_t(dtype_size(out.dtype())), out.dtype(), h, stream, tp);
        rows.swap(next);
      }
    });
    return;
  }
  // Other paths: rows are widened to f32 and the result narrowed with the exact bulk
  // conversions, so the accumulation itself is a plain f32 loop the compiler vectorises.
  auto convert = [](const void* src, DType from, void* dst, DType to, int64_t n) {
    kernels::convert_scalar(src, from, dst, to, n);
  };
  const int64_t ys = h * int64_t(dtype_size(y_perm.dtype())), os = h * int64_t(dtype_size(out.dtype()));
  parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> acc(static_cast<size_t>(h)), row(static_cast<size_t>(h));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t r = ro[t * k + j];
        if (r < 0) continue;
        const float wj = wt[t * k + j];
        const float* y = y_perm.data_as<const float>() + int64_t(r) * h;
        if (y_perm.dtype() != DType::f32) {
          convert(y_perm.data_as<const char>() + int64_t(r) * ys, y_perm.dtype(), row.data(), DType::f32, h);
          y = row.data();
        }
        for (int64_t c = 0; c < h; ++c) acc[size_t(c)] += wj * y[c];
      }
      convert(acc.data(), DType::f32, out.data_as<char>() + t * os, out.dtype(), h);
    }
  });
}

}  // namespace sol
