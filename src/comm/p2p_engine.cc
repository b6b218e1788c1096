// The node-local point-to-point engine: headers and payloads through the per-pair rings,
// matching by (peer, tag), messages set aside until their receive is posted, and the one-copy
// pull of heap buffers (see p2p_engine.h for the protocol and the progress model).
#include "comm/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include "comm/move_bytes.h"

namespace sol::comm::detail {

namespace {

constexpr uint32_t kMagic = 0x501C0117u;
constexpr size_t kHeaderBytes = 64;
// Smaller heap messages still go eager: the sender is done at once instead of waiting for the
// receiver's copy, and the payload costs less than the round trip.
constexpr size_t kPullMinBytes = size_t(32) << 10;

enum class MessageKind : uint32_t { eager = 1, pull = 2 };

// Every message starts on a 64-byte boundary of the ring (lengths are padded to 64 and the
// ring is a multiple of 64), so a header is never split by the wrap.
struct alignas(64) MessageHeader {
  uint32_t magic = kMagic;
  MessageKind kind = MessageKind::eager;
  int32_t tag = 0;
  uint32_t unused = 0;
  uint64_t bytes = 0;
  uint64_t src_offset = 0;  // pull: where the payload lies in the sender's segment
  uint64_t seq = 0;         // pull: the slot number the receiver raises once it has copied
};
static_assert(sizeof(MessageHeader) == kHeaderBytes);

size_t ring_length(size_t bytes) { return kHeaderBytes + round_up(bytes, kHeaderBytes); }

}  // namespace

struct ShmP2P::SetAside {
  int tag = 0;
  size_t bytes = 0;
  bool pull = false;
  uint64_t src_offset = 0, seq = 0;
  std::vector<std::byte> payload;  // eager: the bytes that arrived
  size_t filled = 0;
  ShmOp* claimed = nullptr;  // a receive matched it while its payload still streams in
  bool complete() const { return pull || filled == bytes; }
};

struct ShmP2P::Incoming {
  std::deque<ShmOp*> posted;                        // unmatched receives, in post order
  std::deque<std::unique_ptr<SetAside>> set_aside;  // unmatched messages, in arrival order
  // The eager message whose payload is streaming out of the ring now, into a receive or a
  // set-aside buffer (neither: a forgotten receive, the payload is skipped).
  bool streaming = false;
  size_t length = 0, pos = 0;
  ShmOp* into = nullptr;
  SetAside* held = nullptr;
};

struct ShmP2P::Outgoing {
  std::deque<ShmOp*> queue;      // sends not yet wholly in the ring, in post order
  std::vector<ShmOp*> pulling;   // pull sends whose header is out, until the receiver copied
  uint64_t next_seq = 1;
  bool broken = false;           // a send was dropped half-written: the stream is cut
};

ShmOp::ShmOp(ShmP2P& e, Kind k, int p, int t, std::byte* d, size_t b)
    : engine(e), kind(k), peer(p), tag(t), data(d), bytes(b) {}

ShmOp::~ShmOp() {
  if (!done) engine.forget(*this);
}

ShmP2P::ShmP2P(GroupState& l) : local(l) {
  for (int p = 0; p < local.size; ++p) {
    in_.push_back(std::make_unique<Incoming>());
    out_.push_back(std::make_unique<Outgoing>());
  }
}

ShmP2P::~ShmP2P() = default;

void ShmP2P::check_usable(int peer) const {
  if (out_[size_t(peer)]->broken)
    comm_failure("send: the stream to rank " + std::to_string(local.world_rank_of[size_t(peer)]) +
                 " was cut by an earlier send that failed; it cannot carry more messages");
}

void ShmP2P::check_fits(int peer, const ShmOp& op, int tag, size_t bytes) const {
  if (bytes == op.bytes) return;
  comm_failure("recv: rank " + std::to_string(local.world_rank_of[size_t(peer)]) + " sent " +
               std::to_string(bytes) + " bytes with tag " + std::to_string(tag) +
               " but the matching receive of rank " + std::to_string(local.world_rank_of[size_t(local.rank)]) +
               " expects " + std::to_string(op.bytes) + " bytes");
}

void ShmP2P::post(ShmOp& op) {
  if (op.kind == ShmOp::send) {
    check_usable(op.peer);
    op.pull = op.bytes >= kPullMinBytes && local.heap_offset_of(op.data, op.bytes) >= 0;
    out_[size_t(op.peer)]->queue.push_back(&op);
    return;
  }
  Incoming& in = *in_[size_t(op.peer)];
  for (auto it = in.set_aside.begin(); it != in.set_aside.end(); ++it) {
    SetAside& m = **it;
    if (m.tag != op.tag || m.claimed) continue;
    check_fits(op.peer, op, m.tag, m.bytes);
    if (!m.complete()) {
      m.claimed = &op;
      return;
    }
    std::unique_ptr<SetAside> taken = std::move(*it);
    in.set_aside.erase(it);
    deliver(op.peer, op, *taken);
    return;
  }
  in.posted.push_back(&op);
}

void ShmP2P::deliver(int peer, ShmOp& op, SetAside& m) {
  if (m.pull) {
    pull_into(peer, op, m.src_offset, m.seq);
    return;
  }
  move_bytes(op.data, m.payload.data(), m.bytes);
  op.received = m.bytes;
  op.done = true;
}

void ShmP2P::pull_into(int peer, ShmOp& op, uint64_t src_offset, uint64_t seq) {
  if (src_offset + op.bytes > local.shm->layout().total_bytes())
    comm_failure("recv: the mailbox from rank " + std::to_string(local.world_rank_of[size_t(peer)]) +
                 " points outside its segment (corrupt)");
  move_bytes(op.data, local.shm->base(peer) + src_offset, op.bytes);
  op.received = op.bytes;
  op.done = true;
  // The sender may reuse its buffer once it sees this (release: our reads came first).
  local.shm->mailbox(local.rank, peer).pulled[seq % kPullSlots].store(seq, std::memory_order_release);
}

void ShmP2P::drain_ring(int peer) {
  Incoming& in = *in_[size_t(peer)];
  MailboxHeader& h = local.shm->mailbox(local.rank, peer);
  std::byte* ring = local.shm->ring(local.rank, peer);
  const size_t R = local.shm->layout().ring_bytes;
  const uint64_t posted = h.posted.load(std::memory_order_acquire);
  uint64_t consumed = h.consumed.load(std::memory_order_relaxed);
  const uint64_t start = consumed;
  while (consumed < posted) {
    if (!in.streaming) {
      MessageHeader m;
      std::memcpy(&m, ring + consumed % R, kHeaderBytes);
      if (m.magic != kMagic || (m.kind != MessageKind::eager && m.kind != MessageKind::pull))
        comm_failure("recv: the mailbox from rank " + std::to_string(local.world_rank_of[size_t(peer)]) +
                     " is corrupt");
      consumed += kHeaderBytes;
      ShmOp* op = nullptr;
      auto match = std::find_if(in.posted.begin(), in.posted.end(), [&](ShmOp* o) { return o->tag == m.tag; });
      if (match != in.posted.end()) {
        op = *match;
        in.posted.erase(match);
        check_fits(peer, *op, m.tag, m.bytes);
      }
      if (m.kind == MessageKind::pull) {
        if (op) {
          pull_into(peer, *op, m.src_offset, m.seq);
        } else {
          auto a = std::make_unique<SetAside>();
          a->tag = m.tag, a->bytes = m.bytes, a->pull = true, a->src_offset = m.src_offset, a->seq = m.seq;
          in.set_aside.push_back(std::move(a));
        }
        continue;
      }
      in.streaming = true;
      in.length = ring_length(m.bytes);
      in.pos = kHeaderBytes;
      in.into = op;
      in.held = nullptr;
      if (!op) {
        auto a = std::make_unique<SetAside>();
        a->tag = m.tag, a->bytes = m.bytes;
        a->payload.resize(m.bytes);
        in.held = a.get();
        in.set_aside.push_back(std::move(a));
      }
    }
    // No destination: the receive was dropped (its Work failed); the payload is skipped.
    std::byte* dest = in.into ? in.into->data : in.held ? in.held->payload.data() : nullptr;
    const size_t payload = in.into ? in.into->bytes : in.held ? in.held->bytes : 0;
    while (in.pos < in.length && consumed < posted) {
      const size_t at = size_t(consumed % R);
      const size_t n = std::min({size_t(posted - consumed), R - at, in.length - in.pos});
      const size_t from = in.pos - kHeaderBytes;
      if (dest && from < payload) move_bytes(dest + from, ring + at, std::min(n, payload - from));
      consumed += n;
      in.pos += n;
    }
    if (in.pos < in.length) break;
    in.streaming = false;
    if (in.into) {
      in.into->received = in.into->bytes;
      in.into->done = true;
    } else if (in.held) {
      SetAside& m = *in.held;
      m.filled = m.bytes;
      if (m.claimed) {
        ShmOp& op = *m.claimed;
        auto it = std::find_if(in.set_aside.begin(), in.set_aside.end(), [&](const auto& a) { return a.get() == &m; });
        std::unique_ptr<SetAside> taken = std::move(*it);
        in.set_aside.erase(it);
        deliver(peer, op, *taken);
      }
    }
    in.into = nullptr;
    in.held = nullptr;
  }
  if (consumed != start) h.consumed.store(consumed, std::memory_order_release);
}

void ShmP2P::push_sends(int peer) {
  Outgoing& o = *out_[size_t(peer)];
  MailboxHeader& h = local.shm->mailbox(peer, local.rank);
  if (!o.queue.empty()) {
    std::byte* ring = local.shm->ring(peer, local.rank);
    const size_t R = local.shm->layout().ring_bytes;
    uint64_t posted = h.posted.load(std::memory_order_relaxed);
    const uint64_t consumed = h.consumed.load(std::memory_order_acquire);
    const uint64_t start = posted;
    while (!o.queue.empty()) {
      ShmOp& op = *o.queue.front();
      if (op.ring_pos == 0) {
        if (R - (posted - consumed) < kHeaderBytes) break;
        MessageHeader m;
        m.kind = op.pull ? MessageKind::pull : MessageKind::eager;
        m.tag = op.tag;
        m.bytes = op.bytes;
        if (op.pull) {
          // The slot is free once the receiver has copied the message that used it last.
          const uint64_t seq = o.next_seq;
          if (seq > kPullSlots && h.pulled[seq % kPullSlots].load(std::memory_order_acquire) != seq - kPullSlots)
            break;
          m.src_offset = uint64_t(local.heap_offset_of(op.data, op.bytes));
          m.seq = op.seq = seq;
          ++o.next_seq;
        }
        std::memcpy(ring + posted % R, &m, kHeaderBytes);
        posted += kHeaderBytes;
        op.ring_pos = kHeaderBytes;
        if (op.pull) {
          o.pulling.push_back(&op);
          o.queue.pop_front();
          continue;
        }
      }
      const size_t length = ring_length(op.bytes);
      while (op.ring_pos < length && posted - consumed < R) {
        const size_t at = size_t(posted % R);
        const size_t n = std::min({R - size_t(posted - consumed), R - at, length - op.ring_pos});
        const size_t from = op.ring_pos - kHeaderBytes;
        if (from < op.bytes) move_bytes(ring + at, op.data + from, std::min(n, op.bytes - from));
        posted += n;
        op.ring_pos += n;
      }
      if (op.ring_pos < length) break;
      op.done = true;
      o.queue.pop_front();
    }
    if (posted != start) h.posted.store(posted, std::memory_order_release);
  }
  for (size_t i = 0; i < o.pulling.size();) {
    ShmOp& op = *o.pulling[i];
    if (h.pulled[op.seq % kPullSlots].load(std::memory_order_acquire) == op.seq) {
      op.done = true;
      o.pulling.erase(o.pulling.begin() + ptrdiff_t(i));
    } else {
      ++i;
    }
  }
}

void ShmP2P::progress() {
  for (int p = 0; p < local.size; ++p) {
    if (p == local.rank) continue;
    push_sends(p);
    drain_ring(p);
  }
}

void ShmP2P::forget(ShmOp& op) {
  Outgoing& o = *out_[size_t(op.peer)];
  Incoming& in = *in_[size_t(op.peer)];
  if (op.kind == ShmOp::send) {
    auto q = std::find(o.queue.begin(), o.queue.end(), &op);
    if (q != o.queue.end()) {
      // A header already in the ring promises bytes that will never come.
      if (op.ring_pos > 0) o.broken = true;
      o.queue.erase(q);
    }
    auto p = std::find(o.pulling.begin(), o.pulling.end(), &op);
    if (p != o.pulling.end()) {
      // The receiver may still read the buffer, which its owner is about to reuse.
      o.broken = true;
      o.pulling.erase(p);
    }
    return;
  }
  in.posted.erase(std::remove(in.posted.begin(), in.posted.end(), &op), in.posted.end());
  if (in.into == &op) in.into = nullptr;
  for (auto& m : in.set_aside)
    if (m->claimed == &op) m->claimed = nullptr;
}

WaitFor ShmP2P::waiting_for(const ShmOp& op) const {
  const int world_peer = local.world_rank_of[size_t(op.peer)];
  const int pid = local.shm->pid(op.peer);
  const std::string message = std::to_string(op.bytes) + "-byte message with tag " + std::to_string(op.tag);
  if (op.kind == ShmOp::send) {
    if (op.pull && op.seq > 0)
      return {"send", world_peer, pid, "it to receive the " + message + " (copied out of this rank's heap)"};
    return {"send", world_peer, pid,
            "room in its mailbox for the " + message + " (" + std::to_string(op.ring_pos) + " of " +
                std::to_string(ring_length(op.bytes)) + " ring bytes written)"};
  }
  std::string what = "a " + message + " (" + std::to_string(op.received) + " bytes received)";
  const Incoming& in = *in_[size_t(op.peer)];
  if (in.set_aside.empty()) return {"recv", world_peer, pid, what + "; nothing else from it is pending"};
  what += "; it sent, unmatched:";
  int shown = 0;
  for (const auto& m : in.set_aside) {
    if (++shown > 4) {
      what += " ...";
      break;
    }
    what += " tag " + std::to_string(m->tag) + " (" + std::to_string(m->bytes) + " bytes)";
  }
  return {"recv", world_peer, pid, what};
}

}  // namespace sol::comm::detail
