// sol.pp: pipeline-parallel schedules (1F1B, DualPipe) and the schedule runner over Python stage
// callables, for ranks under mpirun. Pipeline.run releases the GIL and takes it back around each
// callable; an exception a callable raises propagates out of run (the other ranks then time
// out in their next wait: the pipeline is not usable afterwards).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "sol/pp.h"

namespace solpy {

using namespace nb::literals;

namespace {

namespace pp = sol::pp;

const char* kind_name(pp::Action::Kind k) {
  return k == pp::Action::forward ? "F" : k == pp::Action::backward_input ? "B" : "W";
}

nb::list actions_list(const std::vector<pp::Action>& actions) {
  nb::list out;
  for (const pp::Action& a : actions) out.append(nb::make_tuple(kind_name(a.kind), int(a.direction), a.micro_batch));
  return out;
}

// A numpy array over a Tensor that is valid during a callable only; None for an empty tensor.
nb::object call_view(const sol::Tensor& t) {
  if (t.data() == nullptr || t.empty()) return nb::none();
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  const size_t bytes = sol::dtype_size(t.dtype());
  nb::dlpack::dtype raw{uint8_t(nb::dlpack::dtype_code::UInt), uint8_t(8 * bytes), 1};
  nb::ndarray<nb::numpy> nd(t.data(), shape.size(), shape.data(), nb::handle(), t.strides().data(), raw);
  return nb::cast(nd, nb::rv_policy::reference).attr("view")(numpy_dtype(t.dtype()));
}

struct PyPipeline {
  std::unique_ptr<pp::Pipeline> pipeline;
};

}  // namespace

void bind_pp(nb::module_& m) {
  nb::module_ p = m.def_submodule("pp", "Pipeline parallelism: 1F1B and DualPipe schedules and their runner (sol::pp).");

  p.def("build_schedule", [](const std::string& schedule, int ranks, int rank, int micro_batches) {
    return actions_list(pp::build_schedule(pp::parse_schedule(schedule), ranks, rank, micro_batches));
  }, "schedule"_a, "ranks"_a, "rank"_a, "micro_batches"_a,
  "The action list of rank: [(kind 'F' | 'B' | 'W', direction, micro_batch)]. schedule: '1f1b' | 'dualpipe'.");
  p.def("bubble_formula", [](const std::string& schedule, int ranks, int micro_batches, double f, double b, double w) {
    return pp::bubble_formula(pp::parse_schedule(schedule), ranks, micro_batches, f, b, w);
  }, "schedule"_a, "ranks"_a, "micro_batches"_a, "f"_a = 1.0, "b"_a = 1.0, "w"_a = 1.0,
  "Idle fraction the schedule predicts with F, B, W times per micro-batch and stage.");

  nb::class_<pp::StageCall>(p, "StageCall", "Where a stage callable is called from.")
      .def_ro("stage", &pp::StageCall::stage)
      .def_ro("direction", &pp::StageCall::direction)
      .def_ro("micro_batch", &pp::StageCall::micro_batch)
      .def_ro("first", &pp::StageCall::first)
      .def_ro("last", &pp::StageCall::last);

  nb::class_<PyPipeline>(p, "Pipeline", "Activation / gradient transfers between adjacent ranks and the schedule runner.")
      .def("__init__", [](PyPipeline* self, const sol::comm::Group& group, std::vector<int64_t> boundary_shape,
                          const std::string& schedule, int micro_batches, nb::handle dtype) {
        pp::PipelineOptions o;
        o.schedule = pp::parse_schedule(schedule);
        o.micro_batches = micro_batches;
        o.boundary_shape = std::move(boundary_shape);
        o.dtype = dtype_arg(dtype, "Pipeline", "dtype");
        std::unique_ptr<pp::Pipeline> pipe;
        released([&] { pipe = std::make_unique<pp::Pipeline>(group, o); });
        new (self) PyPipeline{std::move(pipe)};
      }, "group"_a, "boundary_shape"_a, nb::kw_only(), "schedule"_a = "1f1b", "micro_batches"_a = 1,
      "dtype"_a = "f32")
      .def_prop_ro("actions", [](const PyPipeline& s) { return actions_list(s.pipeline->actions()); })
      .def("run", [](PyPipeline& s, nb::callable forward, nb::callable backward_input, nb::object backward_weight) {
        pp::StageFns fns;
        fns.forward = [&](const pp::StageCall& call, const sol::Tensor& x, const sol::Tensor& y) {
          nb::gil_scoped_acquire held;
          forward(pp::StageCall(call), call_view(x), call_view(y));
        };
        fns.backward_input = [&](const pp::StageCall& call, const sol::Tensor& dy, const sol::Tensor& dx) {
          nb::gil_scoped_acquire held;
          backward_input(pp::StageCall(call), call_view(dy), call_view(dx));
        };
        if (!backward_weight.is_none())
          fns.backward_weight = [&](const pp::StageCall& call) {
            nb::gil_scoped_acquire held;
            backward_weight(pp::StageCall(call));
          };
        pp::PipelineStats st;
        released([&] { st = s.pipeline->run(fns); });
        nb::dict d;
        d["wall_s"] = st.wall_s;
        d["forward_s"] = st.forward_s;
        d["backward_input_s"] = st.backward_input_s;
        d["backward_weight_s"] = st.backward_weight_s;
        d["bubble_measured"] = st.bubble_measured;
        d["bubble_formula"] = st.bubble_formula;
        d["recv_slots"] = st.recv_slots;
        return d;
      }, "forward"_a, "backward_input"_a, "backward_weight"_a = nb::none(),
      "One step over all micro-batches (collective). forward(call, x, y), backward_input(call, dy, dx), "
      "backward_weight(call): x / dy arrays valid during the call only (None on the first / last stage), "
      "y / dx arrays to write (None on the last / first stage). Returns the step's stats as a dict.");
}

}  // namespace solpy
