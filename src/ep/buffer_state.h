#pragma once
// What an ep::Buffer holds underneath: where each region lives in the symmetric heap (the same
// offsets on every rank, so a peer's region is this rank's address moved to its segment), the
// flags each rank raises in its own segment, and the call counters the protocols order by.
//
// Every flag and every metadata slot has one writer, its owner; peers only read them. Bulk
// data moves by one-sided puts: a sender writes rows straight into the receiver's region.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sol/comm.h"
#include "sol/ep.h"
#include "sol/tensor.h"

namespace sol::ep {

// The flags a rank raises in its own segment (release), each on its own cache line.
struct alignas(64) Flag {
  std::atomic<uint64_t> value{0};
};

struct Flags {
  Flag normal_posted;   // dispatch n entered, its counts published (so: done with views of n-1)
  Flag normal_sent;     // every row of dispatch n written to every destination
  Flag combine_posted;  // combine n entered (2n + 1 when y is in this rank's combine region)
  Flag combine_sent;    // every row of combine n written back to every source
  Flag combine_done;    // combine n reduced (in place: every peer's rows read)
  Flag ll_posted;       // low-latency dispatch n entered, per-expert counts published
  Flag ll_sent;         // every row of low-latency dispatch n written
  Flag llc_posted;      // low-latency combine n entered
  Flag llc_sent;        // every row of low-latency combine n written back
};

// How normal mode moves rows: inside one node by one-sided puts; across nodes of equal size
// hierarchically (cross once per destination node, then puts inside the node); across nodes of
// unequal size by the group's all_to_all_v.
enum class Path { one_node, hierarchical, flat_mpi };

struct Buffer::State {
  State(const comm::Group& g, const comm::Group& l) : group(g), local(l) {}
  comm::Group group;
  comm::Group local;                    // the ranks of this node (the group itself on one node)
  int R = 1, me = 0;
  int64_t H = 0, E = 0, K = 0, L = 0;   // hidden, experts, top_k, local experts
  int64_t row_bytes = 0;                // payload bytes per token row
  int64_t scale_cols = 0;               // f32 scales per row (fp8), else 0
  Path path = Path::one_node;
  bool shared = false;                  // regions in the node's symmetric heap (not flat_mpi)
  bool fp8 = false;

  // ---- topology, gathered once through the public Group API ----
  int N = 1, G = 1;                     // nodes; ranks per node (hierarchical: every node)
  int my_node = 0, my_local = 0;
  std::vector<int> node_of, local_of;   // [R]
  std::vector<std::vector<int>> ranks_of_node;  // [N] group ranks, by local index
  std::vector<int> cross_rank_of_node;  // [N] rank in group.cross() of the node's rank with my local index
  Traffic dispatch_traffic, combine_traffic;

  // ---- normal mode ----
  int64_t max_tokens = 0, cap = 0;      // cap = R · max_tokens received (or combined) rows
  std::byte* heap = nullptr;            // this rank's allocation; the same offsets in peers'
  std::vector<std::byte> private_memory;  // groups across nodes: the same regions, private
  size_t off_meta[2] = {}, off_recv_x = 0, off_recv_scales = 0, off_recv_idx = 0, off_recv_w = 0,
         off_combine = 0;
  // flat_mpi: packed send rows for all_to_all_v.
  size_t off_send_x = 0, off_send_scales = 0, off_send_idx = 0, off_send_w = 0;
  // hierarchical: cross-node staging in private memory. Dispatch packs records (row | scales |
  // ids | weights) into stage_out and receives into stage_in; combine reuses them the other way
  // (node partial sums out of stage_in, this rank's partials back into stage_out).
  std::vector<std::byte> stage_out, stage_in;
  std::vector<int32_t> count_row, count_rows;  // [R + N] this rank's counts; [R][R + N] everyone's
  std::vector<int> node_of_cross_rank;  // [N] inverse of cross_rank_of_node
  uint64_t normal_seq = 0, combine_seq = 0;
  // Layout views' storage, and this rank's dispatch scratch (sized at construction).
  std::vector<int32_t> tokens_per_rank, tokens_per_node, tokens_per_expert, recv_per_expert;
  std::vector<uint8_t> in_rank;
  DispatchLayout layout;
  std::vector<int64_t> recv_offset;     // [src] first received row of each source
  std::vector<int32_t> scratch_counts;  // [R]
  std::vector<int32_t> expert_scratch;  // [E]
  std::vector<int64_t> count_matrix;    // [src][dst], this call's

  // ---- low-latency mode ----
  int64_t ll_max = 0;                   // tokens per rank per call
  int64_t ll_slots = 0;                 // R · ll_max rows per local expert
  size_t off_ll_meta[2] = {}, off_ll_x[2] = {}, off_ll_scales[2] = {}, off_ll_src[2] = {},
         off_ll_combine[2] = {};
  uint64_t ll_seq = 0, llc_seq = 0;
  bool ll_in_flight = false;
  std::vector<int32_t> ll_count[2];     // [local_experts] per buffer
  std::vector<int64_t> ll_block[2];     // [local_expert][src] first packed row of each source
  std::vector<int32_t> ll_expert_counts;  // [E] this rank's count per expert (scratch)
  std::vector<int64_t> ll_offsets;      // [E] where this rank's rows start in the expert's block
  std::vector<int64_t> ll_pos;          // [T·top_k] packed row of each (token, choice)
  std::vector<std::byte> ll_quant;      // fp8: the tokens quantized once [ll_max, hidden]
  std::vector<float> ll_quant_scales;   // fp8: their scales [ll_max, hidden/128]

  Flags& flags() const { return *reinterpret_cast<Flags*>(heap); }
  // Peers are group ranks on this rank's node.
  Flags& flags_of(int peer) const;
  // This rank's region at `offset`, or the same region in `peer`'s segment.
  std::byte* own(size_t offset) const { return heap + offset; }
  std::byte* peer(int p, size_t offset) const;
  void wait_flag(int peer, const Flag& flag, uint64_t value, const char* op, const char* what) const;
  // Raises `flag` (of this rank) to value and waits until every other rank of the node has.
  void node_round(Flag Flags::*flag, uint64_t value, const char* op, const char* what) const;
};

}  // namespace sol::ep
