// CUDA-C reference for smem.cluster: the pointer chase of smem.latency through another
// CTA's shared memory in the same thread-block cluster (distributed shared memory).
// Every CTA copies the image into its own shared memory, then (after a cluster barrier)
// chases in CTA (rank + p0) % cluster size: ld.shared::cluster of addresses that mapa made.
// inp as smem_chase.cu; the launch sets the cluster size.
#include "common.cuh"

#ifndef UNROLL
#define UNROLL 64
#endif

__device__ __forceinline__ unsigned cluster_sreg(int which) {
    unsigned r;
    if (which == 0) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    else asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;" ::: "memory");
}

extern "C" __global__ void smem_cluster_chase(MB_ARGS) {
    __shared__ __align__(16) unsigned s[4096];
    const unsigned rank = cluster_sreg(0), size = cluster_sreg(1);
    const unsigned target = (rank + p0) % size;
    unsigned own, remote;   // this CTA's and the target's copy of s, as cluster addresses
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(own) : "r"(mb_shared_address(s)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote) : "r"(mb_shared_address(s)), "r"(target));
    const unsigned n = inp[0];
    // the image points into the CTA that holds it: a chase stays in the target's memory
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = inp[64 + i] + own;
    unsigned a = inp[1 + threadIdx.x] + remote;
    cluster_sync();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++)
            asm volatile("ld.shared::cluster.u32 %0, [%0];" : "+r"(a));
    }
    const unsigned long long t1 = mb_clock();
    cluster_sync();
    mb_record(out, t0, t1, a - remote, true);
}
