// CUDA-C reference for smem.atomic: shared-memory atomics without a returned value. Each lane
// reads the byte offset of its word from inp[threadIdx.x]; UNROLL atomics a loop iteration.
// -DFORM=0  red.shared.add.u32 of a register value (ATOMS.ADD)
// -DFORM=1  atomicAdd(p, 1) with the result unused (ptxas: ATOMS.POPC.INC, one increment
//           per lane folded per address)
#include "common.cuh"

#ifndef FORM
#define FORM 0
#endif
#ifndef UNROLL
#define UNROLL 64
#endif

extern "C" __global__ void __launch_bounds__(1024) smem_atomic(MB_ARGS) {
    __shared__ __align__(16) unsigned s[8192];
    for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) s[i] = 0;
    const unsigned off = inp[threadIdx.x] & 0x7fffffffu;
    unsigned *p = s + off / 4;
    const unsigned a = mb_shared_address(p);
    const unsigned v = (threadIdx.x ^ p0) | 1u;
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++) {
#if FORM == 0
            asm volatile("red.shared.add.u32 [%0], %1;" :: "r"(a), "r"(v) : "memory");
#else
            atomicAdd(p, 1u);
#endif
        }
    }
    const unsigned long long t1 = mb_clock();
    __syncthreads();
    mb_record(out, t0, t1, s[threadIdx.x % 8192], flag != 0);
}
