#pragma once
// Point-to-point inside a node: the matching engine of one node-local group.
//
// Every ordered pair of ranks has a byte ring in the receiver's segment that only the sender
// writes (the mailbox). Each message enters it as a 64-byte header {tag, size, ...}:
//   - eager: the payload follows the header through the ring (two copies: in, out);
//   - pull: the sender's buffer lies in its symmetric heap, so the header carries its offset
//     and the receiver copies straight out of the sender's segment (one copy), then raises the
//     message's slot in `pulled` so the sender knows its buffer is free again.
// The receiver drains its rings whenever it makes progress, so one stream never blocks
// another: a message nobody has asked for yet is set aside (an eager payload into process
// memory, a pull header as it is) and matched when its receive is posted. Matching is by
// (peer, tag) in order, as in MPI: messages of one tag between a pair arrive in the order they
// were sent; messages of different tags are independent streams.
//
// Progress model: there is no background thread. Transfers move whenever this rank enters the
// engine: when a batch is posted, and on every Work::completed() or wait() of any work of the
// group (one call drives every transfer of the group, not only the caller's). A rank that
// computes without polling still lets eager sends into it finish as far as its rings have room,
// but a pull message waits for the receiver's next poll, and its sender's work for that.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "comm/group_state.h"
#include "comm/wait.h"

namespace sol::comm::detail {

class ShmP2P;

// One send or receive with a local peer; owned by a Work, registered with the engine until done.
struct ShmOp {
  enum Kind { send, recv };
  ShmOp(ShmP2P& engine, Kind kind, int peer, int tag, std::byte* data, size_t bytes);
  ~ShmOp();
  ShmOp(const ShmOp&) = delete;
  ShmOp& operator=(const ShmOp&) = delete;

  ShmP2P& engine;
  Kind kind;
  int peer;  // local rank
  int tag;
  std::byte* data;
  size_t bytes;
  bool done = false;
  // Sends.
  bool pull = false;       // the buffer lies in this rank's heap: the receiver copies it
  uint64_t seq = 0;        // pull sends: the slot sequence number, once the header is out
  size_t ring_pos = 0;     // eager sends: bytes of header + padded payload in the ring so far
  // Receives.
  size_t received = 0;
};

class ShmP2P {
 public:
  explicit ShmP2P(GroupState& local);
  ~ShmP2P();

  // Registers a new op (sends queue behind earlier sends to the same peer; receives match
  // messages already set aside) and moves what it can.
  void post(ShmOp& op);
  // Moves every transfer of the group that can move now; never blocks. Throws CommError when a
  // message does not fit the receive it matches.
  void progress();
  // An op dropped before completion (its Work failed): its streams can no longer be trusted.
  void forget(ShmOp& op);
  WaitFor waiting_for(const ShmOp& op) const;

  GroupState& local;

 private:
  struct SetAside;     // a message that arrived before its receive was posted
  struct Incoming;     // receive side of one peer's ring
  struct Outgoing;     // send side towards one peer
  void drain_ring(int peer);
  void push_sends(int peer);
  void deliver(int peer, ShmOp& op, SetAside& message);
  void pull_into(int peer, ShmOp& op, uint64_t src_offset, uint64_t seq);
  void check_fits(int peer, const ShmOp& op, int tag, size_t bytes) const;
  void check_usable(int peer) const;
  std::vector<std::unique_ptr<Incoming>> in_;
  std::vector<std::unique_ptr<Outgoing>> out_;
};

}  // namespace sol::comm::detail
