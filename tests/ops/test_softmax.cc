#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/stream_threshold.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/softmax.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

// Enough rows that every thread's range takes the pipelined AVX-512 kernel (32 rows or more per
// thread, src/ops/softmax/softmax.cc), with 8 more so the ranges differ.
int64_t pipelined_rows() { return 32 * int64_t(num_threads()) + 8; }

// The fp64 softmax of a bf16 row (no NaN or +inf in it).
std::vector<double> fp64_softmax(const uint16_t* x, int64_t n) {
  double mx = -INFINITY, sum = 0;
  for (int64_t c = 0; c < n; ++c) mx = std::max(mx, double(bf16_to_f32(x[c])));
  std::vector<double> p(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) sum += p[size_t(c)] = std::exp(double(bf16_to_f32(x[c])) - mx);
  for (double& v : p) v /= sum;
  return p;
}

// A bf16 output of a bf16 softmax (sol/softmax.h): within 0.75 of a bf16 ulp of the exact value
// want >= 0 (a correctly rounded result is within 0.5; the one-degree exponential adds < 0.1),
// so it is the correctly rounded value or, near a tie, its neighbour. Ulps of bf16 subnormals
// below 2^-126.
bool bf16_close(uint16_t got_bits, double want) {
  const double got = bf16_to_f32(got_bits);
  int e = 0;
  std::frexp(want, &e);  // want = m 2^e, m in [0.5, 1): its binade's ulp is 2^(e - 1 - 7)
  const double ulp = std::ldexp(1.0, std::max(e - 1, -126) - 7);
  return std::fabs(got - want) <= 0.75 * ulp;
}

TEST(Softmax, MasksNaNAndInfinityRows) {
  for_each_isa([] {
    const int64_t n = 37;
    Buffer x(DType::f32, {4, n}), y(DType::f32, {4, n});
    fill_random(x, 2, 5.0);
    float* p = x.tensor().data_as<float>();
    for (int64_t i = 0; i < n; i += 2) p[i] = -INFINITY;  // row 0: half masked
    p[n + 5] = NAN;                                        // row 1: NaN
    p[2 * n + 7] = INFINITY;                               // row 2: +inf
    softmax(x, y);
    const float* q = y.tensor().data_as<float>();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        EXPECT_EQ(q[i], 0.0f);
      }
      sum += q[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[n + i]));
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[2 * n + i]));
    sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += q[3 * n + i];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  });
}

// The AVX-512 row runs 32 elements per step (bf16: even / odd halves of a line) with masked
// 16-lane tails: every input dtype, lengths around the step, outputs off a 64-byte line and
// outputs large enough to stream must give the fp64 softmax to f32 accuracy; a bf16 output is
// the rounding of the f32 output bit for bit for f32 input, and within bf16_close of the fp64
// softmax for bf16 input (its own, cheaper exponential: sol/softmax.h).
TEST(Softmax, EveryDtypeLengthAndAlignmentMatchesFp64) {
  const testing_stream::LowStreamThreshold low;
  for_each_isa([] {
    for (DType in : {DType::f32, DType::bf16})
      for (int64_t n : {1, 15, 31, 32, 33, 64, 100, 1031, 999}) {
        const int64_t rows = n == 999 && active_isa() >= Isa::avx512 ? testing_stream::kStreamBytes / (2 * n) + 3 : 3;
        Buffer x(in, {rows, n}), y32(DType::f32, {rows, n}), y16(DType::bf16, {rows * n + 1});
        fill_random(x, uint64_t(n), 12.0);
        poison(y32);
        poison(y16);
        softmax(x, y32);
        for (int64_t offset : {0, 1}) {
          Tensor view(y16.tensor().data_as<uint16_t>() + offset, DType::bf16, {rows, n});
          softmax(x, view);
          int64_t unrounded = 0;
          if (in == DType::f32) {
            for (int64_t i = 0; i < rows * n; ++i)
              unrounded += view.data_as<uint16_t>()[i] != f32_to_bf16(y32.tensor().data_as<float>()[i]);
          } else {
            for (int64_t r = 0; r < rows; ++r) {
              const std::vector<double> want = fp64_softmax(x.tensor().data_as<uint16_t>() + r * n, n);
              for (int64_t c = 0; c < n; ++c) unrounded += !bf16_close(view.data_as<uint16_t>()[r * n + c], want[size_t(c)]);
            }
          }
          EXPECT_EQ(unrounded, 0) << dtype_name(in) << " n " << n << " offset " << offset;
        }
        int64_t far = 0;
        for (int64_t r = 0; r < std::min<int64_t>(rows, 5); ++r) {
          auto xv = [&](int64_t c) -> double {
            const int64_t i = r * n + c;
            return in == DType::bf16 ? bf16_to_f32(x.tensor().data_as<uint16_t>()[i]) : x.tensor().data_as<float>()[i];
          };
          double mx = -INFINITY, sum = 0;
          for (int64_t c = 0; c < n; ++c) mx = std::max(mx, xv(c));
          for (int64_t c = 0; c < n; ++c) sum += std::exp(xv(c) - mx);
          for (int64_t c = 0; c < n; ++c) {
            const double want = std::exp(xv(c) - mx) / sum, got = y32.tensor().data_as<float>()[r * n + c];
            far += !(std::fabs(got - want) <= 2e-6 * want + 1e-30);
          }
        }
        EXPECT_EQ(far, 0) << dtype_name(in) << " n " << n;
      }
  });
}

