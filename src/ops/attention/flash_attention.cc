// flash_attention: FlashAttention-2's forward on CPU. K and V of each (sequence, kv head) are
// packed once into panels; each task then owns a block of 192 query rows of one head and walks
// the 128-key blocks it can see with an online softmax, so the score matrix never exists beyond
// one 12 x 128 tile.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/attention/blocked.h"
#include "ops/attention/packing.h"
#include "ops/attention/problem.h"
#include "sol/attention.h"
#include "sol/tensor.h"

namespace sol {

using namespace attention_detail;

namespace {

struct Forward {
  Forward(const Problem& problem, const Operands& operands)
      : p(problem), rows(operands), kern(tile_kernels(problem.bf16)) {}
  const Problem& p;
  const Operands& rows;
  TileKernels kern;
  char* work = nullptr;
  std::vector<int64_t> kv_offset;  // elements, per (sequence, kv head): T(K) then I(V)
  int64_t es = 0, dv_pad = 0;

  int64_t k_elems(const Sequence& s) const { return transposed_elems(s.skv, p.dqk); }
  int64_t v_elems(const Sequence& s) const { return interleaved_elems(s.skv, p.dv); }

  void pack(int64_t seq, int64_t kvh) const {
    const Sequence& s = p.seqs[size_t(seq)];
    char* dst = work + kv_offset[size_t(seq * p.hkv + kvh)] * es;
    if (s.skv == 0) return;
    pack_transposed(*kern.set, rows.k.row(seq, 0, kvh), rows.k.token_stride, p.dtype, s.skv, p.dqk, dst);
    pack_interleaved(*kern.set, rows.v.row(seq, 0, kvh), rows.v.token_stride, p.dtype, s.skv, p.dv, dst + k_elems(s) * es);
  }

  struct Scratch {
    std::vector<float> q, s, p, o, row_max, row_sum, alpha;
    BlockRows ranges;
    Scratch(int64_t dqk, int64_t dv_pad)
        : q(size_t(kQueryBlock * dqk)), s(size_t(kernels::kAttnTileRows * kKeyBlock)),
          p(size_t(kernels::kAttnTileRows * kKeyBlock)), o(size_t(kQueryBlock * dv_pad)), row_max(kQueryBlock),
          row_sum(kQueryBlock), alpha(kQueryBlock), ranges(kQueryBlock) {}
  };

