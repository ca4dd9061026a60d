// CUDA-C reference for smem.latency: pointer chase through shared memory.
// inp[0] = words of the image, inp[1 + lane] = the lane's start offset, inp[64...] = the
// image (byte offset of the next element, relative to the array). -DWIDTH=4|8|16.
#include "common.cuh"

#ifndef WIDTH
#define WIDTH 4
#endif
#ifndef UNROLL
#define UNROLL 64
#endif

__device__ __forceinline__ unsigned hop(unsigned a) {
#if WIDTH == 4
    asm volatile("ld.volatile.shared.u32 %0, [%0];" : "+r"(a));
#elif WIDTH == 8
    unsigned b;
    asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%0];" : "+r"(a), "=r"(b));
#else
    unsigned b, c, d;
    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%0];" : "+r"(a), "=r"(b), "=r"(c), "=r"(d));
#endif
    return a;
}

extern "C" __global__ void smem_chase(MB_ARGS) {
    __shared__ __align__(16) unsigned s[4096];
    const unsigned base = mb_shared_address(s);
    const unsigned n = inp[0];
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = inp[64 + i] + base;
    unsigned a = inp[1 + threadIdx.x] + base;
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++) a = hop(a);
    }
    const unsigned long long t1 = mb_clock();
    mb_record(out, t0, t1, a - base, true);
}