// The AVX-512 exponential reduces x - max to a 16th of ln2 through a register table and a
// cubic: every residue k mod 16 of the table, exponents from 0 down to where the output leaves
// the normal range, on the one-row and the pipelined paths, must give the fp64 softmax per
// element to f32 accuracy (2e-6 relative; below ~1e-30 the outputs are subnormal or zero and
// only their size is checked). Entries far below the maximum (x - max < -104, or -inf) round
// to zero.
TEST(Softmax, WideExponentRangeMatchesFp64PerElement) {
  for_each_isa([] {
    for (DType in : {DType::f32, DType::bf16})
      for (int64_t rows : {int64_t(3), pipelined_rows()}) {
        const int64_t n = 1031;
        Buffer x(in, {rows, n}), y(DType::f32, {rows, n});
        std::vector<double> xd(size_t(rows * n));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < n; ++c) {
            // max = 5 + r / 8 at c = 0; then x - max spread over [-120, 0] with a fine
            // fractional part (every k mod 16), two entries far below and one -inf.
            double v = 5.0 + double(r) / 8 - std::fmod(double(c) * 0.6180339887 * 193.7, 120.0);
            if (c == 0) v = 5.0 + double(r) / 8;
            if (c == 7) v = -1e6;
            if (c == 9) v = -INFINITY;
            const int64_t i = r * n + c;
            if (in == DType::bf16) {
              x.tensor().data_as<uint16_t>()[i] = f32_to_bf16(float(v));
              xd[size_t(i)] = bf16_to_f32(x.tensor().data_as<uint16_t>()[i]);
            } else {
              x.tensor().data_as<float>()[i] = float(v);
              xd[size_t(i)] = double(float(v));
            }
          }
        poison(y);
        softmax(x, y);
        int64_t far = 0, checked = 0;
        for (int64_t r = 0; r < rows; ++r) {
          double mx = -INFINITY, sum = 0;
          for (int64_t c = 0; c < n; ++c) mx = std::max(mx, xd[size_t(r * n + c)]);
          for (int64_t c = 0; c < n; ++c) sum += std::exp(xd[size_t(r * n + c)] - mx);
          for (int64_t c = 0; c < n; ++c) {
            if (c == 9) continue;  // -inf: exactly zero, below
            const double d = xd[size_t(r * n + c)] - mx, want = std::exp(d) / sum;
            const double got = y.tensor().data_as<float>()[r * n + c];
            // f32 inputs: x - max itself rounds to f32 (half an ulp, |d| 2^-24 relative in the
            // result); bf16 inputs subtract exactly in f32 over this range.
            const double rel = 2e-6 + (in == DType::f32 ? std::fabs(d) * 0x1p-24 : 0.0);
            checked += want > 1e-30;
            const bool bad = !(std::fabs(got - want) <= rel * want + 1e-30);
            if (bad && far < 3) ADD_FAILURE() << "entry " << c << ": x - max " << d << " got " << got << " want " << want;
            far += bad;
          }
          EXPECT_EQ(y.tensor().data_as<float>()[r * n + 7], 0.0f);
          EXPECT_EQ(y.tensor().data_as<float>()[r * n + 9], 0.0f);
        }
        EXPECT_EQ(far, 0) << dtype_name(in) << " rows " << rows;
        EXPECT_GT(checked, rows * n / 3);  // ~45% of the entries are checked relative, not absolute
      }
  });
}

