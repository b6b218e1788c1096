// sol.ep: expert-parallel dispatch and combine (DeepEP's semantics) for ranks under mpirun.
// What a dispatch returns are numpy views into the Buffer's memory (the Buffer object stays
// alive while they do); their contents are valid until the next call of the same kind, as in C++.
#include <nanobind/stl/string.h>

#include <memory>

#include "arrays.h"
#include "bindings.h"
#include "sol/ep.h"

namespace solpy {

using namespace nb::literals;

namespace {

namespace ep = sol::ep;

// A numpy array over a Tensor that lives in memory `owner` keeps alive; None for an empty view.
nb::object numpy_view(const sol::Tensor& t, nb::handle owner) {
  if (t.data() == nullptr) return nb::none();
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  const size_t bytes = sol::dtype_size(t.dtype());
  // Exported as unsigned integers of the element size, then given the numpy (ml_dtypes) type.
  nb::dlpack::dtype raw{uint8_t(nb::dlpack::dtype_code::UInt), uint8_t(8 * bytes), 1};
  nb::ndarray<nb::numpy> nd(t.data(), shape.size(), shape.data(), owner, t.strides().data(), raw);
  return nb::cast(nd, nb::rv_policy::reference).attr("view")(numpy_dtype(t.dtype()));
}

struct PyBuffer {
  std::unique_ptr<ep::Buffer> buffer;
};

struct PyLowLatencyHandle {
  ep::LowLatencyHandle handle;
  nb::object buffer;  // the handle points into it
  void wait() { released([&] { handle.wait(); }); }
};

nb::dict dispatch_result(const ep::DispatchResult& r, nb::handle owner) {
  nb::dict d;
  d["recv_x"] = numpy_view(r.recv_x, owner);
  d["recv_x_scales"] = numpy_view(r.recv_x_scales, owner);
  d["recv_topk_idx"] = numpy_view(r.recv_topk_idx, owner);
  d["recv_topk_weights"] = numpy_view(r.recv_topk_weights, owner);
  d["num_recv_tokens_per_expert"] = numpy_view(r.num_recv_tokens_per_expert, owner);
  return d;
}

ep::Buffer& buffer_of(nb::handle self) { return *nb::cast<PyBuffer&>(self).buffer; }

}  // namespace

void bind_ep(nb::module_& m) {
  nb::module_ e = m.def_submodule("ep", "Expert-parallel dispatch and combine with DeepEP's semantics (sol::ep).");
  nb::class_<ep::DispatchHandle>(e, "DispatchHandle", "What combine and a cached dispatch need from a dispatch.")
      .def_prop_ro("num_tokens", &ep::DispatchHandle::num_tokens)
      .def_prop_ro("num_recv_tokens", &ep::DispatchHandle::num_recv_tokens);
  nb::class_<PyLowLatencyHandle>(e, "LowLatencyHandle", "A low-latency dispatch; wait() receives it.")
      .def("wait", &PyLowLatencyHandle::wait)
      .def_prop_ro("pending", [](const PyLowLatencyHandle& h) { return h.handle.pending(); });

  nb::class_<PyBuffer>(e, "Buffer", "Dispatch/combine memory of a comm group, taken once (collective).")
      .def("__init__", [](PyBuffer* self, const sol::comm::Group& group, int64_t hidden, int64_t num_experts,
                          int64_t top_k, nb::handle dtype, int64_t max_tokens_per_rank, int64_t low_latency_max_tokens) {
        ep::BufferConfig c{hidden, num_experts, top_k, dtype_arg(dtype, "ep.Buffer", "dtype"), max_tokens_per_rank,
                           low_latency_max_tokens};
        std::unique_ptr<ep::Buffer> b;
        released([&] { b = std::make_unique<ep::Buffer>(group, c); });
        new (self) PyBuffer{std::move(b)};
      }, "group"_a, nb::kw_only(), "hidden"_a = 7168, "num_experts"_a = 256, "top_k"_a = 8, "dtype"_a = "bf16",
      "max_tokens_per_rank"_a = 4096, "low_latency_max_tokens"_a = 0)
      .def_prop_ro("rank", [](nb::handle s) { return buffer_of(s).rank(); })
      .def_prop_ro("num_ranks", [](nb::handle s) { return buffer_of(s).num_ranks(); })
      .def_prop_ro("num_local_experts", [](nb::handle s) { return buffer_of(s).num_local_experts(); })
      .def("get_dispatch_layout", [](nb::handle self, nb::handle topk_idx) {
        Array idx = input(topk_idx, "get_dispatch_layout", "topk_idx");
        const ep::DispatchLayout* l = nullptr;
        released([&] { l = &buffer_of(self).get_dispatch_layout(*idx); });
        nb::dict d;
        d["num_tokens_per_rank"] = numpy_view(l->num_tokens_per_rank, self);
        d["num_tokens_per_node"] = numpy_view(l->num_tokens_per_node, self);
        d["num_tokens_per_expert"] = numpy_view(l->num_tokens_per_expert, self);
        d["is_token_in_rank"] = numpy_view(l->is_token_in_rank, self);
        return d;
      }, "topk_idx"_a, "Tokens per rank, node and expert, and is_token_in_rank, for this routing.")
      .def("dispatch", [](nb::handle self, nb::handle x, nb::handle topk_idx, nb::handle topk_weights,
                          nb::handle x_scales, int64_t expert_alignment) {
        const char* op = "dispatch";
        Array X = input(x, op, "x"), idx = input(topk_idx, op, "topk_idx"), w = input(topk_weights, op, "topk_weights");
        std::optional<Array> scales = optional_input(x_scales, op, "x_scales");
        auto handle = std::make_unique<ep::DispatchHandle>();
        ep::DispatchResult r;
        released([&] {
          ep::Buffer& b = buffer_of(self);
          const ep::DispatchLayout& layout = b.get_dispatch_layout(*idx);
          r = b.dispatch(*X, ptr(scales), *idx, *w, layout, *handle, expert_alignment);
        });
        return nb::make_tuple(dispatch_result(r, self), nb::cast(handle.release(), nb::rv_policy::take_ownership));
      }, "x"_a, "topk_idx"_a, "topk_weights"_a, nb::kw_only(), "x_scales"_a = nb::none(), "expert_alignment"_a = 1,
      "Normal-mode dispatch (collective): ({'recv_x', 'recv_x_scales', 'recv_topk_idx', 'recv_topk_weights', "
      "'num_recv_tokens_per_expert'}, handle). x [T, hidden] bf16, or float8_e4m3fn with x_scales [T, hidden/128].")
      .def("dispatch_cached", [](nb::handle self, nb::handle x, const ep::DispatchHandle& handle, nb::handle x_scales) {
        Array X = input(x, "dispatch", "x");
        std::optional<Array> scales = optional_input(x_scales, "dispatch", "x_scales");
        ep::DispatchResult r;
        released([&] { r = buffer_of(self).dispatch(*X, ptr(scales), handle); });
        return dispatch_result(r, self);
      }, "x"_a, "handle"_a, nb::kw_only(), "x_scales"_a = nb::none(), "A new payload along the routing of `handle`.")
      .def("combine", [](nb::handle self, nb::handle y, const ep::DispatchHandle& handle, nb::handle out) {
        Array Y = input(y, "combine", "y");
        Array O = output_or_new(out, "combine", "out", {handle.num_tokens(), Y.dim(1)}, sol::DType::bf16);
        released([&] { buffer_of(self).combine(*Y, handle, *O); });
        return O.object;
      }, "y"_a, "handle"_a, nb::kw_only(), "out"_a = nb::none(),
      "out[t] = sum of y over the ranks token t went to (f32, rounded once to bf16). Collective.")
      .def("low_latency_dispatch", [](nb::handle self, nb::handle x, nb::handle topk_idx, bool async_) {
        Array X = input(x, "low_latency_dispatch", "x"), idx = input(topk_idx, "low_latency_dispatch", "topk_idx");
        auto h = std::make_unique<PyLowLatencyHandle>();
        h->buffer = nb::borrow(self);
        ep::LowLatencyResult r;
        released([&] { r = buffer_of(self).low_latency_dispatch(*X, *idx, h->handle, async_); });
        nb::dict d;
        d["recv_x"] = numpy_view(r.recv_x, self);
        d["recv_x_scales"] = numpy_view(r.recv_x_scales, self);
        d["recv_count"] = numpy_view(r.recv_count, self);
        return nb::make_tuple(d, nb::cast(h.release(), nb::rv_policy::take_ownership));
      }, "x"_a, "topk_idx"_a, nb::kw_only(), "async_"_a = false,
      "Decode dispatch: ({'recv_x' [local_experts, ranks * max_tokens, hidden], 'recv_x_scales', 'recv_count'}, "
      "handle) in the masked layout grouped_gemm_masked reads; async_: only send (handle.wait() receives).")
      .def("low_latency_combine", [](nb::handle self, nb::handle y, nb::handle topk_idx, nb::handle topk_weights,
                                     const PyLowLatencyHandle& handle, nb::handle out) {
        const char* op = "low_latency_combine";
        Array Y = input(y, op, "y"), idx = input(topk_idx, op, "topk_idx"), w = input(topk_weights, op, "topk_weights");
        Array O = output_or_new(out, op, "out", {idx.dim(0), Y.dim(2)}, sol::DType::bf16);
        released([&] { buffer_of(self).low_latency_combine(*Y, *idx, *w, handle.handle, *O); });
        return O.object;
      }, "y"_a, "topk_idx"_a, "topk_weights"_a, "handle"_a, nb::kw_only(), "out"_a = nb::none(),
      "out[t] = sum_j topk_weights[t, j] * y(t, j) in f32, rounded once to bf16.");
}

}  // namespace solpy
