// Adversarial tests of the GEMM panel packers (ops/gemm/packing.cc, the AVX-512 packers of
// kernels/x86/avx512/gemm_pack_avx512.cc) and the blocked driver's side stream: the panel
// layouts bit for bit against plain loops, then whole GEMMs against the fp64 reference on
// every path, with K tails around the packers' 16-step chunks, partial and half-empty
// 32-column panels, strided and oddly offset operands, decode shapes that cross several
// column blocks, packed-vs-plain and one-vs-two-thread bitwise identity.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/random_bytes.h"
#include "kernels/e4m3_bf16_table.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/packing.h"
#include "ops/gemm/reference.h"
#include "ops/gemm_paths.h"
#include "sol/copy.h"
#include "sol/gemm.h"
#include "sol/threads.h"

namespace sol {
namespace {

using kernels::kGemmMR;
using kernels::kGemmNR;
using testing_paths::for_each_gemm_path;

bool is_int(DType t) { return t == DType::i8 || t == DType::u8; }


// A [rows, cols] view at column `offset` of rows of offset + cols + pad elements. Everything
// outside the view is loud (NaN bits for floats, 0x7F for int8), so a packer that reads past
// a row or a column shows in the result. `guarded`: the view's last element ends a page and
// the next page is unmapped, so a read (or write) one byte past the last row faults.
class Operand {
 public:
  Operand(DType t, int64_t rows, int64_t cols, int64_t pad, int64_t offset, uint64_t seed, bool guarded = false)
      : type_(t), ld_(offset + cols + pad) {
    const int64_t es = int64_t(dtype_size(t));
    bytes_ = size_t(rows * ld_ * es);
    if (guarded && rows > 0 && cols > 0) {
      const size_t page = size_t(sysconf(_SC_PAGESIZE));
      const size_t used = size_t(((rows - 1) * ld_ + offset + cols) * es);  // up to the view's end
      const size_t body = (used + page - 1) / page * page;
      map_bytes_ = body + page;
      map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (map_ == MAP_FAILED) throw std::runtime_error("mmap failed");
      mprotect(static_cast<char*>(map_) + body, page, PROT_NONE);
      base_ = static_cast<char*>(map_) + body - used;
      bytes_ = used;
    } else {
      buf_ = Buffer(t, {rows, ld_});
      base_ = buf_.data();
    }
    const int64_t shape[] = {rows, cols}, strides[] = {ld_, 1};
    view = Tensor(static_cast<char*>(base_) + offset * es, t, shape, strides);
    fill_all(is_int(t) ? 0x7F : 0xFF);
    Buffer values(t, {rows, cols});
    if (is_int(t) || t == DType::f8e4m3) fill_bytes(values, seed, t == DType::f8e4m3);
    else fill_random(values, seed, t == DType::i32 ? 1e6 : 1.0);
    copy(values, view);
  }
  ~Operand() {
    if (map_) munmap(map_, map_bytes_);
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  // Every byte of the rows (views and pads) set to `byte`.
  void fill_all(uint8_t byte) const { std::memset(base_, byte, bytes_); }
  // Byte 0 of element (row, col) of the underlying rows (col may be outside the view).
  uint8_t byte_at(int64_t row, int64_t col) const {
    return static_cast<const uint8_t*>(base_)[(row * ld_ + col) * int64_t(dtype_size(type_))];
  }
  int64_t ld() const { return ld_; }

  Tensor view;

 private:
  DType type_;
  int64_t ld_;
  Buffer buf_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// ---- the panels, bit for bit --------------------------------------------------------------

// The bulk of the cases on one thread: on a loaded machine each OpenMP region of a tiny GEMM
// (and of the copies that build its operands) costs more than its arithmetic. Two threads:
// BitwiseIdenticalForOneAndTwoThreads.
struct OneThread {
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(0); }
};

struct SetIsa {
  explicit SetIsa(const char* isa) { setenv("SOL_ISA", isa, 1); }
  ~SetIsa() { unsetenv("SOL_ISA"); }
};

// Slot (step s, row i) of an A panel as the micro-kernel reads it: f32 bits; bf16 (k, k+1)
// pairs; e4m3 pairs widened to bf16; int8 quads (s8 + 128); zeros past kc.
uint32_t a_slot(const Tensor& a, DType t, int64_t row, int64_t k0, int64_t kc, int64_t s) {
  const int64_t group = t == DType::f32 ? 1 : t == DType::bf16 || t == DType::f8e4m3 ? 2 : 4;
  uint32_t v = 0;
  for (int64_t j = 0; j < group; ++j) {
    const int64_t k = s * group + j;
    if (k >= kc) break;
    const void* e = a.ptr({row, k0 + k});
    if (t == DType::f32) v = *static_cast<const uint32_t*>(e);
    else if (t == DType::bf16) v |= uint32_t(*static_cast<const uint16_t*>(e)) << (16 * j);
    else if (t == DType::f8e4m3)
      v |= uint32_t(kernels::kE4m3CodesToBf16.bits[*static_cast<const uint8_t*>(e)]) << (16 * j);
    else v |= uint32_t(uint8_t(*static_cast<const uint8_t*>(e) ^ (t == DType::i8 ? 0x80 : 0))) << (8 * j);
  }
  return v;
}

// The vector levels whose GEMM has its own packers (avx2, avx512; amx packs A as avx512).
std::vector<const char*> packer_levels() {
  std::vector<const char*> levels;
  if (isa_at_least(Isa::avx2)) levels.push_back("avx2");
  if (isa_at_least(Isa::avx512)) levels.push_back("avx512");
  return levels;
}

TEST(GemmPacking, APanelsMatchTheirLayoutBitForBit) {
  OneThread one_thread;
  if (packer_levels().empty()) GTEST_SKIP() << "no vector packer on this CPU";
  const auto check_level = [](const char* level) {
    SCOPED_TRACE(level);
    const kernels::GemmKernels& kern = gemm_detail::gemm_kernels();
    for (DType t : {DType::f32, DType::bf16, DType::f8e4m3, DType::i8, DType::u8}) {
      const int64_t k_total = 131;
      Operand a(t, 40, k_total, 5, 1, 7);  // lda > K, at an odd element offset
      for (int64_t rows : {1, 3, 4, 5, 8, 11, 12})
        for (int64_t kc : {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127}) {
          const int64_t k0 = t == DType::f32 ? 3 : 4;
          const int64_t group = t == DType::f32 ? 1 : t == DType::bf16 || t == DType::f8e4m3 ? 2 : 4;
          const int64_t steps = (kc + group - 1) / group, first_row = 40 - rows - 3;
          // A bf16 pair as two f32 per row of the panel where the set's tile multiplies by
          // FMAs (kernels/gemm.h); else kGemmMR 32-bit slots a step.
          const int64_t words = gemm_detail::a_step_bytes(kern, gemm_detail::compute_type(t), rows) / 4;
          const bool f32_pairs = gemm_detail::a_f32_pairs(kern, gemm_detail::compute_type(t));
          std::vector<uint32_t> panel(size_t(steps * words + 16), 0xCDCDCDCDu);
          gemm_detail::pack_a_panel(kern, a.view.data(), a.view.stride(0), t, first_row, rows, k0, kc, panel.data());
          int bad = 0;
          for (int64_t s = 0; s < steps; ++s)
            for (int64_t i = 0; i < rows; ++i) {
              const uint32_t want = a_slot(a.view, t, first_row + i, k0, kc, s);
              const uint32_t wants[2] = {f32_pairs ? want << 16 : want, want & 0xFFFF0000u};
              for (int h = 0; h < (f32_pairs ? 2 : 1); ++h) {
                const uint32_t got = panel[size_t(s * words + h * rows + i)];
                if (got != wants[h] && ++bad <= 3)
                  ADD_FAILURE() << dtype_name(t) << " rows=" << rows << " kc=" << kc << " step " << s << " row " << i
                                << (f32_pairs ? (h ? " second" : " first") : "") << ": " << std::hex << got
                                << " != " << wants[h];
              }
            }
          for (size_t j = size_t(steps * words); j < panel.size(); ++j)
            EXPECT_EQ(panel[j], 0xCDCDCDCDu) << dtype_name(t) << " rows=" << rows << " kc=" << kc << ": wrote past the panel";
        }
    }
  };
  for (const char* level : packer_levels()) {
    SetIsa isa(level);
    check_level(level);
  }
  if (isa_at_least(Isa::avx512)) {
    testing_paths::OtherBf16Route other;
    check_level(other.fma() ? "avx512, FMA variant (forced)" : "avx512, vdpbf16ps (FMA masked)");
  }
}

// pack_b_block on each vector path against the plain loops (SOL_ISA=scalar): the same bytes,
// pads and column sums included. Rows are padded and start one element in (misaligned), K
// runs past the vector packers' requests ahead (1001), and N ends in tails of 1..31 columns.
TEST(GemmPacking, BPanelsOfEachVectorPathMatchThePlainLoops) {
  OneThread one_thread;
  if (packer_levels().empty()) GTEST_SKIP() << "no vector packer on this CPU";
  for (const char* level : packer_levels())
    for (DType t : {DType::f32, DType::bf16, DType::i8, DType::f8e4m3})
      for (Layout layout : {Layout::nn, Layout::nt})
        for (int64_t n_total : {1, 7, 16, 17, 31, 33, 63, 65})
          for (int64_t kc : {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 33, 47, 49, 64, 65, 130, 1001}) {
            const int64_t group = t == DType::f32 ? 1 : t == DType::i8 ? 4 : 2, k0 = 4;
            const int64_t k_total = k0 + kc + 3;
            const bool nn = layout == Layout::nn;
            Operand b(t, nn ? k_total : n_total, nn ? n_total : k_total, 3, 1, uint64_t(kc * 131 + n_total));
            const gemm_detail::PlainB plain{b.view.data(), b.view.stride(0), layout};
            // Columns [n0, n0 + nc): from 0, or from 32; one whole panel past n_total.
            for (int64_t n0 : {int64_t(0), int64_t(32)}) {
              if (n0 >= n_total) continue;
              const int64_t nc = (n_total - n0 + kGemmNR - 1) / kGemmNR * kGemmNR + kGemmNR;
              const int64_t panel_elems = (kc + group - 1) / group * group * kGemmNR;
              const int64_t out_es = t == DType::f8e4m3 ? 2 : int64_t(dtype_size(t));
              const size_t bytes = size_t(nc / kGemmNR * panel_elems * out_es + 64);
              std::vector<uint8_t> fast(bytes, 0xCD), slow(bytes, 0xCD);
              std::vector<int32_t> fast_sum(size_t(nc + 1), 0x5A5A5A5A), slow_sum(size_t(nc + 1), 0x5A5A5A5A);
              {
                SetIsa isa(level);
                gemm_detail::pack_b_block(gemm_detail::gemm_kernels(), plain, t, n_total, k0, kc, n0, nc, fast.data(),
                                          panel_elems, t == DType::i8 ? fast_sum.data() : nullptr);
              }
              {
                SetIsa isa("scalar");
                gemm_detail::pack_b_block(gemm_detail::gemm_kernels(), plain, t, n_total, k0, kc, n0, nc, slow.data(),
                                          panel_elems, t == DType::i8 ? slow_sum.data() : nullptr);
              }
              const std::string what = std::string(level) + " " + std::string(dtype_name(t)) + (nn ? " nn" : " nt") + " n=" +
                                       std::to_string(n_total) + " n0=" + std::to_string(n0) +
                                       " kc=" + std::to_string(kc);
              const auto diff = std::mismatch(fast.begin(), fast.end(), slow.begin());
              EXPECT_TRUE(diff.first == fast.end()) << what << ": first differing byte " << (diff.first - fast.begin())
                                                    << " of " << bytes;
              EXPECT_TRUE(fast_sum == slow_sum) << what << ": column sums differ";
              EXPECT_EQ(fast.back(), 0xCD) << what << ": wrote past the panels";
            }
          }
}

// ---- whole GEMMs --------------------------------------------------------------------------

struct Types {
  DType a, b, d;
};
const Types kTypes[] = {{DType::f32, DType::f32, DType::f32},       {DType::bf16, DType::bf16, DType::bf16},
                        {DType::bf16, DType::bf16, DType::f32},     {DType::i8, DType::i8, DType::i32},
                        {DType::u8, DType::i8, DType::i32},         {DType::f8e4m3, DType::f8e4m3, DType::bf16},
                        {DType::f8e4m3, DType::f8e4m3, DType::f32}, {DType::bf16, DType::f8e4m3, DType::f32}};

struct Case {
  Types types;
  int64_t m, n, k;
  Layout layout;
  int64_t pad_a = 0, pad_b = 0, off_b = 0, pad_d = 0;  // pad: extra elements per row
  bool with_c = false;                                 // beta != 0, C strided like D
  bool bias_silu = false;                              // float outputs: + bias, then SiLU
  bool guarded = false;                                // every operand ends at an unmapped page
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.types.a)) + " x " + std::string(dtype_name(c.types.b)) + " -> " +
         std::string(dtype_name(c.types.d)) + (c.layout == Layout::nn ? " nn" : " nt") + " m=" + std::to_string(c.m) +
         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " pad_a=" + std::to_string(c.pad_a) +
         " pad_b=" + std::to_string(c.pad_b) + " off_b=" + std::to_string(c.off_b) +
         " pad_d=" + std::to_string(c.pad_d) + (c.with_c ? " +C" : "") + (c.bias_silu ? " bias silu" : "") +
         (c.guarded ? " guarded" : "");
}

// Runs the case (plain B, then B packed by pack_b) on NaN-filled D; checks D against the fp64
// reference (when asked), that packed equals plain bit for bit, and that D's padding was left
// alone. Returns the plain result.
Buffer run_case(const Case& c, uint64_t seed, bool check = true) {
  const Types& t = c.types;
  const bool nn = c.layout == Layout::nn, fp8 = t.b == DType::f8e4m3;
  Operand a(t.a, c.m, c.k, c.pad_a, 0, seed, c.guarded);
  Operand b(t.b, nn ? c.k : c.n, nn ? c.n : c.k, c.pad_b, c.off_b, seed + 1, c.guarded);
  Operand cm(t.d, c.m, c.n, c.pad_d, 1, seed + 2, c.guarded);
  Operand d_rows(t.d, c.m, c.n, c.pad_d, 1, seed + 3, c.guarded);  // D at an odd offset, ldd > N
  const Tensor& d = d_rows.view;
  Buffer a_scales, b_scales, bias(DType::f32, {c.n});
  fill_random(bias, seed + 5, 1.0);
  GemmOptions opt;
  opt.layout = c.layout;
  if (c.bias_silu && !is_int(t.a)) {
    opt.bias = &bias.tensor();
    opt.activation = Activation::silu;
  }
  if (c.with_c) {
    opt.beta = is_int(t.a) ? 1.0f : 0.5f;
    opt.c = &cm.view;
  }
  if (t.a == DType::f8e4m3) {
    a_scales = Buffer(DType::f32, {c.m, c.k / kFp8ScaleBlock});
    fill_random(a_scales, seed + 3, 1.0);
    for (int64_t i = 0; i < a_scales.tensor().numel(); ++i)
      a_scales.tensor().data_as<float>()[i] = std::fabs(a_scales.tensor().data_as<float>()[i]) + 0.25f;
    opt.a_scales = &a_scales.tensor();
  }
  if (fp8) {
    b_scales = Buffer(DType::f32, {(c.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock, c.k / kFp8ScaleBlock});
    fill_random(b_scales, seed + 4, 1.0);
    for (int64_t i = 0; i < b_scales.tensor().numel(); ++i)
      b_scales.tensor().data_as<float>()[i] = std::fabs(b_scales.tensor().data_as<float>()[i]) * 0.01f + 0.001f;
  }

  auto run = [&](bool packed) {
    d_rows.fill_all(0xFF);  // NaN (or -1): beta = 0 must not read it
    GemmOptions o = opt;
    if (packed) {
      gemm(a.view, pack_b(b.view, c.layout, fp8 ? &b_scales.tensor() : nullptr), d, o);
    } else {
      if (fp8) o.b_scales = &b_scales.tensor();
      gemm(a.view, b.view, d, o);
    }
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j : {int64_t(0), c.n + 1})
        if (j < d_rows.ld()) {
          EXPECT_EQ(d_rows.byte_at(i, j), 0xFF) << describe(c) << ": wrote outside D";
        }
    Buffer out(t.d, {c.m, c.n});
    copy(d, out);
    return out;
  };
  Buffer plain = run(false), packed = run(true);
  CheckResult same = compare_bitwise(packed, plain);
  EXPECT_TRUE(same.pass) << describe(c) << ": packed B vs plain B: " << same.detail;
  if (!check) return plain;

  Buffer ref(is_int(t.a) ? DType::i32 : DType::f32, {c.m, c.n});
  reference_gemm(a.view, b.view, c.layout, c.with_c ? &cm.view : nullptr, 1.0f, opt.beta, opt.bias, opt.activation,
                 ref, opt.a_scales, fp8 ? &b_scales.tensor() : nullptr);
  if (is_int(t.a)) {
    CheckResult r = compare_bitwise(plain, ref);
    EXPECT_TRUE(r.pass) << describe(c) << ": " << r.detail;
    return plain;
  }
  // The tolerances of test_gemm.cc / test_gemm_lowp.cc.
  const bool bf16 = t.a == DType::bf16 || t.d == DType::bf16;
  const double tol = t.d == DType::bf16 ? 1e-2 : fp8 || t.a == DType::f8e4m3 ? 2e-5
                     : bf16                ? 1e-2
                                           : 1e-5 * std::max(1.0, std::sqrt(c.k / 4096.0));
  CheckResult r = compare_relative(plain, ref, tol);
  EXPECT_TRUE(r.pass) << describe(c) << ": " << r.detail;
  EXPECT_LT(gemm_diff_metric(plain, ref), fp8 ? 1e-3 : 1e-4) << describe(c);
  return plain;
}

bool is_fp8(const Types& t) { return t.a == DType::f8e4m3 || t.b == DType::f8e4m3; }

// Strides rotate over the shapes: contiguous; lda > K, ldb > N or K, ldd > N; B at an odd
// element offset, with C; both, with C, bias and SiLU (float outputs).
void apply_variant(Case& c, int v) {
  switch (v % 4) {
    case 0: break;
    case 1: c.pad_a = 5, c.pad_b = 3, c.pad_d = 2; break;
    case 2: c.off_b = 1, c.with_c = true; break;
    default: c.pad_a = 1, c.pad_b = 7, c.off_b = 1, c.pad_d = 3, c.with_c = true, c.bias_silu = true; break;
  }
}

// f(types, layout) for every type pair and layout a GEMM takes (fp8 B is [N, K] only: its
// 128 x 128 scales are laid out that way).
template <class F>
void for_each_type_and_layout(const F& f) {
  for (const Types& t : kTypes)
    for (Layout layout : {Layout::nn, Layout::nt})
      if (!(is_fp8(t) && layout == Layout::nn)) f(t, layout);
}

TEST(GemmPacking, PlainBTailsAndPartialPanelsEveryPath) {
  OneThread one_thread;
  const int64_t ms[] = {1, 8, 12, 13, 16, 17, 25};
  const int64_t ns[] = {1, 31, 33, 63, 65};
  const int64_t ks[] = {1, 2, 3, 5, 7, 15, 17, 31, 33, 47, 49, 63, 65, 129};
  const int64_t fp8_ks[] = {128, 256};
  for_each_gemm_path([&] {
    for_each_type_and_layout([&](const Types& t, Layout layout) {
      int v = 0;
      for (int64_t m : ms)
        for (int64_t n : ns)
          for (int64_t k : is_fp8(t) ? std::vector<int64_t>(std::begin(fp8_ks), std::end(fp8_ks))
                                     : std::vector<int64_t>(std::begin(ks), std::end(ks))) {
            Case c{t, m, n, k, layout};
            apply_variant(c, v++);
            run_case(c, uint64_t(m * 1000 + n * 10 + k));
          }
    });
  });
}

// M <= 16 with a plain B: each tile of a 64-column block requests a share of the next
// block's source; N crosses several blocks and ends in a partial one; K up to a few KC blocks.
TEST(GemmPacking, DecodeAcrossColumnBlocksEveryPath) {
  OneThread one_thread;
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 200, 33}, {7, 321, 130}, {16, 129, 257}, {13, 450, 65}, {16, 97, 1031}, {3, 100, 4133}};  // the last: K blocks
  const Shape fp8_shapes[] = {{1, 321, 256}, {16, 200, 384}, {9, 129, 128}, {2, 130, 4352}};
  for_each_gemm_path([&] {
    for_each_type_and_layout([&](const Types& t, Layout layout) {
      int v = 0;
      for (const Shape& s : is_fp8(t) ? std::vector<Shape>(std::begin(fp8_shapes), std::end(fp8_shapes))
                                      : std::vector<Shape>(std::begin(shapes), std::end(shapes))) {
        Case c{t, s.m, s.n, s.k, layout};
        apply_variant(c, v++);
        run_case(c, uint64_t(s.m + s.n + s.k));
      }
    });
  });
}

