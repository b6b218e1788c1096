#pragma once
// wgmma: warpgroup matrix multiply-accumulate with both operands in shared memory, addressed
// by descriptors (sm90_descriptor.h), and f32 accumulators in registers (sm90_fragment.h says
// which thread holds which element). D += A * B^T with A M x K K-major and B N x K:
//   bf16:     m64nNk16, 32 bytes of K per instruction; B K-major, or MN-major (imm-trans-b 1:
//             B stored [K, N], layout nn)
//   fp8 e4m3: m64nNk32, 32 bytes of K per instruction (fp8 operands must be K-major)
// The order of one K step: wgmma_fence, the instructions, wgmma_commit, wgmma_wait<n>. Between
// fence and wait the accumulator registers belong to the tensor cores: touching them there
// makes ptxas serialise every wgmma (warning C7511), which the SASS checks reject.

#include "kernels/cuda/sm90/sm90_device.cuh"

namespace sol::kernels::sm90 {

template <u32 N>
struct Accum {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in 8..256");
  float d[N / 2];
};

SOL_SM90_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
SOL_SM90_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int Pending>
SOL_SM90_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous region.
template <u32 N>
SOL_SM90_DEVICE void fence_accumulator(Accum<N>& acc) {
#pragma unroll
  for (u32 i = 0; i < N / 2; ++i) asm volatile("" : "+f"(acc.d[i])::"memory");
}

// Operand lists of 32, 64, 96 and 128 accumulators: "%0, ..., %k" and "+f"(d[0]), ... built from
// decades ("%" "1" "0" is "%10"; an empty decade argument gives the first ten).
#define SOL_WG_S10(t) "%" #t "0, %" #t "1, %" #t "2, %" #t "3, %" #t "4, %" #t "5, %" #t "6, %" #t "7, %" #t "8, %" #t "9, "
#define SOL_WG_F10(t)                                                                                          \
  "+f"(d[t##0]), "+f"(d[t##1]), "+f"(d[t##2]), "+f"(d[t##3]), "+f"(d[t##4]), "+f"(d[t##5]), "+f"(d[t##6]), \
      "+f"(d[t##7]), "+f"(d[t##8]), "+f"(d[t##9])
#define SOL_WG_REGS_32 "{" SOL_WG_S10() SOL_WG_S10(1) SOL_WG_S10(2) "%30, %31}"
#define SOL_WG_OUTS_32 SOL_WG_F10(), SOL_WG_F10(1), SOL_WG_F10(2), "+f"(d[30]), "+f"(d[31])
#define SOL_WG_REGS_64 \
  "{" SOL_WG_S10() SOL_WG_S10(1) SOL_WG_S10(2) SOL_WG_S10(3) SOL_WG_S10(4) SOL_WG_S10(5) "%60, %61, %62, %63}"
#define SOL_WG_OUTS_64                                                                                   \
  SOL_WG_F10(), SOL_WG_F10(1), SOL_WG_F10(2), SOL_WG_F10(3), SOL_WG_F10(4), SOL_WG_F10(5), "+f"(d[60]), \
      "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define SOL_WG_REGS_96                                                                                 \
  "{" SOL_WG_S10() SOL_WG_S10(1) SOL_WG_S10(2) SOL_WG_S10(3) SOL_WG_S10(4) SOL_WG_S10(5) SOL_WG_S10(6) \
      SOL_WG_S10(7) SOL_WG_S10(8) "%90, %91, %92, %93, %94, %95}"
#define SOL_WG_OUTS_96                                                                                    \
  SOL_WG_F10(), SOL_WG_F10(1), SOL_WG_F10(2), SOL_WG_F10(3), SOL_WG_F10(4), SOL_WG_F10(5), SOL_WG_F10(6), \
      SOL_WG_F10(7), SOL_WG_F10(8), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),      \
      "+f"(d[95])
#define SOL_WG_REGS_128                                                                                    \
  "{" SOL_WG_S10() SOL_WG_S10(1) SOL_WG_S10(2) SOL_WG_S10(3) SOL_WG_S10(4) SOL_WG_S10(5) SOL_WG_S10(6)    \
      SOL_WG_S10(7) SOL_WG_S10(8) SOL_WG_S10(9) SOL_WG_S10(10) SOL_WG_S10(11)                             \
      "%120, %121, %122, %123, %124, %125, %126, %127}"
#define SOL_WG_OUTS_128                                                                                      \
  SOL_WG_F10(), SOL_WG_F10(1), SOL_WG_F10(2), SOL_WG_F10(3), SOL_WG_F10(4), SOL_WG_F10(5), SOL_WG_F10(6),   \
      SOL_WG_F10(7), SOL_WG_F10(8), SOL_WG_F10(9), SOL_WG_F10(10), SOL_WG_F10(11), "+f"(d[120]), "+f"(d[121]), \
      "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// scale_d 0 makes the instruction overwrite D instead of adding to it. bf16 takes the operand
// scales (+1) and "transpose" flags (0: K-major, 1: MN-major) as immediates; e4m3 has no
// transpose flags.
#define SOL_WGMMA_ASM(SHAPE_TYPES, REGS, OUTS, IA, IB, IS, TAIL)                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                                \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " " REGS ", %" #IA ", %" #IB ", p" TAIL \
               ";\n}\n"                                                                          \
               : OUTS                                                                            \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))

// BMnMajor: B is read MN-major (imm-trans-b = 1), its descriptor built by mnmajor_desc.
template <u32 N, bool BMnMajor = false>
SOL_SM90_DEVICE void wgmma_bf16(Accum<N>& acc, u64 desc_a, u64 desc_b, u32 scale_d) {
  float* d = acc.d;
  if constexpr (BMnMajor) {
    if constexpr (N == 64) {
      SOL_WGMMA_ASM("m64n64k16.f32.bf16.bf16", SOL_WG_REGS_32, SOL_WG_OUTS_32, 32, 33, 34, ", 1, 1, 0, 1");
    } else if constexpr (N == 128) {
      SOL_WGMMA_ASM("m64n128k16.f32.bf16.bf16", SOL_WG_REGS_64, SOL_WG_OUTS_64, 64, 65, 66, ", 1, 1, 0, 1");
    } else {
      static_assert(N == 256, "wgmma_bf16: N is 64, 128 or 256");
      SOL_WGMMA_ASM("m64n256k16.f32.bf16.bf16", SOL_WG_REGS_128, SOL_WG_OUTS_128, 128, 129, 130, ", 1, 1, 0, 1");
    }
  } else if constexpr (N == 64) {
    SOL_WGMMA_ASM("m64n64k16.f32.bf16.bf16", SOL_WG_REGS_32, SOL_WG_OUTS_32, 32, 33, 34, ", 1, 1, 0, 0");
  } else if constexpr (N == 128) {
    SOL_WGMMA_ASM("m64n128k16.f32.bf16.bf16", SOL_WG_REGS_64, SOL_WG_OUTS_64, 64, 65, 66, ", 1, 1, 0, 0");
  } else {
    static_assert(N == 256, "wgmma_bf16: N is 64, 128 or 256");
    SOL_WGMMA_ASM("m64n256k16.f32.bf16.bf16", SOL_WG_REGS_128, SOL_WG_OUTS_128, 128, 129, 130, ", 1, 1, 0, 0");
  }
}

template <u32 N>
SOL_SM90_DEVICE void wgmma_e4m3(Accum<N>& acc, u64 desc_a, u64 desc_b, u32 scale_d) {
  float* d = acc.d;
  if constexpr (N == 64) {
    SOL_WGMMA_ASM("m64n64k32.f32.e4m3.e4m3", SOL_WG_REGS_32, SOL_WG_OUTS_32, 32, 33, 34, ", 1, 1");
  } else if constexpr (N == 128) {
    SOL_WGMMA_ASM("m64n128k32.f32.e4m3.e4m3", SOL_WG_REGS_64, SOL_WG_OUTS_64, 64, 65, 66, ", 1, 1");
  } else if constexpr (N == 192) {  // the block-scaled kernel's tile of one and a half scale blocks
    SOL_WGMMA_ASM("m64n192k32.f32.e4m3.e4m3", SOL_WG_REGS_96, SOL_WG_OUTS_96, 96, 97, 98, ", 1, 1");
  } else {
    static_assert(N == 256, "wgmma_e4m3: N is 64, 128, 192 or 256");
    SOL_WGMMA_ASM("m64n256k32.f32.e4m3.e4m3", SOL_WG_REGS_128, SOL_WG_OUTS_128, 128, 129, 130, ", 1, 1");
  }
}

#undef SOL_WGMMA_ASM
#undef SOL_WG_OUTS_128
#undef SOL_WG_REGS_128
#undef SOL_WG_OUTS_64
#undef SOL_WG_REGS_64
#undef SOL_WG_OUTS_96
#undef SOL_WG_REGS_96
#undef SOL_WG_OUTS_32
#undef SOL_WG_REGS_32
#undef SOL_WG_F10
#undef SOL_WG_S10

}  // namespace sol::kernels::sm90
