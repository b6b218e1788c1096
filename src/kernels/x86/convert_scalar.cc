// Portable conversion loops over the scalar functions of sol/dtype.h: the baseline path, and
// the definition the vector paths are tested against.
#include <cstring>

#include "kernels/convert.h"
#include "sol/error.h"

namespace sol::kernels {
namespace {

// Storage type and f32 view of each convertible type.
template <DType T> struct Codec;
template <> struct Codec<DType::f32> {
  using Bits = float;
  static float decode(float x) { return x; }
  static float encode(float x) { return x; }
};
template <> struct Codec<DType::bf16> {
  using Bits = uint16_t;
  static float decode(uint16_t b) { return bf16_to_f32(b); }
  static uint16_t encode(float x) { return f32_to_bf16(x); }
};
template <> struct Codec<DType::f16> {
  using Bits = uint16_t;
  static float decode(uint16_t b) { return f16_to_f32(b); }
  static uint16_t encode(float x) { return f32_to_f16(x); }
};
template <> struct Codec<DType::f8e4m3> {
  using Bits = uint8_t;
  static float decode(uint8_t b) { return e4m3_to_f32(b); }
  static uint8_t encode(float x) { return f32_to_e4m3(x); }
};
template <> struct Codec<DType::f8e5m2> {
  using Bits = uint8_t;
  static float decode(uint8_t b) { return e5m2_to_f32(b); }
  static uint8_t encode(float x) { return f32_to_e5m2(x); }
};

template <DType From, DType To>
void convert_elements(const char* src, char* dst, int64_t n) {
  using In = typename Codec<From>::Bits;
  using Out = typename Codec<To>::Bits;
  for (int64_t i = 0; i < n; ++i) {
    In in;
    std::memcpy(&in, src + i * sizeof(In), sizeof(In));
    const Out out = Codec<To>::encode(Codec<From>::decode(in));
    std::memcpy(dst + i * sizeof(Out), &out, sizeof(Out));
  }
}

template <DType From>
void convert_from(const char* src, char* dst, DType to, int64_t n) {
  switch (to) {
    case DType::f32: return convert_elements<From, DType::f32>(src, dst, n);
    case DType::bf16: return convert_elements<From, DType::bf16>(src, dst, n);
    case DType::f16: return convert_elements<From, DType::f16>(src, dst, n);
    case DType::f8e4m3: return convert_elements<From, DType::f8e4m3>(src, dst, n);
    case DType::f8e5m2: return convert_elements<From, DType::f8e5m2>(src, dst, n);
    default: return;
  }
}

}  // namespace

bool convert_supported(DType from, DType to) {
  const auto convertible = [](DType t) {
    return t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::f8e4m3 ||
           t == DType::f8e5m2;
  };
  return convertible(from) && convertible(to);
}

void convert_scalar(const void* src, DType from, void* dst, DType to, int64_t n) {
  check(convert_supported(from, to), "convert", "no conversion from ", dtype_name(from), " to ",
        dtype_name(to), " (supported: f32, bf16, f16, f8e4m3, f8e5m2)");
  if (n <= 0) return;
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  if (from == to) {
    std::memcpy(out, in, size_t(n) * dtype_size(from));
    return;
  }
  switch (from) {
    case DType::f32: return convert_from<DType::f32>(in, out, to, n);
    case DType::bf16: return convert_from<DType::bf16>(in, out, to, n);
    case DType::f16: return convert_from<DType::f16>(in, out, to, n);
    case DType::f8e4m3: return convert_from<DType::f8e4m3>(in, out, to, n);
    case DType::f8e5m2: return convert_from<DType::f8e5m2>(in, out, to, n);
    default: return;
  }
}

}  // namespace sol::kernels
