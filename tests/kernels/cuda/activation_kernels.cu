// The activation kernels as the JIT builds them, for the offline nvcc/NVRTC/SASS checks.
// sol-offline: plain sm_90 builds too (no wgmma/setmaxnreg: no negative build).
#include "kernels/cuda/activation_kernels.cuh"
