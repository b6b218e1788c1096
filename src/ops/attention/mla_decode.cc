// MLA decode over a paged latent cache: validation, the split-KV schedule, the two-phase
// driver (chunks, then left-to-right merges of sequences whose chunks ran on several threads),
// and the FP8 cache quantizer. The per-chunk arithmetic is in the kernels (mla_chunk_avx512.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/x86/avx512/mla_chunk_avx512.h"
#include "core/parallel.h"
#include "ops/common/thread_workspace.h"
#include "ops/common/validate.h"
#include "sol/dtype.h"
#include "sol/error.h"
#include "hw/kernel_select.h"
#include "sol/mla.h"
#include "sol/threads.h"

namespace sol {

namespace {

constexpr const char* kOp = "mla_decode_with_kvcache";
constexpr int64_t kChunkPages = kMlaChunkTokens / kMlaPageSize;
static_assert(kChunkPages == kernels::kMlaMaxChunkPages);

int64_t chunks_of(int64_t seqlen) { return std::max<int64_t>(1, (seqlen + kMlaChunkTokens - 1) / kMlaChunkTokens); }

// Cost of chunk k of a sequence: its pages plus one page's worth of fixed work (packing,
// merging), so that empty and short chunks are not free.
int64_t chunk_cost(int64_t seqlen, int64_t k) {
  const int64_t tokens = std::clamp<int64_t>(seqlen - k * kMlaChunkTokens, 0, kMlaChunkTokens);
  return (tokens + kMlaPageSize - 1) / kMlaPageSize + 1;
}

std::vector<int32_t> read_seqlens(const char* op, const Tensor& cache_seqlens) {
  check(cache_seqlens.ndim() == 1 && cache_seqlens.dtype() == DType::i32, op,
        "cache_seqlens must be a 1-d i32 tensor [B] but is ", describe_text(cache_seqlens));
  require_data(op, "cache_seqlens", cache_seqlens);
  std::vector<int32_t> s(size_t(cache_seqlens.shape(0)));
  for (int64_t b = 0; b < cache_seqlens.shape(0); ++b) {
    s[size_t(b)] = cache_seqlens.data_as<int32_t>()[b * cache_seqlens.stride(0)];
    check(s[size_t(b)] >= 0, op, "cache_seqlens[", b, "] = ", s[size_t(b)], " but must be >= 0");
  }
  return s;
}

bool is_fp8_cache(DType t) { return t == DType::f8e4m3 || t == DType::u8; }

struct Problem {
  int64_t batch = 0, s_q = 0, heads = 0, rows = 0;
  bool fp8 = false;
  int64_t token_bytes = 0, block_stride_bytes = 0;
  std::vector<int32_t> seqlens;
};

Problem validate(const Tensor& q, const Tensor& kv, const Tensor& block_table, const Tensor& cache_seqlens,
                 int head_dim_v, float softmax_scale, const MlaMetadata& meta, const Tensor& out,
                 const Tensor& lse) {
  const char* op = kOp;
  Problem p;
  check(q.ndim() == 4, op, "q must be 4-d [B, s_q, h_q, 576] but is ", describe_text(q));
  check(q.dtype() == DType::bf16, op, "q.dtype = ", dtype_name(q.dtype()), " but must be bf16");
  check(q.shape(3) == kMlaHeadDimQk, op, "q.shape[3] = ", q.shape(3), " but must be ", kMlaHeadDimQk,
        " (512 latent + 64 rope)");
  p.batch = q.shape(0);
  p.s_q = q.shape(1);
  p.heads = q.shape(2);
  check(p.batch == 0 || (p.s_q >= 1 && p.heads >= 1), op, "q.shape = ", shape_text(q),
        " but s_q and h_q must be >= 1");
  check(q.empty() || q.stride(3) == 1, op, "q rows must be dense (stride(3) = 1)");
  require_data(op, "q", q);
  p.rows = p.s_q * p.heads;

  check(kv.ndim() == 4, op, "kv_cache must be 4-d [num_blocks, 64, 1, 576 or 656] but is ", describe_text(kv));
  check(kv.shape(1) == kMlaPageSize, op, "kv_cache page size (shape[1]) = ", kv.shape(1), " but must be ",
        kMlaPageSize);
  check(kv.shape(2) == 1, op, "kv_cache.shape[2] (latent heads) = ", kv.shape(2), " but must be 1");
  p.fp8 = is_fp8_cache(kv.dtype());
  check(kv.dtype() == DType::bf16 || p.fp8, op, "kv_cache.dtype = ", dtype_name(kv.dtype()),
        " but must be bf16 (576 per token) or f8e4m3 / u8 (the 656-byte FP8 format)");
  const int64_t row = p.fp8 ? kMlaFp8TokenBytes : kMlaHeadDimQk;
  check(kv.shape(3) == row, op, "kv_cache.shape[3] = ", kv.shape(3), " but a ", dtype_name(kv.dtype()),
        " cache needs ", row, p.fp8 ? " (bytes per FP8 token)" : " (512 latent + 64 rope)");
  check(kv.empty() || (kv.stride(3) == 1 && kv.stride(1) == row), op,
        "kv_cache rows inside a page must be dense (strides [.., ", row, ", any, 1]) but strides are ",
        kv.stride(1), ", ", kv.stride(3));
  require_data(op, "kv_cache", kv);
  p.token_bytes = row * int64_t(dtype_size(kv.dtype()));
  p.block_stride_bytes = kv.stride(0) * int64_t(dtype_size(kv.dtype()));
  if (p.fp8) check(kv.empty() || (reinterpret_cast<uintptr_t>(kv.data()) % 4 == 0 && p.block_stride_bytes % 4 == 0),
                   op, "an FP8 kv_cache must be 4-byte aligned (its f32 scales are read in place)");

  check(block_table.ndim() == 2 && block_table.dtype() == DType::i32, op,
        "block_table must be a 2-d i32 tensor [B, max_blocks] but is ", describe_text(block_table));
  check(block_table.shape(0) == p.batch, op, "block_table.shape[0] = ", block_table.shape(0), " but q has B = ",
        p.batch);
  require_data(op, "block_table", block_table);
  check(cache_seqlens.ndim() == 1 && cache_seqlens.shape(0) == p.batch, op, "cache_seqlens.shape = ",
        shape_text(cache_seqlens), " but expected [", p.batch, "]");
  p.seqlens = read_seqlens(op, cache_seqlens);
  check(head_dim_v == kMlaHeadDimV, op, "head_dim_v = ", head_dim_v, " but must be ", kMlaHeadDimV);
  check(std::isfinite(softmax_scale), op, "softmax_scale = ", softmax_scale, " but must be finite");

  const int64_t num_blocks = kv.shape(0), max_blocks = block_table.shape(1);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t pages = (p.seqlens[size_t(b)] + kMlaPageSize - 1) / kMlaPageSize;
    check(pages <= max_blocks, op, "cache_seqlens[", b, "] = ", p.seqlens[size_t(b)], " needs ", pages,
          " pages but block_table has only ", max_blocks, " per sequence");
    for (int64_t j = 0; j < pages; ++j) {
      const int32_t id = block_table.data_as<int32_t>()[b * block_table.stride(0) + j * block_table.stride(1)];
      check(id >= 0 && id < num_blocks, op, "block_table[", b, "][", j, "] = ", id, " but kv_cache has ",
            num_blocks, " blocks");
    }
  }

