// Sharded Engram lookup under mpirun: tables split unevenly by rows, ranks asking for
// different numbers of tokens (none, on one rank), repeated and hot indices, the async form
// overlapped with other work (finished by wait() or by polling test()), shards rewritten
// between lookups (the one-sided path's fence), f32 and bf16 rows, and out-of-range indices
// failing on every rank with sol::Error, in both forms.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../comm/mpi_check.h"
#include "sol/comm_window.h"
#include "sol/copy.h"
#include "sol/engram.h"
#include "sol/timing.h"

namespace {

using sol::comm::testing::Checker;

// Row r, element e of the full table in its `version`: exact in bf16.
double table_value(int64_t r, int64_t e, int version = 0) { return double((r * 13 + e * 7 + version * 5) % 97 - 48); }

void fill_shard(const sol::engram::ShardedTable& t, int version = 0) {
  const sol::Tensor& local = t.local();
  const int64_t first = t.row_begin(sol::comm::Group::world().rank());
  for (int64_t r = 0; r < local.shape(0); ++r)
    for (int64_t e = 0; e < t.dim(); ++e)
      sol::store_from_double(local.data(), local.dtype(), size_t(r * t.dim() + e), table_value(first + r, e, version));
}

int64_t wrong_rows(const sol::Tensor& idx, const sol::Tensor& out, int64_t dim, int version = 0) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < idx.numel(); ++i)
    for (int64_t e = 0; e < dim; ++e)
      wrong += sol::load_as_double(out.data(), out.dtype(), size_t(i * dim + e)) !=
               table_value(idx.data_as<int32_t>()[i], e, version);
  return wrong;
}

void run_case(const sol::comm::Group& g, Checker& c, int64_t rows, int64_t dim, sol::DType dt, bool async, bool hot) {
  const int me = g.rank();
  sol::engram::ShardedTable table(g, rows, dim, dt);
  c.expect(table.one_sided() == (g.num_nodes() == 1), "one_sided() within one node only");
  const int64_t tokens = me == 1 ? 0 : 5 + 7 * me, heads = 3;  // each rank asks for a different count
  sol::Buffer idx(sol::DType::i32, {tokens, heads}), out(dt, {tokens, heads, dim});
  uint64_t x = 99 + uint64_t(me) * 7919 + uint64_t(rows);
  for (int64_t i = 0; i < tokens * heads; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    // hot: most indices hit the same few rows (repeats within and across ranks)
    idx.tensor().data_as<int32_t>()[i] = int32_t(hot ? (x >> 40) % 3 : (x >> 33) % uint64_t(rows));
  }
  if (tokens > 0) idx.tensor().data_as<int32_t>()[0] = int32_t(rows - 1);
  const std::string name = "lookup rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) + " " +
                           std::string(sol::dtype_name(dt)) + (async ? " async" : "") + (hot ? " hot" : "");
  // Each repetition rewrites the shards first, right after the previous lookup returned:
  // a peer still reading would see the new rows where the old were due, or the reverse.
  for (int rep = 0; rep < 3; ++rep) {
    fill_shard(table, rep);
    std::memset(out.data(), 0xFF, out.bytes());
    if (async) {
      sol::engram::LookupHandle h = table.lookup_async(idx, out);
      volatile double busy = 0;  // other work while the rows travel
      for (int i = 0; i < 1000; ++i) {
        busy = busy + i;
        if (i % 100 == 0) h.test();
      }
      if (rep == 1)
        while (!h.test()) {
        }
      else
        h.wait();
      h.wait();  // again: returns at once
    } else {
      table.lookup(idx, out);
    }
    const int64_t wrong = wrong_rows(idx, out, dim, rep);
    c.expect(wrong == 0, name + " rep " + std::to_string(rep) + ": " + std::to_string(wrong) + " wrong elements");
  }
}

void out_of_range(const sol::comm::Group& g, Checker& c) {
  sol::engram::ShardedTable table(g, 10, 4, sol::DType::f32);
  fill_shard(table);
  sol::Buffer idx(sol::DType::i32, {2, 2}), out(sol::DType::f32, {2, 2, 4});
  for (int i = 0; i < 4; ++i) idx.tensor().data_as<int32_t>()[i] = i;
  if (g.rank() == g.size() - 1) idx.tensor().data_as<int32_t>()[3] = 10;  // one past the end, one rank only
  bool threw = false;
  std::string what;
  try {
    table.lookup(idx, out);
  } catch (const sol::Error& e) {
    threw = true;
    what = e.what();
  }
  c.expect(threw, "out-of-range index: no sol::Error on rank " + std::to_string(g.rank()));
  if (g.rank() == g.size() - 1)
    c.expect(what.find("indices[1, 1] = 10") != std::string::npos, "out-of-range message: " + what);
  else
    c.expect(what.find("rank " + std::to_string(g.size() - 1) + " passed an index outside") != std::string::npos,
             "out-of-range message on the other ranks: " + what);
  // The async form fails the same way, at the call (a negative index this time, on rank 0).
  if (g.rank() == 0) idx.tensor().data_as<int32_t>()[2] = -3;
  threw = false;
  try {
    sol::engram::LookupHandle h = table.lookup_async(idx, out);
    h.wait();
  } catch (const sol::Error& e) {
    threw = true;
    what = e.what();
  }
  c.expect(threw, "async out-of-range index: no sol::Error on rank " + std::to_string(g.rank()));
  if (g.rank() == 0) c.expect(what.find("indices[1, 0] = -3") != std::string::npos, "negative index message: " + what);
  idx.tensor().data_as<int32_t>()[2] = 2;
  // The table is still usable afterwards.
  idx.tensor().data_as<int32_t>()[3] = 9;
  table.lookup(idx, out);
  c.expect(wrong_rows(idx, out, 4) == 0, "lookup after an out-of-range error");
  // A handle assigned over one still in flight completes the first lookup, then runs its own.
  {
    sol::Buffer out2(sol::DType::f32, {2, 2, 4});
    std::memset(out.data(), 0xFF, out.bytes());
    sol::engram::LookupHandle h = table.lookup_async(idx, out);
    h = sol::engram::LookupHandle();
    c.expect(wrong_rows(idx, out, 4) == 0, "lookup completed by assigning over its handle");
    h = table.lookup_async(idx, out2);
    h.wait();
    c.expect(wrong_rows(idx, out2, 4) == 0, "lookup after a handle was assigned over");
  }
  bool shape_threw = false;
  try {
    sol::Buffer bad(sol::DType::f32, {2, 2, 5});
    table.lookup(idx, bad);
  } catch (const sol::Error&) {
    shape_threw = true;
  }
  c.expect(shape_threw, "wrong output shape: no sol::Error");
}


