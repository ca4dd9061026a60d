// CUDA-C reference for smem.async_copy: cp.async of 16-byte chunks from global into shared
// memory (LDGSTS), UNROLL a loop iteration, then commit and wait for all of them.
// Thread t copies chunk t of a 12 KiB source window (blockDim.x = 768) to shared chunk t
// (+ 12 KiB for odd j), so the source stays in L1 (.ca) or L2 (.cg).
// -DBYPASS=0|1 (cp.async.ca | cp.async.cg: LDGSTS.E.128 | LDGSTS.E.BYPASS.128), -DUNROLL=...
// -DWAIT_EACH=1: wait for the copies every iteration; 0: once, after the end clock.
// -DWARM=1: one iteration's copies issued and waited for before the start clock.
#include "common.cuh"

#ifndef BYPASS
#define BYPASS 0
#endif
#ifndef UNROLL
#define UNROLL 32
#endif
#ifndef WAIT_EACH
#define WAIT_EACH 1
#endif
#ifndef WARM
#define WARM 0
#endif

__device__ __forceinline__ void copy_iteration(unsigned dst, const unsigned char *src) {
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
#if BYPASS
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                     :: "r"(dst + (j & 1) * 12288u), "l"(src) : "memory");
#else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;"
                     :: "r"(dst + (j & 1) * 12288u), "l"(src) : "memory");
#endif
    }
}

extern "C" __global__ void __launch_bounds__(1024) smem_async_copy(MB_ARGS) {
    __shared__ __align__(16) unsigned char smem[32768];
    const unsigned dst = mb_shared_address(smem) + 16u * threadIdx.x;
    const unsigned char *src = (const unsigned char *)inp + 16u * threadIdx.x;
#if WARM
    copy_iteration(dst, src);
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
#endif
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
        copy_iteration(dst, src);
#if WAIT_EACH
        asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
#endif
    }
    const unsigned long long t1 = mb_clock();
#if !WAIT_EACH
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
#endif
    __syncthreads();
    mb_record(out, t0, t1, ((const unsigned *)smem)[threadIdx.x], flag != 0);
}
