#pragma once
// sol::engram — the n-gram hash of DeepSeek's Engram ("Conditional Memory via Scalable
// Lookup", 2026) and a sharded lookup of its embedding tables across a group's ranks.
//
// The hash, for one layer with max n-gram order N and H heads per order, over compressed token
// ids x[b, t] (the tokenizer's ids already mapped to their canonical, compressed ids):
//
//   token k back:  x_k[t] = x[t - k] if t >= k, else pad_id            (k = 0 .. N-1, per row b)
//   mix_n[t]     = (x_0[t]*m_0) XOR (x_1[t]*m_1) XOR ... XOR (x_{n-1}[t]*m_{n-1})   (n = 2 .. N)
//   hash[t, h]   = mix_n[t] mod p_h,   head h = (n-2)*H + j, j = 0 .. H-1
//   row[t, h]    = hash[t, h] + offset_h,  offset_h = p_0 + ... + p_{h-1}
//
// m_k: the layer's N odd multipliers; p_h: one prime per head, all distinct. Arithmetic is on
// unsigned 64-bit integers, wrapping (for ids below the compressed vocabulary and multipliers
// below 2^63 / vocabulary, as DeepSeek draws them, nothing wraps and this equals the signed
// arithmetic of the published code). Row indices are i32: the tables may hold up to 2^31 - 1
// rows in all. docs/perf/cp-pp-engram.md records how the multipliers and primes are drawn.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sol/comm.h"
#include "sol/dtype.h"
#include "sol/tensor.h"

namespace sol::engram {

struct HashConfig {
  int max_ngram = 3;                  // N >= 2
  int heads_per_ngram = 8;            // H >= 1
  std::vector<uint64_t> multipliers;  // N odd multipliers of this layer
  std::vector<int64_t> moduli;        // (N-1)*H primes, order (n = 2: heads 0..H-1), (n = 3: ...), ...
  int64_t pad_id = 0;                 // compressed id of the padding token
  int heads() const { return (max_ngram - 1) * heads_per_ngram; }
};

// Layer configurations as DeepSeek builds them: per layer, N odd multipliers 2r+1 with r drawn
// uniformly from [0, max(1, floor((2^63-1) / compressed_vocab) / 2)) by a generator seeded with
// seed + 10007 * layer_id (Sol's own splitmix64 stream: not numpy's PCG64, so the multipliers
// differ from the published demo's; pass multipliers explicitly to reproduce those);
// per layer and order n, H primes: the smallest primes above vocab_per_ngram[n-2] - 1, each
// search starting at the previous head's prime and skipping every prime already taken by any
// earlier layer, order or head (layers in the order given).
std::vector<HashConfig> make_hash_configs(std::span<const int64_t> vocab_per_ngram, int max_ngram,
                                          int heads_per_ngram, std::span<const int> layer_ids,
                                          int64_t compressed_vocab, uint64_t seed, int64_t pad_id);

bool is_prime(uint64_t n);  // deterministic for all 64-bit n
// offsets[h] = p_0 + ... + p_{h-1}; total_rows = sum of all moduli. Throws if above 2^31 - 1.
std::vector<int64_t> table_offsets(const HashConfig& config);
int64_t total_rows(const HashConfig& config);

// ids: [B, T] i32 (compressed ids, >= 0); out: [B, T, heads] i32. with_offsets: rows of the
// concatenated table (hash + offset_h) rather than per-head hashes. AVX-512 or scalar path
// (SOL_ISA), bit-identical.
void ngram_hash(const Tensor& ids, const Tensor& out, const HashConfig& config, bool with_offsets = true);
// The plain reference (one token at a time, 64-bit `%`), for tests.
void ngram_hash_reference(const Tensor& ids, const Tensor& out, const HashConfig& config, bool with_offsets);

// Embedding tables of `rows` rows of `dim` elements split by rows across the ranks of a group:
// rank r holds rows [row_begin(r), row_begin(r+1)), the first rows % size ranks one row more.
//
// Within one node (group.num_nodes() == 1) the shards live in a comm::Window: a lookup copies
// each wanted row straight out of its owner's shard into `out` (one copy per row; only one flag
// per rank is exchanged) and ends with the window's fence. Across nodes, indices and rows are
// exchanged (all_to_all_v, or batched send/recv for the async form).
class ShardedTable;

// A lookup in flight. One node: the indices are checked by every rank; the rows are copied
// inside test() (a bounded chunk per call) and wait(). Across nodes: the indices are already
// exchanged and the local rows sent; the transfers progress inside test() and wait(). Either
// way, call test() between pieces of other work to keep it moving; it is true once the lookup
// is complete (rows in `out`, and every peer done reading this rank's shard).
class LookupHandle {
 public:
  LookupHandle();
  ~LookupHandle();  // completes a lookup still in flight (so does assigning over it)
  LookupHandle(LookupHandle&&) noexcept;
  LookupHandle& operator=(LookupHandle&&) noexcept;
  void wait();
  bool test();

  struct State;  // internal

 private:
  friend class ShardedTable;
  std::unique_ptr<State> state_;
};

class ShardedTable {
 public:
  // Collective construction: every rank passes the same rows, dim, dtype (within one node it
  // maps the peers' shards).
  ShardedTable(const comm::Group& group, int64_t rows, int64_t dim, DType dtype);
  ~ShardedTable();
  ShardedTable(ShardedTable&&) noexcept;

  int64_t rows() const;
  int64_t dim() const;
  int64_t row_begin(int rank) const;  // rank in 0..size; row_begin(size) = rows
  // This rank's rows: [row_begin(rank+1) - row_begin(rank), dim], to fill or train. Peers
  // read them during lookups: write them only between lookups (once this rank's lookup or
  // wait() has returned, no peer reads them until the next lookup starts).
  const Tensor& local() const;
  // True when lookups copy rows straight from peers' shards (the group shares one node).
  bool one_sided() const;

  // Collective. indices: [T, H] i32, any values in [0, rows) (repeats allowed); out: [T, H, dim]
  // of the table's dtype, contiguous. Ranks may pass different T. Any out-of-range index on any
  // rank makes every rank throw sol::Error (the offending rank names the index).
  void lookup(const Tensor& indices, const Tensor& out) const;
  // The same, returning before the rows arrive (a layer can prefetch its rows while earlier
  // layers compute). indices and out must stay alive until the lookup completes; at most one
  // lookup of a table may be in flight.
  LookupHandle lookup_async(const Tensor& indices, const Tensor& out) const;

  struct Impl;  // internal

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sol::engram
