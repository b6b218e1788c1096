// The public entry points of sol::cp: validate once, then run the chosen variant.
#include <string>

#include "cp/variants.h"
#include "sol/error.h"

namespace sol::cp {

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::ring: return "ring";
    case Variant::all_gather_kv: return "all_gather_kv";
    case Variant::ulysses: return "ulysses";
  }
  return "?";
}

Variant parse_variant(const std::string& name) {
  for (Variant v : {Variant::ring, Variant::all_gather_kv, Variant::ulysses})
    if (name == variant_name(v)) return v;
  throw Error("cp: variant '" + name + "' is not ring, all_gather_kv or ulysses");
}

void ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                    const comm::Group& group, const RingAttentionOptions& opt) {
  const detail::ShardDims dims = detail::check_shards("ring_attention", q, k, v, o, lse, false);
  const detail::Forward t{q, k, v, o, lse};
  switch (opt.variant) {
    case Variant::ring:
      if (opt.kv_window) return detail::ring_forward_in_place(t, dims, group, opt);
      return detail::ring_forward(t, dims, group, opt);
    case Variant::all_gather_kv: return detail::all_gather_forward(t, dims, group, opt);
    case Variant::ulysses: return detail::ulysses_forward(t, dims, group, opt);
  }
  throw Error("ring_attention: unknown variant " + std::to_string(int(opt.variant)));
}

void ring_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const comm::Group& group, const RingAttentionOptions& opt) {
  const char* op = "ring_attention_backward";
  const detail::ShardDims dims = detail::check_shards(op, q, k, v, o, lse, true);
  detail::check_grads(op, q, k, v, o, d_o, dq, dk, dv);
  const detail::Backward t{q, k, v, o, lse, d_o, dq, dk, dv};
  switch (opt.variant) {
    case Variant::ring:
      if (opt.kv_window) return detail::ring_backward_in_place(t, dims, group, opt);
      return detail::ring_backward(t, dims, group, opt);
    case Variant::all_gather_kv: return detail::all_gather_backward(t, dims, group, opt);
    case Variant::ulysses: return detail::ulysses_backward(t, dims, group, opt);
  }
  throw Error("ring_attention_backward: unknown variant " + std::to_string(int(opt.variant)));
}

}  // namespace sol::cp
