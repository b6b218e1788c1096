// Every collective against a reference, on private and on symmetric-heap buffers, for sizes
// 0, 1, odd, not multiples of the rank count, past the one-shot limit and past one staging
// slot. Run by ctest under mpirun with 2, 3 and 4 ranks (4 as two emulated nodes).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_check.h"
#include "sol/comm.h"

using namespace sol;
using namespace sol::comm;
using sol::comm::testing::Checker;

namespace {

const int64_t kSizes[] = {0, 1, 7, 33, 1000, 40000, 1200001};

double rounded(DType t, double v) {
  uint32_t cell = 0;
  store_from_double(&cell, t, 0, v);
  return load_as_double(&cell, t, 0);
}

// A buffer of `n` elements, private or carved from the group's symmetric heap.
struct Buf {
  std::vector<std::byte> own;
  void* data = nullptr;
  DType t;
  int64_t n;
  Buf(const Group& g, bool heap, DType type, int64_t count) : t(type), n(count) {
    size_t bytes = size_t(count) * dtype_size(type);
    if (heap) {
      data = g.heap_alloc(bytes);
    } else {
      own.resize(std::max<size_t>(bytes, 1));
      data = own.data();
    }
    testing::poison(data, bytes);
  }
  Tensor tensor() const { return Tensor(data, t, {n}); }
  Tensor slice(int64_t b, int64_t e) const { return tensor().slice(0, b, e); }
};

std::string label(const char* op, DType t, ReduceOp r, int64_t n, bool heap) {
  return std::string(op) + " " + std::string(dtype_name(t)) + " " + std::string(reduce_op_name(r)) +
         " n=" + std::to_string(n) + (heap ? " heap" : " private");
}

double combine(ReduceOp op, double a, double b) { return op == ReduceOp::sum ? a + b : std::max(a, b); }

void check_allreduce(const Group& g, Checker& c, DType t, ReduceOp op, int64_t n, bool heap, bool in_place) {
  const uint64_t seed = uint64_t(n) * 31 + uint64_t(t) * 7 + uint64_t(op);
  Buf in(g, heap, t, n);
  testing::fill(in.data, t, n, seed, g.rank(), true);
  Buf out_buf(g, heap && !in_place, t, in_place ? 0 : n);
  const Tensor out = in_place ? in.tensor() : out_buf.tensor();
  g.allreduce(in.tensor(), out, op);
  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double acc = rounded(t, testing::input_value(seed, 0, i, true));
    for (int r = 1; r < g.size(); ++r) acc = combine(op, acc, rounded(t, testing::input_value(seed, r, i, true)));
    ref[size_t(i)] = acc;
  }
  const double tolerance = op == ReduceOp::max ? 0 : t == DType::f32 ? 1e-5 : 1e-2;
  c.expect_close(out.data(), t, ref, tolerance,
                 label(in_place ? "allreduce(in place)" : "allreduce", t, op, n, heap));
  // Every rank must hold the same bits: compare against rank 0's result.
  std::vector<std::byte> first(size_t(out.nbytes()));
  std::copy_n(static_cast<std::byte*>(out.data()), first.size(), first.begin());
  g.broadcast(Tensor(first.data(), DType::i8, {int64_t(first.size())}), 0);
  c.expect(std::equal(first.begin(), first.end(), static_cast<std::byte*>(out.data())),
           label("allreduce ranks agree", t, op, n, heap));
  if (heap) g.heap_reset();
}

void check_reduce_scatter(const Group& g, Checker& c, DType t, ReduceOp op, int64_t n, bool heap) {
  const uint64_t seed = uint64_t(n) * 17 + uint64_t(t) + 100;
  const int64_t total = n * g.size();
  Buf in(g, heap, t, total), out(g, heap, t, n);
  testing::fill(in.data, t, total, seed, g.rank(), true);
  g.reduce_scatter(in.tensor(), out.tensor(), op);
  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = int64_t(g.rank()) * n + i;
    double acc = rounded(t, testing::input_value(seed, 0, at, true));
    for (int r = 1; r < g.size(); ++r) acc = combine(op, acc, rounded(t, testing::input_value(seed, r, at, true)));
    ref[size_t(i)] = acc;
  }
  c.expect_close(out.data, t, ref, op == ReduceOp::max ? 0 : t == DType::f32 ? 1e-5 : 1e-2,
                 label("reduce_scatter", t, op, n, heap));
  if (heap) g.heap_reset();
}

void check_all_gather(const Group& g, Checker& c, int64_t n, bool heap, bool in_place) {
  Buf own_in(g, heap && !in_place, DType::i32, in_place ? 0 : n), out(g, heap, DType::i32, n * g.size());
  const Tensor in = in_place ? out.slice(int64_t(g.rank()) * n, int64_t(g.rank() + 1) * n) : own_in.tensor();
  for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(in.data())[i] = testing::tag_value(g.rank(), i);
  g.all_gather(in, out.tensor());
  bool ok = true;
  for (int p = 0; p < g.size(); ++p)
    for (int64_t i = 0; i < n; ++i) ok &= static_cast<int32_t*>(out.data)[p * n + i] == testing::tag_value(p, i);
  c.expect(ok, "all_gather i32 n=" + std::to_string(n) + (heap ? " heap" : " private") + (in_place ? " in place" : ""));
  if (heap) g.heap_reset();
}

