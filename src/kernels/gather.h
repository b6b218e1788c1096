#pragma once
// Row gather (internal, AVX-512): dst row r = src[r] (row_bytes each; src[r] == nullptr: zeros),
// for embedding lookups and the MoE permutation. The source rows are scattered, so the
// hardware prefetcher restarts at every row; the kernel keeps a software prefetch
// kGatherPrefetchBytes ahead in the concatenated source stream, running into the next rows.
// Rows longer than half that distance are copied two at a time, row r with row r + rows / 2
// (two independent streams each way: docs/perf/layer-ops.md), each half with its own
// prefetch stream. nontemporal as in kernels/copy.h. dst rows and src rows must not overlap.
#include <cstdint>

namespace sol::kernels {
constexpr int64_t kGatherPrefetchBytes = 4096;
void gather_rows_avx512(char* dst, int64_t dst_stride, const char* const* src, int64_t rows, int64_t row_bytes,
                        bool nontemporal);
}  // namespace sol::kernels