// f32 rows take two passes (kernels/softmax.h): per-lane sums of exp(x - ref) against a
// reference that is raised, and the sum rescaled, when a 256-element chunk holds a value more
// than 64 above it. Rows that rise through every chunk (a rescale each time), start with -inf
// chunks, hold the largest finite magnitudes (x - max overflows to -inf), fall, or carry NaN or
// +inf in a later chunk, the second half of a step or the tail, must give the fp64 softmax per
// element (NaN everywhere for NaN, +inf and all -inf rows), for lengths around the step and the
// chunk, on the one-row (in place) and pipelined paths, with the same bits.
TEST(Softmax, F32RowsRescaleTheirSums) {
  for_each_isa([] {
    for (int64_t n : {1, 15, 31, 32, 33, 255, 256, 257, 300, 1031})
      for (int64_t rows : {int64_t(8), pipelined_rows()}) {
        Buffer x(DType::f32, {rows, n}), y(DType::f32, {rows, n}), in_place(DType::f32, {rows, n});
        float* p = x.tensor().data_as<float>();
        auto at = [&](int64_t c) { return std::min(c, n - 1); };
        for (int64_t r = 0; r < rows; ++r) {
          float* row = p + r * n;
          const int64_t kind = r % 8;
          for (int64_t c = 0; c < n; ++c) {
            const double frac = std::fmod(double(c + r) * 0.6180339887, 1.0);  // every table residue
            if (kind == 0) row[c] = float(0.3 * double(c) + frac - 40);        // rises ~77 per chunk
            if (kind == 1) row[c] = c < n / 2 ? -INFINITY : float(10 * frac);  // -inf chunks first
            if (kind == 2) row[c] = -FLT_MAX;
            if (kind == 3) row[c] = float(-0.3 * double(c) - frac);
            if (kind >= 4) row[c] = float(20 * frac - 10);
          }
          if (kind == 2) row[at(5)] = row[at(1030)] = FLT_MAX;  // one or two entries of the row's weight
          if (kind == 4) row[at(2 * 256 + 20)] = NAN;
          if (kind == 5) row[at(1030)] = INFINITY;
          if (kind == 6)
            for (int64_t c = 0; c < n; ++c) row[c] = -INFINITY;
        }
        std::memcpy(in_place.data(), x.data(), size_t(rows * n * 4));
        poison(y);
        softmax(x, y);
        softmax(in_place, in_place);
        const float* q = y.tensor().data_as<float>();
        // Same bits on both paths; a NaN may differ in its sign bit (which operand an x86 op
        // passes on when two are NaN is the compiler's choice), as Bf16RowsMaxFromBitPatterns allows.
        const float* qi = in_place.tensor().data_as<float>();
        int64_t differ = 0;
        for (int64_t i = 0; i < rows * n; ++i)
          differ += std::memcmp(q + i, qi + i, 4) != 0 && !(std::isnan(q[i]) && std::isnan(qi[i]));
        EXPECT_EQ(differ, 0) << "n " << n << " rows " << rows;
        int64_t far = 0, checked = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = p + r * n;
          double mx = -INFINITY, sum = 0;
          bool nan = false;
          for (int64_t c = 0; c < n; ++c) {
            nan |= std::isnan(row[c]);
            mx = std::max(mx, double(row[c]));
          }
          if (nan || !std::isfinite(mx)) {
            for (int64_t c = 0; c < n; ++c) far += !std::isnan(q[r * n + c]);
            continue;
          }
          for (int64_t c = 0; c < n; ++c) sum += std::exp(double(row[c]) - mx);
          for (int64_t c = 0; c < n; ++c) {
            const double d = double(row[c]) - mx, want = std::exp(d) / sum, got = q[r * n + c];
            // x - max rounds to f32 (|d| 2^-24 relative in the result) unless it overflows, and
            // then exp gives 0 as fp64 does.
            const double rel = 2e-6 + (std::isfinite(d) ? std::fabs(d) * 0x1p-24 : 0.0);
            checked += want > 1e-30;
            const bool bad = !(std::fabs(got - want) <= rel * want + 1e-30) || (row[c] == -INFINITY && got != 0.0);
            if (bad && far < 3) ADD_FAILURE() << "n " << n << " row " << r << " entry " << c << ": got " << got << " want " << want;
            far += bad;
          }
        }
        EXPECT_EQ(far, 0) << "n " << n << " rows " << rows;
        EXPECT_GT(checked, rows * n / 8);
      }
  });
}

