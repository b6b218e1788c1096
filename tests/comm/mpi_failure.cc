// Failure scenarios, driven by failure_test.sh. Each rank prints what it caught; the script
// checks the messages, the time taken, and that /dev/shm is clean afterwards.
//   timeout   rank 1 never joins the allreduce: rank 0 must time out naming rank 1
//   mismatch  ranks call allreduce with different sizes: both must say so
//   kill      all ranks loop over allreduce until the script kills rank 1 with SIGKILL
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sol/comm.h"

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
    } else if (mode == "kill") {
      std::printf("rank %d pid %d\n", me, int(::getpid()));
      std::fflush(stdout);
      const Tensor a(in.data(), DType::f32, {int64_t(in.size())}), b(out.data(), DType::f32, {int64_t(out.size())});
      for (;;) world.allreduce(a, b);
    } else {
      std::fprintf(stderr, "usage: mpi_failure timeout|mismatch|kill\n");
      return 2;
    }
    std::printf("rank %d: NOT CAUGHT: the call returned\n", me);
  } catch (const CommError& e) {
    std::printf("rank %d CAUGHT CommError: %s\n", me, e.what());
  }
  std::fflush(stdout);
  return 0;
}
