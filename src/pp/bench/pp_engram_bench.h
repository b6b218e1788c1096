#pragma once
// `sol comm bench pp-sendrecv | engram-lookup`: the pipeline's stage links and the sharded
// Engram lookup, swept over message sizes like the collectives (same records and table).
//
// pp-sendrecv: a 1F1B step over 16 micro-batches whose stages only pass their boundary tensor
//   on (no compute), so each rank sends and receives `bytes` per micro-batch and direction.
//   time = step / micro-batches; busbw = algbw (factor 1, as sendrecv); ceiling: copy of bytes.
//   The first run checks every element, timed runs check each message's tagged first and last
//   4 bytes (a message landing in the wrong slot or order is caught every run).
// engram-lookup: each rank looks up bytes / (dim x dtype) random rows (dim 128) of a table
//   split across the ranks (2 x that many rows per rank); busbw = algbw (factor 1); ceiling:
//   copy of bytes. Within a node every output row is one copy out of its owner's shard, local
//   or remote alike, so a copy of the whole output is the floor (counting only the remote
//   (P-1)/P, as all_to_all does, would cap SOL% at (P-1)/P). Every element checked.
#include <vector>

#include "sol/comm_bench.h"

namespace sol::comm {

inline constexpr const char* kPipelineBenchOps[] = {"pp-sendrecv", "engram-lookup"};

bool is_pipeline_bench_op(std::string_view op);
std::vector<CommBenchRecord> pipeline_bench(const Group& group, const CommBenchOptions& options);

}  // namespace sol::comm
