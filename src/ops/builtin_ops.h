#pragma once
// One line per op family: each family's register function adds its ops to the registry.
namespace sol {
void register_copy_ops();
void register_cast_ops();
void register_gemm_ops();
void register_quant_ops();
void register_norm_ops();
void register_layernorm_ops();
void register_activation_ops();
void register_gelu_ops();
void register_softmax_ops();
void register_routing_ops();
void register_rope_ops();
void register_embedding_ops();
void register_moe_permute_ops();
void register_sampling_ops();
void register_attention_ops();
void register_mla_ops();
void register_mla_absorbed_ops();
void register_dsl_gemm_ops();  // src/compiler/bench: the tile DSL's GEMM
void register_engram_ops();

inline void register_builtin_ops() {
  register_copy_ops();
  register_cast_ops();
  register_gemm_ops();
  register_quant_ops();
  register_norm_ops();
  register_layernorm_ops();
  register_activation_ops();
  register_gelu_ops();
  register_softmax_ops();
  register_routing_ops();
  register_rope_ops();
  register_embedding_ops();
  register_moe_permute_ops();
  register_sampling_ops();
  register_attention_ops();
  register_mla_ops();
  register_mla_absorbed_ops();
  register_dsl_gemm_ops();
  register_engram_ops();
}
}  // namespace sol
