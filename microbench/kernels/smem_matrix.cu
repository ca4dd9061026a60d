// CUDA-C reference for smem.matrix: ldmatrix / stmatrix streams. Each lane reads the byte
// offset of the matrix row it addresses from inp[threadIdx.x]; every instruction moves
// 8x8 16-bit matrices (COUNT of them: 1, 2 or 4; 128 bytes each), UNROLL a loop iteration,
// instruction j at [row + j * STEP] (STEP = 128: the same banks, another line). Every
// instruction has its own address: ldmatrix is no volatile access, and ptxas merges two
// ldmatrix of one address (and deletes a pair whose results cancel).
// -DSTORE=0|1 (ldmatrix | stmatrix), -DCOUNT=1|2|4, -DTRANS=0|1, -DUNROLL=..., -DSTEP=...
#include "common.cuh"

#ifndef STORE
#define STORE 0
#endif
#ifndef COUNT
#define COUNT 4
#endif
#ifndef TRANS
#define TRANS 0
#endif
#ifndef UNROLL
#define UNROLL 128
#endif
#ifndef STEP
#define STEP 128
#endif

#if TRANS
#define MB_TRANS ".trans"
#else
#define MB_TRANS ""
#endif
#define MB_STR2(x) #x
#define MB_STR(x) MB_STR2(x)
#define MB_SHAPE ".m8n8.x" MB_STR(COUNT) MB_TRANS ".shared.b16"

__device__ __forceinline__ void access(unsigned a, unsigned &x, unsigned &y, unsigned &z, unsigned &w) {
#if !STORE
#if COUNT == 1
    unsigned v0;
    asm volatile("ldmatrix.sync.aligned" MB_SHAPE " {%0}, [%1];" : "=r"(v0) : "r"(a));
    x ^= v0;
#elif COUNT == 2
    unsigned v0, v1;
    asm volatile("ldmatrix.sync.aligned" MB_SHAPE " {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(a));
    x ^= v0; y ^= v1;
#else
    unsigned v0, v1, v2, v3;
    asm volatile("ldmatrix.sync.aligned" MB_SHAPE " {%0, %1, %2, %3}, [%4];"
                 : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a));
    x ^= v0; y ^= v1; z ^= v2; w ^= v3;
#endif
#else
#if COUNT == 1
    asm volatile("stmatrix.sync.aligned" MB_SHAPE " [%0], {%1};" :: "r"(a), "r"(x) : "memory");
#elif COUNT == 2
    asm volatile("stmatrix.sync.aligned" MB_SHAPE " [%0], {%1, %2};" :: "r"(a), "r"(x), "r"(y) : "memory");
#else
    asm volatile("stmatrix.sync.aligned" MB_SHAPE " [%0], {%1, %2, %3, %4};"
                 :: "r"(a), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
#endif
#endif
}

extern "C" __global__ void __launch_bounds__(1024) smem_matrix(MB_ARGS) {
    __shared__ __align__(16) unsigned char smem[32768];
    const unsigned a = mb_shared_address(smem) + (inp[threadIdx.x] & 0x7fffffffu);
    unsigned x = threadIdx.x ^ p0, y = x + 1, z = x + 2, w = x + 3;
    __syncthreads();
    const unsigned long long t0 = mb_clock();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < UNROLL; j++) access(a + j * STEP, x, y, z, w);
    }
    const unsigned long long t1 = mb_clock();
    mb_record(out, t0, t1, x ^ y ^ z ^ w, flag != 0);
}
