#include "sol/rope.h"

#include "kernels/rope.h"
#include "ops/common/validate.h"
#include "ops/rope/rope_backends.h"
#include "ops/activation/row_pairs.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "sol/error.h"

namespace sol {

void rope_validate(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset) {
  const char* op = "rope";
  const RopeConfig& c = table.config();
  check(x.ndim() == 3, op, "x must be [tokens, heads, head_dim] but is ", describe_text(x));
  check(x.dtype() == DType::f32 || x.dtype() == DType::bf16, op, "x.dtype = ", dtype_name(x.dtype()),
        " but must be f32 or bf16");
  check(x.numel() == 0 || x.stride(2) == 1, op, "x's head_dim must be dense (stride(2) = 1)");
  check(rope_offset >= 0 && rope_offset + c.rope_dim <= x.shape(2), op, "rope slice [", rope_offset, ", ",
        rope_offset + c.rope_dim, ") does not fit head_dim = ", x.shape(2));
  check(positions.ndim() == 1 && positions.shape(0) == x.shape(0) && positions.dtype() == DType::i32 &&
            positions.is_contiguous(),
        op, "positions = ", describe_text(positions), " but expected contiguous [", x.shape(0), "] i32");
  require_same_device(op, "x", x, "positions", positions);
}

void rope_check_positions(const int32_t* pos, int64_t tokens, const RopeTable& table) {
  for (int64_t t = 0; t < tokens; ++t)
    check(pos[t] >= 0 && pos[t] < table.max_positions(), "rope", "positions[", t, "] = ", pos[t],
          " outside the table's [0, ", table.max_positions(), ")");
}

const OpBackends<RopeEntry>& rope_backends() {
  static const OpBackends<RopeEntry> b{rope_cpu, SOL_CUDA_ENTRY(rope_cuda)};
  return b;
}

void rope(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset) {
  rope_validate(x, positions, table, rope_offset);
  backend_entry(rope_backends(), "rope", x.device())(x, positions, table, rope_offset);
}

void rope_cpu(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset) {
  const RopeConfig& c = table.config();
  const int64_t tokens = x.shape(0), heads = x.shape(1), d = c.rope_dim;
  const int32_t* pos = positions.data_as<const int32_t>();
  rope_check_positions(pos, tokens, table);
  const bool inter = c.layout == RopeLayout::interleaved;
  const kernels::RopeKernels& k = select_kernels(kernels::rope_kernel_table(), "rope");
  const TuningParams& tp = tuning().params;  // read once per call
  const int64_t es = int64_t(dtype_size(x.dtype()));
  auto slices = [&](int64_t t) { return x.data_as<char>() + (t * x.stride(0) + rope_offset) * es; };
  parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
    auto one = [&](int64_t t, int64_t end) {
      k.rotate_heads(slices(t), x.dtype(), x.stride(1) * es, heads, table.cos_row(pos[t]), table.sin_row(pos[t]), d,
                     inter, t + 1 < end ? slices(t + 1) : nullptr, tp);
    };
    if (!k.rotate_two_tokens || tp.rope_pair_tokens == 0) {
      for (int64_t t = t0; t < t1; ++t) one(t, t1);
      return;
    }
    // Token t0 + k with token t0 + half + k (ops/activation/row_pairs.h), each half's
    // prefetches running into its own next token; whether pairing pays depends on how the core
    // overlaps misses (rope_pair_tokens, docs/perf/layer-ops.md).
    const int64_t half = (t1 - t0) / 2;
    auto token = [&](int64_t t, int64_t end) {
      return kernels::RopeToken{slices(t), table.cos_row(pos[t]), table.sin_row(pos[t]),
                                t + 1 < end ? slices(t + 1) : nullptr};
    };
    for_row_pairs(
        t0, t1,
        [&](int64_t a, int64_t b) {
          k.rotate_two_tokens(token(a, t0 + half), token(b, t0 + 2 * half), x.dtype(), x.stride(1) * es, heads, d, inter, tp);
        },
        [&](int64_t t) { one(t, t1); });
  });
}

}  // namespace sol
