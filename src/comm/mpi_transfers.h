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

// Posted requests with the peer each one talks to, for error messages.
struct PostedRequests {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;  // world ranks
  std::vector<bool> is_send;
};
void post_send(GroupState& s, const Transfer& t, PostedRequests& posted);
void post_receive(GroupState& s, const Transfer& t, PostedRequests& posted);
// Non-blocking: true once all are done.
bool test_all(PostedRequests& posted, std::string_view op);
void wait_all(PostedRequests& posted, std::string_view op);

}  // namespace sol::comm::detail
