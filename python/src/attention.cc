// Flash attention, forward and backward, fixed length or varlen (FlashAttention-2 semantics).
#include <nanobind/stl/optional.h>

#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "sol/attention.h"

namespace solpy {

using namespace nb::literals;

namespace {

std::vector<int64_t> shape_of(const Array& a) { return {a->shape().begin(), a->shape().end()}; }

struct AttentionArgs {
  std::optional<Array> cu_q, cu_k;
  sol::AttentionOptions opt;
};

AttentionArgs attention_args(const char* op, bool causal, int64_t window_left, int64_t window_right,
                             std::optional<float> softmax_scale, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k) {
  AttentionArgs a;
  a.cu_q = optional_input(cu_seqlens_q, op, "cu_seqlens_q");
  a.cu_k = optional_input(cu_seqlens_k, op, "cu_seqlens_k");
  a.opt.causal = causal;
  a.opt.window_left = window_left;
  a.opt.window_right = window_right;
  a.opt.softmax_scale = softmax_scale;
  a.opt.cu_seqlens_q = ptr(a.cu_q);
  a.opt.cu_seqlens_k = ptr(a.cu_k);
  return a;
}

nb::tuple flash_attention(nb::handle q, nb::handle k, nb::handle v, bool causal, int64_t window_left,
                          int64_t window_right, std::optional<float> softmax_scale, nb::handle cu_seqlens_q,
                          nb::handle cu_seqlens_k, nb::handle out, nb::handle lse) {
  const char* op = "flash_attention";
  Array Q = input(q, op, "q"), K = input(k, op, "k"), V = input(v, op, "v");
  AttentionArgs args = attention_args(op, causal, window_left, window_right, softmax_scale, cu_seqlens_q, cu_seqlens_k);
  std::vector<int64_t> o_shape = shape_of(Q);
  if (!o_shape.empty()) o_shape.back() = V.dim(-1);
  const bool varlen = args.cu_q.has_value();
  std::vector<int64_t> lse_shape = varlen ? std::vector<int64_t>{Q.dim(1), Q.dim(0)}
                                          : std::vector<int64_t>{Q.dim(0), Q.dim(2), Q.dim(1)};
  Array O = output_or_new(out, op, "out", o_shape, Q->dtype());
  Array L = output_or_new(lse, op, "lse", lse_shape, sol::DType::f32);
  released([&] { sol::flash_attention(*Q, *K, *V, *O, *L, args.opt); });
  return nb::make_tuple(O.object, L.object);
}

nb::tuple flash_attention_backward(nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse,
                                   nb::handle d_o, bool causal, int64_t window_left, int64_t window_right,
                                   std::optional<float> softmax_scale, nb::handle cu_seqlens_q,
                                   nb::handle cu_seqlens_k, nb::handle dq, nb::handle dk, nb::handle dv) {
  const char* op = "flash_attention_backward";
  Array Q = input(q, op, "q"), K = input(k, op, "k"), V = input(v, op, "v"), O = input(o, op, "o"),
        L = input(lse, op, "lse"), dO = input(d_o, op, "d_o");
  AttentionArgs args = attention_args(op, causal, window_left, window_right, softmax_scale, cu_seqlens_q, cu_seqlens_k);
  Array dQ = output_or_new(dq, op, "dq", shape_of(Q), Q->dtype());
  Array dK = output_or_new(dk, op, "dk", shape_of(K), K->dtype());
  Array dV = output_or_new(dv, op, "dv", shape_of(V), V->dtype());
  released([&] { sol::flash_attention_backward(*Q, *K, *V, *O, *L, *dO, *dQ, *dK, *dV, args.opt); });
  return nb::make_tuple(dQ.object, dK.object, dV.object);
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def("flash_attention", &flash_attention, "q"_a, "k"_a, "v"_a, nb::kw_only(), "causal"_a = false,
        "window_left"_a = -1, "window_right"_a = -1, "softmax_scale"_a = nb::none(), "cu_seqlens_q"_a = nb::none(),
        "cu_seqlens_k"_a = nb::none(), "out"_a = nb::none(), "lse"_a = nb::none(),
        "FlashAttention-2 forward: q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D] (or varlen [total, H, D] with "
        "cu_seqlens_q/k int32) -> (out, lse f32 [B, Hq, Sq] or [Hq, total_q]).");
  m.def("flash_attention_backward", &flash_attention_backward, "q"_a, "k"_a, "v"_a, "o"_a, "lse"_a, "d_o"_a,
        nb::kw_only(), "causal"_a = false, "window_left"_a = -1, "window_right"_a = -1,
        "softmax_scale"_a = nb::none(), "cu_seqlens_q"_a = nb::none(), "cu_seqlens_k"_a = nb::none(),
        "dq"_a = nb::none(), "dk"_a = nb::none(), "dv"_a = nb::none(),
        "Gradients of flash_attention (deterministic): (dq, dk, dv).");
}

}  // namespace solpy