  void block(int64_t seq, int64_t h, int64_t r0, Scratch& w) const {
    const Sequence& s = p.seqs[size_t(seq)];
    const int64_t m = std::min(kQueryBlock, s.sq - r0), kvh = h / p.group;
    BlockRows& br = w.ranges;
    br.see(p, s, true, r0, m);
    char* q_rows = reinterpret_cast<char*>(w.q.data());
    gather_a_rows(kern, rows.q.row(seq, r0, h), rows.q.token_stride * es, m, p.dqk, q_rows);
    std::fill(w.o.begin(), w.o.begin() + m * dv_pad, 0.0f);
    std::fill(w.row_max.begin(), w.row_max.end(), -std::numeric_limits<float>::infinity());
    std::fill(w.row_sum.begin(), w.row_sum.end(), 0.0f);
    const char* kp = work + kv_offset[size_t(seq * p.hkv + kvh)] * es;
    const char* vp = kp + k_elems(s) * es;
    const int64_t k_panel = p.dqk * 32, v_panel = round_up(s.skv, 32) * 32;
    const int64_t qk_steps = p.bf16 ? p.dqk / 2 : p.dqk;
    // Per tile, only the 32-key panels of each key block that some row of the tile sees.
    br.for_each_tile(m, kKeyBlock, kKeyBlock, [&](int64_t t0, int mt, int64_t col0, int64_t col1) {
      const int64_t ncols = col1 - col0;
      for (int64_t c = col0; c < col1; c += 32)
        kern.gemm(gemm_tile(mt, kernels::kAttnPanel, qk_steps, q_rows + t0 * p.dqk * kern.a_es, p.dqk,
                            panel_at(kp, p.dtype, k_panel, c, 0), w.s.data() + (c - col0), kKeyBlock, false));
      kernels::AttnSoftmaxRows sm;
      sm.m = mt;
      sm.n = int(ncols);
      sm.s = w.s.data();
      sm.lds = kKeyBlock;
      sm.lo = br.rel_lo;
      sm.hi = br.rel_hi;
      sm.scale = p.scale;
      sm.row_max = w.row_max.data() + t0;
      sm.row_sum = w.row_sum.data() + t0;
      sm.alpha = w.alpha.data();
      sm.p = w.p.data();
      sm.ldp = kKeyBlock;
      sm.p_bf16 = p.bf16;
      sm.p_widened = kern.widened;
      kern.softmax(sm);
      accumulate_panels(kern, p.dtype, mt, p.dv, w.p.data(), kKeyBlock, vp, v_panel, col0, ncols,
                        w.o.data() + t0 * dv_pad, dv_pad, w.alpha.data());
    });
    for (int64_t i = 0; i < m; ++i) {
      const bool empty = br.lo[size_t(i)] >= br.hi[size_t(i)];
      const float sum = w.row_sum[size_t(i)];
      w.alpha[size_t(i)] = empty ? 0.0f : 1.0f / sum;  // rows that see nothing are all zeros
      if (rows.has_lse)
        *reinterpret_cast<float*>(rows.lse.row(seq, r0 + i, h)) =
            empty ? -std::numeric_limits<float>::infinity() : w.row_max[size_t(i)] + std::log(sum);
    }
    store_rows(kern, p.bf16, w.o.data(), dv_pad, m, p.dv, w.alpha.data(), 1.0f, rows.o.row(seq, r0, h),
               rows.o.token_stride);
  }
};

}  // namespace

void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                     const AttentionOptions& opt) {
  Operands rows;
  const Problem p = make_problem("flash_attention", q, k, v, o, lse, false, opt, rows);
  Forward f(p, rows);
  f.es = int64_t(dtype_size(p.dtype));
  f.dv_pad = round_up(p.dv, 32);
  const int64_t nseq = int64_t(p.seqs.size());

  f.kv_offset.assign(size_t(nseq * p.hkv) + 1, 0);
  std::vector<double> pack_cost;
  for (int64_t s = 0; s < nseq; ++s)
    for (int64_t h = 0; h < p.hkv; ++h) {
      const Sequence& sq = p.seqs[size_t(s)];
      const size_t i = size_t(s * p.hkv + h);
      f.kv_offset[i + 1] = f.kv_offset[i] + f.k_elems(sq) + f.v_elems(sq);
      pack_cost.push_back(double(sq.skv) * double(p.dqk + p.dv) + 1);
    }
  f.work = thread_workspace(size_t(std::max<int64_t>(f.kv_offset.back(), 1) * f.es));
  run_balanced(pack_cost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f.pack(i / p.hkv, i % p.hkv);
  });

  struct Task {
    int64_t seq, head, r0;
  };
  std::vector<Task> tasks;
  std::vector<double> cost;
  for (int64_t s = 0; s < nseq; ++s) {
    const Sequence& sq = p.seqs[size_t(s)];
    for (int64_t r0 = 0; r0 < sq.sq; r0 += kQueryBlock) {
      const double pairs = p.pairs_of_rows(sq, true, r0, std::min(sq.sq, r0 + kQueryBlock));
      for (int64_t h = 0; h < p.hq; ++h) {
        tasks.push_back({s, h, r0});
        cost.push_back(pairs * double(p.dqk + p.dv) + double(kQueryBlock * p.dv));
      }
    }
  }
  run_balanced(cost, [&](int64_t b, int64_t e) {
    Forward::Scratch w(p.dqk, f.dv_pad);
    for (int64_t i = b; i < e; ++i) f.block(tasks[size_t(i)].seq, tasks[size_t(i)].head, tasks[size_t(i)].r0, w);
  });
}

}  // namespace sol
