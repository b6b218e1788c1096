// sol.engram: DeepSeek Engram's n-gram hash (HashConfig, make_hash_configs, ngram_hash) and the
// embedding tables sharded by rows across a comm group (ShardedTable, under mpirun).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "sol/engram.h"

namespace solpy {

using namespace nb::literals;

namespace {

namespace eg = sol::engram;

// A numpy array over a Tensor whose memory `owner` keeps alive (as sol.ep's views).
nb::object tensor_view(const sol::Tensor& t, nb::handle owner) {
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  const size_t bytes = sol::dtype_size(t.dtype());
  nb::dlpack::dtype raw{uint8_t(nb::dlpack::dtype_code::UInt), uint8_t(8 * bytes), 1};
  nb::ndarray<nb::numpy> nd(t.data(), shape.size(), shape.data(), owner, t.strides().data(), raw);
  return nb::cast(nd, nb::rv_policy::reference).attr("view")(numpy_dtype(t.dtype()));
}

nb::object hash(nb::handle ids, const eg::HashConfig& config, bool with_offsets, nb::handle out, bool reference) {
  const char* op = reference ? "ngram_hash_reference" : "ngram_hash";
  Array I = input(ids, op, "ids");
  Array O = output_or_new(out, op, "out", {I.dim(0), I.dim(1), int64_t(config.heads())}, sol::DType::i32);
  released([&] {
    if (reference) eg::ngram_hash_reference(*I, *O, config, with_offsets);
    else eg::ngram_hash(*I, *O, config, with_offsets);
  });
  return O.object;
}

// A lookup in flight, with what it reads and writes (and the table it scatters from) alive.
struct PyLookup {
  eg::LookupHandle handle;
  nb::object table;
  std::vector<Array> buffers;
  bool done = false;

