#include "sol/embedding.h"

#include <vector>

#include "kernels/move_bytes.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "ops/embedding/embedding_backends.h"
#include "sol/error.h"

namespace sol {

const OpBackends<EmbeddingEntry>& embedding_backends() {
  static const OpBackends<EmbeddingEntry> b{embedding_cpu, SOL_CUDA_ENTRY(embedding_cuda)};
  return b;
}

void embedding_check_ids(const int32_t* id, int64_t tokens, int64_t vocab) {
  for (int64_t t = 0; t < tokens; ++t)
    check(id[t] >= 0 && id[t] < vocab, "embedding", "ids[", t, "] = ", id[t], " outside the vocabulary [0, ", vocab, ")");
}

void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const char* op = "embedding";
  check(table.ndim() == 2 && (table.numel() == 0 || table.stride(1) == 1), op,
        "table must be [vocab, hidden] with dense rows, got ", describe_text(table));
  check(ids.ndim() == 1 && ids.dtype() == DType::i32 && ids.is_contiguous(), op, "ids = ", describe_text(ids),
        " but expected contiguous [tokens] i32");
  check(out.ndim() == 2 && out.shape(0) == ids.shape(0) && out.shape(1) == table.shape(1) &&
            out.dtype() == table.dtype() && (out.numel() == 0 || out.stride(1) == 1),
        op, "out = ", describe_text(out), " but expected [", ids.shape(0), ", ", table.shape(1), "] ",
        dtype_name(table.dtype()), " with dense rows");
  require_same_device(op, "table", table, "ids", ids);
  require_same_device(op, "table", table, "out", out);
  require_no_overlap(op, "table", table, "out", out);
  backend_entry(embedding_backends(), op, table.device())(table, ids, out);
}

void embedding_cpu(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t tokens = ids.shape(0);
  const int32_t* id = ids.data_as<const int32_t>();
  embedding_check_ids(id, tokens, table.shape(0));
  const int64_t row_bytes = table.shape(1) * int64_t(dtype_size(table.dtype()));
  const int64_t ts = table.stride(0) * int64_t(dtype_size(table.dtype()));
  const int64_t os = out.stride(0) * int64_t(dtype_size(out.dtype()));
  const kernels::MoveKernels& k = select_kernels(kernels::move_kernel_table(), "embedding");
  const bool stream = should_stream(tokens * row_bytes);
  if (k.gather_rows) {
    std::vector<const char*> src(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) src[size_t(t)] = table.data_as<const char>() + id[t] * ts;
    parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
      k.gather_rows(out.data_as<char>() + t0 * os, os, src.data() + t0, t1 - t0, row_bytes, stream);
    });
    return;
  }
  parallel_ranges(tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const char* src = table.data_as<const char>() + id[t] * ts;
      char* dst = out.data_as<char>() + t * os;
      k.copy(dst, src, row_bytes, stream, /*fence=*/true);
    }
  });
}

}  // namespace sol