// `mpi_engram bench BYTES [ITERS]`: the engram-lookup bench's case (BYTES of f32 rows of 128 per
// rank, uniform random indices, a table of 2 x that many rows per rank), interleaved call by call
// with the copy ceiling's transfer (BYTES out of the next rank's shared region into private
// memory), each timed by the calling thread's CPU clock (immune to time slices lost to other
// processes on a shared machine) and by the wall clock. Prints min and median per rank.
int bench(const sol::comm::Group& g, int64_t bytes, int iters) {
  const int P = g.size(), me = g.rank();
  const int64_t dim = 128, lookups = std::max<int64_t>(1, bytes / (dim * 4)), rows = 2 * lookups * P;
  sol::engram::ShardedTable table(g, rows, dim, sol::DType::f32);
  fill_shard(table);
  sol::Buffer idx(sol::DType::i32, {lookups, 1}), out(sol::DType::f32, {lookups, 1, dim}), dst(sol::DType::f32, {lookups * dim});
  uint64_t x = 0x1234567ull + uint64_t(me) * 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < lookups; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    idx.tensor().data_as<int32_t>()[i] = int32_t((x >> 33) % uint64_t(rows));
  }
  sol::comm::Window w(g, size_t(lookups * dim * 4));
  std::memset(w.local(), 1, w.bytes(me));
  const sol::Tensor peer(w.peer((me + 1) % P), sol::DType::f32, {lookups * dim});
  std::vector<double> cpu_l, wall_l, cpu_c, wall_c;
  for (int i = -3; i < iters; ++i) {
    g.barrier();
    double c0 = sol::thread_cpu_seconds(), w0 = sol::now_seconds();
    table.lookup(idx, out);
    double c1 = sol::thread_cpu_seconds(), w1 = sol::now_seconds();
    g.barrier();
    double c2 = sol::thread_cpu_seconds(), w2 = sol::now_seconds();
    sol::copy(peer, dst);
    double c3 = sol::thread_cpu_seconds(), w3 = sol::now_seconds();
    if (i < 0) continue;
    cpu_l.push_back(c1 - c0), wall_l.push_back(w1 - w0), cpu_c.push_back(c3 - c2), wall_c.push_back(w3 - w2);
  }
  const int64_t wrong = wrong_rows(idx, out, dim);
  auto stat = [](std::vector<double> v, bool median) {
    std::sort(v.begin(), v.end());
    return (median ? v[v.size() / 2] : v[0]) * 1e6;
  };
  for (int r = 0; r < P; ++r) {
    g.barrier();
    if (r != me) continue;
    std::printf("rank %d  %lld B  lookup cpu min %.1f med %.1f us, wall min %.1f med %.1f us | copy cpu min %.1f med %.1f, "
                "wall min %.1f med %.1f us | lookup/copy cpu min %.0f%% med %.0f%%, wall min %.0f%% med %.0f%%  wrong %lld\n",
                me, (long long)(lookups * dim * 4), stat(cpu_l, false), stat(cpu_l, true), stat(wall_l, false),
                stat(wall_l, true), stat(cpu_c, false), stat(cpu_c, true), stat(wall_c, false), stat(wall_c, true),
                100 * stat(cpu_c, false) / stat(cpu_l, false), 100 * stat(cpu_c, true) / stat(cpu_l, true),
                100 * stat(wall_c, false) / stat(wall_l, false), 100 * stat(wall_c, true) / stat(wall_l, true),
                (long long)wrong);
    std::fflush(stdout);
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const sol::comm::Group& g = sol::comm::Group::world();
  if (argc >= 3 && std::string(argv[1]) == "bench") return bench(g, std::atoll(argv[2]), argc > 3 ? std::atoi(argv[3]) : 50);
  Checker c(g.rank());
  try {
    for (bool async : {false, true}) {
      run_case(g, c, 1, 8, sol::DType::f32, async, false);          // fewer rows than ranks
      run_case(g, c, 1001, 16, sol::DType::f32, async, false);      // uneven split
      run_case(g, c, 4099, 33, sol::DType::bf16, async, false);
      run_case(g, c, 64, 64, sol::DType::f32, async, true);
      run_case(g, c, 20000, 128, sol::DType::bf16, async, false);   // rows beyond a mailbox ring
    }
    out_of_range(g, c);
  } catch (const std::exception& e) {
    c.expect(false, std::string("exception: ") + e.what());
  }
  return c.finish("mpi_engram");
}
