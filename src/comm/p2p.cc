// Asynchronous send/recv. Within a node a sender writes straight into a byte ring in the
// receiver's segment and publishes how far it got (release); the receiver copies out and
// publishes how far it read. Each message starts with a 16-byte header carrying its size, so
// a receiver that expects another size reports it instead of reading garbage. Across nodes:
// MPI_Isend / MPI_Irecv.
#include <cstring>
#include <string>

#include "comm/group_state.h"
#include "comm/mpi_transfers.h"
#include "comm/wait.h"
#include "sol/comm.h"

namespace sol::comm {

namespace detail {

struct PendingOp {
  virtual ~PendingOp() = default;
  virtual bool progress() = 0;  // true once complete; never blocks
  virtual WaitFor waiting_for() const = 0;
};

namespace {

constexpr uint64_t kMagic = 0x501C0117ull;
constexpr size_t kHeaderBytes = 16;

// One direction of a mailbox: the sender's or the receiver's view of a stream of messages.
struct MailboxStream {
  GroupState& local;
  int owner, sender;  // local ranks: whose segment holds the mailbox, who writes into it
  MailboxHeader& header() const { return local.shm->mailbox(owner, sender); }
  std::byte* ring() const { return local.shm->ring(owner, sender); }
  size_t ring_bytes() const { return local.shm->layout().ring_bytes; }
};

class ShmSend final : public PendingOp {
 public:
  ShmSend(GroupState& local, int to, int world_peer, const void* data, size_t bytes)
      : stream_{local, to, local.rank}, world_peer_(world_peer), data_(static_cast<const std::byte*>(data)),
        bytes_(bytes), ticket_(local.send_issued[size_t(to)]++) {
    const uint64_t header[2] = {kMagic, bytes};
    std::memcpy(header_, header, kHeaderBytes);
  }

  bool progress() override {
    GroupState& l = stream_.local;
    if (pos_ == kHeaderBytes + bytes_) return true;
    if (l.send_served[size_t(stream_.owner)] != ticket_) return false;
    MailboxHeader& h = stream_.header();
    const size_t ring = stream_.ring_bytes();
    uint64_t posted = h.posted.load(std::memory_order_relaxed);
    const uint64_t consumed = h.consumed.load(std::memory_order_acquire);
    while (pos_ < kHeaderBytes + bytes_ && posted - consumed < ring) {
      const size_t at = size_t(posted % ring);
      size_t n = std::min({ring - size_t(posted - consumed), ring - at, kHeaderBytes + bytes_ - pos_});
      if (pos_ < kHeaderBytes) {
        n = std::min(n, kHeaderBytes - pos_);
        std::memcpy(stream_.ring() + at, header_ + pos_, n);
      } else {
        std::memcpy(stream_.ring() + at, data_ + (pos_ - kHeaderBytes), n);
      }
      posted += n;
      pos_ += n;
    }
    h.posted.store(posted, std::memory_order_release);
    if (pos_ < kHeaderBytes + bytes_) return false;
    ++l.send_served[size_t(stream_.owner)];
    return true;
  }

  WaitFor waiting_for() const override {
    return {"send", world_peer_, stream_.local.shm->pid(stream_.owner),
            "room in its mailbox (" + std::to_string(pos_) + " of " + std::to_string(kHeaderBytes + bytes_) +
                " bytes written)"};
  }

 private:
  MailboxStream stream_;
  int world_peer_;
  const std::byte* data_;
  size_t bytes_, pos_ = 0;
  uint64_t ticket_;
  std::byte header_[kHeaderBytes];
};

class ShmRecv final : public PendingOp {
 public:
  ShmRecv(GroupState& local, int from, int world_peer, void* data, size_t bytes)
      : stream_{local, local.rank, from}, world_peer_(world_peer), data_(static_cast<std::byte*>(data)),
        bytes_(bytes), ticket_(local.recv_issued[size_t(from)]++) {}

