// CUDA-C reference for inst.hmma_loop_mix: TILES independent mma.sync m16n8k16 FP16 products
// into FP32 accumulators, three a tile a loop iteration (hi*hi, lo*hi, hi*lo of constant
// fragments): ptxas's schedule of the SASS variant's 108 HMMA.16816.F32. The accumulators are
// stored only when flag != 0.
#include "common.cuh"

#ifndef TILES
#define TILES 36
#endif

__device__ __forceinline__ void mb_mma(float d[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(256, 1) hmma_stream(MB_ARGS) {
    unsigned a_hi[4], a_lo[4], b_hi[2], b_lo[2];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        a_hi[i] = 0x3c003c00u + p0 + i;
        a_lo[i] = 0x1c001c00u + p1 + i;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        b_hi[i] = 0x3c003c00u ^ (p0 + i);
        b_lo[i] = 0x1c001c00u ^ (p1 + i);
    }
    float acc[TILES][4];
#pragma unroll
    for (int t = 0; t < TILES; t++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[t][j] = 0.0f;
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int p = 0; p < 3; p++)
#pragma unroll
            for (int t = 0; t < TILES; t++) mb_mma(acc[t], p == 1 ? a_lo : a_hi, p == 2 ? b_lo : b_hi);
    }
    const unsigned long long t1 = mb_clock();
    unsigned sink = 0;
#pragma unroll
    for (int t = 0; t < TILES; t++)
#pragma unroll
        for (int j = 0; j < 4; j++) sink ^= __float_as_uint(acc[t][j]);
    mb_record(out, t0, t1, sink, flag != 0);
}
