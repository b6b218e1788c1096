#include "sol/dtype.h"

#include "sol/error.h"

namespace sol {
namespace {

struct DTypeSpelling {
  std::string_view name;
  DType dtype;
};

// Canonical names first (dtype_name returns the first spelling of each type), then aliases.
constexpr DTypeSpelling kSpellings[] = {
    {"f32", DType::f32},       {"bf16", DType::bf16},     {"f16", DType::f16},
    {"f8e4m3", DType::f8e4m3}, {"f8e5m2", DType::f8e5m2}, {"i8", DType::i8},
    {"i32", DType::i32},       {"u8", DType::u8},         {"i64", DType::i64},
    {"e4m3", DType::f8e4m3},   {"fp8", DType::f8e4m3},    {"e5m2", DType::f8e5m2},
    {"s8", DType::i8},         {"s32", DType::i32},       {"s64", DType::i64},
};

constexpr std::string_view kAccepted =
    "f32, bf16, f16, f8e4m3 (e4m3, fp8), f8e5m2 (e5m2), i8 (s8), i32 (s32), u8, i64 (s64)";

}  // namespace

std::string_view dtype_name(DType t) {
  for (const DTypeSpelling& s : kSpellings) {
    if (s.dtype == t) return s.name;
  }
  fail("dtype_name", "invalid DType value ", int(t));
}

DType parse_dtype(std::string_view name, std::string_view what) {
  for (const DTypeSpelling& s : kSpellings) {
    if (s.name == name) return s.dtype;
  }
  fail(what, "unknown dtype '", name, "' (expected one of ", kAccepted, ")");
}

}  // namespace sol
