"""F(4x4,3x3)'s batched GEMM in 3xTF32 on HGMMA (wgmma, sm_90a): a measurement of what the
warpgroup tensor-core instruction gives the non-fused path, in CUDA-C with inline PTX (ptxas's
schedule; `python -m kernels_sass.winograd wgmma-gemm`, NOTES.md section 20).

    M[e][k][t] = sum_c U[e][k][c] V[e][c][t]     U, U_lo K-major [36][Kp][Cp]; V [36][Cp][Tp]

TF32 wgmma takes both shared-memory operands K-major (the reduction dimension contiguous), and
V is [c][t]; so the tiles are wgmma's A, from registers (fragments as mma.sync m16n8k8's: the
split into hi and lo in registers, as tcgemm does), and the filters its B, from shared memory
through descriptors (no swizzle: core matrices of 8 rows x 16 bytes, LBO 128 bytes between the
two of a k-step, SBO between row groups; LBO 512 / SBO 128 gave wrong products). B's lo part
comes split from global memory (U_lo), or is split in shared memory.

A block: 2 warpgroups, 128 tiles (64 each: wgmma's M) x 128 filters (N), 16 channels an
iteration (2 k-steps, 6 wgmma a warpgroup), 4 stages of cp.async. Measured (H200): correct
(1.4e-6 to 4.2e-6 against float64) and no faster than tcgemm's mma.sync kernel: the loop waits
on its copies and barriers (ncu: 39% of the SM's throughput, L2 72% busy on Conv3/N128).
"""
from __future__ import annotations

from dataclasses import dataclass

TB = 128        # tiles a block: 2 warpgroups of 64 (wgmma's M)
THREADS = 256
KERNEL = "f4_wgmma_gemm"
HI_MASK = 0xffffe000


