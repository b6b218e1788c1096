// flash_attention_backward: FlashAttention-2's backward on CPU, deterministic.
//
// P is recomputed from the saved lse, never stored. Two kinds of task, each the only writer of
// its outputs, run in one cost-balanced pass:
//   key block (dk, dv): 128 keys of one kv head; walks the group's q heads in order and their
//     queries in chunks of 128, with transposed tiles (rows = keys, columns = queries):
//       S^T = K Q^T,  dP^T = V dO^T,  P^T, dS^T,  dV += P^T dO,  dK += dS^T Q
//   query block (dq): 192 rows of one q head; walks the key blocks in order, as the forward:
//       S = Q K^T,  dP = dO V^T,  dS,  dQ += dS K
// so S and dP are computed twice (7 products where FlashAttention-2 does 5 and adds dq from many
// blocks with atomics): the price of sums whose order never depends on the thread count.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/attention/blocked.h"
#include "ops/attention/packing.h"
#include "ops/attention/problem.h"
#include "ops/common/validate.h"
#include "sol/attention.h"
#include "sol/error.h"
#include "sol/tensor.h"

namespace sol {

using namespace attention_detail;

namespace {

struct Backward {
  Backward(const Problem& problem, const Operands& operands)
      : p(problem), rows(operands), kern(tile_kernels(problem.bf16)) {}
  const Problem& p;
  const Operands& rows;
  HeadRows d_o, dq, dk, dv;
  TileKernels kern;
  int64_t es = 0, dqk_pad = 0, dv_pad = 0, qk_steps = 0, v_steps = 0;
  char* work = nullptr;
  // Per (sequence, kv head): T(K), T(V), I(K). Per (sequence, q head): T(Q), I(Q), T(dO), I(dO).
  std::vector<int64_t> kv_offset, q_offset;
  std::vector<float> lse_delta;       // per (sequence, q head): lse then delta, each round_up(sq, 32)
  std::vector<int64_t> stat_offset;

  int64_t tk_elems(const Sequence& s) const { return transposed_elems(s.skv, p.dqk); }
  int64_t tv_elems(const Sequence& s) const { return transposed_elems(s.skv, p.dv); }
  int64_t ik_elems(const Sequence& s) const { return interleaved_elems(s.skv, p.dqk); }
  int64_t tq_elems(const Sequence& s) const { return transposed_elems(s.sq, p.dqk); }
  int64_t iq_elems(const Sequence& s) const { return interleaved_elems(s.sq, p.dqk); }
  int64_t tdo_elems(const Sequence& s) const { return transposed_elems(s.sq, p.dv); }
  int64_t ido_elems(const Sequence& s) const { return interleaved_elems(s.sq, p.dv); }

  char* kv_base(int64_t seq, int64_t kvh) const { return work + kv_offset[size_t(seq * p.hkv + kvh)] * es; }
  char* q_base(int64_t seq, int64_t h) const { return work + q_offset[size_t(seq * p.hq + h)] * es; }
  float* lse_of(int64_t seq, int64_t h) { return lse_delta.data() + stat_offset[size_t(seq * p.hq + h)]; }
  float* delta_of(int64_t seq, int64_t h) {
    return lse_of(seq, h) + round_up(p.seqs[size_t(seq)].sq, 32);
  }

  void pack_kv(int64_t seq, int64_t kvh) const {
    const Sequence& s = p.seqs[size_t(seq)];
    if (s.skv == 0) return;
    char* at = kv_base(seq, kvh);
    pack_transposed(*kern.set, rows.k.row(seq, 0, kvh), rows.k.token_stride, p.dtype, s.skv, p.dqk, at);
    at += tk_elems(s) * es;
    pack_transposed(*kern.set, rows.v.row(seq, 0, kvh), rows.v.token_stride, p.dtype, s.skv, p.dv, at);
    at += tv_elems(s) * es;
    pack_interleaved(*kern.set, rows.k.row(seq, 0, kvh), rows.k.token_stride, p.dtype, s.skv, p.dqk, at);
  }

