// Asynchronous send/recv. Within a node: the matching engine of the node-local group
// (p2p_engine.h: tags, one-copy pulls of heap buffers, the progress model). Across nodes:
// MPI_Isend / MPI_Irecv with the tag offset past the collectives' own.
#include <string>

#include "comm/group_state.h"
#include "comm/mpi_transfers.h"
#include "comm/p2p_engine.h"
#include "comm/wait.h"
#include "comm/world.h"
#include "sol/comm.h"

namespace sol::comm {

namespace detail {

struct PendingOp {
  virtual ~PendingOp() = default;
  // Moves what it can (the whole group's transfers, for shared memory); true once this op is
  // complete. Never blocks.
  virtual bool progress() = 0;
  virtual WaitFor waiting_for() const = 0;
};

namespace {

class ShmTransfer final : public PendingOp {
 public:
  ShmTransfer(ShmP2P& engine, ShmOp::Kind kind, int peer, int tag, void* data, size_t bytes)
      : op_(engine, kind, peer, tag, static_cast<std::byte*>(data), bytes) {
    engine.post(op_);
  }
  bool progress() override {
    if (!op_.done) op_.engine.progress();
    return op_.done;
  }
  WaitFor waiting_for() const override { return op_.engine.waiting_for(op_); }

 private:
  ShmOp op_;
};

class MpiTransfer final : public PendingOp {
 public:
  MpiTransfer(GroupState& s, bool send, const Transfer& t, int tag)
      : send_(send), peer_(s.world_rank_of[size_t(t.peer)]), tag_(tag) {
    if (send) post_send(s, t, posted_, kFirstP2PTag + tag);
    else post_receive(s, t, posted_, kFirstP2PTag + tag);
  }
  bool progress() override { return test_all(posted_, send_ ? "send" : "recv"); }
  WaitFor waiting_for() const override {
    return {send_ ? "send" : "recv", peer_, 0,
            "an MPI transfer with tag " + std::to_string(tag_) + " to complete (cross-node)"};
  }

 private:
  bool send_;
  int peer_, tag_;
  PostedRequests posted_;
};

}  // namespace
}  // namespace detail

using detail::GroupState;

Work::Work() = default;
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&&) noexcept = default;

// A batch dropped unfinished still owns buffers peers read or write: finish it here (errors
// were already reported to whoever waited; a failed op leaves its stream marked as cut). Not
// after a comm failure in this process: its peers are gone or stopped and it is on its way
// out, so waiting again would cost a whole SOL_COMM_TIMEOUT_S per batch dropped.
Work::~Work() {
  if (detail::process_failed()) return;
  try {
    if (!completed()) wait();
  } catch (const std::exception&) {
  }
}

bool Work::completed() const {
  bool all = true;
  for (const auto& op : ops_) all &= op->progress();
  return all;
}

void Work::wait() {
  detail::wait_until([&] { return completed(); },
                     [&] {
                       for (const auto& op : ops_)
                         if (!op->progress()) return op->waiting_for();
                       return detail::WaitFor{"wait", -1, 0, "the batch"};
                     });
}

Work Group::batch_isend_irecv(std::span<const P2POp> ops) const {
  GroupState& s = *state_;
  // Everything is checked before anything is posted: a batch goes out whole or not at all.
  for (const P2POp& op : ops) {
    const char* name = op.kind == P2POp::send ? "isend" : "irecv";
    check(op.peer >= 0 && op.peer < size() && op.peer != rank(), name, "peer = ", op.peer,
          " but must be another rank of the group (size ", size(), ", this rank ", rank(), ")");
    check(op.tag >= 0 && op.tag <= kMaxTag, name, "tag = ", op.tag, " but must be in 0..", kMaxTag);
    check(op.buffer.is_contiguous(), name, "buffer must be contiguous, got ", describe_text(op.buffer));
    check(op.buffer.empty() || op.buffer.data() != nullptr, name, "buffer has ", op.buffer.numel(),
          " elements but no data");
  }
  Work work;
  for (const P2POp& op : ops) {
    const size_t bytes = size_t(op.buffer.nbytes());
    const auto kind = op.kind == P2POp::send ? detail::ShmOp::send : detail::ShmOp::recv;
    std::unique_ptr<detail::PendingOp> pending;
    if (s.node_of[size_t(op.peer)] == s.node) {
      GroupState& local = s.local();
      if (!local.p2p) local.p2p = std::make_unique<detail::ShmP2P>(local);
      pending = std::make_unique<detail::ShmTransfer>(*local.p2p, kind, s.local_of[size_t(op.peer)], op.tag,
                                                      op.buffer.data(), bytes);
    } else {
      pending = std::make_unique<detail::MpiTransfer>(s, op.kind == P2POp::send,
                                                      detail::Transfer{op.peer, op.buffer.data(), bytes}, op.tag);
    }
    work.ops_.push_back(std::move(pending));
  }
  // A first pass at once: eager sends go out as far as the rings have room, and receives
  // take what has already arrived.
  work.completed();
  return work;
}

Work Group::isend(const Tensor& buffer, int peer, int tag) const {
  P2POp op{P2POp::send, buffer, peer, tag};
  return batch_isend_irecv({&op, 1});
}

Work Group::irecv(const Tensor& buffer, int peer, int tag) const {
  P2POp op{P2POp::recv, buffer, peer, tag};
  return batch_isend_irecv({&op, 1});
}

}  // namespace sol::comm