  check(out.ndim() == 4 && out.shape(0) == p.batch && out.shape(1) == p.s_q && out.shape(2) == p.heads &&
            out.shape(3) == kMlaHeadDimV,
        op, "out.shape = ", shape_text(out), " but expected [", p.batch, ", ", p.s_q, ", ", p.heads, ", ",
        kMlaHeadDimV, "]");
  check(out.dtype() == DType::bf16, op, "out.dtype = ", dtype_name(out.dtype()), " but must be bf16");
  check(out.empty() || out.stride(3) == 1, op, "out rows must be dense (stride(3) = 1)");
  require_data(op, "out", out);
  check(lse.ndim() == 3 && lse.shape(0) == p.batch && lse.shape(1) == p.heads && lse.shape(2) == p.s_q, op,
        "lse.shape = ", shape_text(lse), " but expected [", p.batch, ", ", p.heads, ", ", p.s_q, "]");
  check(lse.dtype() == DType::f32, op, "lse.dtype = ", dtype_name(lse.dtype()), " but must be f32");
  require_data(op, "lse", lse);
  require_no_overlap(op, "out", out, "q", q);
  require_no_overlap(op, "out", out, "kv_cache", kv);
  require_no_overlap(op, "out", out, "lse", lse);
  require_no_overlap(op, "lse", lse, "q", q);
  require_no_overlap(op, "lse", lse, "kv_cache", kv);

