// CUDA-C reference for inst.ffma_banks / inst.ffma_issue: 8 independent FFMA accumulators,
// UNROLL fmaf() per loop iteration, plain C (the compiler picks registers, banks, reuse
// flags and stall counts). The accumulators are stored only when flag != 0.
#include "common.cuh"

#ifndef UNROLL
#define UNROLL 256
#endif

extern "C" __global__ void __launch_bounds__(1024) ffma_stream(MB_ARGS) {
    const float a = __uint_as_float(p0), b = __uint_as_float(p1);
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = (float)(threadIdx.x + k);
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++) acc[j % 8] = fmaf(a, b, acc[j % 8]);
    }
    const unsigned long long t1 = mb_clock();
    unsigned sink = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) sink ^= __float_as_uint(acc[k]);
    mb_record(out, t0, t1, sink, flag != 0);
}
