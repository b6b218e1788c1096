// Pipeline parallelism under mpirun: a small MLP (one tanh layer per stage, squared-error loss
// on the last) split across the ranks, run with 1F1B and DualPipe; every micro-batch's loss and
// every stage's weight gradient must match a single-rank run of the same micro-batches.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../comm/mpi_check.h"
#include "sol/pp.h"
#include "sol/timing.h"

namespace {

using sol::comm::testing::Checker;
using sol::comm::testing::input_value;

constexpr int kRows = 5, kHidden = 24;
constexpr int kElems = kRows * kHidden;

struct Layer {
  std::vector<float> w, b, dw, db;  // w: [in = kHidden][out = kHidden]
  explicit Layer(int stage) : w(kHidden * kHidden), b(kHidden), dw(w.size()), db(b.size()) {
    for (int i = 0; i < kHidden * kHidden; ++i) w[size_t(i)] = float(0.05 * input_value(11, stage, i, true));
    for (int i = 0; i < kHidden; ++i) b[size_t(i)] = float(0.02 * input_value(12, stage, i, true));
  }
};

std::vector<float> micro_batch_input(int mb) {
  std::vector<float> x(kElems);
  for (int i = 0; i < kElems; ++i) x[size_t(i)] = float(0.1 * input_value(21, mb, i, true));
  return x;
}
std::vector<float> micro_batch_target(int mb) {
  std::vector<float> t(kElems);
  for (int i = 0; i < kElems; ++i) t[size_t(i)] = float(0.05 * input_value(22, mb, i, true));
  return t;
}

// y = tanh(x w + b)
void layer_forward(const Layer& l, const float* x, float* y) {
  for (int r = 0; r < kRows; ++r)
    for (int o = 0; o < kHidden; ++o) {
      float z = l.b[size_t(o)];
      for (int i = 0; i < kHidden; ++i) z += x[r * kHidden + i] * l.w[size_t(i * kHidden + o)];
      y[r * kHidden + o] = std::tanh(z);
    }
}
// dz = dy (1 - y^2); dx = dz w^T
void layer_backward_input(const Layer& l, const float* y, const float* dy, float* dz, float* dx) {
  for (int i = 0; i < kElems; ++i) dz[i] = dy[i] * (1 - y[i] * y[i]);
  if (!dx) return;
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kHidden; ++i) {
      float s = 0;
      for (int o = 0; o < kHidden; ++o) s += dz[r * kHidden + o] * l.w[size_t(i * kHidden + o)];
      dx[r * kHidden + i] = s;
    }
}
void layer_backward_weight(Layer& l, const float* x, const float* dz) {
  for (int i = 0; i < kHidden; ++i)
    for (int o = 0; o < kHidden; ++o) {
      float s = 0;
      for (int r = 0; r < kRows; ++r) s += x[r * kHidden + i] * dz[r * kHidden + o];
      l.dw[size_t(i * kHidden + o)] += s;
    }
  for (int o = 0; o < kHidden; ++o) {
    float s = 0;
    for (int r = 0; r < kRows; ++r) s += dz[r * kHidden + o];
    l.db[size_t(o)] += s;
  }
}
float loss_and_grad(const float* y, int mb, float* dy) {
  std::vector<float> t = micro_batch_target(mb);
  float loss = 0;
  for (int i = 0; i < kElems; ++i) {
    const float d = y[i] - t[size_t(i)];
    loss += 0.5f * d * d;
    dy[i] = d;
  }
  return loss;
}

// The same micro-batches on one rank: losses, and each stage's gradients summed over the
// micro-batches in [first, last).
struct Reference {
  std::vector<float> losses;
  std::vector<Layer> layers;
  Reference(int stages, int first, int last, int total) : losses(size_t(total), 0.f) {
    for (int s = 0; s < stages; ++s) layers.emplace_back(s);
    for (int mb = first; mb < last; ++mb) {
      std::vector<std::vector<float>> acts{micro_batch_input(mb)};
      for (int s = 0; s < stages; ++s) {
        acts.emplace_back(kElems);
        layer_forward(layers[size_t(s)], acts[size_t(s)].data(), acts.back().data());
      }
      std::vector<float> dy(kElems), dz(kElems), dx(kElems);
      losses[size_t(mb)] = loss_and_grad(acts.back().data(), mb, dy.data());
      for (int s = stages - 1; s >= 0; --s) {
        layer_backward_input(layers[size_t(s)], acts[size_t(s) + 1].data(), dy.data(), dz.data(), s > 0 ? dx.data() : nullptr);
        layer_backward_weight(layers[size_t(s)], acts[size_t(s)].data(), dz.data());
        dy = dx;
      }
    }
  }
};

