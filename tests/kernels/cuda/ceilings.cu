// The GPU ceiling loops of `sol hw` (src/kernels/cuda/ceilings_*.cuh) as the JIT compiles them:
// one translation unit, so the offline checks build it by nvcc and NVRTC for sm_90a, reject it
// for plain sm_90 (the wgmma loops), and hold its SASS to ceilings.sass.txt.
#include "kernels/cuda/ceilings_compute.cuh"
#include "kernels/cuda/ceilings_memory.cuh"
