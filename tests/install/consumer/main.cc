// A project outside Sol's tree: find_package(Sol), cast a tensor, print one converted value.
#include <cstdio>

#include <sol/sol.h>

int main() {
  float in[3] = {1.0f, 3.14159f, -448.5f};
  unsigned char out[3] = {};
  sol::cast(sol::Tensor(in, sol::DType::f32, {3}), sol::Tensor(out, sol::DType::f8e4m3, {3}));
  std::printf("%g %g %g\n", sol::e4m3_to_f32(out[0]), sol::e4m3_to_f32(out[1]), sol::e4m3_to_f32(out[2]));
  return out[0] == 0x38 ? 0 : 1;  // 1.0 in e4m3 is 0.0111.000
}
