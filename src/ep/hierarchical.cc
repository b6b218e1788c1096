// Normal mode across nodes of equal size (G ranks each), hierarchical as DeepEP's internode
// kernels: a token crosses the slow link once per destination NODE, and the node forwards it.
//
// A "stream" is one source rank's tokens that have a destination on one node, in token order.
// Rank (node a, local l) sends its stream to node b (b ≠ a) to rank (b, l), its peer in the
// group's cross() group, as records (row | scales | top_k ids | weights) through one
// all_to_all_v over cross(). Rank (b, l) is the FORWARDER of the streams of every (·, l),
// its own stream to its own node included: it writes each row into the receive region of each
// rank of node b the token goes to (one-sided puts into the node's symmetric heap), at the
// place the flat path would: blocks by source rank, token order inside a block. So the result
// is the one-node result, bit for bit, with one cross-node transfer per (token, node).
//
// Dispatch n:
//   1. streams: the row of token t in this rank's stream to each node;
//   2. everyone's counts [R][R] (per rank) and [R][N] (per node): inside the node from the
//      peers' metadata slots after a node round of normal_posted = n (so every rank of the node
//      has entered dispatch n: its views of dispatch n−1 are released and its receive region,
//      which only this node's ranks write, may be overwritten), across nodes by one all_gather
//      of the node's block over cross();
//   3. records to other nodes: pack, one all_to_all_v over cross();
//   4. forward every stream this rank handles to the node's ranks; raise normal_sent = n and
//      wait for the node's ranks (they forwarded everything this rank receives).
//
// Combine m, the other way, reducing inside the node first:
//   1. each rank puts its y rows of source p into the combine region of p's forwarder on this
//      node (after the forwarder raised combine_done = m−1; a forwarder reads its own rows from
//      its y); node round of combine_sent = m;
//   2. each forwarder sums, per stream row, the rows of the node's ranks in local order (f32,
//      rounded once to bf16: a node's partial sum, as DeepEP's internode combine);
//   3. one all_to_all_v over cross() returns each stream's partials to its source;
//   4. the source sums per token, nodes in order: its own node's rows straight from its region
//      (no rounding in between), other nodes' partials from the exchange; combine_done = m.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "comm/move_bytes.h"
#include "comm/reduce.h"
#include "comm/wait.h"
#include "ep/buffer_state.h"
#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/error.h"

