// CUDA-C reference for the shared-memory stream benchmarks (smem.bandwidth, smem.warp).
// Each thread reads its byte offset in the shared array from inp[threadIdx.x] (bit 31 set:
// the lane is inactive), then issues UNROLL accesses WIDTH bytes wide per loop iteration,
// alternating between two 16 KiB halves, as the SASS kernel does.
// -DOP_LOAD=1 (ld.shared) or 0 (st.shared), -DWIDTH=4|8|16, -DUNROLL=128.
// The accesses are volatile inline PTX: plain C++ lets the compiler hoist or merge them
// (a plain CUDA-C LDS loop was seen "reaching" 1865 B/clk/SM).
#include "common.cuh"

#ifndef OP_LOAD
#define OP_LOAD 1
#endif
#ifndef WIDTH
#define WIDTH 16
#endif
#ifndef UNROLL
#define UNROLL 128
#endif

__device__ __forceinline__ void access(unsigned a, unsigned &x, unsigned &y, unsigned &z, unsigned &w) {
#if OP_LOAD
#if WIDTH == 4
    unsigned v0;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v0) : "r"(a));
    x ^= v0;
#elif WIDTH == 8
    unsigned v0, v1;
    asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(a));
    x ^= v0; y ^= v1;
#else
    unsigned v0, v1, v2, v3;
    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a));
    x ^= v0; y ^= v1; z ^= v2; w ^= v3;
#endif
#else
#if WIDTH == 4
    asm volatile("st.volatile.shared.u32 [%0], %1;" :: "r"(a), "r"(x) : "memory");
#elif WIDTH == 8
    asm volatile("st.volatile.shared.v2.u32 [%0], {%1, %2};" :: "r"(a), "r"(x), "r"(y) : "memory");
#else
    asm volatile("st.volatile.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "r"(a), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
#endif
#endif
}

extern "C" __global__ void __launch_bounds__(1024) smem_stream(MB_ARGS) {
    __shared__ __align__(16) unsigned char smem[32768];
    const unsigned word = inp[threadIdx.x];
    const bool active = (int)word >= 0;
    const unsigned a = mb_shared_address(smem) + (word & 0x7fffffffu);
    unsigned x = threadIdx.x ^ p0, y = x + 1, z = x + 2, w = x + 3;
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
        if (active) {
#pragma unroll
            for (int j = 0; j < UNROLL; j++) access(a + (j & 1) * 16384u, x, y, z, w);
        }
    }
    const unsigned long long t1 = mb_clock();
    mb_record(out, t0, t1, x ^ y ^ z ^ w, flag != 0);
}
