#pragma once
// `sol comm bench ep-dispatch | ep-combine | ep-combine-inplace | ep-ll-dispatch | ep-ll-combine`: expert-parallel
// dispatch and combine (sol::ep) swept over tokens per rank, with DeepEP's bandwidth definition.
//
//   ep-dispatch / ep-combine (normal mode): bytes = payload rows this rank receives in the
//     dispatch (the rows its combine sends back), bf16 or fp8 (+ scales), averaged over ranks:
//     DeepEP's "NVL bytes" (recv_x bytes) — each row crosses the bottleneck link once.
//   ep-combine-inplace: the same combine with y in the buffer's combine_buffer() (one node):
//     sources read the rows in place, so it moves fewer bytes than a copy of them.
//   ep-ll-dispatch / ep-ll-combine: bytes = (token, expert) selections this rank sends, times
//     the message (dispatch: the row, fp8 with its scales when the payload is fp8; combine: the
//     bf16 row), as DeepEP's low-latency test counts them.
//   algbw = busbw = bytes / time (slowest rank's mean call, median batch). Ceiling, paired per
//   size: dispatches against the same puts with no synchronisation (ep_put_ceiling: each
//   token's row read once and written to each of its destinations, into a peer's segment);
//   combines against the inter-process copy of `bytes` (DeepEP's definition). SOL% = busbw /
//   ceiling; a row above 100% is flagged on stderr with the reason. count = tokens per rank.
//   #wrong = received rows (dispatch) or output elements (combine) that differ from the exact
//   expected value, before and after the timed batches.
//
// Shape: hidden 7168, top-8 of 256 experts, uniform random routing. Tokens per rank: normal
// 128…4096, low latency 1…128 (×factor). SOL_EP_BENCH="hidden,experts,top_k,min_tokens,max_tokens"
// overrides them (tests use small shapes). The low-latency buffers take
// experts·max_tokens·hidden·2 bytes of heap twice: run with SOL_COMM_HEAP_BYTES=4G.
#include <string_view>
#include <vector>

#include "sol/comm_bench.h"

namespace sol::comm {

inline constexpr const char* kEpBenchOps[] = {"ep-dispatch", "ep-combine", "ep-combine-inplace", "ep-ll-dispatch",
                                              "ep-ll-combine"};

bool is_ep_bench_op(std::string_view op);
std::vector<CommBenchRecord> ep_bench(const Group& group, const CommBenchOptions& options);

}  // namespace sol::comm
