// The activation kernels as the JIT builds them, for the offline nvcc/NVRTC/SASS checks.
#include "kernels/cuda/activation_kernels.cuh"