TEST(GemmPacking, BitwiseIdenticalForOneAndTwoThreads) {
  struct Shape {
    int64_t m, n, k;
  };
  for_each_type_and_layout([&](const Types& t, Layout layout) {
    for (Shape s : {Shape{16, 321, 257}, Shape{25, 200, 130}, Shape{70, 33, 513}}) {
      if (is_fp8(t)) s.k = (s.k / 128 + 1) * 128;
      Case c{t, s.m, s.n, s.k, layout, 3, 5, 1, 2, true};
      set_num_threads(1);
      Buffer one = run_case(c, 17, false);
      set_num_threads(2);
      Buffer two = run_case(c, 17);
      set_num_threads(0);
      CheckResult r = compare_bitwise(two, one);
      EXPECT_TRUE(r.pass) << describe(c) << ": 2 threads vs 1: " << r.detail;
    }
  });
}

// K = 0: no K step to pack (the packers see kc = 0, the s8 sums are 0); D = beta * C.
TEST(GemmPacking, EmptyKEveryPath) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for_each_type_and_layout([&](const Types& t, Layout layout) {
      for (int64_t m : {1, 13, 25}) {
        Case c{t, m, 65, 0, layout};
        apply_variant(c, 3);
        run_case(c, uint64_t(m));
      }
    });
  });
}

// Every operand's last element ends a page before an unmapped one: a packer, tile or
// epilogue that touches a byte past the last row (a mask one too wide, a tail loaded whole)
// faults here instead of reading whatever happens to follow.
TEST(GemmPacking, NothingReadOrWrittenPastTheLastRowEveryPath) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for_each_type_and_layout([&](const Types& t, Layout layout) {
      int v = 0;
      for (int64_t m : {1, 13, 25})
        for (int64_t n : {1, 33, 65})
          for (int64_t k : is_fp8(t) ? std::vector<int64_t>{128} : std::vector<int64_t>{1, 17, 33, 129}) {
            Case c{t, m, n, k, layout};
            c.off_b = v % 2;
            c.with_c = v % 3 == 0;
            c.guarded = true;
            ++v;
            run_case(c, uint64_t(m + n + k));
          }
    });
  });
}

}  // namespace
}  // namespace sol