@dataclass(frozen=True)
class Config:
    ch: int = 16            # channels an iteration (ch / 8 k-steps, 3 wgmma each)
    stages: int = 4
    pipelined: bool = True  # keep one iteration's wgmma group in flight while the next is prepared
    kb: int = 128           # filters a block: wgmma's N (128 or 256)
    lo: str = "global"      # B's lo part: "global" (U_lo loaded), "smem" (split in shared memory), "none"
                            # (measurement only: wrong results)

    @property
    def vrow(self) -> int:  # floats a V row in shared memory: conflict-free fragment loads
        return TB + 8

    @property
    def u_bytes(self) -> int:
        return self.kb * self.ch * 4

    @property
    def stage_bytes(self) -> int:
        return 2 * self.u_bytes + self.ch * self.vrow * 4

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def blocks_per_sm(self) -> int:
        # the pipelined loop's two fragment sets take it past 128 registers (ptxas serializes the
        # wgmma where held to 128)
        return 1 if self.pipelined or self.kb > 128 else max(1, min(2, (227 << 10) // (self.smem_bytes + 1024)))


def source(cfg: Config = Config(), lbo: int = 128) -> str:
    """The kernel of cfg. Shared memory of B (U, then U_lo): core matrices (8 filters x 4
    channels, 128 bytes) 128 bytes apart along the channels, ch * 32 along the filters; lbo the
    descriptors' field (the hardware's distance along k: 128)."""
    n_acc = cfg.kb // 2
    acc = ", ".join(f"%{i}" for i in range(n_acc))
    acc_ops = ", ".join(f'"+f"(d[{i}])' for i in range(n_acc))
    wgmma = ('asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n'
             f'wgmma.mma_async.sync.aligned.m64n{cfg.kb}k8.f32.tf32.tf32 {{{acc}}}, {{%{n_acc}, %{n_acc + 1}, %{n_acc + 2}, %{n_acc + 3}}}, %{n_acc + 4}, p, 1, 1;\\n}}\\n"'
             f' : {acc_ops} : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "l"(DESC));')
    sbo = cfg.ch * 32
    return (r"""
#define TB %(TB)d
#define KB %(KB)d
#define CH %(CH)d
#define KSTEPS (CH / 8)
#define STAGES %(STAGES)d
#define VROW %(VROW)d
#define U_BYTES %(U_BYTES)d
#define STAGE_BYTES %(STAGE_BYTES)d
#define LO_GLOBAL %(LO_GLOBAL)d
#define LO_SMEM %(LO_SMEM)d
#define PIPELINED %(PIPELINED)d
typedef unsigned long long u64;

__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%%0], [%%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ u64 desc(unsigned addr) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(%(LBO)d >> 4) << 16) | ((u64)(%(SBO)d >> 4) << 32);
}
__device__ __forceinline__ float lo_of(float x) { return x - __uint_as_float(__float_as_uint(x) & %(MASK)du); }
#define MMA(A0, A1, A2, A3, DESC) WGMMA

struct Frags { unsigned hi[4 * KSTEPS], lo[4 * KSTEPS]; };

extern "C" __global__ void __launch_bounds__(256, %(MIN_BLOCKS)d) f4_wgmma_gemm(
        const float* __restrict__ U, const float* __restrict__ Ulo, const float* __restrict__ V,
        float* __restrict__ M, int C, int K, int T) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int e = blockIdx.z, t0 = blockIdx.x * TB, k0 = blockIdx.y * KB, tid = threadIdx.x;
    const float* u = U + ((size_t)e * K + k0) * C;
    const float* ul = Ulo + ((size_t)e * K + k0) * C;
    const float* v = V + (size_t)e * C * T + t0;
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int trow = (warp >> 2) * 64 + (warp & 3) * 16 + g;
    const int iters = C / CH;
    float d[KB / 2];
#pragma unroll
    for (int i = 0; i < KB / 2; i++) d[i] = 0.f;

    auto load = [&](int it) {
        if (it < iters) {
            const int c0 = it * CH;
            const unsigned st = sbase + (it %% STAGES) * STAGE_BYTES;
#pragma unroll
            for (int i = 0; i < KB * CH / 4 / 256; i++) {
                const int ch = tid + 256 * i;
                const int n = ch / (CH / 4), cq = ch %% (CH / 4);   // filter row, channel quad
                const unsigned ud = st + (n >> 3) * %(SBO)d + cq * 128 + (n & 7) * 16;
                cp16(ud, u + (size_t)n * C + c0 + cq * 4);
                if (LO_GLOBAL) cp16(ud + U_BYTES, ul + (size_t)n * C + c0 + cq * 4);
            }
#pragma unroll
            for (int i = 0; i < CH * TB / 4 / 256; i++) {
                const int ch = tid + 256 * i;
                const int r = ch >> 5, tq = ch & 31;               // V row (channel), tile quad
                cp16(st + 2 * U_BYTES + (r * VROW + tq * 4) * 4, v + (size_t)(c0 + r) * T + tq * 4);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    // U_lo of stage `it` from its U, in shared memory (float4 by float4)
    auto split_u = [&](int it) {
        float4* p = (float4*)(smem + (it %% STAGES) * STAGE_BYTES);
#pragma unroll
        for (int i = 0; i < KB * CH / 4 / 256; i++) {
            float4 x = p[tid + 256 * i];
            p[U_BYTES / 16 + tid + 256 * i] = make_float4(lo_of(x.x), lo_of(x.y), lo_of(x.z), lo_of(x.w));
        }
    };
    auto frags = [&](int it, Frags& f) {
        const float* vs = (const float*)(smem + (it %% STAGES) * STAGE_BYTES + 2 * U_BYTES);
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ks++) {
            const float x[4] = {vs[(8 * ks + q) * VROW + trow], vs[(8 * ks + q) * VROW + trow + 8],
                                vs[(8 * ks + q + 4) * VROW + trow], vs[(8 * ks + q + 4) * VROW + trow + 8]};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                f.hi[4 * ks + i] = __float_as_uint(x[i]);
                f.lo[4 * ks + i] = __float_as_uint(lo_of(x[i]));
            }
        }
    };
    auto mma = [&](int it, const Frags& f) {
        const unsigned ust = sbase + (it %% STAGES) * STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ks++) {
            const u64 dh = desc(ust + ks * 256), dl = LO_GLOBAL || LO_SMEM ? desc(ust + U_BYTES + ks * 256) : dh;
            MMA(f.hi[4 * ks], f.hi[4 * ks + 1], f.hi[4 * ks + 2], f.hi[4 * ks + 3], dh);
            MMA(f.lo[4 * ks], f.lo[4 * ks + 1], f.lo[4 * ks + 2], f.lo[4 * ks + 3], dh);
            MMA(f.hi[4 * ks], f.hi[4 * ks + 1], f.hi[4 * ks + 2], f.hi[4 * ks + 3], dl);
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    };
    // the stage of `it` landed (this thread's copies), split where asked, visible to the async proxy and all threads
    auto ready = [&](int it) {
        asm volatile("cp.async.wait_group %(WAIT)d;" ::: "memory");
        if (LO_SMEM) { __syncthreads(); split_u(it); }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) load(s);
    ready(0);
#if PIPELINED
    // group it in flight while stage it + 1 is made ready and its fragments loaded; the stage
    // of it - 1 (its group waited for by every thread before ready's barrier) takes the loads
    // of it + STAGES - 1
    Frags fa, fb;
    frags(0, fa);
    for (int it = 0; it < iters; it += 2) {
        mma(it, fa);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (it + 1 >= iters) break;
        ready(it + 1);
        load(it + STAGES - 1);
        frags(it + 1, fb);
        mma(it + 1, fb);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (it + 2 >= iters) break;
        ready(it + 2);
        load(it + STAGES);
        frags(it + 2, fa);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
    for (int it = 0; it < iters; it++) {
        Frags f;
        frags(it, f);
        mma(it, f);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        if (it + 1 < iters) { load(it + STAGES - 1); ready(it + 1); }
    }
#endif
    float* m = M + ((size_t)e * K + k0) * T + t0 + trow;
#pragma unroll
    for (int j = 0; j < KB / 8; j++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            m[(size_t)(8 * j + 2 * q + (r & 1)) * T + 8 * (r >> 1)] = d[4 * j + r];
}
""" % dict(TB=TB, KB=cfg.kb, CH=cfg.ch, STAGES=cfg.stages, VROW=cfg.vrow, U_BYTES=cfg.u_bytes,
           STAGE_BYTES=cfg.stage_bytes, LO_GLOBAL=int(cfg.lo == "global"), LO_SMEM=int(cfg.lo == "smem"),
           PIPELINED=int(cfg.pipelined), MIN_BLOCKS=cfg.blocks_per_sm, LBO=lbo, SBO=sbo, MASK=HI_MASK, WAIT=cfg.stages - 2 - int(cfg.pipelined))).replace("WGMMA", wgmma)


VARIANTS = {"pipelined": Config(), "serial, lo in smem": Config(pipelined=False, lo="smem"),
            "pipelined, lo in smem": Config(lo="smem"),
            "serial, no lo (bound)": Config(pipelined=False, lo="none")}
CONFIGS = ("Conv3/N32", "Conv3/N128", "Conv4/N64", "Conv4/N128", "Conv5/N32", "Conv5/N128")


def cmd_wgmma_gemm(args) -> int:
    """The GEMM on HGMMA (VARIANTS) against tcgemm's 3xTF32 and FP16-split mma.sync kernels on
    the same shapes, random operands; relative error against float64 (the bound variant's
    results are wrong by design)."""
    import json

    import numpy as np
    import sassas
    import torch
    from . import f4, tcgemm
    from .bench import f16_operands, timeit
    from .cuda import compile_source
    from .device import pointer, sm_count
    from .plan import round_up
    from .workloads import log, resnet_configs
    stream = lambda: torch.cuda.current_stream().cuda_stream
    kernels = {n: sassas.load(compile_source(source(c), "sm_90a", "wggemm.cu"))[KERNEL] for n, c in VARIANTS.items()}
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    print(f"# {props.name}: F(4x4,3x3)'s GEMM (36 batched, 3xTF32 or FP16 halves), ms; relative error against float64")
    rows = []
    for name, s in resnet_configs():
        if name not in (args.configs or CONFIGS):
            continue
        T = s.N * s.TH4 * s.TW4
        Tp, Kp, Cp = round_up(T, TB), round_up(s.K, 128), round_up(s.C, 32)
        U = torch.randn(36, Kp, Cp, device="cuda")
        V = torch.randn(36, Cp, Tp, device="cuda")
        Ulo = U - (U.view(torch.int32) & -8192).view(torch.float32)
        M = torch.empty(36, Kp, Tp, device="cuda")
        want = torch.bmm(U.double(), V.double())
        row = {"config": name, "C": Cp, "K": Kp, "T": Tp}
        for tag, k in kernels.items():
            c = VARIANTS[tag]

            def fn(_, k=k, c=c):
                k((Tp // TB, Kp // c.kb, 36), THREADS, pointer(U), pointer(Ulo), pointer(V), pointer(M), np.int32(Cp),
                  np.int32(Kp), np.int32(Tp), shared=c.smem_bytes, stream=stream())
            M.fill_(float("nan"))
            fn(0)
            torch.cuda.synchronize()
            err = float(torch.linalg.norm(M.double() - want) / torch.linalg.norm(want))
            row[tag] = {"ms": timeit(fn, 1, reps=args.reps)[0], "rel_err": err if c.lo != "none" else float("nan")}
        for tag, o in (("tcgemm 3xTF32", tcgemm.OPTIONS), ("tcgemm FP16 halves", tcgemm.F16)):
            p = f4.Plan(s, f4.plan(s, sm_count(), tc=True).parts, o)
            b = p.buffers()
            u4, v4 = torch.randn(*b["u4"], device="cuda"), torch.randn(*b["v4"], device="cuda")
            m4 = torch.empty(*b["m4"], device="cuda")
            words, scales = f16_operands(u4, v4) if p.f16 else (u4, None)
            row[tag] = {"ms": timeit(lambda _: f4.launch_sass_gemm(p.gemm, words, v4, m4, o, stream(), scales), 1,
                                     reps=args.reps)[0]}
        rows.append(row)
        log(f"[wgmma-gemm] {name} done")
        print(f"{name:<11}" + "  ".join(f"{t} {v['ms']:.4f}" + (f" ({v['rel_err']:.1e})" if "rel_err" in v and
                                        v["rel_err"] == v["rel_err"] else "") for t, v in row.items()
                                        if isinstance(v, dict)), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "rows": rows}, f, indent=1)
    return 0
