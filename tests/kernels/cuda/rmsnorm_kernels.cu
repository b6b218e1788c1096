// The RMSNorm kernels as the JIT builds them, for the offline nvcc/NVRTC/SASS checks.
#include "kernels/cuda/rmsnorm_kernels.cuh"