// Every finite bf16 number as an input: the negative ones in rows of 31 behind a 0 (x - max = x,
// so the exponential sees every negative bf16 argument, down to where the output is 0), the
// positive ones in rows of 32 neighbours (x - max a few ulps below 0 at every scale). bf16
// outputs within bf16_close of the fp64 softmax, f32 outputs to 2e-6 relative, on the one-row
// (in place) and pipelined paths.
TEST(Softmax, EveryBf16InputMatchesFp64) {
  std::vector<uint16_t> values;
  for (uint32_t b = 0x8000; b < 0xFF80; ++b) values.push_back(uint16_t(b));  // -0 .. the lowest finite
  const size_t negatives = values.size();
  for (uint32_t b = 0; b < 0x7F80; ++b) values.push_back(uint16_t(b));  // +0 .. the largest finite
  const int64_t n = 32;
  std::vector<uint16_t> rows_bits;
  for (size_t i = 0; i < negatives; i += 31) {
    rows_bits.push_back(0);
    for (size_t j = i; j < i + 31; ++j) rows_bits.push_back(values[std::min(j, negatives - 1)]);
  }
  for (size_t i = negatives; i < values.size(); i += 32)
    for (size_t j = i; j < i + 32; ++j) rows_bits.push_back(values[std::min(j, values.size() - 1)]);
  const int64_t rows = int64_t(rows_bits.size()) / n;
  for_each_isa([&] {
    for (DType out : {DType::bf16, DType::f32}) {
      Buffer x(DType::bf16, {rows, n}), y(out, {rows, n}), in_place(DType::bf16, {rows, n}), y_in_place(out, {rows, n});
      std::memcpy(x.data(), rows_bits.data(), rows_bits.size() * 2);
      poison(y);
      softmax(x, y);
      const Tensor* checked = &y.tensor();
      Buffer* one_row = &y;
      if (out == DType::bf16) {  // in place: the one-row kernel
        std::memcpy(in_place.data(), x.data(), rows_bits.size() * 2);
        softmax(in_place, in_place);
        one_row = &in_place;
      } else {  // few rows per call: the one-row kernel too
        poison(y_in_place);
        for (int64_t r = 0; r < rows; r += 8) {
          const int64_t r1 = std::min(rows, r + 8);
          softmax(x.tensor().slice(0, r, r1), y_in_place.tensor().slice(0, r, r1));
        }
        one_row = &y_in_place;
      }
      for (const Tensor* t : {checked, &one_row->tensor()}) {
        int64_t far = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<double> want = fp64_softmax(rows_bits.data() + r * n, n);
          for (int64_t c = 0; c < n; ++c) {
            const int64_t i = r * n + c;
            const bool bad = out == DType::bf16
                                 ? !bf16_close(t->data_as<uint16_t>()[i], want[size_t(c)])
                                 : !(std::fabs(t->data_as<float>()[i] - want[size_t(c)]) <= 2e-6 * want[size_t(c)] + 1e-30);
            if (bad && far < 3) ADD_FAILURE() << "x " << bf16_to_f32(rows_bits[size_t(i)]) << " (row " << r << ") want " << want[size_t(c)];
            far += bad;
          }
        }
        EXPECT_EQ(far, 0) << dtype_name(out);
      }
    }
  });
}

