#pragma once
// sol::comm — ranks launched by mpirun, bootstrapped over MPI.
//
// Ranks on one node share a symmetric heap in POSIX shared memory: every rank maps every
// peer's segment and reads (or writes) the peer's buffers directly, synchronising through
// flags with acquire/release ordering. Ranks on different nodes talk through MPI
// non-blocking point-to-point. SOL_LOCAL_SIZE=k splits one host's ranks into emulated nodes
// of k ranks, so the cross-node path runs on one machine.
//
// Every wait has a deadline (SOL_COMM_TIMEOUT_S, default 60 s) and a dead peer is noticed
// while waiting: either way the call throws sol::CommError naming the op, the peer (by world
// rank) and what it waited for. Waits inside MPI itself (start-up, creating a group, window
// set-up, MPI_Finalize) cannot throw: a watchdog ends the process with a message instead, after
// SOL_COMM_STARTUP_TIMEOUT_S for start-up (default max(60 s, SOL_COMM_TIMEOUT_S)) and
// SOL_COMM_TIMEOUT_S for the rest. Collectives are called by every rank of the group in the same order with
// agreeing sizes and dtypes; disagreements the protocol can see are reported, not corrupted.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sol/error.h"
#include "sol/reduce_op.h"
#include "sol/tensor.h"

namespace sol {

// A communication wait that ran out of time, a peer that died, or ranks that disagree.
class CommError : public Error {
 public:
  explicit CommError(const std::string& what) : Error(what) {}
};

namespace comm {

using ReduceOp = sol::ReduceOp;
std::string_view reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(std::string_view name);  // "sum" | "max"; throws sol::Error

// SOL_COMM_TIMEOUT_S (default 60): how long any single wait may take.
double timeout_seconds();

namespace detail {
struct GroupState;
struct PendingOp;
}  // namespace detail

class Group;

// Point-to-point tags: 0..kMaxTag (MPI guarantees 32767 tags; Sol keeps the upper half).
inline constexpr int kMaxTag = 16383;

// One point-to-point transfer of a batch: send `buffer` to `peer`, or receive into it.
// Messages are matched by (peer, tag) in order, as in MPI: those of one tag between a pair
// arrive in the order they were sent, and each tag is an independent stream (pipeline and
// context parallelism run several between the same pair). A receive must have the size of
// the message it matches; a message of another size throws CommError on the receiving rank.
struct P2POp {
  enum Kind { send, recv } kind;
  Tensor buffer;  // contiguous
  int peer;       // rank in the group
  int tag = 0;    // 0..kMaxTag
};

// A batch of sends and receives in flight. wait() drives all of them to completion together
// (so a batch that both sends to and receives from a peer cannot deadlock against it).
// Buffers must stay alive and untouched until the work completes (wait() returns, or
// completed() returned true); a Work destroyed earlier waits in its destructor.
//
// Progress: there is no background thread. Transfers move when this rank calls into
// point-to-point: posting a batch makes a first pass, and every completed() or wait() — of any
// Work of the group — drives all of the group's transfers in flight, not only its own. So
// poll completed() between pieces of computation to overlap communication with it. Within a
// node, a send of at least 32 KiB from symmetric-heap memory is copied once, by the receiver
// straight out of the sender's heap (the send completes when the receiver has copied it);
// other messages go through a 1 MiB ring per pair (the send completes once it is in the ring).
class Work {
 public:
  Work();
  ~Work();
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  void wait();
  bool completed() const;

 private:
  friend class Group;
  std::vector<std::unique_ptr<detail::PendingOp>> ops_;
};

// A set of ranks that communicate. Copies share the same underlying communicator.
//
// Reductions: f32, and bf16 accumulated in f32 and rounded once (across nodes the whole
// reduction runs in f32). Data movement: any dtype.
class Group {
 public:
  // All ranks of the job. Initialises MPI on first use (if the program has not) and
  // finalises it at exit unless a rank failed (a failed rank exits without finalising, so a
  // dead peer cannot hang it).
  static Group& world();

  int rank() const;
  int size() const;
  int node() const;        // index of this rank's (emulated) node within the group
  int num_nodes() const;
  const Group& local() const;  // the ranks of this node, which share memory
  const Group& cross() const;  // one rank per node: those with this rank's local index
  // Collective: ranks with the same colour form a new group, ordered by (key, rank).
  Group split(int color, int key) const;

  // Symmetric heap of the node-local group: every rank of the group calls heap_alloc with the
  // same size in the same order and gets memory peers can map. Collectives whose buffers lie
  // in the heap read peers' buffers in place instead of staging copies (the zero-copy path).
  // Lives as long as the group; heap_reset() frees everything (collective).
  void* heap_alloc(size_t bytes) const;
  void heap_reset() const;

  // out = op over ranks of in; in and out: same shape, dtype, contiguous; may alias.
  void allreduce(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum) const;
  // in holds size() blocks of out.numel() elements; rank r gets op over ranks of block r.
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum) const;
  // out holds size() blocks of in.numel() elements, block r from rank r. In place when in is
  // this rank's block of out.
  void all_gather(const Tensor& in, const Tensor& out) const;
  // in and out hold size() equal blocks; block p of in goes to rank p, block p of out came
  // from rank p.
  void all_to_all(const Tensor& in, const Tensor& out) const;
  // Split sizes in elements: send_counts[p] elements of in go to rank p (blocks packed in
  // rank order), recv_counts[p] elements of out come from rank p. recv_counts[p] must equal
  // rank p's send_counts[rank()]; a mismatch seen on the node throws CommError.
  void all_to_all_v(const Tensor& in, std::span<const int64_t> send_counts, const Tensor& out,
                    std::span<const int64_t> recv_counts) const;
  // buffer of root is copied into buffer of every rank.
  void broadcast(const Tensor& buffer, int root) const;
  void barrier() const;
  // Asynchronous point-to-point, like torch.distributed's batch_isend_irecv (see Work for
  // when transfers move, P2POp for matching by tag).
  Work batch_isend_irecv(std::span<const P2POp> ops) const;
  Work isend(const Tensor& buffer, int peer, int tag = 0) const;
  Work irecv(const Tensor& buffer, int peer, int tag = 0) const;

  explicit Group(std::shared_ptr<detail::GroupState> state);
  detail::GroupState& state() const { return *state_; }

 private:
  std::shared_ptr<detail::GroupState> state_;
};

}  // namespace comm
}  // namespace sol
