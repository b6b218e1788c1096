// sol::embedding's CUDA entry: the row gather of src/kernels/cuda/moe_rows.cuh. The ids are
// copied to the host and checked first (a synchronisation per call: an id outside the
// vocabulary is a sol::Error before anything is written, as on the CPU).
#include "ops/embedding/embedding_backends.h"
#include "ops/moe/moe_rows_program.h"
#include "sol/device.h"

namespace sol {

void embedding_cuda(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t tokens = ids.shape(0);
  if (tokens == 0) return;
  Buffer host(DType::i32, {tokens});
  transfer(ids, host.tensor());
  embedding_check_ids(host.tensor().data_as<const int32_t>(), tokens, table.shape(0));
  if (out.numel() == 0) return;
  const int64_t es = int64_t(dtype_size(table.dtype()));
  long long table_stride = table.stride(0) * es, out_stride = out.stride(0) * es, rows = tokens;
  long long row_bytes = table.shape(1) * es;
  int vectors = (reinterpret_cast<uintptr_t>(table.device_data()) | reinterpret_cast<uintptr_t>(out.device_data()) |
                 uintptr_t(table_stride) | uintptr_t(out_stride) | uintptr_t(row_bytes)) % 16 == 0;
  const void* tp = table.device_data();
  const void* ip = ids.device_data();
  void* op = out.device_data();
  void* args[] = {&tp, &table_stride, &ip, &op, &out_stride, &rows, &row_bytes, &vectors};
  cuda::launch(cuda::get_kernel(moe_rows_program(), "sol_gather_rows", out.device()), row_blocks(out.device(), tokens),
               current_stream(out.device()), args);
}

}  // namespace sol