  // Packs q and dO of one head and gathers lse and delta_i = dO_i . O_i (f32, in order).
  void pack_q(int64_t seq, int64_t h) {
    const Sequence& s = p.seqs[size_t(seq)];
    if (s.sq == 0) return;
    char* at = q_base(seq, h);
    pack_transposed(*kern.set, rows.q.row(seq, 0, h), rows.q.token_stride, p.dtype, s.sq, p.dqk, at);
    at += tq_elems(s) * es;
    pack_interleaved(*kern.set, rows.q.row(seq, 0, h), rows.q.token_stride, p.dtype, s.sq, p.dqk, at);
    at += iq_elems(s) * es;
    pack_transposed(*kern.set, d_o.row(seq, 0, h), d_o.token_stride, p.dtype, s.sq, p.dv, at);
    at += tdo_elems(s) * es;
    pack_interleaved(*kern.set, d_o.row(seq, 0, h), d_o.token_stride, p.dtype, s.sq, p.dv, at);
    float* lse = lse_of(seq, h);
    float* delta = delta_of(seq, h);
    for (int64_t i = 0; i < s.sq; ++i) {
      lse[i] = *reinterpret_cast<const float*>(rows.lse.row(seq, i, h));
      const char* o = rows.o.row(seq, i, h);
      const char* g = d_o.row(seq, i, h);
      float sum = 0;
      for (int64_t d = 0; d < p.dv; ++d) sum += load(o, d) * load(g, d);
      delta[i] = sum;
    }
  }

  float load(const char* row, int64_t d) const {
    if (!p.bf16) return reinterpret_cast<const float*>(row)[d];
    const uint32_t bits = uint32_t(reinterpret_cast<const uint16_t*>(row)[d]) << 16;  // exact widening
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
  }
  void store(const float* acc, int64_t lda, int64_t m, int64_t n, float scale, char* out, int64_t ldo) const {
    store_rows(kern, p.bf16, acc, lda, m, n, nullptr, scale, out, ldo);
  }

  struct Scratch {
    std::vector<float> s, dp, p, ds, acc_a, acc_b, rows_a, rows_b;
    BlockRows ranges{std::max(kKeyBlock, kQueryBlock)};
    Scratch(int64_t dqk_pad, int64_t dv_pad) {
      const size_t tile = size_t(kernels::kAttnTileRows * std::max(kKeyBlock, kQueryChunk));
      s.resize(tile);
      dp.resize(tile);
      p.resize(tile);
      ds.resize(tile);
      const int64_t rows = std::max(kKeyBlock, kQueryBlock);
      acc_a.resize(size_t(rows * dqk_pad));
      acc_b.resize(size_t(rows * dv_pad));
      rows_a.resize(size_t(rows * dqk_pad));
      rows_b.resize(size_t(rows * dv_pad));
    }
  };

  // Both passes recompute, for one tile of mt rows against columns [col0, col1) (the span
  // w.ranges.tile_columns gave, which set the rows' relative ranges): S from the rows `s_rows` and
  // the transposed panels `s_panels`, dP from `dp_rows` and `dp_panels` (32-column panels), then
  // the row kernel turns them into dS (and P when `p_out` is given). ld is the scratch row stride;
  // lse / delta run along the columns when per_column, else along the rows.
  void recompute_tile(Scratch& w, int mt, const char* s_rows, const char* s_panels, const char* dp_rows,
                      const char* dp_panels, int64_t col0, int64_t col1, int64_t ld, const float* lse,
                      const float* delta, bool per_column, void* p_out) {
    const int64_t ncols = col1 - col0;
    for (int64_t c = col0; c < col1; c += 32) {
      kern.gemm(gemm_tile(mt, 32, qk_steps, s_rows, p.dqk, panel_at(s_panels, p.dtype, p.dqk * 32, c, 0),
                          w.s.data() + (c - col0), ld, false));
      kern.gemm(gemm_tile(mt, 32, v_steps, dp_rows, p.dv, panel_at(dp_panels, p.dtype, p.dv * 32, c, 0),
                          w.dp.data() + (c - col0), ld, false));
    }
    kernels::AttnGradRows gr;
    gr.m = mt;
    gr.n = int(ncols);
    gr.s = w.s.data();
    gr.dp = w.dp.data();
    gr.ld = ld;
    gr.lo = w.ranges.rel_lo;
    gr.hi = w.ranges.rel_hi;
    gr.scale = p.scale;
    gr.lse = lse;
    gr.delta = delta;
    gr.per_column = per_column;
    gr.p = p_out;
    gr.ds = w.ds.data();
    gr.ldo = ld;
    gr.out_bf16 = p.bf16;
    gr.out_widened = kern.widened;
    kern.grad(gr);
  }

