// CUDA-C references for smem.latency_forms: the shared-memory latency chase in the forms
// published suites use, beside the plain `LDS R, [R]` chase of smem_chase.cu.
//   -DFORM=1  index chase `j = s[j]` in a plain C loop (mt4g's form; Jia et al.'s fine-grained
//             p-chase reads the same way): the array index is scaled and added to the
//             array's base inside the chain.
//   -DFORM=2  64-bit generic pointer chase `p = *p` through pointers into shared memory:
//             a generic LD.E.64 (no .shared), which ptxas keeps because the pointers come
//             from memory and it cannot prove where they point.
//   -DFORM=3  mt4g's loop: `j = s[j]` in a plain loop of iters * UNROLL trips, unrolled
//             the way ptxas chooses (loop control inside the timed chain).
//   -DFORM=4  generic 32-bit chase: a 64-bit generic pointer whose low word is loaded
//             (`q = hi(q) | *(unsigned *)q`): LD.E R, [R.64], the high word kept.
// inp as smem_chase.cu: inp[0] = words of the image, inp[1 + lane] = the lane's start byte
// offset, inp[64...] = the image (byte offsets of the next element, relative to the array).
#include "common.cuh"

#ifndef FORM
#define FORM 1
#endif
#ifndef UNROLL
#define UNROLL 64
#endif

extern "C" __global__ void smem_chase_form(MB_ARGS) {
    __shared__ __align__(16) unsigned s[4096];
    const unsigned n = inp[0];
#if FORM == 1
    // words hold the next element's index (byte offset / 4)
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = inp[64 + i] / 4;
    unsigned j = inp[1 + threadIdx.x] / 4;
#elif FORM == 2
    // 64-bit words: the generic address of the next element
    unsigned long long *p = (unsigned long long *)s;
    for (unsigned i = threadIdx.x; i < n / 2; i += blockDim.x)
        p[i] = (unsigned long long)(s + inp[64 + 2 * i] / 4);
    unsigned long long *q = p + inp[1 + threadIdx.x] / 8;
#elif FORM == 3
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = inp[64 + i] / 4;
    unsigned j = inp[1 + threadIdx.x] / 4;
#else
    // words: the low word of the next element's generic address
    const unsigned long long g = (unsigned long long)s;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = (unsigned)g + inp[64 + i];
    unsigned long long q = g + inp[1 + threadIdx.x];
#endif
    __syncthreads();
    const unsigned long long t0 = mb_clock();
#if FORM == 3
    for (int k = 0; k < iters * UNROLL; k++) j = s[j];
#else
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
#if FORM == 1
            j = s[j];
#elif FORM == 2
            q = (unsigned long long *)*q;
#else
            q = (q & 0xffffffff00000000ull) | *(const unsigned *)q;
#endif
        }
    }
#endif
    const unsigned long long t1 = mb_clock();
#if FORM == 2
    const unsigned sink = (unsigned)((const unsigned *)q - s) * 4u;
#elif FORM == 4
    const unsigned sink = (unsigned)(q - g);
#else
    const unsigned sink = j * 4;
#endif
    mb_record(out, t0, t1, sink, true);
}
