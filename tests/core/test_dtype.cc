#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "sol/dtype.h"
#include "sol/error.h"

namespace sol {
namespace {

TEST(DType, CanonicalNames) {
  EXPECT_EQ(dtype_name(DType::f32), "f32");
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::f16), "f16");
  EXPECT_EQ(dtype_name(DType::f8e4m3), "f8e4m3");
  EXPECT_EQ(dtype_name(DType::f8e5m2), "f8e5m2");
  EXPECT_EQ(dtype_name(DType::i8), "i8");
  EXPECT_EQ(dtype_name(DType::i32), "i32");
}

TEST(DType, ParseRoundTripsEveryName) {
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
}

TEST(DType, ParseAcceptsAliases) {
  EXPECT_EQ(parse_dtype("e4m3"), DType::f8e4m3);
  EXPECT_EQ(parse_dtype("fp8"), DType::f8e4m3);
  EXPECT_EQ(parse_dtype("e5m2"), DType::f8e5m2);
  EXPECT_EQ(parse_dtype("s8"), DType::i8);
  EXPECT_EQ(parse_dtype("s32"), DType::i32);
  EXPECT_EQ(parse_dtype("s64"), DType::i64);
}

// i64 through the generic element access: exact integers, ties to even, saturation at both
// ends (2^63 is the first double past INT64_MAX), NaN to 0.
TEST(DType, I64ElementsRoundAndSaturate) {
  EXPECT_EQ(dtype_name(DType::i64), "i64");
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_FALSE(is_float(DType::i64));
  int64_t v[7] = {};
  const double in[7] = {-3.0, 2.5, 3.5, 9007199254740992.0, 9223372036854775808.0, -1e300, NAN};
  for (size_t i = 0; i < 7; ++i) store_from_double(v, DType::i64, i, in[i]);
  EXPECT_EQ(v[0], -3);
  EXPECT_EQ(v[1], 2);
  EXPECT_EQ(v[2], 4);
  EXPECT_EQ(v[3], int64_t(1) << 53);
  EXPECT_EQ(v[4], INT64_MAX);
  EXPECT_EQ(v[5], INT64_MIN);
  EXPECT_EQ(v[6], 0);
  EXPECT_EQ(load_as_double(v, DType::i64, 3), 9007199254740992.0);
}

TEST(DType, Sizes) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::f8e4m3), 1u);
  EXPECT_EQ(dtype_size(DType::f8e5m2), 1u);
  EXPECT_EQ(dtype_size(DType::i8), 1u);
}

TEST(DType, FloatTypes) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2}) {
    EXPECT_TRUE(is_float(t)) << dtype_name(t);
  }
  EXPECT_FALSE(is_float(DType::i8));
  EXPECT_FALSE(is_float(DType::i32));
}

std::string parse_error(std::string_view name, std::string_view what) {
  try {
    parse_dtype(name, what);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DType, ParseErrorNamesArgumentValueAndChoices) {
  const std::string message = parse_error("f64", "cast --dtype");
  EXPECT_NE(message.find("cast --dtype: "), std::string::npos) << message;
  EXPECT_NE(message.find("'f64'"), std::string::npos) << message;
  for (const char* accepted : {"f32", "bf16", "f16", "f8e4m3", "e4m3", "fp8", "f8e5m2", "e5m2",
                               "i8", "s8", "i32", "s32"}) {
    EXPECT_NE(message.find(accepted), std::string::npos) << accepted << " missing: " << message;
  }
}

TEST(DType, ParseRejectsNearMisses) {
  for (const char* bad : {"", "F32", "bf16 ", "float32", "e4m3fn", "int8", "f8"}) {
    EXPECT_THROW(parse_dtype(bad), Error) << "'" << bad << "'";
  }
  EXPECT_EQ(parse_error("", "dtype").rfind("dtype: ", 0), 0u);
}

TEST(DType, NameOfInvalidValueThrows) { EXPECT_THROW(dtype_name(DType(200)), Error); }

}  // namespace
}  // namespace sol
