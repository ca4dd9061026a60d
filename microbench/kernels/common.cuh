// Shared by the CUDA-C references: the record every thread writes (see microbench/sassgen.py)
//   out[4*gid+0] start clock (low 32 bits), [1] end clock, [2] SM id, [3] sink.
#pragma once

#define MB_ARGS unsigned *__restrict__ out, const unsigned *__restrict__ inp, int iters, \
                int flag, unsigned p0, unsigned p1

__device__ __forceinline__ unsigned mb_smid() {
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned long long mb_clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

// Byte address of a __shared__ array in the shared window (what LDS/STS take).
__device__ __forceinline__ unsigned mb_shared_address(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mb_record(unsigned *out, unsigned long long t0,
                                          unsigned long long t1, unsigned sink, bool store_sink) {
    const unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;
    out[4 * gid + 0] = (unsigned)t0;
    out[4 * gid + 1] = (unsigned)t1;
    out[4 * gid + 2] = mb_smid();
    if (store_sink) out[4 * gid + 3] = sink;
}
