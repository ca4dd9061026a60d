// CUDA-C references for the instruction benchmarks (inst.latency, inst.mufu, inst.clock).
// Each kernel runs UNROLL dependent operations per loop iteration between two clock reads.
// The operations are volatile inline PTX, so that they stay in order between the clock reads
// and none is folded away; ptxas still picks the SASS and the stall counts, which is what
// these references show.
#include "common.cuh"

#ifndef UNROLL
#define UNROLL 64
#endif

#define CHAIN_KERNEL(NAME, TYPE, CONS, INIT, STEP, SINK)                                   \
    extern "C" __global__ void NAME(MB_ARGS) {                                             \
        const TYPE a = CONS(p0), b = CONS(p1);                                             \
        TYPE x = INIT;                                                                     \
        (void)a; (void)b;                                                                  \
        __syncthreads();                                                                   \
        const unsigned long long t0 = mb_clock();                                          \
        for (int i = 0; i < iters; i++) {                                                  \
            _Pragma("unroll") for (int j = 0; j < UNROLL; j++) { STEP; }                   \
        }                                                                                  \
        const unsigned long long t1 = mb_clock();                                          \
        mb_record(out, t0, t1, SINK, true);                                                \
    }

#define U32(v) (v)
#define F32(v) __uint_as_float(v)

// x = x + a (a = 1): IADD3 in SASS
CHAIN_KERNEL(chain_iadd3, unsigned, U32, 0u,
             asm volatile("add.u32 %0, %0, %1;" : "+r"(x) : "r"(a)), x)
// x = x * a + b (a = b = 1): IMAD
CHAIN_KERNEL(chain_imad, unsigned, U32, 0u,
             asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x) : "r"(a), "r"(b)), x)
// x = x * a + b (a = b = 1.0f): FFMA
CHAIN_KERNEL(chain_ffma, float, F32, 0.0f,
             asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(a), "f"(b)), __float_as_uint(x))
// x = x + b (b = 1.0f): FADD
CHAIN_KERNEL(chain_fadd, float, F32, 0.0f,
             asm volatile("add.rn.f32 %0, %0, %1;" : "+f"(x) : "f"(b)), __float_as_uint(x))

// MUFU chains: x = f(x), starting at p0. (ptxas removes rcp(rcp(x)) pairs: the rcp
// reference shows the compiler deleting the work, and the guard rejects its figure.)
CHAIN_KERNEL(mufu_ex2, float, F32, a,
             asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x)), __float_as_uint(x))
CHAIN_KERNEL(mufu_rcp, float, F32, a,
             asm volatile("rcp.approx.ftz.f32 %0, %0;" : "+f"(x)), __float_as_uint(x))
CHAIN_KERNEL(mufu_sin, float, F32, a,
             asm volatile("sin.approx.ftz.f32 %0, %0;" : "+f"(x)), __float_as_uint(x))
CHAIN_KERNEL(mufu_rsq, float, F32, a,
             asm volatile("rsqrt.approx.ftz.f32 %0, %0;" : "+f"(x)), __float_as_uint(x))

// Clock reads: a stream of 64-bit clock reads folded into x (clock64(): CS2R)
#define U64(v) ((unsigned long long)(v))
CHAIN_KERNEL(clock_cs2r, unsigned long long, U64, 0ull,
             { unsigned long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); x ^= t; },
             (unsigned)(x ^ (x >> 32)))
// 32-bit clock reads (%clock)
CHAIN_KERNEL(clock_cs2r32, unsigned, U32, 0u,
             { unsigned t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t)); x ^= t; }, x)
