#pragma once
// Cross-node traffic: a set of non-blocking MPI sends and receives between ranks of a group,
// completed together under the comm deadline (never an unbounded MPI_Wait).
#include <cstddef>
#include <string_view>
#include <vector>

#include "comm/group_state.h"

namespace sol::comm::detail {

struct Transfer {
  int peer;       // group rank
  void* data;     // source for sends, destination for receives
  size_t bytes;
};

// Posts every receive, then every send, and waits for all of them. Messages between a pair
// arrive in the order posted (MPI's non-overtaking rule on one tag).
void mpi_exchange(GroupState& s, std::string_view op, const std::vector<Transfer>& sends,
                  const std::vector<Transfer>& receives);

// The MPI tag of the collectives' own traffic; point-to-point tag t travels as
// kFirstP2PTag + t, so user messages never match a collective's.
inline constexpr int kCollectiveTag = 0x501;
inline constexpr int kFirstP2PTag = 0x4000;

// Posted requests with the peer each one talks to, for error messages.
struct PostedRequests {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;  // world ranks
  std::vector<bool> is_send;
  std::vector<size_t> bytes;  // receives: the size the message must have
};
void post_send(GroupState& s, const Transfer& t, PostedRequests& posted, int tag = kCollectiveTag);
void post_receive(GroupState& s, const Transfer& t, PostedRequests& posted, int tag = kCollectiveTag);
// Non-blocking: true once all are done. A receive that got another size than it expects
// throws CommError (MPI itself only reports messages that are too long).
bool test_all(PostedRequests& posted, std::string_view op);
void wait_all(PostedRequests& posted, std::string_view op);

}  // namespace sol::comm::detail
