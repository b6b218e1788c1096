// The FP8 quantization kernels as the JIT builds them, for the offline nvcc/NVRTC/SASS checks.
#include "kernels/cuda/quant_fp8_kernels.cuh"