void check_all_to_all(const Group& g, Checker& c, int64_t n, bool heap) {
  const int P = g.size();
  Buf in(g, heap, DType::i32, n * P), out(g, heap, DType::i32, n * P);
  for (int64_t i = 0; i < n * P; ++i) static_cast<int32_t*>(in.data)[i] = testing::tag_value(g.rank(), i);
  g.all_to_all(in.tensor(), out.tensor());
  bool ok = true;
  for (int p = 0; p < P; ++p)
    for (int64_t i = 0; i < n; ++i)
      ok &= static_cast<int32_t*>(out.data)[p * n + i] == testing::tag_value(p, int64_t(g.rank()) * n + i);
  c.expect(ok, "all_to_all i32 n=" + std::to_string(n) + (heap ? " heap" : " private"));
  if (heap) g.heap_reset();
}

// Elements rank s sends to rank d: uneven, sometimes zero, agreed by every rank.
int64_t split_size(int s, int d, int64_t scale) { return (s * 3 + d * 5 + 1) % 7 * scale; }

void check_all_to_all_v(const Group& g, Checker& c, int64_t scale, bool heap) {
  const int P = g.size(), me = g.rank();
  std::vector<int64_t> send(static_cast<size_t>(P)), recv(static_cast<size_t>(P));
  int64_t send_total = 0, recv_total = 0;
  for (int p = 0; p < P; ++p) {
    send[size_t(p)] = split_size(me, p, scale);
    recv[size_t(p)] = split_size(p, me, scale);
    send_total += send[size_t(p)];
    recv_total += recv[size_t(p)];
  }
  // Heap allocations must be the same on every rank: size both buffers for the largest rank.
  int64_t largest = 0;
  for (int r = 0; r < P; ++r) {
    int64_t sent = 0, received = 0;
    for (int p = 0; p < P; ++p) sent += split_size(r, p, scale), received += split_size(p, r, scale);
    largest = std::max({largest, sent, received});
  }
  Buf in(g, heap, DType::i32, largest), out(g, heap, DType::i32, largest);
  for (int p = 0, at = 0; p < P; at += int(send[size_t(p)]), ++p)
    for (int64_t i = 0; i < send[size_t(p)]; ++i)
      static_cast<int32_t*>(in.data)[at + i] = testing::tag_value(me, p * 10000000 / 16 + i);
  g.all_to_all_v(in.slice(0, send_total), send, out.slice(0, recv_total), recv);
  bool ok = true;
  for (int p = 0, at = 0; p < P; at += int(recv[size_t(p)]), ++p)
    for (int64_t i = 0; i < recv[size_t(p)]; ++i)
      ok &= static_cast<int32_t*>(out.data)[at + i] == testing::tag_value(p, me * 10000000 / 16 + i);
  c.expect(ok, "all_to_all_v scale=" + std::to_string(scale) + (heap ? " heap" : " private"));
  if (heap) g.heap_reset();
}

void check_broadcast(const Group& g, Checker& c, int64_t n, bool heap) {
  for (int root = 0; root < g.size(); ++root) {
    Buf b(g, heap, DType::i32, n);
    if (g.rank() == root)
      for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(b.data)[i] = testing::tag_value(root, i);
    g.broadcast(b.tensor(), root);
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= static_cast<int32_t*>(b.data)[i] == testing::tag_value(root, i);
    c.expect(ok, "broadcast root=" + std::to_string(root) + " n=" + std::to_string(n) + (heap ? " heap" : " private"));
    if (heap) g.heap_reset();
  }
}

// A ring of messages (each rank sends to the next, receives from the previous) plus two
// messages to the same peer in one batch, which must arrive in order.
void check_send_recv(const Group& g, Checker& c, int64_t n) {
  const int P = g.size(), me = g.rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  std::vector<int32_t> a(static_cast<size_t>(n)), b(size_t(n) + 3), ra(static_cast<size_t>(n)), rb(size_t(n) + 3);
  for (int64_t i = 0; i < n; ++i) a[size_t(i)] = testing::tag_value(me, i);
  for (int64_t i = 0; i < n + 3; ++i) b[size_t(i)] = testing::tag_value(me, i + 5000000);
  testing::poison(ra.data(), ra.size() * 4);
  testing::poison(rb.data(), rb.size() * 4);
  std::vector<P2POp> ops = {
      {P2POp::send, Tensor(a.data(), DType::i32, {n}), next},
      {P2POp::send, Tensor(b.data(), DType::i32, {n + 3}), next},
      {P2POp::recv, Tensor(ra.data(), DType::i32, {n}), prev},
      {P2POp::recv, Tensor(rb.data(), DType::i32, {n + 3}), prev},
  };
  Work w = g.batch_isend_irecv(ops);
  w.wait();
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= ra[size_t(i)] == testing::tag_value(prev, i);
  for (int64_t i = 0; i < n + 3; ++i) ok &= rb[size_t(i)] == testing::tag_value(prev, i + 5000000);
  c.expect(ok, "send/recv ring n=" + std::to_string(n));
}

