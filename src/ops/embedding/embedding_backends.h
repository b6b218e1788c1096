#pragma once
// embedding's whole-op entries per backend (ops/common/op_backends.h), chosen once by the
// table's device after the checks that read no element.
#include <cstdint>

#include "ops/common/op_backends.h"

namespace sol {

using EmbeddingEntry = void (*)(const Tensor& table, const Tensor& ids, const Tensor& out);
const OpBackends<EmbeddingEntry>& embedding_backends();

// Every id in [0, vocab) (host memory), else sol::Error naming the first one outside.
void embedding_check_ids(const int32_t* id, int64_t tokens, int64_t vocab);

void embedding_cpu(const Tensor& table, const Tensor& ids, const Tensor& out);
#ifdef SOL_HAS_CUDA
void embedding_cuda(const Tensor& table, const Tensor& ids, const Tensor& out);
#endif

}  // namespace sol
