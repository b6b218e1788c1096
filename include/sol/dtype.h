#pragma once
// Element types and exact scalar conversions.
//
// Narrow formats are stored as their raw bits (uint16_t / uint8_t). Every conversion from
// f32 rounds to nearest, ties to even. Saturation rules:
//   bf16, f16, f8e5m2: IEEE-like, overflow becomes ±inf; NaN stays NaN.
//   f8e4m3 (OCP e4m3fn): no infinities, max finite 448; finite overflow saturates to ±448,
//   ±inf saturates to ±448 too, NaN maps to the single NaN code S.1111.111.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sol {

// i64 last: the values of the others stay as they were.
enum class DType : uint8_t { f32, bf16, f16, f8e4m3, f8e5m2, i8, i32, u8, i64 };

inline constexpr DType kAllDTypes[] = {DType::f32,    DType::bf16, DType::f16, DType::f8e4m3,
                                       DType::f8e5m2, DType::i8,   DType::i32, DType::u8,
                                       DType::i64};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    default: return 1;
  }
}
constexpr bool is_float(DType t) { return t != DType::i8 && t != DType::i32 && t != DType::u8 && t != DType::i64; }

std::string_view dtype_name(DType t);
// Parses "f32", "bf16", "f16", "f8e4m3" (alias "e4m3", "fp8"), "f8e5m2" ("e5m2"), "i8" ("s8"),
// "i32" ("s32"), "u8", "i64" ("s64"); throws sol::Error naming `what` on anything else.
DType parse_dtype(std::string_view name, std::string_view what = "dtype");

// Scalar conversions (src/core/convert.cc). The f32 -> narrow direction rounds to nearest even.
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float x);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float x);
float e4m3_to_f32(uint8_t bits);
uint8_t f32_to_e4m3(float x);
float e5m2_to_f32(uint8_t bits);
uint8_t f32_to_e5m2(float x);

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

// Generic element access, for references and tests (slow, exact): reads element i of a
// buffer of type t as double / writes it from double with the conversion rules above
// (integers: round to nearest even, saturate; NaN -> 0).
double load_as_double(const void* base, DType t, size_t i);
void store_from_double(void* base, DType t, size_t i, double v);

}  // namespace sol