  check(meta.heads == p.rows || p.batch == 0, op, "metadata was made for ", meta.heads,
        " heads but s_q * h_q = ", p.rows, " (call get_mla_metadata with s_q * h_q)");
  check(meta.seqlens == p.seqlens, op,
        "metadata was made for other cache_seqlens (call get_mla_metadata again when they change)");
  check(meta.threads >= 1 && meta.thread_chunks.size() == size_t(meta.threads) + 1 &&
            meta.batch_chunks.size() == size_t(p.batch) + 1,
        op, "metadata is malformed (threads = ", meta.threads, ")");
  return p;
}

int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }


// One partial result: o [rows][512], then row_max [rows], then row_sum [rows].
struct Partial {
  float* o;
  float* row_max;
  float* row_sum;
  static int64_t floats(int64_t rows) { return rows * (kMlaHeadDimV + 2); }
  static Partial at(float* base, int64_t rows) { return {base, base + rows * kMlaHeadDimV, base + rows * (kMlaHeadDimV + 1)}; }
};

void clear(const Partial& p, int64_t rows) {
  std::fill(p.o, p.o + rows * kMlaHeadDimV, 0.0f);
  std::fill(p.row_max, p.row_max + rows, -std::numeric_limits<float>::infinity());
  std::fill(p.row_sum, p.row_sum + rows, 0.0f);
}

}  // namespace

MlaMetadata get_mla_metadata(const Tensor& cache_seqlens, int heads, int threads) {
  const char* op = "get_mla_metadata";
  check(heads >= 1, op, "heads = ", heads, " but must be >= 1 (s_q * h_q)");
  check(threads >= 0, op, "threads = ", threads, " but must be >= 0 (0: all of Sol's threads)");
  MlaMetadata m;
  m.threads = threads == 0 ? num_threads() : threads;
  m.heads = heads;
  m.seqlens = read_seqlens(op, cache_seqlens);
  m.batch_chunks.assign(1, 0);
  int64_t total = 0;
  for (int32_t s : m.seqlens) {
    m.batch_chunks.push_back(m.batch_chunks.back() + chunks_of(s));
    for (int64_t k = 0; k < chunks_of(s); ++k) total += chunk_cost(s, k);
  }
  // Part t ends at the chunk boundary whose running cost is nearest to total * (t + 1) / threads.
  m.thread_chunks.assign(1, 0);
  int64_t chunk = 0, done = 0;
  size_t b = 0;
  const int64_t nchunks = m.batch_chunks.back();
  auto cost_of = [&](int64_t c) {
    while (m.batch_chunks[b + 1] <= c) ++b;
    return chunk_cost(m.seqlens[b], c - m.batch_chunks[b]);
  };
  for (int t = 0; t < m.threads; ++t) {
    const double target = double(total) * double(t + 1) / double(m.threads);
    while (chunk < nchunks) {
      const int64_t next = cost_of(chunk);
      if (double(done) + double(next) / 2 > target && t + 1 < m.threads) break;
      done += next;
      ++chunk;
    }
    m.thread_chunks.push_back(t + 1 == m.threads ? nchunks : chunk);
  }
  return m;
}