  void wait() {
    released([&] { handle.wait(); });
    done = true;
    buffers.clear();
  }
  bool test() {
    if (!done) released([&] { done = handle.test(); });
    if (done) buffers.clear();
    return done;
  }
  ~PyLookup() {
    // LookupHandle waits in its destructor if still in flight: not with the GIL held.
    nb::gil_scoped_release unlocked;
    eg::LookupHandle pending = std::move(handle);
  }
};

void bind_hash(nb::module_& e) {
  nb::class_<eg::HashConfig>(e, "HashConfig",
                             "One layer's hash: max n-gram order N, H heads per order, N odd multipliers, "
                             "(N-1)*H distinct primes (order n = 2 first), pad id.")
      .def("__init__", [](eg::HashConfig* self, int max_ngram, int heads_per_ngram, std::vector<uint64_t> multipliers,
                          std::vector<int64_t> moduli, int64_t pad_id) {
        new (self) eg::HashConfig{max_ngram, heads_per_ngram, std::move(multipliers), std::move(moduli), pad_id};
      }, nb::kw_only(), "max_ngram"_a = 3, "heads_per_ngram"_a = 8, "multipliers"_a = std::vector<uint64_t>{},
      "moduli"_a = std::vector<int64_t>{}, "pad_id"_a = 0)
      .def_rw("max_ngram", &eg::HashConfig::max_ngram)
      .def_rw("heads_per_ngram", &eg::HashConfig::heads_per_ngram)
      .def_rw("multipliers", &eg::HashConfig::multipliers)
      .def_rw("moduli", &eg::HashConfig::moduli)
      .def_rw("pad_id", &eg::HashConfig::pad_id)
      .def_prop_ro("heads", &eg::HashConfig::heads, "(max_ngram - 1) * heads_per_ngram")
      .def("__repr__", [](const eg::HashConfig& c) {
        return "HashConfig(max_ngram=" + std::to_string(c.max_ngram) + ", heads_per_ngram=" +
               std::to_string(c.heads_per_ngram) + ", " + std::to_string(c.multipliers.size()) + " multipliers, " +
               std::to_string(c.moduli.size()) + " moduli, pad_id=" + std::to_string(c.pad_id) + ")";
      });

  e.def("make_hash_configs", [](std::vector<int64_t> vocab_per_ngram, int max_ngram, int heads_per_ngram,
                                std::vector<int> layer_ids, int64_t compressed_vocab, uint64_t seed, int64_t pad_id) {
    std::vector<eg::HashConfig> configs;
    released([&] {
      configs = eg::make_hash_configs(vocab_per_ngram, max_ngram, heads_per_ngram, layer_ids, compressed_vocab, seed, pad_id);
    });
    return configs;
  }, "vocab_per_ngram"_a, "max_ngram"_a, "heads_per_ngram"_a, "layer_ids"_a, "compressed_vocab"_a, nb::kw_only(),
  "seed"_a = 0, "pad_id"_a = 0,
  "One HashConfig per layer as DeepSeek builds them (Sol's splitmix64 multipliers; primes above "
  "vocab_per_ngram[n-2] - 1, distinct across layers, orders and heads).");
  e.def("is_prime", &eg::is_prime, "n"_a, "Deterministic for every 64-bit n.");
  e.def("table_offsets", &eg::table_offsets, "config"_a, "offsets[h] = moduli[0] + ... + moduli[h-1].");
  e.def("total_rows", &eg::total_rows, "config"_a, "Sum of the moduli (throws above 2^31 - 1).");
  e.def("ngram_hash", [](nb::handle ids, const eg::HashConfig& config, bool with_offsets, nb::handle out) {
    return hash(ids, config, with_offsets, out, false);
  }, "ids"_a, "config"_a, nb::kw_only(), "with_offsets"_a = true, "out"_a = nb::none(),
  "ids [B, T] int32 (compressed ids) -> out [B, T, heads] int32: rows of the concatenated table "
  "(hash + offset), or per-head hashes with with_offsets=False.");
  e.def("ngram_hash_reference", [](nb::handle ids, const eg::HashConfig& config, bool with_offsets, nb::handle out) {
    return hash(ids, config, with_offsets, out, true);
  }, "ids"_a, "config"_a, nb::kw_only(), "with_offsets"_a = true, "out"_a = nb::none(),
  "The plain one-token-at-a-time reference of ngram_hash (bit-identical).");
}

void bind_table(nb::module_& e) {
  nb::class_<PyLookup>(e, "LookupHandle", "A lookup_async in flight: wait() writes out; test() progresses it.")
      .def("wait", &PyLookup::wait)
      .def("test", &PyLookup::test);

  nb::class_<eg::ShardedTable>(e, "ShardedTable",
                               "Embedding rows [rows, dim] split by rows across a group's ranks (collective).")
      .def("__init__", [](eg::ShardedTable* self, const sol::comm::Group& group, int64_t rows, int64_t dim,
                          nb::handle dtype) {
        sol::DType dt = dtype_arg(dtype, "ShardedTable", "dtype");
        nb::gil_scoped_release unlocked;
        new (self) eg::ShardedTable(group, rows, dim, dt);
      }, "group"_a, "rows"_a, "dim"_a, "dtype"_a = "bf16")
      .def_prop_ro("rows", &eg::ShardedTable::rows)
      .def_prop_ro("dim", &eg::ShardedTable::dim)
      .def_prop_ro("one_sided", &eg::ShardedTable::one_sided,
                   "True within one node: lookups copy rows straight out of the owners' shards.")
      .def("row_begin", &eg::ShardedTable::row_begin, "rank"_a,
           "First row rank holds (row_begin(size) = rows).")
      .def_prop_ro("local", [](nb::handle self) { return tensor_view(nb::cast<eg::ShardedTable&>(self).local(), self); },
                   "This rank's rows: a writable numpy view [row_begin(rank+1) - row_begin(rank), dim]. Peers read it during "
                   "lookups: write it between lookups only.")
      .def("lookup", [](const eg::ShardedTable& t, nb::handle indices, nb::handle out) {
        Array I = input(indices, "engram lookup", "indices");
        Array O = output_or_new(out, "engram lookup", "out", {I.dim(0), I.dim(1), t.dim()}, t.local().dtype());
        released([&] { t.lookup(*I, *O); });
        return O.object;
      }, "indices"_a, nb::kw_only(), "out"_a = nb::none(),
      "Collective: out[t, h] = row indices[t, h] of the whole table. indices [T, H] int32.")
      .def("lookup_async", [](nb::handle self, nb::handle indices, nb::handle out) {
        const eg::ShardedTable& t = nb::cast<const eg::ShardedTable&>(self);
        Array I = input(indices, "engram lookup", "indices");
        Array O = output_or_new(out, "engram lookup", "out", {I.dim(0), I.dim(1), t.dim()}, t.local().dtype());
        auto h = std::make_unique<PyLookup>();
        released([&] { h->handle = t.lookup_async(*I, *O); });
        h->table = nb::borrow(self);
        nb::object result = O.object;
        h->buffers.push_back(std::move(I));
        h->buffers.push_back(std::move(O));
        return nb::make_tuple(result, nb::cast(h.release(), nb::rv_policy::take_ownership));
      }, "indices"_a, nb::kw_only(), "out"_a = nb::none(),
      "Collective: (out, handle); out is written by handle.wait(). One lookup of a table in flight at a time.");
}

}  // namespace

void bind_engram(nb::module_& m) {
  nb::module_ e = m.def_submodule("engram", "DeepSeek Engram: the n-gram hash and sharded table lookup (sol::engram).");
  bind_hash(e);
  bind_table(e);
}

}  // namespace solpy
