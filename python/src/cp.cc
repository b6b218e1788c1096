// sol.cp: context parallelism (ring attention over zig-zag sequence shards) under mpirun.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "sol/cp.h"

namespace solpy {

using namespace nb::literals;

namespace {

std::vector<int64_t> shape_of(const Array& a) { return {a->shape().begin(), a->shape().end()}; }

// The shape of one rank's shard of `full` (dim 1 / ranks), or of the whole from a shard (x ranks).
std::vector<int64_t> resized(const Array& a, int ranks, bool shard) {
  std::vector<int64_t> s = shape_of(a);
  if (s.size() >= 2 && ranks > 0) s[1] = shard ? s[1] / ranks : s[1] * ranks;
  return s;
}

}  // namespace

sol::cp::RingAttentionOptions options(bool causal, std::optional<float> softmax_scale, const std::string& variant,
                                      const sol::comm::Window* kv_window) {
  sol::cp::RingAttentionOptions opt;
  opt.causal = causal;
  opt.softmax_scale = softmax_scale;
  opt.variant = sol::cp::parse_variant(variant);
  opt.kv_window = kv_window;
  return opt;
}

void bind_cp(nb::module_& m) {
  nb::module_ c = m.def_submodule("cp", "Context parallelism: ring attention over zig-zag shards (sol::cp).");

  c.def("ring_attention", [](nb::handle q, nb::handle k, nb::handle v, const sol::comm::Group& group, bool causal,
                             std::optional<float> softmax_scale, const std::string& variant,
                             const sol::comm::Window* kv_window, nb::handle out, nb::handle lse, bool return_lse) {
    const char* op = "ring_attention";
    Array Q = input(q, op, "q"), K = input(k, op, "k"), V = input(v, op, "v");
    std::vector<int64_t> o_shape = shape_of(Q);
    if (!o_shape.empty()) o_shape.back() = V.dim(-1);
    Array O = output_or_new(out, op, "out", o_shape, Q->dtype());
    std::optional<Array> L;
    if (!lse.is_none() || return_lse) L = output_or_new(lse, op, "lse", {Q.dim(0), Q.dim(2), Q.dim(1)}, sol::DType::f32);
    const sol::cp::RingAttentionOptions opt = options(causal, softmax_scale, variant, kv_window);
    const sol::Tensor none;
    released([&] { sol::cp::ring_attention(*Q, *K, *V, *O, L ? **L : none, group, opt); });
    if (!L) return O.object;
    return nb::object(nb::make_tuple(O.object, L->object));
  }, "q"_a, "k"_a, "v"_a, "group"_a, nb::kw_only(), "causal"_a = true, "softmax_scale"_a = nb::none(),
  "variant"_a = "ring", nb::arg("kv_window").none() = nb::none(), "out"_a = nb::none(), "lse"_a = nb::none(),
  "return_lse"_a = true,
  "Collective. This rank's zig-zag shards q [B, 2C, Hq, D], k/v [B, 2C, Hkv, D] (f32 or bf16, contiguous) -> "
  "(out [B, 2C, Hq, Dv], lse f32 [B, Hq, 2C]); only out when return_lse=False and no lse is given. "
  "Equals flash_attention on the full sequence, sharded the same way. variant: 'ring' (K/V rotate, overlapped "
  "with compute), 'all_gather_kv' (one all_gather; small K/V: GQA, MQA) or 'ulysses' (all_to_all sequence <-> "
  "heads; heads divisible by the ranks). kv_window (ring, one node): a sol.comm.Window over group with room for "
  "this rank's k and v bytes in every region: the ring reads K/V in place instead of passing it.");

  c.def("ring_attention_backward", [](nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse,
                                      nb::handle d_o, const sol::comm::Group& group, bool causal,
                                      std::optional<float> softmax_scale, const std::string& variant,
                                      const sol::comm::Window* kv_window, nb::handle dq, nb::handle dk, nb::handle dv) {
    const char* op = "ring_attention_backward";
    Array Q = input(q, op, "q"), K = input(k, op, "k"), V = input(v, op, "v"), O = input(o, op, "o"),
          L = input(lse, op, "lse"), dO = input(d_o, op, "d_o");
    Array dQ = output_or_new(dq, op, "dq", shape_of(Q), Q->dtype());
    Array dK = output_or_new(dk, op, "dk", shape_of(K), K->dtype());
    Array dV = output_or_new(dv, op, "dv", shape_of(V), V->dtype());
    const sol::cp::RingAttentionOptions opt = options(causal, softmax_scale, variant, kv_window);
    released([&] { sol::cp::ring_attention_backward(*Q, *K, *V, *O, *L, *dO, *dQ, *dK, *dV, group, opt); });
    return nb::make_tuple(dQ.object, dK.object, dV.object);
  }, "q"_a, "k"_a, "v"_a, "o"_a, "lse"_a, "d_o"_a, "group"_a, nb::kw_only(), "causal"_a = true,
  "softmax_scale"_a = nb::none(), "variant"_a = "ring", nb::arg("kv_window").none() = nb::none(), "dq"_a = nb::none(),
  "dk"_a = nb::none(), "dv"_a = nb::none(),
  "Collective. Gradients of ring_attention for this rank's shards: o and lse are its outputs (same options), "
  "d_o shaped like o -> (dq, dk, dv) shaped like q, k, v. Equals flash_attention_backward on the full sequence, "
  "sharded the same way; any variant may differentiate any variant's forward.");

  c.def("zigzag_shard", [](nb::handle full, int rank, int ranks, nb::handle out) {
    Array F = input(full, "zigzag_shard", "full");
    Array S = output_or_new(out, "zigzag_shard", "out", resized(F, ranks, true), F->dtype());
    released([&] { sol::cp::zigzag_shard(*F, *S, rank, ranks); });
    return S.object;
  }, "full"_a, "rank"_a, "ranks"_a, nb::kw_only(), "out"_a = nb::none(),
  "Rank's shard of full [B, S, ...] (S divisible by 2 x ranks): chunks rank and 2*ranks-1-rank of size "
  "S / (2 ranks), concatenated along dim 1.");

  c.def("zigzag_unshard", [](nb::handle shard, int rank, int ranks, nb::handle out) {
    Array S = input(shard, "zigzag_unshard", "shard");
    Array F = output_or_new(out, "zigzag_unshard", "out", resized(S, ranks, false), S->dtype(), Fill::zeros);
    released([&] { sol::cp::zigzag_unshard(*S, *F, rank, ranks); });
    return F.object;
  }, "shard"_a, "rank"_a, "ranks"_a, nb::kw_only(), "out"_a = nb::none(),
  "Writes rank's shard back into its two chunks of full [B, S, ...] (the rest of a new out is zero). Returns out.");
}

}  // namespace solpy
