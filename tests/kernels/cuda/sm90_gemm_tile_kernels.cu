// The sm90 GEMM tile kernels as Sol's launcher compiles them (one translation unit), for the
// offline checks (cmake/SolCudaChecks.cmake: nvcc and NVRTC with warnings as errors, the SASS
// expectations of sm90_gemm_tile_kernels.sass.txt).
#include "kernels/cuda/sm90/sm90_gemm_tile_kernels.cuh"
