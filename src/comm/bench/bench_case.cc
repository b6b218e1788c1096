// The cases of `sol comm bench`. Inputs are small integers that depend on rank and index, so
// every result (sums included) is exact in f32 and bf16 and checked element by element.
#include "comm/bench/bench_case.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>

namespace sol::comm::detail {

namespace {

double pattern(int rank, int64_t i) { return double((rank * 37 + i * 11) % 61 - 30); }

struct Buffers {
  BenchCase& c;
  const Group& g;
  bool heap;
  void* get(size_t bytes) {
    if (heap) return g.heap_alloc(bytes);
    c.owned.emplace_back(std::max<size_t>(bytes, 1));
    return c.owned.back().data();
  }
};

void fill(void* p, DType t, int64_t n, int rank, int64_t first_index = 0) {
  for (int64_t i = 0; i < n; ++i) store_from_double(p, t, size_t(i), pattern(rank, first_index + i));
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

double combine(ReduceOp op, double a, double b) { return op == ReduceOp::sum ? a + b : std::max(a, b); }

int64_t count_reduced_wrong(const void* out, DType t, int64_t n, int ranks, ReduceOp op, int64_t first_index) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    double expected = pattern(0, first_index + i);
    for (int r = 1; r < ranks; ++r) expected = combine(op, expected, pattern(r, first_index + i));
    wrong += load_as_double(out, t, size_t(i)) != expected;
  }
  return wrong;
}

}  // namespace