  bool progress() override {
    GroupState& l = stream_.local;
    if (pos_ == kHeaderBytes + bytes_) return true;
    if (l.recv_served[size_t(stream_.sender)] != ticket_) return false;
    MailboxHeader& h = stream_.header();
    const size_t ring = stream_.ring_bytes();
    const uint64_t posted = h.posted.load(std::memory_order_acquire);
    uint64_t consumed = h.consumed.load(std::memory_order_relaxed);
    while (pos_ < kHeaderBytes + bytes_ && consumed < posted) {
      const size_t at = size_t(consumed % ring);
      size_t n = std::min({size_t(posted - consumed), ring - at, kHeaderBytes + bytes_ - pos_});
      if (pos_ < kHeaderBytes) {
        n = std::min(n, kHeaderBytes - pos_);
        std::memcpy(header_ + pos_, stream_.ring() + at, n);
        if (pos_ + n == kHeaderBytes) check_header();
      } else {
        std::memcpy(data_ + (pos_ - kHeaderBytes), stream_.ring() + at, n);
      }
      consumed += n;
      pos_ += n;
    }
    h.consumed.store(consumed, std::memory_order_release);
    if (pos_ < kHeaderBytes + bytes_) return false;
    ++l.recv_served[size_t(stream_.sender)];
    return true;
  }

  WaitFor waiting_for() const override {
    return {"recv", world_peer_, stream_.local.shm->pid(stream_.sender),
            "data in this rank's mailbox (" + std::to_string(pos_) + " of " +
                std::to_string(kHeaderBytes + bytes_) + " bytes received)"};
  }

 private:
  void check_header() const {
    uint64_t header[2];
    std::memcpy(header, header_, kHeaderBytes);
    if (header[0] != kMagic)
      comm_failure("recv: the mailbox from rank " + std::to_string(world_peer_) + " is corrupt");
    if (header[1] != bytes_)
      comm_failure("recv: rank " + std::to_string(world_peer_) + " sent " + std::to_string(header[1]) +
                   " bytes but this rank expected " + std::to_string(bytes_));
  }

  MailboxStream stream_;
  int world_peer_;
  std::byte* data_;
  size_t bytes_, pos_ = 0;
  uint64_t ticket_;
  std::byte header_[kHeaderBytes];
};

class MpiTransfer final : public PendingOp {
 public:
  MpiTransfer(GroupState& s, bool send, const Transfer& t) : send_(send), peer_(s.world_rank_of[size_t(t.peer)]) {
    if (send) post_send(s, t, posted_);
    else post_receive(s, t, posted_);
  }
  bool progress() override { return test_all(posted_, send_ ? "send" : "recv"); }
  WaitFor waiting_for() const override {
    return {send_ ? "send" : "recv", peer_, 0, "an MPI transfer to complete (cross-node)"};
  }

 private:
  bool send_;
  int peer_;
  PostedRequests posted_;
};

}  // namespace
}  // namespace detail

using detail::GroupState;

Work::Work() = default;
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&&) noexcept = default;

// A batch dropped unfinished would block later messages of its pairs forever; finishing it
// here keeps the channels usable (errors were already reported to whoever waits next).
Work::~Work() {
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
  Work work;
  for (const P2POp& op : ops) {
    const char* name = op.kind == P2POp::send ? "isend" : "irecv";
    check(op.peer >= 0 && op.peer < size() && op.peer != rank(), name, "peer = ", op.peer,
          " but must be another rank of the group (size ", size(), ", this rank ", rank(), ")");
    check(op.buffer.is_contiguous(), name, "buffer must be contiguous, got ", op.buffer.describe());
    const size_t bytes = size_t(op.buffer.nbytes());
    std::unique_ptr<detail::PendingOp> pending;
    if (s.node_of[size_t(op.peer)] == s.node) {
      GroupState& local = s.local();
      const int peer = s.local_of[size_t(op.peer)];
      const int world_peer = s.world_rank_of[size_t(op.peer)];
      if (op.kind == P2POp::send) pending = std::make_unique<detail::ShmSend>(local, peer, world_peer, op.buffer.data(), bytes);
      else pending = std::make_unique<detail::ShmRecv>(local, peer, world_peer, op.buffer.data(), bytes);
    } else {
      pending = std::make_unique<detail::MpiTransfer>(s, op.kind == P2POp::send,
                                                      detail::Transfer{op.peer, op.buffer.data(), bytes});
    }
    work.ops_.push_back(std::move(pending));
  }
  return work;
}

Work Group::isend(const Tensor& buffer, int peer) const {
  P2POp op{P2POp::send, buffer, peer};
  return batch_isend_irecv({&op, 1});
}

Work Group::irecv(const Tensor& buffer, int peer) const {
  P2POp op{P2POp::recv, buffer, peer};
  return batch_isend_irecv({&op, 1});
}

}  // namespace sol::comm