// One stage's weights on this rank (DualPipe: one per direction) and what it keeps per
// micro-batch between forward and backward.
struct StageReplica {
  Layer layer;
  std::map<int, std::vector<float>> x, y, dz;
  explicit StageReplica(int stage) : layer(stage) {}
};

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void run_case(const sol::comm::Group& g, Checker& c, sol::pp::Schedule schedule, int micro_batches) {
  const int P = g.size(), me = g.rank();
  const std::string name = std::string(sol::pp::schedule_name(schedule)) + " P=" + std::to_string(P) +
                           " M=" + std::to_string(micro_batches);
  sol::pp::PipelineOptions o;
  o.schedule = schedule;
  o.micro_batches = micro_batches;
  o.boundary_shape = {kRows, kHidden};
  sol::pp::Pipeline pipe(g, o);
  std::vector<StageReplica> replicas;  // index: direction
  replicas.emplace_back(me);
  if (schedule == sol::pp::Schedule::dualpipe) replicas.emplace_back(P - 1 - me);
  std::vector<float> losses(size_t(micro_batches), 0.f);

  sol::pp::StageFns fns;
  fns.forward = [&](const sol::pp::StageCall& call, const sol::Tensor& x, const sol::Tensor& y) {
    StageReplica& s = replicas[size_t(call.direction)];
    c.expect(s.layer.w[0] == Layer(call.stage).w[0], name + ": forward called with the wrong stage");
    std::vector<float> in = call.first ? micro_batch_input(call.micro_batch)
                                       : std::vector<float>(x.data_as<float>(), x.data_as<float>() + kElems);
    c.expect(call.first == x.empty() && call.last == y.empty(), name + ": empty tensors where not expected");
    std::vector<float> out(kElems);
    layer_forward(s.layer, in.data(), out.data());
    if (!call.last) std::copy(out.begin(), out.end(), y.data_as<float>());
    s.x[call.micro_batch] = std::move(in);
    s.y[call.micro_batch] = std::move(out);
  };
  fns.backward_input = [&](const sol::pp::StageCall& call, const sol::Tensor& dy, const sol::Tensor& dx) {
    StageReplica& s = replicas[size_t(call.direction)];
    std::vector<float> grad(kElems), dz(kElems);
    if (call.last) losses[size_t(call.micro_batch)] = loss_and_grad(s.y[call.micro_batch].data(), call.micro_batch, grad.data());
    else std::copy(dy.data_as<float>(), dy.data_as<float>() + kElems, grad.begin());
    layer_backward_input(s.layer, s.y[call.micro_batch].data(), grad.data(), dz.data(), call.first ? nullptr : dx.data_as<float>());
    s.dz[call.micro_batch] = std::move(dz);
  };
  fns.backward_weight = [&](const sol::pp::StageCall& call) {
    StageReplica& s = replicas[size_t(call.direction)];
    layer_backward_weight(s.layer, s.x[call.micro_batch].data(), s.dz[call.micro_batch].data());
    s.x.erase(call.micro_batch);
    s.y.erase(call.micro_batch);
    s.dz.erase(call.micro_batch);
  };

  sol::pp::PipelineStats st{};
  for (int step = 0; step < 2; ++step) {  // twice: slots and channels are reused
    for (auto& r : replicas) {
      std::fill(r.layer.dw.begin(), r.layer.dw.end(), 0.f);
      std::fill(r.layer.db.begin(), r.layer.db.end(), 0.f);
    }
    std::fill(losses.begin(), losses.end(), 0.f);
    st = pipe.run(fns);
  }

  // Losses live on the rank that ran the last stage of their direction: sum over ranks.
  std::vector<float> all_losses(losses.size());
  MPI_Allreduce(losses.data(), all_losses.data(), int(losses.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const int half = schedule == sol::pp::Schedule::dualpipe ? micro_batches / 2 : micro_batches;
  for (int d = 0; d < int(replicas.size()); ++d) {
    const int first = d * half, last = d == 0 ? half : micro_batches;
    Reference ref(P, first, last, micro_batches);
    for (int mb = first; mb < last; ++mb)
      c.expect(std::fabs(all_losses[size_t(mb)] - ref.losses[size_t(mb)]) <= 1e-6f * std::fabs(ref.losses[size_t(mb)]) + 1e-7f,
               name + ": loss of micro-batch " + std::to_string(mb) + " = " + std::to_string(all_losses[size_t(mb)]) +
                   ", single rank " + std::to_string(ref.losses[size_t(mb)]));
    const int stage = d == 0 ? me : P - 1 - me;
    const double ew = max_rel_diff(replicas[size_t(d)].layer.dw, ref.layers[size_t(stage)].dw);
    const double eb = max_rel_diff(replicas[size_t(d)].layer.db, ref.layers[size_t(stage)].db);
    c.expect(ew <= 1e-5 && eb <= 1e-5, name + ": stage " + std::to_string(stage) + " direction " + std::to_string(d) +
                                           " gradients differ from the single-rank run: " + std::to_string(ew) + ", " +
                                           std::to_string(eb));
  }
  double bubble[2] = {st.bubble_measured, st.bubble_formula}, worst[2];
  MPI_Allreduce(bubble, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0)
    std::printf("%-22s bubble measured %5.1f%%  formula %5.1f%%  recv slots %d  wall %.2f ms\n", name.c_str(),
                100 * worst[0], 100 * worst[1], st.recv_slots, 1e3 * st.wall_s);
}

void bad_options(const sol::comm::Group& g, Checker& c) {
  auto throws = [&](sol::pp::Schedule s, int m, std::vector<int64_t> shape, const std::string& what) {
    try {
      sol::pp::Pipeline p(g, {s, m, shape, sol::DType::f32});
      c.expect(false, what + ": no error");
    } catch (const sol::Error&) {
    }
  };
  throws(sol::pp::Schedule::one_f_one_b, 0, {4}, "zero micro-batches");
  throws(sol::pp::Schedule::one_f_one_b, 2, {}, "empty boundary shape");
  throws(sol::pp::Schedule::dualpipe, 2 * g.size() - 2, {4}, "dualpipe with too few micro-batches");
  if (g.size() % 2 == 1) throws(sol::pp::Schedule::dualpipe, 2 * g.size() + 2, {4}, "dualpipe on an odd rank count");
}

// `mpi_pp bubble F_MS B_MS W_MS`: stages that spin for fixed times, to compare the measured
// bubble with the schedule's formula (docs/perf/cp-pp-engram.md); not run by ctest.
void spin_for(double seconds) {
  const double until = sol::now_seconds() + seconds;
  while (sol::now_seconds() < until) {
  }
}

int bubble_report(const sol::comm::Group& g, double f, double b, double w) {
  const int P = g.size();
  for (auto schedule : {sol::pp::Schedule::one_f_one_b, sol::pp::Schedule::dualpipe}) {
    if (schedule == sol::pp::Schedule::dualpipe && P % 2) continue;
    for (int m : {2 * P, 4 * P}) {
      sol::pp::PipelineOptions o{schedule, m, {256}, sol::DType::f32};
      sol::pp::Pipeline pipe(g, o);
      sol::pp::StageFns fns;
      fns.forward = [&](const sol::pp::StageCall&, const sol::Tensor&, const sol::Tensor&) { spin_for(f); };
      fns.backward_input = [&](const sol::pp::StageCall&, const sol::Tensor&, const sol::Tensor&) { spin_for(b); };
      fns.backward_weight = [&](const sol::pp::StageCall&) { spin_for(w); };
      std::vector<double> measured, formula;
      for (int rep = 0; rep < 5; ++rep) {
        g.barrier();
        sol::pp::PipelineStats st = pipe.run(fns);
        double mine[2] = {st.bubble_measured, st.bubble_formula}, worst[2];
        MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        measured.push_back(worst[0]);
        formula.push_back(worst[1]);
      }
      std::sort(measured.begin(), measured.end());
      std::sort(formula.begin(), formula.end());
      if (g.rank() == 0)
        std::printf("%-9s P=%d M=%-3d F/B/W=%.1f/%.1f/%.1f ms  bubble measured %5.1f%%  formula %5.1f%% (medians of 5)\n",
                    std::string(sol::pp::schedule_name(schedule)).c_str(), P, m, f * 1e3, b * 1e3, w * 1e3,
                    100 * measured[2], 100 * formula[2]);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "bubble")
    return bubble_report(sol::comm::Group::world(), std::atof(argv[2]) / 1e3, std::atof(argv[3]) / 1e3,
                         std::atof(argv[4]) / 1e3);
  const sol::comm::Group& g = sol::comm::Group::world();
  Checker c(g.rank());
  try {
    for (int m : {1, 3, 8}) run_case(g, c, sol::pp::Schedule::one_f_one_b, m);
    if (g.size() % 2 == 0)
      for (int m : {2 * g.size(), 2 * g.size() + 6}) run_case(g, c, sol::pp::Schedule::dualpipe, m);
    bad_options(g, c);
  } catch (const std::exception& e) {
    c.expect(false, std::string("exception: ") + e.what());
  }
  return c.finish("mpi_pp");
}