namespace sol::ep {

namespace {

// Bytes of one cross-node record: the payload row, its scales and, for a first dispatch, the
// token's top_k expert ids and weights (the forwarder finds the destination ranks from the ids).
int64_t record_bytes(const Buffer::State& s, bool cached) {
  return s.row_bytes + s.scale_cols * 4 + (cached ? 0 : 8 * s.K);
}

// First row of each node's block in a buffer holding one block per other node, blocks in the
// order of cross() ranks (all_to_all_v packs by rank); rows(n) is the block's length.
template <class Rows>
std::vector<int64_t> blocks_by_cross_rank(const Buffer::State& s, Rows&& rows) {
  std::vector<int64_t> start(static_cast<size_t>(s.N), 0);
  int64_t at = 0;
  for (int c = 0; c < s.N; ++c) {
    const int n = s.node_of_cross_rank[size_t(c)];
    start[size_t(n)] = at;
    if (n != s.my_node) at += rows(n);
  }
  return start;
}

// The source whose stream to this node the rank with local index `local` forwards, for node n.
int source_of(const Buffer::State& s, int n, int local) { return s.ranks_of_node[size_t(n)][size_t(local)]; }

// Row, in the combine region of the forwarder with local index f, where the block of local
// rank g for the stream of node n starts: blocks by g, then by node.
int64_t region_row(const Buffer::State& s, const std::vector<int64_t>& C, int f, int g, int n) {
  const int R = s.R;
  int64_t row = 0;
  for (int gg = 0; gg <= g; ++gg) {
    const int dst = s.ranks_of_node[size_t(s.my_node)][size_t(gg)];
    for (int nn = 0; nn < (gg < g ? s.N : n); ++nn) row += C[size_t(source_of(s, nn, f) * R + dst)];
  }
  return row;
}

}  // namespace

void Buffer::dispatch_hierarchical(const Tensor& x, const Tensor* x_scales, const Tensor* topk_idx,
                                   const Tensor* topk_weights, DispatchHandle& handle, bool cached) {
  const char* op = cached ? "ep::dispatch (cached)" : "ep::dispatch";
  State& s = *state_;
  const int R = s.R, me = s.me, N = s.N, G = s.G, my = s.my_node;
  const int64_t T = handle.tokens_, K = s.K, L = s.L, rb = s.row_bytes, sc = s.scale_cols;
  const int32_t* send_pos = handle.send_pos_.data();

  // ---- 1. this rank's streams ----
  if (!cached) {
    handle.stream_pos_.assign(size_t(T) * size_t(N), -1);
    handle.own_stream_.clear();
    std::vector<int32_t> length(static_cast<size_t>(N), 0);
    for (int64_t t = 0; t < T; ++t) {
      int32_t* sp = handle.stream_pos_.data() + t * N;
      for (int d = 0; d < R; ++d) {
        const int n = s.node_of[size_t(d)];
        if (send_pos[t * R + d] >= 0 && sp[n] < 0) sp[n] = length[size_t(n)]++;
      }
      if (sp[my] >= 0) handle.own_stream_.push_back(int32_t(t));
    }
  }
  const int32_t* stream_pos = handle.stream_pos_.data();

  // ---- 2. everyone's counts ----
  const uint64_t n_call = ++s.normal_seq;
  std::copy(s.scratch_counts.begin(), s.scratch_counts.end(), s.count_row.begin());
  for (int n = 0; n < N; ++n) {
    int64_t c = 0;
    if (cached) c = handle.node_counts_[size_t(me * N + n)];
    else
      for (int64_t t = 0; t < T; ++t) c += stream_pos[t * N + n] >= 0;
    s.count_row[size_t(R + n)] = int32_t(c);
  }
  // Inside the node through the heap (a node round, the waits of this buffer); across nodes
  // one all_gather of each node's block over cross(). (The group's own all_gather across
  // emulated nodes took milliseconds per call on a loaded guest; this takes microseconds.)
  const int W = R + N;
  const int par = int(n_call & 1);
  std::copy(s.count_row.begin(), s.count_row.end(), reinterpret_cast<int32_t*>(s.own(s.off_meta[par])));
  s.node_round(&Flags::normal_posted, n_call, op, "dispatch call (counts posted)");
  std::vector<int32_t> node_block(size_t(G) * size_t(W)), blocks(size_t(N) * size_t(G) * size_t(W));
  for (int g = 0; g < G; ++g) {
    const int32_t* theirs = reinterpret_cast<const int32_t*>(s.peer(s.ranks_of_node[size_t(my)][size_t(g)], s.off_meta[par]));
    std::copy(theirs, theirs + W, node_block.begin() + g * W);
  }
  s.group.cross().all_gather(Tensor(node_block.data(), DType::i32, {int64_t(G) * W}),
                             Tensor(blocks.data(), DType::i32, {int64_t(N) * G * W}));
  for (int p = 0; p < R; ++p) {
    const int32_t* row = blocks.data() + (size_t(s.cross_rank_of_node[size_t(s.node_of[size_t(p)])]) * size_t(G) +
                                          size_t(s.local_of[size_t(p)])) * size_t(W);
    std::copy(row, row + W, s.count_rows.begin() + p * W);
  }
  std::vector<int64_t>& C = s.count_matrix;
  std::vector<int64_t> CN(size_t(R) * size_t(N));
  for (int p = 0; p < R; ++p) {
    for (int d = 0; d < R; ++d) C[size_t(p * R + d)] = s.count_rows[size_t(p * (R + N) + d)];
    for (int n = 0; n < N; ++n) CN[size_t(p * N + n)] = s.count_rows[size_t(p * (R + N) + R + n)];
  }
  if (cached)
    for (size_t i = 0; i < C.size(); ++i)
      if (C[i] != handle.counts_[i])
        comm::detail::comm_failure(std::string(op) + ": ranks disagree on the cached handle: rank " +
                                   std::to_string(i / size_t(R)) + " sends " + std::to_string(C[i]) +
                                   " tokens to rank " + std::to_string(i % size_t(R)) +
                                   " but this rank's handle says " + std::to_string(handle.counts_[i]));
  if (!cached) handle.node_counts_ = CN;
  int64_t recv_total = 0;
  for (int p = 0; p < R; ++p) {
    s.recv_offset[size_t(p)] = recv_total;
    recv_total += C[size_t(p * R + me)];
  }
  s.recv_offset[size_t(R)] = recv_total;

  // ---- 3. records across nodes ----
  const int64_t rec = record_bytes(s, cached);
  const int32_t* idx = topk_idx ? topk_idx->data_as<const int32_t>() : nullptr;
  const float* w = topk_weights ? topk_weights->data_as<const float>() : nullptr;
  const std::byte* xs = static_cast<const std::byte*>(x.data());
  const float* scales = s.fp8 ? x_scales->data_as<const float>() : nullptr;
  auto stream_length_in = [&](int n) { return CN[size_t(source_of(s, n, s.my_local) * N + my)]; };
  const std::vector<int64_t> out_start = blocks_by_cross_rank(s, [&](int n) { return CN[size_t(me * N + n)]; });
  const std::vector<int64_t> in_start = blocks_by_cross_rank(s, stream_length_in);
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "ep");
  std::byte* stage_out = s.stage_out.data();
  std::byte* stage_in = s.stage_in.data();
  parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int n = 0; n < N; ++n) {
        const int32_t pos = stream_pos[t * N + n];
        if (n == my || pos < 0) continue;
        std::byte* r = stage_out + (out_start[size_t(n)] + pos) * rec;
        mk.copy(r, xs + t * rb, rb, false, /*fence=*/true);
        if (sc) std::memcpy(r + rb, scales + t * sc, size_t(sc) * 4);
        if (cached) continue;
        std::memcpy(r + rb + sc * 4, idx + t * K, size_t(K) * 4);
        std::memcpy(r + rb + sc * 4 + K * 4, w + t * K, size_t(K) * 4);
      }
  });
  Traffic traffic;
  {
    std::vector<int64_t> send(static_cast<size_t>(N), 0), recv(static_cast<size_t>(N), 0);
    for (int n = 0; n < N; ++n) {
      if (n == my) continue;
      const int c = s.cross_rank_of_node[size_t(n)];
      send[size_t(c)] = CN[size_t(me * N + n)] * rec;
      recv[size_t(c)] = stream_length_in(n) * rec;
      traffic.cross_node_tokens_sent += CN[size_t(me * N + n)];
      traffic.cross_node_tokens_received += stream_length_in(n);
    }
    traffic.cross_node_bytes_sent = traffic.cross_node_tokens_sent * rec;
    traffic.cross_node_bytes_received = traffic.cross_node_tokens_received * rec;
    s.group.cross().all_to_all_v(Tensor(stage_out, DType::i8, {traffic.cross_node_bytes_sent}), send,
                                 Tensor(stage_in, DType::i8, {traffic.cross_node_bytes_received}), recv);
  }

  // ---- 4. forward the streams this rank handles, in node order ----
  std::vector<int64_t> first(static_cast<size_t>(N) + 1, 0);  // first forwarded row of each stream
  for (int n = 0; n < N; ++n) first[size_t(n) + 1] = first[size_t(n)] + stream_length_in(n);
  const int64_t F = first[size_t(N)];
  // The row of stream n's row i in the record buffer or, for this rank's own stream, its token.
  auto record = [&](int n, int64_t i) { return stage_in + (in_start[size_t(n)] + i) * rec; };
  auto stream_ids = [&](int n, int64_t i, int32_t* out) {
    if (n == my) std::memcpy(out, idx + int64_t(handle.own_stream_[size_t(i)]) * K, size_t(K) * 4);
    else std::memcpy(out, record(n, i) + rb + sc * 4, size_t(K) * 4);
  };
  if (!cached) {
    // Position of each forwarded row within (source → local rank)'s block: sources number their
    // tokens in token order, and streams keep that order.
    handle.forward_pos_.assign(size_t(F) * size_t(G), -1);
    std::vector<int32_t> counter(static_cast<size_t>(G)), ids(static_cast<size_t>(K));
    for (int n = 0; n < N; ++n) {
      std::fill(counter.begin(), counter.end(), 0);
      for (int64_t i = 0; i < stream_length_in(n); ++i) {
        stream_ids(n, i, ids.data());
        int32_t* fp = handle.forward_pos_.data() + (first[size_t(n)] + i) * G;
        for (int64_t j = 0; j < K; ++j) {
          const int32_t e = ids[size_t(j)];
          if (e < 0) continue;
          if (e >= s.E) fail(op, "a record from node ", n, " names expert ", e, " (corrupted transfer)");
          const int d = int(e / L);
          if (s.node_of[size_t(d)] != my) continue;
          const int g = s.local_of[size_t(d)];
          if (fp[g] < 0) fp[g] = counter[size_t(g)]++;
        }
      }
    }
  }
  const int32_t* forward_pos = handle.forward_pos_.data();
  // Where stream n's block starts in local rank g's receive region: after lower sources' blocks.
  std::vector<int64_t> base(size_t(N) * size_t(G), 0);
  for (int n = 0; n < N; ++n)
    for (int g = 0; g < G; ++g) {
      const int dst = s.ranks_of_node[size_t(my)][size_t(g)];
      for (int q = 0; q < source_of(s, n, s.my_local); ++q) base[size_t(n * G + g)] += C[size_t(q * R + dst)];
    }
  std::vector<std::byte*> dst_x(static_cast<size_t>(G)), dst_s(static_cast<size_t>(G)), dst_i(static_cast<size_t>(G)),
      dst_w(static_cast<size_t>(G));
  for (int g = 0; g < G; ++g) {
    const int d = s.ranks_of_node[size_t(my)][size_t(g)];
    dst_x[size_t(g)] = s.peer(d, s.off_recv_x);
    dst_s[size_t(g)] = s.peer(d, s.off_recv_scales);
    dst_i[size_t(g)] = s.peer(d, s.off_recv_idx);
    dst_w[size_t(g)] = s.peer(d, s.off_recv_w);
  }
  int64_t forwarded_rows = 0;
  for (int64_t i = 0; i < F * G; ++i) forwarded_rows += forward_pos[i] >= 0;
  const bool stream = should_stream(forwarded_rows * rb);
  parallel_ranges(F, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> ids(static_cast<size_t>(K));
    std::vector<float> ws(static_cast<size_t>(K));
    for (int n = 0; n < N; ++n) {
      const int64_t i0 = std::max(first[size_t(n)], r0) - first[size_t(n)];
      const int64_t i1 = std::min(first[size_t(n) + 1], r1) - first[size_t(n)];
      for (int64_t i = i0; i < i1; ++i) {
        const std::byte* payload;
        const std::byte* row_scales;
        if (n == my) {
          const int64_t t = handle.own_stream_[size_t(i)];
          payload = xs + t * rb;
          row_scales = reinterpret_cast<const std::byte*>(scales + t * sc);
          if (!cached) std::memcpy(ws.data(), w + t * K, size_t(K) * 4);
        } else {
          payload = record(n, i);
          row_scales = payload + rb;
          if (!cached) std::memcpy(ws.data(), payload + rb + sc * 4 + K * 4, size_t(K) * 4);
        }
        if (!cached) stream_ids(n, i, ids.data());
        const int32_t* fp = forward_pos + (first[size_t(n)] + i) * G;
        for (int g = 0; g < G; ++g) {
          if (fp[g] < 0) continue;
          const int64_t row = base[size_t(n * G + g)] + fp[g];
          mk.copy(dst_x[size_t(g)] + row * rb, payload, rb, stream, /*fence=*/true);
          if (sc) std::memcpy(dst_s[size_t(g)] + row * sc * 4, row_scales, size_t(sc) * 4);
          if (cached) continue;
          const int d = s.ranks_of_node[size_t(my)][size_t(g)];
          int32_t* ri = reinterpret_cast<int32_t*>(dst_i[size_t(g)]) + row * K;
          float* rw = reinterpret_cast<float*>(dst_w[size_t(g)]) + row * K;
          for (int64_t j = 0; j < K; ++j) {
            const int32_t e = ids[size_t(j)];
            const bool local = e >= 0 && e / L == d;
            ri[j] = local ? int32_t(e - d * L) : -1;
            rw[j] = local ? ws[size_t(j)] : 0.0f;
          }
        }
      }
    }
  });
  s.node_round(&Flags::normal_sent, n_call, op, "dispatch call (rows forwarded)");

  if (!cached) {
    std::fill(s.recv_per_expert.begin(), s.recv_per_expert.end(), 0);
    const int32_t* ri = reinterpret_cast<const int32_t*>(s.own(s.off_recv_idx));
    for (int64_t i = 0; i < recv_total * K; ++i)
      if (ri[i] >= 0) ++s.recv_per_expert[size_t(ri[i])];
  }
  s.dispatch_traffic = traffic;
}

