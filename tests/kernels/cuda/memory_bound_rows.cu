// Every kernel of the memory-bound device ops (rope, softmax, MoE routing, permute/unpermute,
// embedding) as their op entries instantiate them, for the offline build and SASS checks
// (memory_bound_rows.sass.txt). Not meant to be launched for results.
#include "kernels/cuda/moe_rows.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/route.cuh"
#include "kernels/cuda/softmax.cuh"

SOL_CUDA_ROPE_KERNEL(false, false, false)
SOL_CUDA_ROPE_KERNEL(false, false, true)
SOL_CUDA_ROPE_KERNEL(false, true, false)
SOL_CUDA_ROPE_KERNEL(false, true, true)
SOL_CUDA_ROPE_KERNEL(true, false, false)
SOL_CUDA_ROPE_KERNEL(true, false, true)
SOL_CUDA_ROPE_KERNEL(true, true, false)
SOL_CUDA_ROPE_KERNEL(true, true, true)
SOL_CUDA_SOFTMAX_KERNEL(false, false, false)
SOL_CUDA_SOFTMAX_KERNEL(false, false, true)
SOL_CUDA_SOFTMAX_KERNEL(false, true, false)
SOL_CUDA_SOFTMAX_KERNEL(false, true, true)
SOL_CUDA_SOFTMAX_KERNEL(true, false, false)
SOL_CUDA_SOFTMAX_KERNEL(true, false, true)
SOL_CUDA_SOFTMAX_KERNEL(true, true, false)
SOL_CUDA_SOFTMAX_KERNEL(true, true, true)
SOL_CUDA_ROUTE_KERNEL(1, false)
SOL_CUDA_ROUTE_KERNEL(1, true)
SOL_CUDA_ROUTE_KERNEL(2, false)
SOL_CUDA_ROUTE_KERNEL(2, true)
SOL_CUDA_ROUTE_KERNEL(4, false)
SOL_CUDA_ROUTE_KERNEL(4, true)
SOL_CUDA_ROUTE_KERNEL(8, false)
SOL_CUDA_ROUTE_KERNEL(8, true)
SOL_CUDA_UNPERMUTE_KERNEL(false, false, false)
SOL_CUDA_UNPERMUTE_KERNEL(false, false, true)
SOL_CUDA_UNPERMUTE_KERNEL(false, true, false)
SOL_CUDA_UNPERMUTE_KERNEL(false, true, true)
SOL_CUDA_UNPERMUTE_KERNEL(true, false, false)
SOL_CUDA_UNPERMUTE_KERNEL(true, false, true)
SOL_CUDA_UNPERMUTE_KERNEL(true, true, false)
SOL_CUDA_UNPERMUTE_KERNEL(true, true, true)
