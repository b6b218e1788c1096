// Fault injection, driven by fault_test.sh: rank 1 (the victim) signals itself with SIGKILL or
// SIGSTOP before, during or after an operation, and every other rank must end with an error
// naming the operation (or the teardown) and the victim within SOL_COMM_TIMEOUT_S.
//   mpi_fault OP PHASE SIGNAL
//   OP      collective (allreduce) | ep (ep::dispatch) | pp (a 1F1B pipeline step)
//   PHASE   before: the victim stops instead of making its first call, the others are in it
//           during: a thread of the victim signals 0.3 s into an endless stream of calls
//           after:  the victim stops after the last call, the others are in comm's teardown
//   SIGNAL  kill | stop
// The victim signals itself so that "before" and "after" are exact points, not races with a
// script. Output: "rank R pid P" first, "rank R CAUGHT CommError: ..." when a call throws,
// "rank R done" when its calls returned (teardown's own error goes to stderr).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sol/comm.h"
#include "sol/ep.h"
#include "sol/pp.h"

using namespace sol;

namespace {

constexpr int kVictim = 1;
constexpr int kCallsBeforeAfter = 3;

// One call of the operation under test; collective over the world group.
std::function<void()> make_call(const std::string& op, const comm::Group& world) {
  const int P = world.size();
  if (op == "collective") {
    auto in = std::make_shared<std::vector<float>>(size_t(1) << 20, 1.0f);
    auto out = std::make_shared<std::vector<float>>(in->size());
    return [=, &world] {
      world.allreduce(Tensor(in->data(), DType::f32, {int64_t(in->size())}),
                      Tensor(out->data(), DType::f32, {int64_t(out->size())}));
    };
  }
  if (op == "ep") {
    ep::BufferConfig cfg;
    cfg.hidden = 256;
    cfg.num_experts = 4 * P;
    cfg.top_k = 2;
    cfg.max_tokens_per_rank = 64;
    auto buffer = std::make_shared<ep::Buffer>(world, cfg);
    const int64_t T = 64;
    auto x = std::make_shared<std::vector<uint16_t>>(size_t(T * cfg.hidden), uint16_t(0x3F80));
    auto idx = std::make_shared<std::vector<int32_t>>(size_t(T * cfg.top_k));
    auto w = std::make_shared<std::vector<float>>(idx->size(), 0.5f);
    for (size_t i = 0; i < idx->size(); ++i) (*idx)[i] = int32_t((i * 7 + size_t(world.rank())) % size_t(cfg.num_experts));
    auto handle = std::make_shared<ep::DispatchHandle>();
    return [=] {
      const Tensor topk(idx->data(), DType::i32, {T, cfg.top_k});
      const ep::DispatchLayout& layout = buffer->get_dispatch_layout(topk);
      buffer->dispatch(Tensor(x->data(), DType::bf16, {T, cfg.hidden}), nullptr, topk,
                       Tensor(w->data(), DType::f32, {T, cfg.top_k}), layout, *handle);
    };
  }
  if (op == "pp") {
    pp::PipelineOptions o;
    o.micro_batches = 4;
    o.boundary_shape = {8, 64};
    auto pipeline = std::make_shared<pp::Pipeline>(world, o);
    pp::StageFns fns;
    fns.forward = [](const pp::StageCall&, const Tensor&, const Tensor& y) {
      if (y.numel() > 0) std::fill_n(y.data_as<float>(), y.numel(), 1.0f);
    };
    fns.backward_input = [](const pp::StageCall&, const Tensor&, const Tensor& dx) {
      if (dx.numel() > 0) std::fill_n(dx.data_as<float>(), dx.numel(), 1.0f);
    };
    return [=] { pipeline->run(fns); };
  }
  return {};
}

void signal_self(int sig) { ::kill(::getpid(), sig); }

}  // namespace

int main(int argc, char** argv) {
  const std::string op = argc > 3 ? argv[1] : "", phase = argc > 3 ? argv[2] : "",
                    signal_name = argc > 3 ? argv[3] : "";
  const int sig = signal_name == "kill" ? SIGKILL : signal_name == "stop" ? SIGSTOP : 0;
  const comm::Group& world = comm::Group::world();
  const int me = world.rank();
  std::function<void()> call = make_call(op, world);
  if (!call || sig == 0 || (phase != "before" && phase != "during" && phase != "after")) {
    std::fprintf(stderr, "usage: mpi_fault collective|ep|pp before|during|after kill|stop\n");
    return 2;
  }
  std::printf("rank %d pid %d\n", me, int(::getpid()));
  std::fflush(stdout);
  try {
    if (phase == "before") {
      if (me == kVictim) signal_self(sig);
      call();
    } else if (phase == "during") {
      if (me == kVictim)
        std::thread([sig] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          signal_self(sig);
        }).detach();
      for (;;) call();
    } else {
      for (int i = 0; i < kCallsBeforeAfter; ++i) call();
      if (me == kVictim) signal_self(sig);
    }
    std::printf("rank %d done\n", me);
  } catch (const CommError& e) {
    std::printf("rank %d CAUGHT CommError: %s\n", me, e.what());
    std::fflush(stdout);
    // This rank exits without MPI_Finalize and mpirun then ends the job: give the other
    // survivors, which detect the fault at about the same time, a moment to report theirs.
    ::usleep(1000 * 1000);
  }
  std::fflush(stdout);
  return 0;
}