  // dk and dv of keys [k0, k0 + kKeyBlock) of kv head kvh.
  void key_block(int64_t seq, int64_t kvh, int64_t k0, Scratch& w) {
    const Sequence& s = p.seqs[size_t(seq)];
    const int64_t mk = std::min(kKeyBlock, s.skv - k0);
    float* dk_acc = w.acc_a.data();
    float* dv_acc = w.acc_b.data();
    std::fill(dk_acc, dk_acc + mk * dqk_pad, 0.0f);
    std::fill(dv_acc, dv_acc + mk * dv_pad, 0.0f);
    BlockRows& br = w.ranges;
    br.see(p, s, false, k0, mk);
    const int64_t q_panels = round_up(s.sq, 32) * 32;
    char* k_rows = reinterpret_cast<char*>(w.rows_a.data());
    char* v_rows = reinterpret_cast<char*>(w.rows_b.data());
    gather_a_rows(kern, rows.k.row(seq, k0, kvh), rows.k.token_stride * es, mk, p.dqk, k_rows);
    gather_a_rows(kern, rows.v.row(seq, k0, kvh), rows.v.token_stride * es, mk, p.dv, v_rows);
    for (int64_t g = 0; g < p.group; ++g) {
      const int64_t h = kvh * p.group + g;
      const char* tq = q_base(seq, h);
      const char* iq = tq + tq_elems(s) * es;
      const char* tdo = iq + iq_elems(s) * es;
      const char* ido = tdo + tdo_elems(s) * es;
      const float* lse = lse_of(seq, h);
      const float* delta = delta_of(seq, h);
      // Query chunks start at the first query panel the block's keys see.
      br.for_each_tile(mk, 32, kQueryChunk, [&](int64_t t0, int mt, int64_t col0, int64_t col1) {
        // Keys are the rows here, queries the columns: lse and delta run along the columns.
        recompute_tile(w, mt, k_rows + t0 * p.dqk * kern.a_es, tq, v_rows + t0 * p.dv * kern.a_es, tdo, col0, col1, kQueryChunk,
                       lse + col0, delta + col0, true, w.p.data());
        accumulate_panels(kern, p.dtype, mt, p.dv, w.p.data(), kQueryChunk, ido, q_panels, col0, col1 - col0,
                          dv_acc + t0 * dv_pad, dv_pad);
        accumulate_panels(kern, p.dtype, mt, p.dqk, w.ds.data(), kQueryChunk, iq, q_panels, col0, col1 - col0,
                          dk_acc + t0 * dqk_pad, dqk_pad);
      });
    }
    store(dk_acc, dqk_pad, mk, p.dqk, p.scale, dk.row(seq, k0, kvh), dk.token_stride);
    store(dv_acc, dv_pad, mk, p.dv, 1.0f, dv.row(seq, k0, kvh), dv.token_stride);
  }