// The pipelined bf16 kernel takes each row's maximum from the bit patterns (signed maximum,
// else unsigned minimum). Rows that are all negative (with and without -inf), hold a positive or
// a negative NaN, +inf, only -inf, or only -0 and negatives, as the first, a middle and the last
// row of a call and in the tail of a step, must give the fp64 softmax per element (NaN
// everywhere for the NaN, +inf and all -inf rows), the same as the one-row kernel (in place).
TEST(Softmax, Bf16RowsMaxFromBitPatterns) {
  for_each_isa([] {
    for (DType out : {DType::bf16, DType::f32})
      for (int64_t n : {37, 64, 1031})
        for (int64_t rotate = 0; rotate < 8; ++rotate) {
          const int64_t rows = pipelined_rows();
          Buffer x(DType::bf16, {rows, n}), y(out, {rows, n}), in_place(DType::bf16, {rows, n});
          fill_random(x, uint64_t(n + rotate), 6.0);
          uint16_t* p = x.tensor().data_as<uint16_t>();
          std::vector<bool> nan_row(size_t(rows), false);
          for (int64_t r = 0; r < rows; ++r) {
            uint16_t* row = p + r * n;
            const int64_t kind = (r + rotate) % 8, at = (r * 7) % n;
            if (kind <= 1 || kind == 6) {
              for (int64_t c = 0; c < n; ++c) row[c] |= 0x8000;  // every number negative,
              row[(at + 1) % n] = f32_to_bf16(-200.0f);           // spread beyond exp's range
            }
            if (kind == 1) row[at] = row[n - 1] = 0xFF80;       // -inf among them
            if (kind == 6) row[n - 1] = 0x8000;                  // -0 the maximum
            if (kind == 2) row[at] = 0x7FC1;                     // positive NaN
            if (kind == 3) row[n - 1] = 0xFFC1;                  // negative NaN
            if (kind == 4) row[at] = 0x7F80;                     // +inf
            if (kind == 5)
              for (int64_t c = 0; c < n; ++c) row[c] = 0xFF80;
            nan_row[size_t(r)] = kind >= 2 && kind <= 5;
          }
          poison(y);
          softmax(x, y);
          Buffer y1(out, {rows, n});
          if (out == DType::bf16) {
            std::memcpy(in_place.data(), x.data(), size_t(rows * n * 2));
            softmax(in_place, in_place);
            std::memcpy(y1.data(), in_place.data(), size_t(rows * n * 2));
          } else {
            poison(y1);
            for (int64_t r = 0; r < rows; ++r) softmax(x.tensor().slice(0, r, r + 1), y1.tensor().slice(0, r, r + 1));
          }
          int64_t far = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<double> want = nan_row[size_t(r)] ? std::vector<double>() : fp64_softmax(p + r * n, n);
            for (int64_t c = 0; c < n; ++c) {
              const int64_t i = r * n + c;
              for (const Buffer* b : {&y, &y1}) {
                const double got = out == DType::bf16 ? double(bf16_to_f32(b->tensor().data_as<uint16_t>()[i]))
                                                      : double(b->tensor().data_as<float>()[i]);
                bool bad;
                if (nan_row[size_t(r)]) bad = !std::isnan(got);
                else if (out == DType::bf16) bad = !bf16_close(b->tensor().data_as<uint16_t>()[i], want[size_t(c)]);
                else bad = !(std::fabs(got - want[size_t(c)]) <= 2e-6 * want[size_t(c)] + 1e-30);
                if (bad && far < 3) ADD_FAILURE() << "n " << n << " rotate " << rotate << " row " << r << " entry " << c << ": got " << got;
                far += bad;
              }
              if (!nan_row[size_t(r)]) {
                const size_t es = dtype_size(out);
                far += std::memcmp(y.tensor().data_as<char>() + i * es, y1.tensor().data_as<char>() + i * es, es) != 0;
              }
            }
          }
          EXPECT_EQ(far, 0) << dtype_name(out) << " n " << n << " rotate " << rotate;
        }
  });
}