std::unique_ptr<BenchCase> make_bench_case(const Group& g, const CommBenchOptions& o, size_t bytes) {
  auto c = std::make_unique<BenchCase>();
  Buffers buffers{*c, g, o.heap};
  const DType t = o.dtype;
  const size_t es = dtype_size(t);
  const int P = g.size(), me = g.rank();
  const MPI_Comm comm = g.state().comm;
  const bool mpi_float = t == DType::f32;
  const std::string& op = o.op;
  check(!o.in_place || op == "all_gather", "comm bench", "--in-place applies to all_gather only, not ", op);
  // Collectives that split the buffer into per-rank blocks need a count divisible by P.
  const bool blocked = op == "reduce_scatter" || op == "all_gather" || op == "all_to_all" || op == "all_to_all_v";
  int64_t n = int64_t(bytes / es);
  if (blocked) n = n / P * P;
  c->count = n;
  const size_t nbytes = size_t(n) * es;
  auto tensor = [t](void* p, int64_t elements) { return Tensor(p, t, {elements}); };

  if (op == "allreduce") {
    void* in = buffers.get(nbytes);
    void* out = buffers.get(nbytes);
    fill(in, t, n, me);
    c->run_sol = [=, &g] { g.allreduce(tensor(in, n), tensor(out, n), o.reduce); };
    if (mpi_float) c->run_mpi = [=] { MPI_Allreduce(in, out, int(n), MPI_FLOAT, mpi_op(o.reduce), comm); };
    c->poison = [=] { std::memset(out, 0xFF, nbytes); };
    c->wrong = [=] { return count_reduced_wrong(out, t, n, P, o.reduce, 0); };
  } else if (op == "reduce_scatter") {
    const int64_t block = n / P;
    void* in = buffers.get(nbytes);
    void* out = buffers.get(size_t(block) * es);
    fill(in, t, n, me);
    c->run_sol = [=, &g] { g.reduce_scatter(tensor(in, n), tensor(out, block), o.reduce); };
    if (mpi_float)
      c->run_mpi = [=] { MPI_Reduce_scatter_block(in, out, int(block), MPI_FLOAT, mpi_op(o.reduce), comm); };
    c->poison = [=] { std::memset(out, 0xFF, size_t(block) * es); };
    c->wrong = [=] { return count_reduced_wrong(out, t, block, P, o.reduce, int64_t(me) * block); };
  } else if (op == "all_gather") {
    const int64_t block = n / P;
    const size_t block_bytes = size_t(block) * es;
    void* out = buffers.get(nbytes);
    void* in = o.in_place ? static_cast<std::byte*>(out) + size_t(me) * block_bytes : buffers.get(block_bytes);
    fill(in, t, block, me);
    c->run_sol = [=, &g] { g.all_gather(tensor(in, block), tensor(out, n)); };
    const void* mpi_in = o.in_place ? MPI_IN_PLACE : in;
    c->run_mpi = [=] { MPI_Allgather(mpi_in, int(block_bytes), MPI_BYTE, out, int(block_bytes), MPI_BYTE, comm); };
    c->poison = [=] {
      for (int p = 0; p < P; ++p)
        if (!(o.in_place && p == me)) std::memset(static_cast<std::byte*>(out) + size_t(p) * block_bytes, 0xFF, block_bytes);
    };
    c->wrong = [=] {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += load_as_double(out, t, size_t(i)) != pattern(int(i / block), i % block);
      return wrong;
    };
  } else if (op == "all_to_all" || op == "all_to_all_v") {
    const int64_t block = n / P;
    void* in = buffers.get(nbytes);
    void* out = buffers.get(nbytes);
    // Block p of rank r's input holds pattern(r, p*block + i): rank p must receive, from
    // each rank r, pattern(r, p*block + i).
    fill(in, t, n, me);
    if (op == "all_to_all") {
      c->run_sol = [=, &g] { g.all_to_all(tensor(in, n), tensor(out, n)); };
      c->run_mpi = [=] { MPI_Alltoall(in, int(size_t(block) * es), MPI_BYTE, out, int(size_t(block) * es), MPI_BYTE, comm); };
    } else {
      auto counts = std::make_shared<std::vector<int64_t>>(size_t(P), block);
      auto mpi_counts = std::make_shared<std::vector<int>>(size_t(P), int(size_t(block) * es));
      auto mpi_displs = std::make_shared<std::vector<int>>(size_t(P));
      for (int p = 0; p < P; ++p) (*mpi_displs)[size_t(p)] = p * int(size_t(block) * es);
      c->run_sol = [=, &g] { g.all_to_all_v(tensor(in, n), *counts, tensor(out, n), *counts); };
      c->run_mpi = [=] {
        MPI_Alltoallv(in, mpi_counts->data(), mpi_displs->data(), MPI_BYTE, out, mpi_counts->data(),
                      mpi_displs->data(), MPI_BYTE, comm);
      };
    }
    c->poison = [=] { std::memset(out, 0xFF, nbytes); };
    c->wrong = [=] {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i)
        wrong += load_as_double(out, t, size_t(i)) != pattern(int(i / block), int64_t(me) * block + i % block);
      return wrong;
    };
  } else if (op == "broadcast") {
    void* buf = buffers.get(nbytes);
    fill(buf, t, n, 0);
    c->run_sol = [=, &g] { g.broadcast(tensor(buf, n), 0); };
    c->run_mpi = [=] { MPI_Bcast(buf, int(nbytes), MPI_BYTE, 0, comm); };
    c->poison = [=] { if (me != 0) std::memset(buf, 0xFF, nbytes); };
    c->wrong = [=] {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += load_as_double(buf, t, size_t(i)) != pattern(0, i);
      return wrong;
    };
  } else if (op == "sendrecv") {
    const int next = (me + 1) % P, prev = (me + P - 1) % P;
    void* in = buffers.get(nbytes);
    void* out = buffers.get(nbytes);
    fill(in, t, n, me);
    c->run_sol = [=, &g] {
      P2POp ops[] = {{P2POp::send, tensor(in, n), next}, {P2POp::recv, tensor(out, n), prev}};
      g.batch_isend_irecv(ops).wait();
    };
    c->run_mpi = [=] {
      MPI_Sendrecv(in, int(nbytes), MPI_BYTE, next, 7, out, int(nbytes), MPI_BYTE, prev, 7, comm, MPI_STATUS_IGNORE);
    };
    c->poison = [=] { std::memset(out, 0xFF, nbytes); };
    c->wrong = [=] {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += load_as_double(out, t, size_t(i)) != pattern(prev, i);
      return wrong;
    };
  } else {
    std::string known;
    for (const char* k : kBenchOps) known += (known.empty() ? "" : ", ") + std::string(k);
    fail("comm bench", "unknown op '", op, "': expected one of ", known);
  }
  return c;
}

}  // namespace sol::comm::detail
