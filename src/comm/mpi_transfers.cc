// MPI point-to-point under a deadline. MPI counts are int, so messages above 1 GiB travel as
// several consecutive messages on the same tag.
#include "comm/mpi_transfers.h"

#include <algorithm>
#include <string>

#include "comm/wait.h"

namespace sol::comm::detail {

namespace {
constexpr size_t kMaxMessage = size_t(1) << 30;

template <class Post>
void post_pieces(const GroupState& s, const Transfer& t, PostedRequests& posted, bool is_send, Post&& post) {
  size_t off = 0;
  do {
    const size_t n = std::min(kMaxMessage, t.bytes - off);
    posted.requests.emplace_back();
    posted.peers.push_back(s.world_rank_of[size_t(t.peer)]);
    posted.is_send.push_back(is_send);
    posted.bytes.push_back(n);
    post(static_cast<char*>(t.data) + off, int(n), &posted.requests.back());
    off += n;
  } while (off < t.bytes);
}
}  // namespace

void post_send(GroupState& s, const Transfer& t, PostedRequests& posted, int tag) {
  post_pieces(s, t, posted, true, [&](char* p, int n, MPI_Request* r) {
    MPI_Isend(p, n, MPI_BYTE, t.peer, tag, s.comm, r);
  });
}

void post_receive(GroupState& s, const Transfer& t, PostedRequests& posted, int tag) {
  post_pieces(s, t, posted, false, [&](char* p, int n, MPI_Request* r) {
    MPI_Irecv(p, n, MPI_BYTE, t.peer, tag, s.comm, r);
  });
}

bool test_all(PostedRequests& posted, std::string_view op) {
  if (posted.requests.empty()) return true;
  int done = 0;
  std::vector<MPI_Status> statuses(posted.requests.size());
  int rc = MPI_Testall(int(posted.requests.size()), posted.requests.data(), &done, statuses.data());
  if (rc != MPI_SUCCESS) {
    // Name the transfer that failed when MPI says which one: a receive too small for what the
    // peer sent is the usual case (ranks that disagree on a size across nodes).
    if (rc == MPI_ERR_IN_STATUS)
      for (size_t i = 0; i < statuses.size(); ++i) {
        const int e = statuses[i].MPI_ERROR;
        if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
        int error_class = 0;
        MPI_Error_class(e, &error_class);
        if (error_class == MPI_ERR_TRUNCATE && !posted.is_send[i])
          comm_failure(std::string(op) + ": rank " + std::to_string(posted.peers[i]) + " sent more than the " +
                       std::to_string(posted.bytes[i]) + " bytes this rank expected (cross-node)");
        rc = e;
        break;
      }
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    comm_failure(std::string(op) + ": cross-node transfer failed (" + text +
                 "): do the ranks agree on the message sizes?");
  }
  if (!done) return false;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (posted.is_send[i]) continue;
    int got = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &got);
    if (size_t(got) != posted.bytes[i])
      comm_failure(std::string(op) + ": rank " + std::to_string(posted.peers[i]) + " sent " + std::to_string(got) +
                   " bytes but this rank expected " + std::to_string(posted.bytes[i]) + " (cross-node)");
  }
  posted = {};
  return true;
}

void wait_all(PostedRequests& posted, std::string_view op) {
  wait_until([&] { return test_all(posted, op); },
             [&] {
               // The first request still open names the peer we wait for.
               for (size_t i = 0; i < posted.requests.size(); ++i) {
                 int done = 0;
                 MPI_Request_get_status(posted.requests[i], &done, MPI_STATUS_IGNORE);
                 if (done) continue;
                 return WaitFor{op, posted.peers[i], 0,
                                std::string(posted.is_send[i] ? "an MPI send to" : "an MPI receive from") +
                                    " it to complete (cross-node)"};
               }
               return WaitFor{op, -1, 0, "MPI requests to complete (cross-node)"};
             });
  posted = {};
}

void mpi_exchange(GroupState& s, std::string_view op, const std::vector<Transfer>& sends,
                  const std::vector<Transfer>& receives) {
  PostedRequests posted;
  for (const Transfer& t : receives) post_receive(s, t, posted);
  for (const Transfer& t : sends) post_send(s, t, posted);
  wait_all(posted, op);
}

}  // namespace sol::comm::detail