void mla_decode_with_kvcache(const Tensor& q, const Tensor& kv_cache, const Tensor& block_table,
                             const Tensor& cache_seqlens, int head_dim_v, float softmax_scale, bool causal,
                             const MlaMetadata& meta, const Tensor& out, const Tensor& lse) {
  const Problem p =
      validate(q, kv_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, meta, out, lse);
  if (p.batch == 0) return;
  const int64_t rows = p.rows;
  const kernels::MlaKernels& k = select_kernels(kernels::mla_kernel_table(), "mla_decode");

  // Which part holds each sequence's chunk 0, and where that part ends.
  std::vector<int> head_part(size_t(p.batch));
  for (int64_t b = 0, t = 0; b < p.batch; ++b) {
    while (meta.thread_chunks[size_t(t) + 1] <= meta.batch_chunks[size_t(b)]) ++t;
    head_part[size_t(b)] = int(t);
  }
  // Sequences whose chunks span parts keep one partial per chunk in a shared workspace (the
  // head part's running merge sits in the slot of chunk 0); all others never leave their thread.
  std::vector<int64_t> slot_of_batch(size_t(p.batch), -1);
  std::vector<int64_t> split;
  int64_t slots = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    if (meta.batch_chunks[size_t(b) + 1] > meta.thread_chunks[size_t(head_part[size_t(b)]) + 1]) {
      slot_of_batch[size_t(b)] = slots;
      slots += meta.batch_chunks[size_t(b) + 1] - meta.batch_chunks[size_t(b)];
      split.push_back(b);
    }
  }

  const int workers = std::max(1, std::min(meta.threads, num_threads()));
  const int64_t partial_bytes = align64(Partial::floats(rows) * 4);
  const int64_t per_worker = align64(kernels::mla_scratch_bytes(rows)) + 2 * partial_bytes;
  char* base = thread_workspace(size_t(per_worker * workers + partial_bytes * slots));
  float* slot_base = reinterpret_cast<float*>(base + per_worker * workers);
  auto slot = [&](int64_t b, int64_t c) {
    return Partial::at(slot_base + (slot_of_batch[size_t(b)] + c - meta.batch_chunks[size_t(b)]) *
                                       (partial_bytes / 4), rows);
  };

  const uint8_t* kv = static_cast<const uint8_t*>(kv_cache.data());
  const int64_t bt0 = block_table.stride(0), bt1 = block_table.stride(1);
  const int32_t* bt = block_table.data_as<const int32_t>();
  const int64_t lse_h = lse.stride(1), lse_s = lse.stride(2);

  auto page_at = [&](int64_t b, int64_t j) { return kv + int64_t(bt[b * bt0 + j * bt1]) * p.block_stride_bytes; };

  auto finish = [&](int64_t b, const Partial& r, int64_t r0, int64_t r1) {
    kernels::MlaFinish f;
    f.s_q = int(p.s_q);
    f.heads = int(p.heads);
    f.o = r.o;
    f.row_max = r.row_max;
    f.row_sum = r.row_sum;
    f.out = out.data_as<uint16_t>() + b * out.stride(0);
    f.out_stride_s = out.stride(1);
    f.out_stride_h = out.stride(2);
    f.lse = lse.data_as<float>() + b * lse.stride(0);
    f.lse_stride_h = lse_h;
    f.lse_stride_s = lse_s;
    f.row_begin = r0;
    f.row_end = r1;
    k.finish(f);
  };

  auto run_part = [&](int part, int worker) {
    char* mine = base + per_worker * worker;
    void* scratch = mine;
    const Partial run_state = Partial::at(reinterpret_cast<float*>(mine + align64(kernels::mla_scratch_bytes(rows))), rows);
    const Partial chunk_state = Partial::at(run_state.o + partial_bytes / 4, rows);
    const int64_t c0 = meta.thread_chunks[size_t(part)], c1 = meta.thread_chunks[size_t(part) + 1];
    int64_t b = std::upper_bound(meta.batch_chunks.begin(), meta.batch_chunks.end(), c0) - meta.batch_chunks.begin() - 1;
    int64_t packed_batch = -1;
    for (int64_t c = c0; c < c1; ++c) {
      while (meta.batch_chunks[size_t(b) + 1] <= c) ++b;
      const int64_t kc = c - meta.batch_chunks[size_t(b)], seqlen = p.seqlens[size_t(b)];
      const bool head_here = meta.batch_chunks[size_t(b)] >= c0;
      const bool whole_here = head_here && meta.batch_chunks[size_t(b) + 1] <= c1;
      const Partial state = whole_here ? run_state : slot(b, meta.batch_chunks[size_t(b)]);
      const Partial target = !head_here ? slot(b, c) : kc == 0 ? state : chunk_state;

      kernels::MlaChunk ch;
      ch.q = q.data_as<const uint16_t>() + b * q.stride(0);
      ch.q_stride_s = q.stride(1);
      ch.q_stride_h = q.stride(2);
      ch.s_q = int(p.s_q);
      ch.heads = int(p.heads);
      ch.scale = softmax_scale;
      ch.format = p.fp8 ? kernels::MlaCacheFormat::fp8 : kernels::MlaCacheFormat::bf16;
      ch.pos0 = kc * kMlaChunkTokens;
      ch.seqlen = seqlen;
      ch.causal = causal;
      const int64_t tokens = std::clamp<int64_t>(seqlen - ch.pos0, 0, kMlaChunkTokens);
      ch.npages = int((tokens + kMlaPageSize - 1) / kMlaPageSize);
      for (int j = 0; j < ch.npages; ++j) ch.pages[j] = page_at(b, kc * kChunkPages + j);
      if (c + 1 < c1) {
        // The next chunk is chunk kc + 1 of b, or chunk 0 of the next sequence that has one.
        const int64_t nb = c + 1 < meta.batch_chunks[size_t(b) + 1] ? b : b + 1;
        const int64_t npage = nb == b ? (kc + 1) * kChunkPages : 0;
        if (int64_t(p.seqlens[size_t(nb)]) > npage * kMlaPageSize) ch.next_page = page_at(nb, npage);
      }
      ch.o = target.o;
      ch.row_max = target.row_max;
      ch.row_sum = target.row_sum;
      ch.scratch = scratch;
      ch.q_packed = packed_batch == b;
      if (ch.npages == 0) {
        clear(target, rows);
      } else {
        k.chunk(ch);
        packed_batch = b;
      }
      if (head_here && kc > 0) k.merge(rows, state.o, state.row_max, state.row_sum, target.o, target.row_max,
                                       target.row_sum);
      if (whole_here && c + 1 == meta.batch_chunks[size_t(b) + 1]) finish(b, state, 0, rows);
    }
  };

  if (workers == 1) {
    for (int part = 0; part < meta.threads; ++part) run_part(part, 0);
  } else {
#pragma omp parallel num_threads(workers)
    {
      const int w = omp_get_thread_num(), nw = omp_get_num_threads();
      for (int part = w; part < meta.threads; part += nw) run_part(part, w);
    }
  }

  // Sequences split across parts: the head part's merged state, then every later chunk, in order.
  if (split.empty()) return;
  const int64_t row_blocks = (rows + 15) / 16;
  parallel_ranges(int64_t(split.size()) * row_blocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = split[size_t(i / row_blocks)];
      const int64_t r0 = (i % row_blocks) * 16, r1 = std::min(rows, r0 + 16);
      const Partial state = slot(b, meta.batch_chunks[size_t(b)]);
      const int64_t head_end = meta.thread_chunks[size_t(head_part[size_t(b)]) + 1];
      for (int64_t c = head_end; c < meta.batch_chunks[size_t(b) + 1]; ++c) {
        const Partial later = slot(b, c);
        k.merge(r1 - r0, state.o + r0 * kMlaHeadDimV, state.row_max + r0, state.row_sum + r0,
                later.o + r0 * kMlaHeadDimV, later.row_max + r0, later.row_sum + r0);
      }
      finish(b, state, r0, r1);
    }
  });
}

