#pragma once
// The tile instructions themselves, as one backend of the AMX GEMM kernel template
// (gemm_tile_amx.h). GCC's _tile_* macros paste their tile numbers into the mnemonic text, so
// they take only literal digits; these wrappers print a template argument with %c instead,
// which lets the kernel name its tiles once (amx_tile_config.h) and share code with the model.
// AT&T operand order: the destination comes last (tdpbf16ps B, A, C computes C += A * B).
// Included only by *_amx.cc files (compiled with -mamx-tile -mamx-bf16 -mamx-int8).
#include <cstdint>

#include "kernels/x86/amx/amx_tile_config.h"

namespace sol::kernels::amx {

struct HardwareTiles {
  // The whole 64-byte struct is the memory operand, so the stores that fill it stay live
  // (GCC 12's _tile_loadconfig declares only 8 bytes read; DESIGN §9).
  static void configure(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" : : "m"(c)); }
  static void release() { __asm__ volatile("tilerelease" ::: "memory"); }
  template <int T>
  static void zero() {
    __asm__ volatile("tilezero %%tmm%c0" : : "i"(T));
  }
  template <int T>
  static void load(const void* base, int64_t stride) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" : : "r"(base), "r"(stride), "i"(T) : "memory");
  }
  template <int T>
  static void store(void* base, int64_t stride) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" : : "r"(base), "r"(stride), "i"(T) : "memory");
  }
  template <int C, int A, int B>
  static void dp_bf16() {
    __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(C), "i"(A), "i"(B));
  }
  template <int C, int A, int B>
  static void dp_s8s8() {
    __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(C), "i"(A), "i"(B));
  }
  template <int C, int A, int B>
  static void dp_u8s8() {
    __asm__ volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(C), "i"(A), "i"(B));
  }
};

}  // namespace sol::kernels::amx