void Buffer::combine_hierarchical(const Tensor& y, const DispatchHandle& handle, const Tensor& out) {
  const char* op = "ep::combine";
  State& s = *state_;
  const int R = s.R, me = s.me, N = s.N, G = s.G, my = s.my_node, ml = s.my_local;
  const int64_t H = s.H, T = handle.tokens_, row = 2 * H;
  const std::vector<int64_t>& C = handle.counts_;
  const std::vector<int64_t>& CN = handle.node_counts_;
  const uint64_t m = ++s.combine_seq;
  auto stream_length_in = [&](int n) { return CN[size_t(source_of(s, n, ml) * N + my)]; };

  // ---- 1. y rows to the forwarders of their sources ----
  // Rows from source p sit at [y_start[p], y_start[p] + C[p][me]) of y.
  std::vector<int64_t> y_start(static_cast<size_t>(R), 0);
  for (int p = 1; p < R; ++p) y_start[size_t(p)] = y_start[size_t(p) - 1] + C[size_t((p - 1) * R + me)];
  const std::byte* ys = static_cast<const std::byte*>(y.data());
  for (int k = 0; k < G; ++k) {
    const int fl = (ml + k) % G;  // start with a different forwarder on every rank
    const int f = s.ranks_of_node[size_t(my)][size_t(fl)];
    if (f == me) continue;  // this rank's own rows are read from y where they are
    s.wait_flag(f, s.flags_of(f).combine_done, m - 1, op, "combine call (region free)");
    std::byte* region = s.peer(f, s.off_combine);
    for (int n = 0; n < N; ++n) {
      const int p = source_of(s, n, fl);
      comm::detail::move_bytes(region + region_row(s, C, fl, ml, n) * row, ys + y_start[size_t(p)] * row,
                               size_t(C[size_t(p * R + me)] * row));
    }
  }
  s.node_round(&Flags::combine_sent, m, op, "combine call (rows written to forwarders)");

  // ---- 2. node partial sums of the streams from other nodes ----
  std::vector<int64_t> first(static_cast<size_t>(N) + 1, 0);
  for (int n = 0; n < N; ++n) first[size_t(n) + 1] = first[size_t(n)] + stream_length_in(n);
  std::vector<int64_t> block(size_t(N) * size_t(G));  // region row of (stream n, local rank g)
  for (int n = 0; n < N; ++n)
    for (int g = 0; g < G; ++g) block[size_t(n * G + g)] = region_row(s, C, ml, g, n);
  const std::byte* region = s.own(s.off_combine);
  const int32_t* forward_pos = handle.forward_pos_.data();
  const std::vector<int64_t> in_start = blocks_by_cross_rank(s, stream_length_in);
  const std::vector<int64_t> out_start = blocks_by_cross_rank(s, [&](int n) { return CN[size_t(me * N + n)]; });
  std::byte* partial_out = s.stage_in.data();  // [streams from other nodes] rows, back to sources
  std::byte* partial_in = s.stage_out.data();  // [this rank's streams to other nodes] rows
  auto node_rows = [&](int n, int64_t i, const void** sources, int count) {
    const int32_t* fp = forward_pos + (first[size_t(n)] + i) * G;
    for (int g = 0; g < G; ++g) {
      if (fp[g] < 0) continue;
      if (g == ml) sources[count++] = ys + (y_start[size_t(source_of(s, n, ml))] + fp[g]) * row;
      else sources[count++] = region + (block[size_t(n * G + g)] + fp[g]) * row;
    }
    return count;
  };
  const int64_t F = first[size_t(N)];
  parallel_ranges(F, 1, [&](int64_t r0, int64_t r1) {
    std::vector<const void*> sources(static_cast<size_t>(G));
    for (int n = 0; n < N; ++n) {
      if (n == my) continue;
      const int64_t i0 = std::max(first[size_t(n)], r0) - first[size_t(n)];
      const int64_t i1 = std::min(first[size_t(n) + 1], r1) - first[size_t(n)];
      for (int64_t i = i0; i < i1; ++i) {
        const int count = node_rows(n, i, sources.data(), 0);
        comm::detail::reduce_sources(partial_out + (in_start[size_t(n)] + i) * row, sources.data(), count, H,
                                     DType::bf16, comm::ReduceOp::sum);
      }
    }
  });

  // ---- 3. partials back across nodes ----
  Traffic traffic;
  {
    std::vector<int64_t> send(static_cast<size_t>(N), 0), recv(static_cast<size_t>(N), 0);
    for (int n = 0; n < N; ++n) {
      if (n == my) continue;
      const int c = s.cross_rank_of_node[size_t(n)];
      send[size_t(c)] = stream_length_in(n) * row;
      recv[size_t(c)] = CN[size_t(me * N + n)] * row;
      traffic.cross_node_tokens_sent += stream_length_in(n);
      traffic.cross_node_tokens_received += CN[size_t(me * N + n)];
    }
    traffic.cross_node_bytes_sent = traffic.cross_node_tokens_sent * row;
    traffic.cross_node_bytes_received = traffic.cross_node_tokens_received * row;
    s.group.cross().all_to_all_v(Tensor(partial_out, DType::i8, {traffic.cross_node_bytes_sent}), send,
                                 Tensor(partial_in, DType::i8, {traffic.cross_node_bytes_received}), recv);
  }

  // ---- 4. per token, nodes in order ----
  const int32_t* stream_pos = handle.stream_pos_.data();
  std::byte* o = static_cast<std::byte*>(out.data());
  const bool stream = should_stream(T * row);
  parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<const void*> sources(static_cast<size_t>(G + N));
    for (int64_t t = t0; t < t1; ++t) {
      int count = 0;
      for (int n = 0; n < N; ++n) {
        const int32_t pos = stream_pos[t * N + n];
        if (pos < 0) continue;
        if (n == my) count = node_rows(n, pos, sources.data(), count);
        else sources[size_t(count++)] = partial_in + (out_start[size_t(n)] + pos) * row;
      }
      if (count == 0) std::memset(o + t * row, 0, size_t(row));
      else comm::detail::reduce_sources(o + t * row, sources.data(), count, H, DType::bf16, comm::ReduceOp::sum, stream);
    }
  });
  s.flags().combine_done.value.store(m, std::memory_order_release);
  s.combine_traffic = traffic;
}

}  // namespace sol::ep
