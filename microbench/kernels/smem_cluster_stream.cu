// CUDA-C reference for smem.cluster's bandwidth: 128-bit loads from the shared memory of
// CTA (rank + p0) % cluster size (ld.shared::cluster.v4 of mapa addresses), UNROLL a loop
// iteration, load j at [the lane's byte offset from inp[threadIdx.x] + j * STEP] (every load
// its own address: ptxas merges two of one address); a cluster barrier before the end keeps
// every CTA's memory alive.
#include "common.cuh"

#ifndef UNROLL
#define UNROLL 128
#endif
#ifndef STEP
#define STEP 128
#endif

extern "C" __global__ void __launch_bounds__(1024) smem_cluster_stream(MB_ARGS) {
    __shared__ __align__(16) unsigned char smem[32768];
    unsigned rank, size, remote;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote) : "r"(mb_shared_address(smem)), "r"((rank + p0) % size));
    const unsigned a = remote + (inp[threadIdx.x] & 0x7fffffffu);
    unsigned x = threadIdx.x ^ p1, y = x + 1, z = x + 2, w = x + 3;
    asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;" ::: "memory");
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++) {
            unsigned v0, v1, v2, v3;
            asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a + j * STEP));
            x ^= v0; y ^= v1; z ^= v2; w ^= v3;
        }
    }
    const unsigned long long t1 = mb_clock();
    asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;" ::: "memory");
    mb_record(out, t0, t1, x ^ y ^ z ^ w, flag != 0);
}
