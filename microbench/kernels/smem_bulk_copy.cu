// CUDA-C reference for smem.bulk_copy: bulk copies global -> shared (cp.async.bulk, UBLKCP)
// completing on mbarriers. One warp a block; thread 0 issues. STAGES buffers of COPIES copies
// of COPY_BYTES each, every copy from the start of `inp` (the source stays in L2), buffer s
// completing on mbarrier s. Iteration i waits for buffer s's copies of iteration i - 1 (phase
// parity (i & 1) ^ 1: a fresh mbarrier passes parity 1 at once), arms the mbarrier with the
// stage's bytes (mbarrier.arrive.expect_tx) and issues the copies into it.
// -DWAIT_EACH=1: the end clock after the last copies landed; 0: after the last copy issued
// (what issuing costs the thread), the wait after the end clock.
// -DSTAMPS=1 (the latency cases: one stage of one copy): thread 0 also reads the clock each
// time it has seen a copy's phase (and once before the first copy); lane j records the stamps
// around copy j (j < 32) as its start and end clocks: copy j's issue to the waiting thread
// seeing its phase, the loop around it included, one sample a copy.
// -DTENSOR=1: cp.async.bulk.tensor.2d (UTMALDG) of the box at (0, 0) of the tensor map the host
// encoded into inp's first 128 bytes (COPY_BYTES = the box's bytes); the map is fenced first
// (fence.proxy.tensormap::generic.acquire: the host wrote it).
#include "common.cuh"

#ifndef COPY_BYTES
#define COPY_BYTES 8192
#endif
#ifndef COPIES
#define COPIES 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef WAIT_EACH
#define WAIT_EACH 1
#endif
#ifndef TENSOR
#define TENSOR 0
#endif
#ifndef STAMPS
#define STAMPS 0
#endif
#define STAGE_BYTES (COPY_BYTES * COPIES)
#if STAMPS && (STAGES != 1 || COPIES != 1 || !WAIT_EACH)
#error "STAMPS times one copy at a time: STAGES=1, COPIES=1, WAIT_EACH=1"
#endif

__device__ __forceinline__ void mb_wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nMB_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra MB_WAIT_%=;\n}" :: "r"(bar), "r"(parity) : "memory");
}

extern "C" __global__ void __launch_bounds__(32) smem_bulk_copy(MB_ARGS) {
    __shared__ __align__(128) unsigned char smem[STAGES * STAGE_BYTES];
    __shared__ __align__(8) unsigned long long bars[STAGES];
#if STAMPS
    __shared__ unsigned stamps[33];
#endif
    const unsigned buf = mb_shared_address(smem);
    const unsigned bar = mb_shared_address(bars);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar + 8 * s));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#if TENSOR
        asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(inp) : "memory");
#endif
    }
    __syncthreads();
    unsigned parity = 1;
    const unsigned long long t0 = mb_clock();
    if (threadIdx.x == 0) {
        for (int i = 0; i < iters; i++) {
#pragma unroll
            for (int s = 0; s < STAGES; s++) {
                mb_wait_parity(bar + 8 * s, parity);
#if STAMPS
                if (i < 33) stamps[i] = (unsigned)mb_clock();
#endif
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                             :: "r"(bar + 8 * s), "n"(STAGE_BYTES) : "memory");
#pragma unroll
                for (int c = 0; c < COPIES; c++)
#if TENSOR
                    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 " [%0], [%1, {%2, %2}], [%3];"
                                 :: "r"(buf + s * STAGE_BYTES + c * COPY_BYTES), "l"(inp), "r"(0),
                                    "r"(bar + 8 * s) : "memory");
#else
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 " [%0], [%1], %2, [%3];"
                                 :: "r"(buf + s * STAGE_BYTES + c * COPY_BYTES), "l"(inp),
                                    "n"(COPY_BYTES), "r"(bar + 8 * s) : "memory");
#endif
            }
            parity ^= 1;
        }
#if WAIT_EACH
#pragma unroll
        for (int s = 0; s < STAGES; s++) mb_wait_parity(bar + 8 * s, parity);
#endif
#if STAMPS
        if (iters < 33) stamps[iters] = (unsigned)mb_clock();
#endif
    }
    const unsigned long long t1 = mb_clock();
#if !WAIT_EACH
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) mb_wait_parity(bar + 8 * s, parity);
    }
#endif
    __syncthreads();
    // Every thread's sink: its word of the first copy (inp[threadIdx.x], or the tensor's first
    // row), checked by the host.
    const unsigned sink = ((const unsigned *)smem)[threadIdx.x];
#if STAMPS
    if (threadIdx.x < iters) {      // one warp: threadIdx.x < 32
        mb_record(out, stamps[threadIdx.x], stamps[threadIdx.x + 1], sink, true);
        return;
    }
#endif
    mb_record(out, t0, t1, sink, true);
}
