// MLA decode over a paged latent cache (FlashMLA's interface): metadata, decode, FP8 cache; and
// the absorbed decode of one layer over a dense latent cache of any widths.
#include "arrays.h"
#include "bindings.h"
#include "packed_experts.h"
#include "sol/mla.h"
#include "sol/mla_absorbed.h"

namespace solpy {

using namespace nb::literals;

void bind_mla(nb::module_& m) {
  nb::class_<sol::MlaMetadata>(m, "MlaMetadata", "Which thread computes which chunks (sol.get_mla_metadata).")
      .def_ro("threads", &sol::MlaMetadata::threads)
      .def_ro("heads", &sol::MlaMetadata::heads);

  m.def("get_mla_metadata", [](nb::handle cache_seqlens, int heads, int threads) {
    Array s = input(cache_seqlens, "get_mla_metadata", "cache_seqlens");
    sol::MlaMetadata md;
    released([&] { md = sol::get_mla_metadata(*s, heads, threads); });
    return md;
  }, "cache_seqlens"_a, "heads"_a, "threads"_a = 0, "The split-KV schedule for these lengths; heads = s_q * h_q.");

  m.def("mla_decode_with_kvcache", [](nb::handle q, nb::handle kv_cache, nb::handle block_table,
                                      nb::handle cache_seqlens, int head_dim_v, float softmax_scale, bool causal,
                                      const sol::MlaMetadata& metadata, nb::handle out, nb::handle lse) {
    const char* op = "mla_decode_with_kvcache";
    Array Q = input(q, op, "q"), KV = input(kv_cache, op, "kv_cache"), BT = input(block_table, op, "block_table"),
          S = input(cache_seqlens, op, "cache_seqlens");
    Array O = output_or_new(out, op, "out", {Q.dim(0), Q.dim(1), Q.dim(2), head_dim_v}, sol::DType::bf16);
    Array L = output_or_new(lse, op, "lse", {Q.dim(0), Q.dim(2), Q.dim(1)}, sol::DType::f32);
    released([&] {
      sol::mla_decode_with_kvcache(*Q, *KV, *BT, *S, head_dim_v, softmax_scale, causal, metadata, *O, *L);
    });
    return nb::make_tuple(O.object, L.object);
  }, "q"_a, "kv_cache"_a, "block_table"_a, "cache_seqlens"_a, "head_dim_v"_a, "softmax_scale"_a, "causal"_a,
  "metadata"_a, nb::kw_only(), "out"_a = nb::none(), "lse"_a = nb::none(),
  "FlashMLA's decode: q [B, s_q, h_q, 576] bf16 over a paged latent cache -> (out [B, s_q, h_q, 512] "
  "bf16, lse [B, h_q, s_q] f32).");

  m.def("mla_quantize_kv_cache_fp8", [](nb::handle kv_bf16, nb::handle out) {
    const char* op = "mla_quantize_kv_cache_fp8";
    Array KV = input(kv_bf16, op, "kv_bf16");
    Array O = output_or_new(out, op, "out", {KV.dim(0), KV.dim(1), KV.dim(2), sol::kMlaFp8TokenBytes},
                            sol::DType::f8e4m3);
    released([&] { sol::mla_quantize_kv_cache_fp8(*KV, *O); });
    return O.object;
  }, "kv_bf16"_a, nb::kw_only(), "out"_a = nb::none(),
  "bf16 cache [N, 64, 1, 576] -> FlashMLA's FP8 cache [N, 64, 1, 656] (float8_e4m3fn bytes).");

  m.def("mla_decode_absorbed", [](nb::handle q, const PackedExperts& w_uk, nb::handle latent,
                                  const PackedExperts& w_uv, float softmax_scale, nb::handle out, int64_t seqlen) {
    const char* op = "mla_decode_absorbed";
    Array Q = input(q, op, "q"), L = input(latent, op, "latent");
    sol::check(!w_uv.experts.empty(), op, "w_uv holds no packed matrices (one per head)");
    sol::Tensor rows = *L;
    if (seqlen >= 0) {  // the first seqlen rows of a buffer with spare rows (a cache's)
      sol::check(rows.ndim() == 3 && seqlen <= rows.shape(1), op, "seqlen = ", seqlen, " but latent is ",
                 rows.describe());
      rows = rows.slice(1, 0, seqlen);
    }
    Array O = output_or_new(out, op, "out", {Q.dim(0), Q.dim(1), w_uv.experts[0].n()}, Q->dtype());
    released([&] { sol::mla_decode_absorbed(*Q, w_uk.experts, rows, w_uv.experts, softmax_scale, *O); });
    return O.object;
  }, "q"_a, "w_uk"_a, "latent"_a, "w_uv"_a, "softmax_scale"_a, nb::kw_only(), "out"_a = nb::none(),
  "seqlen"_a = -1,
  "One MLA layer's decode with absorbed up-projections: q [B, H, Dq] (rope applied), w_uk and w_uv "
  "from sol.pack_experts ([H, Dk, Dq] and [H, Dv, Dl]), latent rows [B, L, Dk] -> out [B, H, Dv]; "
  "out = (softmax(scale * (q . w_uk) . latent^T) . latent[..., :Dl]) . w_uv per head. seqlen >= 0: "
  "only the first seqlen rows of latent (a cache buffer with spare rows) are the sequence's.");
}

}  // namespace solpy
