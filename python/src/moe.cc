// Mixture-of-experts plumbing and decoding: routing, permute / unpermute, sampling.
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "bindings.h"
#include "sol/moe_permute.h"
#include "sol/routing.h"
#include "sol/sampling.h"

namespace solpy {

using namespace nb::literals;

namespace {

nb::tuple moe_routing(nb::handle logits, int64_t top_k, int64_t n_group, int64_t topk_group,
                      const std::string& scoring, bool renormalize, float scaling, nb::handle correction_bias,
                      nb::handle topk_idx, nb::handle topk_weights) {
  const char* op = "moe_routing";
  Array L = input(logits, op, "logits");
  std::optional<Array> bias = optional_input(correction_bias, op, "correction_bias");
  sol::RoutingOptions opt;
  opt.top_k = top_k;
  opt.n_group = n_group;
  opt.topk_group = topk_group;
  opt.scoring = choice<sol::Scoring>(scoring, op, "scoring",
                                     {{"sigmoid", sol::Scoring::sigmoid}, {"softmax", sol::Scoring::softmax}});
  opt.renormalize = renormalize;
  opt.scaling = scaling;
  opt.correction_bias = ptr(bias);
  Array idx = output_or_new(topk_idx, op, "topk_idx", {L.dim(0), top_k}, sol::DType::i32);
  Array w = output_or_new(topk_weights, op, "topk_weights", {L.dim(0), top_k}, sol::DType::f32);
  released([&] { sol::moe_routing(*L, *idx, *w, opt); });
  return nb::make_tuple(idx.object, w.object);
}

nb::tuple moe_permute(nb::handle x, nb::handle topk_idx, int64_t experts, int64_t alignment, nb::handle x_perm,
                      nb::handle grouped_layout, nb::handle row_of) {
  const char* op = "moe_permute";
  Array X = input(x, op, "x"), idx = input(topk_idx, op, "topk_idx");
  int64_t rows = 0;
  if (x_perm.is_none() || grouped_layout.is_none())
    released([&] { rows = sol::moe_permuted_rows(*idx, experts, alignment); });
  Array xp = output_or_new(x_perm, op, "x_perm", {rows, X.dim(1)}, X->dtype());
  Array layout = output_or_new(grouped_layout, op, "grouped_layout", {rows}, sol::DType::i32);
  Array rows_of = output_or_new(row_of, op, "row_of", {idx.dim(0), idx.dim(1)}, sol::DType::i32);
  released([&] { sol::moe_permute(*X, *idx, experts, alignment, *xp, *layout, *rows_of); });
  return nb::make_tuple(xp.object, layout.object, rows_of.object);
}

}  // namespace

void bind_moe(nb::module_& m) {
  m.def("moe_routing", &moe_routing, "logits"_a, nb::kw_only(), "top_k"_a = 8, "n_group"_a = 1,
        "topk_group"_a = 1, "scoring"_a = "sigmoid", "renormalize"_a = true, "scaling"_a = 1.0f,
        "correction_bias"_a = nb::none(), "topk_idx"_a = nb::none(), "topk_weights"_a = nb::none(),
        "Top-k experts per token from logits [T, E] (f32/bf16): (topk_idx [T, k] int32 — or int64 when "
        "an int64 topk_idx is given — and topk_weights [T, k] f32). DeepSeek-V3: scoring='sigmoid', n_group=8, topk_group=4, top_k=8, scaling=2.5, "
        "correction_bias [E] f32.");

  m.def("moe_permuted_rows", [](nb::handle topk_idx, int64_t experts, int64_t alignment) {
    Array idx = input(topk_idx, "moe_permuted_rows", "topk_idx");
    int64_t rows = 0;
    released([&] { rows = sol::moe_permuted_rows(*idx, experts, alignment); });
    return rows;
  }, "topk_idx"_a, "experts"_a, "alignment"_a = 128, "Rows moe_permute writes for this routing.");

  m.def("moe_permute", &moe_permute, "x"_a, "topk_idx"_a, "experts"_a, "alignment"_a = 128, nb::kw_only(),
        "x_perm"_a = nb::none(), "grouped_layout"_a = nb::none(), "row_of"_a = nb::none(),
        "Rows of x grouped by expert, each expert padded to `alignment` rows (DeepGEMM's contiguous "
        "layout): (x_perm [R, H], grouped_layout [R] int32 (-1: padding), row_of [T, k] int32).");

  m.def("moe_unpermute", [](nb::handle y_perm, nb::handle row_of, nb::handle topk_weights, nb::handle out) {
    const char* op = "moe_unpermute";
    Array Y = input(y_perm, op, "y_perm"), R = input(row_of, op, "row_of"), W = input(topk_weights, op, "topk_weights");
    Array O = output_or_new(out, op, "out", {R.dim(0), Y.dim(1)}, Y->dtype());
    released([&] { sol::moe_unpermute(*Y, *R, *W, *O); });
    return O.object;
  }, "y_perm"_a, "row_of"_a, "topk_weights"_a, nb::kw_only(), "out"_a = nb::none(),
  "out[t] = sum_j topk_weights[t, j] * y_perm[row_of[t, j]] in f32. Returns out [T, H].");

  m.def("sample", [](nb::handle logits, float temperature, int64_t top_k, float top_p, uint64_t seed, nb::handle out) {
    Array L = input(logits, "sample", "logits");
    Array ids = output_or_new(out, "sample", "out", {L.dim(0)}, sol::DType::i32);
    released([&] { sol::sample(*L, *ids, {temperature, top_k, top_p, seed}); });
    return ids.object;
  }, "logits"_a, nb::kw_only(), "temperature"_a = 1.0f, "top_k"_a = 0, "top_p"_a = 1.0f, "seed"_a = 0,
  "out"_a = nb::none(),
  "One token id per row of logits [B, V]: temperature (0: greedy), top-k, top-p, reproducible from "
  "(seed, row). Returns ids [B] int32.");

  m.def("sampling_uniform", &sol::sampling_uniform, "seed"_a, "row"_a, "The uniform draw sample() uses for a row.");
}

}  // namespace solpy