void mla_quantize_kv_cache_fp8(const Tensor& src, const Tensor& dst) {
  const char* op = "mla_quantize_kv_cache_fp8";
  check(src.ndim() == 4 && src.dtype() == DType::bf16 && src.shape(1) == kMlaPageSize && src.shape(2) == 1 &&
            src.shape(3) == kMlaHeadDimQk,
        op, "kv_bf16 must be [num_blocks, 64, 1, 576] bf16 but is ", describe_text(src));
  check(dst.ndim() == 4 && is_fp8_cache(dst.dtype()) && dst.shape(0) == src.shape(0) &&
            dst.shape(1) == kMlaPageSize && dst.shape(2) == 1 && dst.shape(3) == kMlaFp8TokenBytes,
        op, "kv_fp8 must be [", src.shape(0), ", 64, 1, 656] f8e4m3 or u8 but is ", describe_text(dst));
  check(src.is_contiguous() && dst.is_contiguous(), op, "both caches must be contiguous");
  check(reinterpret_cast<uintptr_t>(dst.data()) % 4 == 0, op, "kv_fp8 must be 4-byte aligned");
  require_no_overlap(op, "kv_bf16", src, "kv_fp8", dst);
  const int64_t tokens = src.shape(0) * kMlaPageSize;
  parallel_ranges(tokens, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint16_t* in = src.data_as<const uint16_t>() + t * kMlaHeadDimQk;
      uint8_t* o = dst.data_as<uint8_t>() + t * kMlaFp8TokenBytes;
      for (int g = 0; g < kMlaHeadDimV / kMlaFp8GroupSize; ++g) {
        float amax = 0;
        for (int d = g * kMlaFp8GroupSize; d < (g + 1) * kMlaFp8GroupSize; ++d) {
          const float x = std::fabs(bf16_to_f32(in[d]));
          if (std::isfinite(x)) amax = std::max(amax, x);
        }
        // 2^ceil(log2(amax / 448)): frexp gives amax / 448 = f * 2^e with f in [0.5, 1).
        float scale = 1.0f;
        if (amax > 0) {
          int e = 0;
          const float f = std::frexp(amax / kE4M3Max, &e);
          scale = std::ldexp(1.0f, f == 0.5f ? e - 1 : e);
        }
        for (int d = g * kMlaFp8GroupSize; d < (g + 1) * kMlaFp8GroupSize; ++d)
          o[d] = f32_to_e4m3(bf16_to_f32(in[d]) / scale);
        std::memcpy(o + kMlaFp8ScaleOffset + 4 * g, &scale, 4);
      }
      std::memcpy(o + kMlaFp8RopeOffset, in + kMlaHeadDimV, 2 * kMlaRopeDim);
    }
  });
}

}  // namespace sol
