#pragma once
// The layout of one rank's shared segment. Every field has exactly one writer: the control
// block and the staging slots are written by the owner, a mailbox's `posted` and ring by the
// one sender it belongs to, its `consumed` by the owner. Peers only read what others write.
//
//   [ControlBlock][mailbox 0]...[mailbox L-1][staging slot 0][staging slot 1][user heap]
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sol::comm::detail {

inline constexpr int kMaxLocalRanks = 64;
inline constexpr size_t kPage = 4096;

// What a rank declares at one step of the local protocol, so peers can check that they run
// the same collective with the same sizes, and find the data it published.
struct StepRecord {
  uint8_t op = 0;           // StepOp
  uint8_t dtype = 0;
  uint8_t reduce = 0;
  uint8_t zero_copy = 0;    // 1: data_offset points into the owner's heap buffers, not staging
  int32_t root = -1;
  uint64_t bytes = 0;       // the size every rank must agree on
  uint64_t data_offset = 0; // where in the owner's segment this step's data starts
};

struct alignas(64) ControlBlock {
  // One cache line: the step (raised with release after the record and the data are in
  // place) and the records, so a peer that sees the step has what it must check in the same
  // transfer. Records alternate by step parity: a rank rewrites record s%2 only after every
  // peer has posted step s-1, i.e. after every peer finished reading step s-2.
  alignas(64) std::atomic<uint64_t> step{0};
  StepRecord records[2];
  // all_to_all_v: bytes the owner sends to each local rank, by step parity like the records.
  alignas(64) uint64_t counts[2][kMaxLocalRanks] = {};
  alignas(64) int32_t pid = 0;
};
static_assert(sizeof(std::atomic<uint64_t>) + 2 * sizeof(StepRecord) <= 64);

// Pull messages (p2p_engine.h) a sender may have waiting for the receiver's copy, per pair.
inline constexpr uint64_t kPullSlots = 64;

// Point-to-point channel from one sender into the owner's segment: a byte ring, and the slots
// in which the owner tells the sender that it has copied a pull message out of its heap.
struct alignas(64) MailboxHeader {
  alignas(64) std::atomic<uint64_t> posted{0};    // bytes the sender has written, ever
  alignas(64) std::atomic<uint64_t> consumed{0};  // bytes the owner has read, ever
  alignas(64) std::atomic<uint64_t> pulled[kPullSlots] = {};  // owner: last pull seq copied per slot
};
static_assert(sizeof(MailboxHeader) <= kPage);

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct SegmentLayout {
  int ranks = 1;
  size_t ring_bytes = 1 << 20;        // per sender
  size_t staging_slot_bytes = 4 << 20;
  size_t heap_bytes = 0;

  size_t control_bytes() const { return round_up(sizeof(ControlBlock), kPage); }
  size_t mailbox_stride() const { return kPage + ring_bytes; }
  size_t mailbox_offset(int sender) const { return control_bytes() + size_t(sender) * mailbox_stride(); }
  size_t staging_offset(int slot) const {
    return mailbox_offset(ranks) + size_t(slot) * staging_slot_bytes;
  }
  size_t heap_offset() const { return staging_offset(2); }
  size_t total_bytes() const { return heap_offset() + heap_bytes; }
};

}  // namespace sol::comm::detail