// Two tagged streams between each pair of ring neighbours, received in the opposite order of
// sending, on private and heap buffers (heap sends past 32 KiB are pulled by the receiver),
// with messages larger than the 1 MiB ring, and works waited on in reverse order: every
// message must land in the receive of its own tag, in order within a tag.
void check_tagged_streams(const Group& g, Checker& c, bool heap) {
  const int P = g.size(), me = g.rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  const int64_t sizes[] = {3, 20000, 400001};  // eager, pulled from the heap, larger than the ring
  for (int64_t n : sizes) {
    // Stream tag 7 carries two messages, stream tag 3 one, sent as 7, 7, 3.
    Buf s7a(g, heap, DType::i32, n), s7b(g, heap, DType::i32, n + 1), s3(g, heap, DType::i32, n + 2);
    Buf r7a(g, heap, DType::i32, n), r7b(g, heap, DType::i32, n + 1), r3(g, heap, DType::i32, n + 2);
    for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(s7a.data)[i] = testing::tag_value(me, i);
    for (int64_t i = 0; i < n + 1; ++i) static_cast<int32_t*>(s7b.data)[i] = testing::tag_value(me, i + 3000000);
    for (int64_t i = 0; i < n + 2; ++i) static_cast<int32_t*>(s3.data)[i] = testing::tag_value(me, i + 6000000);
    Work send_a = g.isend(s7a.tensor(), next, 7);
    Work send_b = g.isend(s7b.tensor(), next, 7);
    Work send_c = g.isend(s3.tensor(), next, 3);
    // Tag 3 first although it was sent last; the tag-7 messages are set aside meanwhile.
    Work recv_c = g.irecv(r3.tensor(), prev, 3);
    recv_c.wait();
    Work recv_b_first_posted = g.irecv(r7a.tensor(), prev, 7);
    Work recv_b = g.irecv(r7b.tensor(), prev, 7);
    recv_b.wait();  // within a node, waiting on the later work drives the earlier one too
    if (g.num_nodes() == 1)
      c.expect(recv_b_first_posted.completed(), "tagged: an earlier receive of the tag completed with the later one");
    recv_b_first_posted.wait();
    send_c.wait();
    send_b.wait();
    send_a.wait();
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= static_cast<int32_t*>(r7a.data)[i] == testing::tag_value(prev, i);
    for (int64_t i = 0; i < n + 1; ++i) ok &= static_cast<int32_t*>(r7b.data)[i] == testing::tag_value(prev, i + 3000000);
    for (int64_t i = 0; i < n + 2; ++i) ok &= static_cast<int32_t*>(r3.data)[i] == testing::tag_value(prev, i + 6000000);
    c.expect(ok, "tagged streams n=" + std::to_string(n) + (heap ? " heap" : " private"));
    g.barrier();
    if (heap) g.heap_reset();
  }
  // Bad tags are refused before anything is posted.
  bool refused = false;
  try {
    int32_t x = 0;
    g.isend(Tensor(&x, DType::i32, {1}), next, kMaxTag + 1);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("tag") != std::string::npos;
  }
  c.expect(refused, "a tag above kMaxTag is refused");
}

void run_all(const Group& g, Checker& c) {
  for (bool heap : {false, true}) {
    for (int64_t n : kSizes) {
      for (DType t : {DType::f32, DType::bf16})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
          check_allreduce(g, c, t, op, n, heap, false);
          check_reduce_scatter(g, c, t, op, n, heap);
        }
      check_allreduce(g, c, DType::f32, ReduceOp::sum, n, heap, true);
      check_all_gather(g, c, n, heap, false);
      check_all_gather(g, c, n, heap, true);
      check_all_to_all(g, c, n, heap);
      check_broadcast(g, c, n, heap);
    }
    for (int64_t scale : {int64_t(1), int64_t(3), int64_t(100003)}) check_all_to_all_v(g, c, scale, heap);
  }
  if (g.size() > 1) {
    for (int64_t n : {int64_t(0), int64_t(5), int64_t(700001)}) check_send_recv(g, c, n);
    for (bool heap : {false, true}) check_tagged_streams(g, c, heap);
  }
  g.barrier();
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker c(world.rank());
  c.expect(world.local().size() * world.num_nodes() == world.size() || world.num_nodes() > 1,
           "local group sizes add up");
  // Every node has a local rank 0; nodes of unequal size may lack higher local indices.
  c.expect(world.cross().size() <= world.num_nodes() &&
               (world.local().rank() != 0 || world.cross().size() == world.num_nodes()),
           "cross group has at most one rank per node");
  run_all(world, c);
  // Sub-groups: even and odd ranks, in reverse order.
  if (world.size() > 2) {
    Group half = world.split(world.rank() % 2, -world.rank());
    c.expect(half.size() == (world.size() + 1 - world.rank() % 2) / 2, "split size");
    run_all(half, c);
  }
  return c.finish(world.num_nodes() > 1 ? "mpi_collectives (multi-node)" : "mpi_collectives");
}