// bf16 outputs on both sides of 2^-126 from the pipelined kernel: rows {0, d, d, ...} with d
// stepping through [-92, -84] must give the fp64 softmax per element (vcvtne2ps2bf16 reads a
// subnormal as 0; the conversion's guard must catch every such line).
TEST(Softmax, Bf16OutputsAroundTheSubnormalBound) {
  for_each_isa([] {
    const int64_t n = 64, rows = pipelined_rows();
    Buffer x(DType::bf16, {rows, n}), y(DType::bf16, {rows, n});
    uint16_t* p = x.tensor().data_as<uint16_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t d = f32_to_bf16(-84.0f - 0.5f * float(r % 17));  // -84 .. -92, bf16's steps of 0.5
      for (int64_t c = 0; c < n; ++c) p[r * n + c] = c == r % n ? 0 : d;
    }
    poison(y);
    softmax(x, y);
    int64_t far = 0, subnormal = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> want = fp64_softmax(p + r * n, n);
      for (int64_t c = 0; c < n; ++c) {
        const uint16_t got = y.tensor().data_as<uint16_t>()[r * n + c];
        subnormal += (got & 0x7F80) == 0 && got != 0;
        const bool bad = !bf16_close(got, want[size_t(c)]);
        if (bad && far < 3) ADD_FAILURE() << "row " << r << " entry " << c << ": got " << bf16_to_f32(got) << " want " << want[size_t(c)];
        far += bad;
      }
    }
    EXPECT_EQ(far, 0);
    EXPECT_GT(subnormal, rows * n / 4);
  });
}

TEST(Softmax, InPlaceAndHigherRank) {
  Buffer x(DType::bf16, {2, 3, 100}), y(DType::bf16, {2, 3, 100});
  fill_random(x, 5);
  softmax(x, y);
  softmax(x, x);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), size_t(x.tensor().nbytes())), 0);
}

// Out of place, bf16 input runs the pipelined AVX-512 kernel from 32 rows per thread on (row
// r's exponentials beside row r - 1's stores and row r + 1's maximum); in place runs one row
// per call. Both must give the
// same bits for every row count (first, middle and last stages), lengths with tails, outputs
// off a line, and streamed outputs.
TEST(Softmax, PipelinedRowsMatchOneRowAtATime) {
  for_each_isa([] {
    const testing_stream::LowStreamThreshold low;
    for (DType in : {DType::bf16, DType::f32})
      for (int64_t n : {33, 64, 1031, 1024})
        for (int64_t rows : {int64_t(1), int64_t(2), int64_t(31), int64_t(32), int64_t(33), int64_t(67),
                             n == 1024 ? testing_stream::kStreamBytes / (2 * n) + 3 : 5})
          for (int64_t offset : {0, 1}) {
            const int64_t es = int64_t(dtype_size(in));
            Buffer x(in, {rows, n}), ybuf(in, {rows * n + 1}), ref(in, {rows * n + 1});
            fill_random(x, uint64_t(n + rows), 12.0);
            poison(ybuf);
            Tensor y(ybuf.tensor().data_as<char>() + offset * es, in, {rows, n});
            Tensor in_place(ref.tensor().data_as<char>() + offset * es, in, {rows, n});
            std::memcpy(in_place.data(), x.data(), size_t(rows * n * es));
            softmax(x, y);
            softmax(in_place, in_place);
            EXPECT_EQ(std::memcmp(y.data(), in_place.data(), size_t(rows * n * es)), 0)
                << dtype_name(in) << " n " << n << " rows " << rows << " offset " << offset;
          }
  });
}

TEST(Softmax, BadInputIsNamed) {
  Buffer x(DType::f32, {4, 8}), y(DType::f32, {4, 9}), yi(DType::i32, {4, 8});
  EXPECT_THROW(softmax(x, y), Error);
  EXPECT_THROW(softmax(x, yi), Error);
  EXPECT_THROW(softmax(x.tensor().slice(1, 0, 4), Buffer(DType::f32, {4, 4}).tensor()), Error);
  EXPECT_THROW(softmax(x.tensor().slice(0, 0, 2), x.tensor().slice(0, 1, 3)), Error);  // partial overlap
}

}  // namespace
}  // namespace sol
