// Instantiations of the persistent sm90 GEMM for the offline checks (cmake/SolCudaChecks.cmake:
// nvcc and NVRTC with warnings as errors, the SASS expectations of
// sm90_gemm_persistent_kernels.sass.txt), through the same macros the launcher's JIT programs
// use. One kernel serves one GEMM and both grouped layouts (the grouping is an argument).
#include "kernels/cuda/sm90/sm90_gemm_persistent_kernels.cuh"

SOL_SM90_PERSISTENT_KERNEL(bf16, 128, 256, 4, 2, false, k)
// The negative build (plain sm_90 must reject the wgmma and setmaxnreg) needs one kernel: the
// rest would only repeat the front end's work, most of that test's time.
#ifndef SOL_OFFLINE_NEGATIVE_BUILD
SOL_SM90_PERSISTENT_KERNEL(bf16, 64, 128, 8, 2, false, k)
SOL_SM90_PERSISTENT_KERNEL(e4m3, 128, 256, 4, 1, false, k)
SOL_SM90_PERSISTENT_KERNEL(e4m3_scaled, 128, 128, 5, 1, true, k)
// Layout nn (B [K, N] read MN-major): 4 (or 2) B boxes per stage.
SOL_SM90_PERSISTENT_KERNEL(bf16_nn, 128, 256, 4, 2, false, mn)
SOL_SM90_PERSISTENT_KERNEL(bf16_nn, 64, 128, 8, 2, false, mn)
// B multicast over clusters of two vertically adjacent tiles: each CTA loads half of a B stage.
SOL_SM90_PERSISTENT_CLUSTER_KERNEL(bf16, 128, 256, 4, 2, false, 2)
SOL_SM90_PERSISTENT_CLUSTER_KERNEL(e4m3_scaled, 128, 128, 5, 1, true, 2)
// The block-scaled tile over two scale blocks (wgmma N = 192, two B scales per K block).
SOL_SM90_PERSISTENT_KERNEL(e4m3_scaled, 128, 192, 4, 1, true, k)
SOL_SM90_PERSISTENT_CLUSTER_KERNEL(e4m3_scaled, 128, 192, 4, 1, true, 2)
SOL_SM90_SPLIT_REDUCE_KERNEL(128)
#endif
