// sol.comm: ranks started by `mpirun python ...` (no mpi4py needed), the group's collectives
// and point-to-point transfers on arrays. Every call releases the GIL while it waits.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "bindings.h"
#include "sol/comm.h"
#include "sol/comm_window.h"

namespace solpy {

using namespace nb::literals;

namespace {

using sol::comm::Group;

sol::comm::ReduceOp reduce_op(const std::string& s) { return sol::comm::parse_reduce_op(s); }

std::vector<int64_t> shape_of(const Array& a) { return {a->shape().begin(), a->shape().end()}; }

// Work in flight and the arrays it reads or writes: they stay alive until it completes.
struct PyWork {
  sol::comm::Work work;
  std::vector<Array> buffers;

  void wait() {
    released([&] { work.wait(); });
    buffers.clear();
  }
  bool completed() {
    bool done = false;
    released([&] { done = work.completed(); });
    if (done) buffers.clear();
    return done;
  }
  ~PyWork() {
    // Sol's Work waits in its destructor for what is still in flight (up to the comm timeout):
    // do that without holding the GIL, and before the buffers go.
    nb::gil_scoped_release unlocked;
    sol::comm::Work pending = std::move(work);
  }
};

PyWork* start(const Group& g, std::vector<Array> arrays, std::vector<sol::comm::P2POp> ops) {
  auto w = std::make_unique<PyWork>();
  released([&] { w->work = g.batch_isend_irecv(ops); });
  w->buffers = std::move(arrays);
  return w.release();
}

void bind_group(nb::module_& c) {
  nb::class_<Group>(c, "Group", "A set of ranks that communicate (sol::comm::Group).")
      .def_prop_ro("rank", &Group::rank)
      .def_prop_ro("size", &Group::size)
      .def_prop_ro("node", &Group::node)
      .def_prop_ro("num_nodes", &Group::num_nodes)
      .def("local", &Group::local, nb::rv_policy::reference_internal, "The ranks of this node (shared memory).")
      .def("cross", &Group::cross, nb::rv_policy::reference_internal, "One rank per node, this rank's local index.")
      .def("split", [](const Group& g, int color, int key) {
        nb::gil_scoped_release unlocked;
        return g.split(color, key);
      }, "color"_a, "key"_a = 0, "Collective: ranks with the same colour form a new group, ordered by (key, rank).")
      .def("barrier", &Group::barrier, nb::call_guard<nb::gil_scoped_release>())
      .def("allreduce", [](const Group& g, nb::handle x, nb::handle out, const std::string& op) {
        Array in = input(x, "allreduce", "x");
        Array o = output_or_new(out, "allreduce", "out", shape_of(in), in->dtype());
        sol::comm::ReduceOp r = reduce_op(op);
        released([&] { g.allreduce(*in, *o, r); });
        return o.object;
      }, "x"_a, nb::kw_only(), "out"_a = nb::none(), "op"_a = "sum",
      "out = op over ranks of x ('sum' or 'max'; f32, or bf16 summed in f32). out=x reduces in place.")
      .def("reduce_scatter", [](const Group& g, nb::handle x, nb::handle out, const std::string& op) {
        Array in = input(x, "reduce_scatter", "x");
        std::vector<int64_t> shape = shape_of(in);
        if (!shape.empty() && shape[0] % g.size() == 0) shape[0] /= g.size();
        else shape = {in->numel() / g.size()};
        Array o = output_or_new(out, "reduce_scatter", "out", shape, in->dtype());
        sol::comm::ReduceOp r = reduce_op(op);
        released([&] { g.reduce_scatter(*in, *o, r); });
        return o.object;
      }, "x"_a, nb::kw_only(), "out"_a = nb::none(), "op"_a = "sum",
      "x holds size blocks (along dim 0); rank r gets op over ranks of block r.")
      .def("all_gather", [](const Group& g, nb::handle x, nb::handle out) {
        Array in = input(x, "all_gather", "x");
        std::vector<int64_t> shape = shape_of(in);
        if (shape.empty()) shape = {int64_t(g.size())};
        else shape[0] *= g.size();
        Array o = output_or_new(out, "all_gather", "out", shape, in->dtype());
        released([&] { g.all_gather(*in, *o); });
        return o.object;
      }, "x"_a, nb::kw_only(), "out"_a = nb::none(), "out holds size blocks (along dim 0), block r from rank r.")
      .def("all_to_all", [](const Group& g, nb::handle x, nb::handle out) {
        Array in = input(x, "all_to_all", "x");
        Array o = output_or_new(out, "all_to_all", "out", shape_of(in), in->dtype());
        released([&] { g.all_to_all(*in, *o); });
        return o.object;
      }, "x"_a, nb::kw_only(), "out"_a = nb::none(), "Block p of x goes to rank p; block p of out came from rank p.")
      .def("all_to_all_v", [](const Group& g, nb::handle x, std::vector<int64_t> send_counts,
                              std::vector<int64_t> recv_counts, nb::handle out) {
        Array in = input(x, "all_to_all_v", "x");
        int64_t total = 0;
        for (int64_t n : recv_counts) total += n;
        Array o = output_or_new(out, "all_to_all_v", "out", {total}, in->dtype());
        released([&] { g.all_to_all_v(*in, send_counts, *o, recv_counts); });
        return o.object;
      }, "x"_a, "send_counts"_a, "recv_counts"_a, nb::kw_only(), "out"_a = nb::none(),
      "send_counts[p] elements of x go to rank p (packed in rank order); recv_counts[p] elements of out "
      "come from rank p (out: 1-d unless given).")
      .def("broadcast", [](const Group& g, nb::handle buffer, int root) {
        Array b = output(buffer, "broadcast", "buffer");
        released([&] { g.broadcast(*b, root); });
        return b.object;
      }, "buffer"_a, "root"_a = 0, "buffer of root is copied into buffer of every rank (in place). Returns buffer.")
      .def("isend", [](const Group& g, nb::handle buffer, int peer) {
        Array b = input(buffer, "isend", "buffer");
        std::vector<sol::comm::P2POp> ops = {{sol::comm::P2POp::send, *b, peer}};
        std::vector<Array> keep;
        keep.push_back(std::move(b));
        return start(g, std::move(keep), std::move(ops));
      }, "buffer"_a, "peer"_a, "Starts sending buffer to peer; Work.wait() completes it.")
      .def("irecv", [](const Group& g, nb::handle buffer, int peer) {
        Array b = output(buffer, "irecv", "buffer");
        std::vector<sol::comm::P2POp> ops = {{sol::comm::P2POp::recv, *b, peer}};
        std::vector<Array> keep;
        keep.push_back(std::move(b));
        return start(g, std::move(keep), std::move(ops));
      }, "buffer"_a, "peer"_a, "Starts receiving into buffer from peer; Work.wait() completes it.")
      .def("batch_isend_irecv", [](const Group& g, nb::iterable ops) {
        std::vector<Array> keep;
        std::vector<sol::comm::P2POp> p2p;
        for (nb::handle item : ops) {
          nb::object seq = nb::steal(PySequence_Tuple(item.ptr()));
          if (!seq.is_valid()) nb::raise_python_error();
          nb::tuple t = nb::borrow<nb::tuple>(seq);
          sol::check(t.size() == 3 && nb::isinstance<nb::str>(t[0]) && nb::isinstance<nb::int_>(t[2]),
                     "batch_isend_irecv", "each op must be (\"send\" | \"recv\", buffer, peer) but got ",
                     to_string(item));
          auto kind = choice<sol::comm::P2POp::Kind>(nb::cast<std::string>(t[0]), "batch_isend_irecv", "kind",
                                                     {{"send", sol::comm::P2POp::send}, {"recv", sol::comm::P2POp::recv}});
          Array b = kind == sol::comm::P2POp::send ? input(t[1], "batch_isend_irecv", "buffer")
                                                   : output(t[1], "batch_isend_irecv", "buffer");
          p2p.push_back({kind, *b, nb::cast<int>(t[2])});
          keep.push_back(std::move(b));
        }
        return start(g, std::move(keep), std::move(p2p));
      }, "ops"_a, "Sends and receives in flight together: ops is a list of (\"send\" | \"recv\", buffer, peer).");
}

}  // namespace

void bind_comm(nb::module_& m) {
  nb::module_ c = m.def_submodule("comm", "Communication between ranks started by mpirun (sol::comm).");
  nb::class_<PyWork>(c, "Work", "Point-to-point transfers in flight; the arrays stay alive until they complete.")
      .def("wait", &PyWork::wait)
      .def("completed", &PyWork::completed);
  bind_group(c);
  nb::class_<sol::comm::Window>(c, "Window",
                                "Regions of a node-local group's ranks that every rank maps (sol::comm::Window); "
                                "used by sol.cp.ring_attention(kv_window=...).")
      .def("__init__", [](sol::comm::Window* self, const Group& group, size_t bytes) {
        nb::gil_scoped_release unlocked;
        new (self) sol::comm::Window(group, bytes);
      }, "group"_a, "bytes"_a, "Collective: this rank's region holds `bytes` (sizes may differ by rank).")
      .def("bytes", &sol::comm::Window::bytes, "rank"_a, "The size rank asked for.")
      .def("fence", [](const sol::comm::Window& w) { released([&] { w.fence(); }); },
           "Collective barrier ordering every rank's earlier accesses of any region.");
  c.def("world", [] {
    nb::gil_scoped_release unlocked;
    return &Group::world();
  }, nb::rv_policy::reference, "All ranks of the job (initialises MPI on first use).");
  c.def("timeout_seconds", &sol::comm::timeout_seconds, "SOL_COMM_TIMEOUT_S: how long any single wait may take.");
}

}  // namespace solpy
