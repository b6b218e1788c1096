// sol::embedding's CUDA entry: the row gather of src/kernels/cuda/moe_rows.cuh. The ids are
// read back and checked on the host while the gather runs (cuda::IndexReadback): an id outside
// the vocabulary is a sol::Error from this call, and its row of out is left unwritten.
#include "device/cuda/index_readback.h"
#include "ops/embedding/embedding_backends.h"
#include "ops/moe/moe_rows_program.h"
#include "sol/device.h"

namespace sol {

namespace {

void launch_gather(const Tensor& table, const Tensor& ids, const Tensor& out, void* stream) {
  const int64_t es = int64_t(dtype_size(table.dtype()));
  long long table_rows = table.shape(0), table_stride = table.stride(0) * es, out_stride = out.stride(0) * es,
            rows = ids.shape(0);
  long long row_bytes = table.shape(1) * es;
  int vectors = (reinterpret_cast<uintptr_t>(table.device_data()) | reinterpret_cast<uintptr_t>(out.device_data()) |
                 uintptr_t(table_stride) | uintptr_t(out_stride) | uintptr_t(row_bytes)) % 16 == 0;
  const void* tp = table.device_data();
  const void* ip = ids.device_data();
  void* op = out.device_data();
  void* args[] = {&tp, &table_rows, &table_stride, &ip, &op, &out_stride, &rows, &row_bytes, &vectors};
  cuda::launch(cuda::get_kernel(moe_rows_program(), "sol_gather_rows", out.device()), row_blocks(out.device(), rows),
               stream, args);
}

}  // namespace

void embedding_cuda(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t tokens = ids.shape(0);
  if (tokens == 0) return;
  void* stream = current_stream(out.device());
  cuda::IndexReadback host_ids("embedding", ids, stream);
  if (out.numel() != 0) launch_gather(table, ids, out, stream);
  embedding_check_ids(static_cast<const int32_t*>(host_ids.wait()), tokens, table.shape(0));
}

}  // namespace sol