  // dq of rows [r0, r0 + kQueryBlock) of q head h.
  void query_block(int64_t seq, int64_t h, int64_t r0, Scratch& w) {
    const Sequence& s = p.seqs[size_t(seq)];
    const int64_t m = std::min(kQueryBlock, s.sq - r0), kvh = h / p.group;
    float* dq_acc = w.acc_a.data();
    std::fill(dq_acc, dq_acc + m * dqk_pad, 0.0f);
    BlockRows& br = w.ranges;
    br.see(p, s, true, r0, m);
    char* q_rows = reinterpret_cast<char*>(w.rows_a.data());
    char* do_rows = reinterpret_cast<char*>(w.rows_b.data());
    gather_a_rows(kern, rows.q.row(seq, r0, h), rows.q.token_stride * es, m, p.dqk, q_rows);
    gather_a_rows(kern, d_o.row(seq, r0, h), d_o.token_stride * es, m, p.dv, do_rows);
    const char* tk = kv_base(seq, kvh);
    const char* tv = tk + tk_elems(s) * es;
    const char* ik = tv + tv_elems(s) * es;
    const int64_t k_panels = round_up(s.skv, 32) * 32;
    const float* lse = lse_of(seq, h) + r0;
    const float* delta = delta_of(seq, h) + r0;
    br.for_each_tile(m, kKeyBlock, kKeyBlock, [&](int64_t t0, int mt, int64_t col0, int64_t col1) {
      recompute_tile(w, mt, q_rows + t0 * p.dqk * kern.a_es, tk, do_rows + t0 * p.dv * kern.a_es, tv, col0, col1, kKeyBlock,
                     lse + t0, delta + t0, false, nullptr);
      accumulate_panels(kern, p.dtype, mt, p.dqk, w.ds.data(), kKeyBlock, ik, k_panels, col0, col1 - col0,
                        dq_acc + t0 * dqk_pad, dqk_pad);
    });
    store(dq_acc, dqk_pad, m, p.dqk, p.scale, dq.row(seq, r0, h), dq.token_stride);
  }
};

}  // namespace

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, const AttentionOptions& opt) {
  const char* op = "flash_attention_backward";
  Operands rows;
  const Problem p = make_problem(op, q, k, v, o, lse, true, opt, rows);
  Backward bw(p, rows);
  bw.d_o = describe_like(op, "d_o", d_o, "o", o, opt, p, false);
  bw.dq = describe_like(op, "dq", dq, "q", q, opt, p, false);
  bw.dk = describe_like(op, "dk", dk, "k", k, opt, p, true);
  bw.dv = describe_like(op, "dv", dv, "v", v, opt, p, true);
  const std::pair<const char*, const Tensor*> outs[] = {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}};
  const std::pair<const char*, const Tensor*> ins[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"d_o", &d_o}};
  for (size_t i = 0; i < 3; ++i) {
    for (const auto& [name, t] : ins) require_no_overlap(op, outs[i].first, *outs[i].second, name, *t);
    for (size_t j = i + 1; j < 3; ++j) require_no_overlap(op, outs[i].first, *outs[i].second, outs[j].first, *outs[j].second);
  }

  bw.es = int64_t(dtype_size(p.dtype));
  bw.dqk_pad = round_up(p.dqk, 32);
  bw.dv_pad = round_up(p.dv, 32);
  bw.qk_steps = p.bf16 ? p.dqk / 2 : p.dqk;
  bw.v_steps = p.bf16 ? p.dv / 2 : p.dv;
  const int64_t nseq = int64_t(p.seqs.size());
  int64_t elems = 0, stats = 0;
  std::vector<double> pack_cost;
  for (int64_t s = 0; s < nseq; ++s) {
    const Sequence& sq = p.seqs[size_t(s)];
    for (int64_t h = 0; h < p.hkv; ++h) {
      bw.kv_offset.push_back(elems);
      elems += bw.tk_elems(sq) + bw.tv_elems(sq) + bw.ik_elems(sq);
    }
    for (int64_t h = 0; h < p.hq; ++h) {
      bw.q_offset.push_back(elems);
      elems += bw.tq_elems(sq) + bw.iq_elems(sq) + bw.tdo_elems(sq) + bw.ido_elems(sq);
      bw.stat_offset.push_back(stats);
      stats += 2 * round_up(sq.sq, 32);
    }
  }
  bw.work = thread_workspace(size_t(std::max<int64_t>(elems, 1) * bw.es));
  bw.lse_delta.assign(size_t(stats), 0.0f);

  // Packing jobs: (sequence, kv head) first, then (sequence, q head).
  std::vector<double> cost;
  for (int64_t s = 0; s < nseq; ++s) {
    const Sequence& sq = p.seqs[size_t(s)];
    for (int64_t h = 0; h < p.hkv; ++h) cost.push_back(double(sq.skv) * double(2 * p.dqk + p.dv) + 1);
  }
  for (int64_t s = 0; s < nseq; ++s) {
    const Sequence& sq = p.seqs[size_t(s)];
    for (int64_t h = 0; h < p.hq; ++h) cost.push_back(double(sq.sq) * double(2 * p.dqk + 3 * p.dv) + 1);
  }
  const int64_t kv_jobs = nseq * p.hkv;
  run_balanced(cost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (i < kv_jobs) bw.pack_kv(i / p.hkv, i % p.hkv);
      else bw.pack_q((i - kv_jobs) / p.hq, (i - kv_jobs) % p.hq);
    }
  });

  // Tasks: key blocks (4 products per visible pair) and query blocks (3 per visible pair).
  struct Task {
    bool key_block;
    int64_t seq, head, start;
  };
  std::vector<Task> tasks;
  cost.clear();
  const double per_pair = double(p.dqk + p.dv);
  for (int64_t s = 0; s < nseq; ++s) {
    const Sequence& sq = p.seqs[size_t(s)];
    for (int64_t k0 = 0; k0 < sq.skv; k0 += kKeyBlock) {
      const double pairs = p.pairs_of_rows(sq, false, k0, std::min(sq.skv, k0 + kKeyBlock));
      for (int64_t h = 0; h < p.hkv; ++h) {
        tasks.push_back({true, s, h, k0});
        cost.push_back(2.0 * pairs * per_pair * double(p.group) + double(kKeyBlock * (p.dqk + p.dv)));
      }
    }
    for (int64_t r0 = 0; r0 < sq.sq; r0 += kQueryBlock) {
      const double pairs = p.pairs_of_rows(sq, true, r0, std::min(sq.sq, r0 + kQueryBlock));
      for (int64_t h = 0; h < p.hq; ++h) {
        tasks.push_back({false, s, h, r0});
        cost.push_back(1.5 * pairs * per_pair + double(kQueryBlock * p.dqk));
      }
    }
  }
  run_balanced(cost, [&](int64_t b, int64_t e) {
    Backward::Scratch w(bw.dqk_pad, bw.dv_pad);
    for (int64_t i = b; i < e; ++i) {
      const Task& t = tasks[size_t(i)];
      if (t.key_block) bw.key_block(t.seq, t.head, t.start, w);
      else bw.query_block(t.seq, t.head, t.start, w);
    }
  });
}

}  // namespace sol
