#pragma once
// MLA decode over a paged latent cache, with FlashMLA's semantics (DeepSeek-V2/V3 attention with
// the absorbed up-projections):
//
//   q            [B, s_q, h_q, 576] bf16   576 = 512 latent ("nope") + 64 RoPE dims
//   kv_cache     [num_blocks, 64, 1, 576] bf16, or the FP8 format below ([.., 656] f8e4m3 / u8)
//   block_table  [B, max_blocks] i32       page j of sequence b is kv_cache[block_table[b][j]]
//   cache_seqlens [B] i32                  cache positions 0 .. seqlen-1 of sequence b
//   out          [B, s_q, h_q, 512] bf16   written
//   lse          [B, h_q, s_q] f32         written: natural log of the softmax denominator
//
// Each cached token is one latent row; it is read once and serves as the key (all 576 dims) and
// as the value (its first 512 dims): out = softmax(scale * q k^T) v with v = k[:, :512].
// Page size is 64 tokens; the cache's rows inside a page must be dense (stride(1) = row length);
// pages may sit anywhere in kv_cache and in any order.
//
// causal: query i of s_q (the i-th of s_q new tokens, whose keys are the last s_q cache rows)
// sees the cache positions < seqlen - (s_q - 1 - i) — FlashAttention's bottom-right alignment.
// A query row that sees no position (seqlen 0, or causal with seqlen < s_q) gets out = 0 and
// lse = -inf. NaN in q or in a visible cache row makes the rows that see it NaN; rows that do
// not see a position never read it (so garbage beyond seqlen in a page is harmless).
//
// Work split and determinism: the cache positions of each sequence are cut into chunks of
// kMlaChunkTokens (fixed, independent of the thread count). Each chunk's partial result
// (unnormalised output, row max, row sum) is computed on its own and the chunks of a sequence
// are merged strictly left to right (LSE merge). The metadata only decides which thread computes
// which chunks, so the output is bit for bit the same for any thread count (for one ISA path).
#include <cstdint>
#include <vector>

#include "sol/tensor.h"

namespace sol {

inline constexpr int kMlaPageSize = 64;
inline constexpr int kMlaHeadDimQk = 576;  // latent 512 + RoPE 64
inline constexpr int kMlaHeadDimV = 512;
inline constexpr int kMlaRopeDim = 64;
inline constexpr int kMlaChunkTokens = 256;  // 4 pages: the unit of split-KV work

// FP8 cache format (FlashMLA's): 656 bytes per token, in this order
//   bytes [0, 512)    512 e4m3 (OCP e4m3fn) codes of the latent dims 0..511
//   bytes [512, 528)  4 f32 scales, scale g applies to latent dims [128 g, 128 g + 128)
//   bytes [528, 656)  64 bf16 RoPE values (dims 512..575), not quantized
// value(d) = e4m3(code[d]) * scale[d / 128] for d < 512. The tensor is [num_blocks, 64, 1, 656]
// of dtype f8e4m3 (as FlashMLA views it) or u8; q stays bf16.
inline constexpr int kMlaFp8TokenBytes = 656;
inline constexpr int kMlaFp8ScaleOffset = 512;
inline constexpr int kMlaFp8RopeOffset = 528;
inline constexpr int kMlaFp8GroupSize = 128;

// Which thread computes which chunks, for one set of cache_seqlens.
//   batch_chunks  [B + 1]: sequence b owns the global chunk ids [batch_chunks[b], batch_chunks[b+1]);
//                 chunk k of b covers cache positions [k * kMlaChunkTokens, (k+1) * kMlaChunkTokens)
//                 ∩ [0, seqlen); a sequence of length 0 still has one (empty) chunk
//   thread_chunks [threads + 1]: part t computes the global chunks [thread_chunks[t], thread_chunks[t+1]),
//                 contiguous and balanced by cost (pages in the chunk + one page of fixed cost each)
// The op runs the parts on min(threads, num_threads()) OpenMP threads; any split gives the same bits.
struct MlaMetadata {
  int threads = 0;
  int heads = 0;                 // s_q * h_q the schedule was made for (checked by the op)
  std::vector<int32_t> seqlens;  // the cache_seqlens it was made for (checked by the op)
  std::vector<int64_t> batch_chunks;
  std::vector<int64_t> thread_chunks;
};

// heads = s_q * h_q (FlashMLA's num_heads_per_head_k); threads = 0 means num_threads().
MlaMetadata get_mla_metadata(const Tensor& cache_seqlens, int heads, int threads = 0);

// softmax_scale: usually 1/sqrt(192) for DeepSeek (any finite value). head_dim_v must be 512.
// The metadata must come from get_mla_metadata with the same cache_seqlens and s_q * h_q.
// Scratch memory is kept per calling thread between calls (grown on demand, never shrunk).
void mla_decode_with_kvcache(const Tensor& q, const Tensor& kv_cache, const Tensor& block_table,
                             const Tensor& cache_seqlens, int head_dim_v, float softmax_scale, bool causal,
                             const MlaMetadata& metadata, const Tensor& out, const Tensor& lse);

// bf16 cache [N, 64, 1, 576] -> FP8 cache [N, 64, 1, 656] (f8e4m3 or u8), token by token: each
// 128-wide group gets the power-of-two scale 2^ceil(log2(amax / 448)) (amax 0 -> scale 1), so
// code * scale reproduces every value the e4m3 grid can hold exactly; NaN stays NaN, ±inf
// saturates to ±448 * scale. The RoPE part is copied bit for bit.
void mla_quantize_kv_cache_fp8(const Tensor& kv_bf16, const Tensor& kv_fp8);

}  // namespace sol
