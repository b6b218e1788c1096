// Failure scenarios, driven by failure_test.sh. Each rank prints what it caught; the script
// checks the messages, the time taken, and that /dev/shm is clean afterwards.
//   timeout   rank 1 never joins the allreduce: rank 0 must time out naming rank 1
//   mismatch  ranks call allreduce with different sizes: both must say so
//   dtype     ranks call allreduce with different dtypes
//   nodes     the two emulated nodes call allreduce with different sizes: only the cross-node
//             MPI messages can show it
//   order     rank 0 calls allreduce while the others call all_gather
//   tag_size  rank 1 receives a tagged message into a buffer of another size
//   tag_none  rank 1 waits for tag 2 while rank 0 sent tag 1: the timeout names both
//   fence     rank 1 never starts a window fence: rank 0 must time out naming rank 1
//   kill      all ranks loop over collectives and a ring send/recv until the script kills
//             rank 1 with SIGKILL
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sol/comm.h"
#include "sol/comm_window.h"

using namespace sol;
using namespace sol::comm;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const Group& world = Group::world();
  const int me = world.rank();
  std::vector<float> in(1 << 20, 1.0f), out(1 << 20);
  try {
    if (mode == "timeout") {
      if (me == 1) {
        ::sleep(unsigned(timeout_seconds() * 2 + 1));
        return 0;
      }
      world.allreduce(Tensor(in.data(), DType::f32, {8}), Tensor(out.data(), DType::f32, {8}));
    } else if (mode == "mismatch") {
      const int64_t n = me == 0 ? 8 : 16;
      world.allreduce(Tensor(in.data(), DType::f32, {n}), Tensor(out.data(), DType::f32, {n}));
    } else if (mode == "nodes") {
      const int64_t n = world.node() == 0 ? 64 : 128;
      world.allreduce(Tensor(in.data(), DType::f32, {n}), Tensor(out.data(), DType::f32, {n}));
    } else if (mode == "dtype") {
      const DType t = me == 0 ? DType::f32 : DType::bf16;
      world.allreduce(Tensor(in.data(), t, {8}), Tensor(out.data(), t, {8}));
    } else if (mode == "order") {
      const Tensor block(in.data(), DType::f32, {8}), all(out.data(), DType::f32, {8 * world.size()});
      if (me == 0) world.allreduce(block, Tensor(out.data(), DType::f32, {8}));
      else world.all_gather(block, all);
    } else if (mode == "tag_size" || mode == "tag_none") {
      if (me == 0) world.isend(Tensor(in.data(), DType::f32, {16}), 1, mode == "tag_size" ? 5 : 1).wait();
      if (me == 1) world.irecv(Tensor(out.data(), DType::f32, {mode == "tag_size" ? 8 : 16}), 0, mode == "tag_size" ? 5 : 2).wait();
      if (me > 1) return 0;
    } else if (mode == "fence") {
      Window w(world, 64);
      if (me == 1) {
        ::sleep(unsigned(timeout_seconds() * 2 + 1));
        return 0;
      }
      w.fence();
    } else if (mode == "kill") {
      std::printf("rank %d pid %d\n", me, int(::getpid()));
      std::fflush(stdout);
      const int P = world.size();
      const int64_t n = int64_t(in.size()) / P * P;
      const Tensor a(in.data(), DType::f32, {n}), b(out.data(), DType::f32, {n});
      const Tensor block(in.data(), DType::f32, {n / P});
      for (;;) {
        world.allreduce(a, b);
        world.all_gather(block, b);
        world.all_to_all(a, b);
        P2POp ring[] = {{P2POp::send, a, (me + 1) % P, 4}, {P2POp::recv, b, (me + P - 1) % P, 4}};
        world.batch_isend_irecv(ring).wait();
      }
    } else {
      std::fprintf(stderr, "usage: mpi_failure timeout|mismatch|nodes|dtype|order|tag_size|tag_none|fence|kill\n");
      return 2;
    }
    std::printf("rank %d: NOT CAUGHT: the call returned\n", me);
  } catch (const CommError& e) {
    std::printf("rank %d CAUGHT CommError: %s\n", me, e.what());
    std::fflush(stdout);
    // A failed rank exits without MPI_Finalize and mpirun then ends the job: give the other
    // ranks, which detect the failure within milliseconds, time to report theirs too.
    ::usleep(500 * 1000);
  }
  std::fflush(stdout);
  return 0;
}
