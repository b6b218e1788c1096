#pragma once
// Thread-block clusters (PTX ISA: "Cluster of Cooperative Thread Arrays", mapa, barrier.cluster,
// mbarrier over shared::cluster): the CTA's rank in its cluster, a cluster-wide barrier, an
// arrival on an mbarrier of another CTA of the cluster, and with it the GEMM consumers' release
// of a ring stage, which in a multicast cluster (ClusterM = 2) goes to every CTA whose producer
// loads into that stage.

#include "kernels/cuda/sm90/sm90_device.cuh"
#include "kernels/cuda/sm90/sm90_mbarrier.cuh"

namespace sol::kernels::sm90 {

SOL_SM90_DEVICE u32 cluster_ctarank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every CTA of the cluster arrives, then waits for all: release/acquire, so
// barriers initialised before it are visible to the other CTAs' TMA and arrivals after it, and
// no CTA leaves while another may still write its shared memory or arrive on its barriers. The
// barrier is .aligned (the whole warp executes it together), and callers reach it after code
// only one lane ran, so the warp reconverges first.
SOL_SM90_DEVICE void cluster_sync() {
  __syncwarp();
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// One arrival on the mbarrier at shared-window address `bar` of this CTA, as it lies in cluster
// CTA `rank` (the same offset in every CTA of the cluster). Default (CTA-scope) semantics: what
// the arrival publishes is that this CTA's wgmmas have finished reading a stage (their wait
// came first), not data a peer reads; a cluster-scope release would put a GPU-wide memory
// barrier (MEMBAR.ALL.GPU) before every arrival, in the K loop.
SOL_SM90_DEVICE void mbar_arrive_cluster(u32 bar, u32 rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// A consumer warpgroup is done reading ring stage `stage` (one thread arrives): on its own CTA's
// empty barrier, or in a cluster on that barrier in every CTA, whose producer may load into it.
template <class Plan>
SOL_SM90_DEVICE void release_stage(u32 base, u32 stage) {
  if (thread_in_warpgroup() != 0) return;
  if constexpr (Plan::cluster_m > 1) {
#pragma unroll
    for (u32 rank = 0; rank < Plan::cluster_m; ++rank) mbar_arrive_cluster(base + Plan::empty_barrier_offset(stage), rank);
  } else {
    mbar_arrive(base + Plan::empty_barrier_offset(stage));
  }
}

}  // namespace sol::kernels::sm90
