// Winograd F(4x4,3x3), fused, on the tensor cores: a CUDA-C measurement (fusedtc.py, `python -m
// kernels_sass.winograd fused-tc`, NOTES.md section 21) of what the fused kernel gains with its
// products on mma.sync in 3xTF32. Compiled after winograd.cu (f4_bt, f4_at_tile) by NVRTC, sm_80 up.
//
// x NCHW -> y NCHW, no transformed tensor in global memory but U (f4_filter_transform: rows
// e*Cp + c of Kp floats). The products in 3xTF32 on mma.sync m16n8k8 (hi = x's top 19 bits,
// lo = x - hi; lo*hi + hi*lo + hi*hi a tile). A block: 32 filters x 32 tiles x the 36
// positions, 8 channels an iteration. Its 8 multiplying warps: warp w positions w, w + 8,
// w + 16, w + 24 (32 x 32 each: 2 x 4 mma tiles) and rows 16 (w % 2) of position 32 + w / 2;
// 144 accumulators a thread.
// Shared memory: two stages of U[e][c][k] and V[e][c][t] (rows of 32 floats, column x at
// x ^ 8 (c % 4): a fragment's 32 loads in 32 banks), the raw 6x6 windows of a chunk (cp.async,
// zero-filled outside the image; VEC: a window row's columns 1-4 by one 16-byte copy), and in
// the epilogue M[e][k][t] (rows FT_MROW apart) over both. grid (ceil(T / 32), Kp / 32, parts):
// part p sums chunks [p ipp, (p + 1) ipp) into y by atomicAdd where parts > 1 (y zeroed first).
//
// f4_fused_tc (256 threads, 180 KB): every warp copies, transforms and multiplies; the next chunk's copies are issued
// before this chunk's products (FT_INTERLEAVE: between its positions), its transform after them,
// one barrier a chunk. f4_fused_tc_ws (sm_90a, 384 threads, 216 KB): warp-specialized, two consumer warpgroups (the
// products, setmaxnreg to FT_CONSUMER_REGS) and a producer warpgroup (U's copies, the windows
// one chunk ahead into two raw buffers, the transform; FT_PRODUCER_REGS). A stage is full at a
// named barrier (the producer arrives, the consumers wait), empty at the block's barrier (all
// wait: the consumers for the producer's next transform, which they wait for anyway).
#define FT_OPER (36 * 8 * 32)              // floats of one operand's stage
#define FT_STAGES (2 * 2 * FT_OPER)        // floats of both stages of U and V
#define FT_RAW_FLOATS (6 * 256 * 4 + 6 * 2 * 256)   // a raw buffer: columns 1-4 [6][256][4], 0 and 5 [6][2][256]
#define FT_MROW 40                         // the epilogue's M rows: a warp's float2 stores in 32 banks
#define FT_MEW (32 * FT_MROW)
#define FT_CONSUMER_REGS 200               // 2 x 128 x 200 + 128 x 104 = 384 x 168, the block's registers at
#define FT_PRODUCER_REGS 104               // launch: more and the consumers' setmaxnreg.inc waits forever
#define FT_FULL 1                          // named barriers: FT_FULL + s (a stage full), the consumers' epilogue
#define FT_EPILOGUE 3
#ifndef FT_SKIP
#define FT_SKIP 0                          // measurement only (wrong results): 1 the products, 2 the windows' loads,
#endif                                     // 4 U's copies, 8 the transform
#ifndef FT_INTERLEAVE
#define FT_INTERLEAVE 0
#endif

// hi: x's top 19 bits (sign, exponent, 10 of the mantissa): lo = x - hi is exact and below
// 2^-10 |x|, the tensor core's truncation of lo costs 2^-21 |x|; one LOP3 where cvt.rna.tf32
// compiles to a rounding sequence with NaN checks
__device__ __forceinline__ unsigned ft_hi(float x)
{
    return __float_as_uint(x) & 0xffffe000u;
}

__device__ __forceinline__ void ft_mma(float d[4], const unsigned a[4], const unsigned b[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ int ft_col(int c, int x) { return c * 32 + (x ^ (8 * (c & 3))); }

__device__ __forceinline__ void ft_copy(unsigned dst, const void* src, int bytes, bool in)
{
    if (bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(in ? 4 : 0) : "memory");
}

__device__ __forceinline__ void ft_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Barriers the two roles of the warp-specialized kernel reach at different instructions: PTX's
// bar.sync (barrier.sync.aligned) wants every thread at the same one
__device__ __forceinline__ void ft_bar_sync(int id, int count)
{
    asm volatile("barrier.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void ft_bar_arrive(int id, int count)
{
    asm volatile("barrier.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void ft_bar_all() { asm volatile("barrier.sync 0;" ::: "memory"); }

// The window of tile t (t < T): its image n, its top-left corner (h0, w0) (-1: the padding),
// which of its 36 elements are inside the image, and its address in channel 0 (xw)
struct FtWindow {
    const float* xw;
    unsigned long long inside;
    int n, h0, w0;
};

__device__ __forceinline__ FtWindow ft_window(const float* x, int t, int T, int C, int H, int W, int TH, int TW)
{
    FtWindow f;
    const int tile = t % (TH * TW);
    f.n = t / (TH * TW);
    f.h0 = 4 * (tile / TW) - 1;
    f.w0 = 4 * (tile % TW) - 1;
    f.inside = 0;
#pragma unroll
    for (int i = 0; i < 6; ++i)
#pragma unroll
        for (int j = 0; j < 6; ++j)
            if (t < T && f.h0 + i >= 0 && f.h0 + i < H && f.w0 + j >= 0 && f.w0 + j < W) f.inside |= 1ull << (6 * i + j);
    f.xw = x + (i64)(t < T ? f.n : 0) * C * H * W + (i64)f.h0 * W + f.w0;
    return f;
}

// channel c's window (zeros where c >= C) into slot p of the raw buffer at shared address raw
template <bool VEC>
__device__ __forceinline__ void ft_copy_window(unsigned raw, int p, const FtWindow& f, int c, int C, int H, int W,
                                               const float* x)
{
    if (FT_SKIP & 2) return;
    const bool ok = c < C;
    const float* xc = f.xw + (i64)(ok ? c : 0) * H * W;
#pragma unroll
    for (int i = 0; i < 6; ++i) {
        const unsigned mid = raw + 4 * (i * 1024 + 4 * p), edge = raw + 4 * (6 * 1024 + 2 * i * 256 + p);
        auto in = [&](int j) { return ok && (f.inside >> (6 * i + j)) & 1; };
        if (VEC) {                 // columns 1-4 inside or outside together
            ft_copy(mid, in(1) ? xc + i * W + 1 : x, 16, in(1));
        } else {
#pragma unroll
            for (int j = 1; j < 5; ++j) ft_copy(mid + 4 * (j - 1), in(j) ? xc + i * W + j : x, 4, in(j));
        }
        ft_copy(edge, in(0) ? xc + i * W : x, 4, in(0));
        ft_copy(edge + 4 * 256, in(5) ? xc + i * W + 5 : x, 4, in(5));
    }
}

// B^T d B of the window in slot p of the raw buffer rw (landed), into v: V[e] at v + 256 e
__device__ __forceinline__ void ft_transform_window(const float* rw, int p, float* v)
{
    if (FT_SKIP & 8) return;
    float d[6][6], s[6][6];
#pragma unroll
    for (int i = 0; i < 6; ++i) {
        const float4 m = *reinterpret_cast<const float4*>(rw + i * 1024 + 4 * p);
        d[i][0] = rw[6 * 1024 + 2 * i * 256 + p];
        d[i][1] = m.x; d[i][2] = m.y; d[i][3] = m.z; d[i][4] = m.w;
        d[i][5] = rw[6 * 1024 + (2 * i + 1) * 256 + p];
    }
#pragma unroll
    for (int j = 0; j < 6; ++j) {
        float col[6], o[6];
#pragma unroll
        for (int i = 0; i < 6; ++i) col[i] = d[i][j];
        f4_bt(col, o);
#pragma unroll
        for (int i = 0; i < 6; ++i) s[i][j] = o[i];
    }
#pragma unroll
    for (int i = 0; i < 6; ++i) {
        float o[6];
        f4_bt(s[i], o);
#pragma unroll
        for (int j = 0; j < 6; ++j) v[(6 * i + j) * 256] = o[j];
    }
}

// copies `count` of the chunk's 2304 16-byte pieces of U (from `first`, `step` apart) into
// the stage at shared address st: row e * 8 + c (channel c0 + c) of 32 filters from k0
__device__ __forceinline__ void ft_copy_u(unsigned st, const float* u, int c0, int k0, int Cp, int Kp, int first,
                                          int step, int count)
{
    if (FT_SKIP & 4) return;
#pragma unroll
    for (int i = 0; i < count; ++i) {
        const int id = first + step * i, row = id >> 3, part = id & 7;
        const float* src = u + ((i64)(row >> 3) * Cp + c0 + (row & 7)) * Kp + k0 + 4 * part;
        ft_copy(st + 4 * ((row >> 3) * 256 + ft_col(row & 7, 4 * part)), src, 16, true);
    }
}

// position e's products of the 8 channels in shared memory (us, vs: the stage) on MI_N row
// halves from mi0 and the 4 column octets
template <int MI_N>
__device__ __forceinline__ void ft_position(const float* __restrict__ us, const float* __restrict__ vs, int e, int mi0,
                                            int g, int q, float acc[MI_N][4][4])
{
    unsigned ah[MI_N][4], al[MI_N][4], bh[4][2], bl[4][2];
    const float* ue = us + e * 8 * 32;
    const float* ve = vs + e * 8 * 32;
#pragma unroll
    for (int mi = 0; mi < MI_N; ++mi)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const float x = ue[ft_col(q + 4 * (r >> 1), 16 * (mi0 + mi) + g + 8 * (r & 1))];
            ah[mi][r] = ft_hi(x);
            al[mi][r] = __float_as_uint(x - __uint_as_float(ah[mi][r]));
        }
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float x = ve[ft_col(q + 4 * r, 8 * ni + g)];
            bh[ni][r] = ft_hi(x);
            bl[ni][r] = __float_as_uint(x - __uint_as_float(bh[ni][r]));
        }
    if (FT_SKIP & 1) return;
#pragma unroll
    for (int mi = 0; mi < MI_N; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) ft_mma(acc[mi][ni], al[mi], bh[ni]);
#pragma unroll
    for (int mi = 0; mi < MI_N; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) ft_mma(acc[mi][ni], ah[mi], bl[ni]);
#pragma unroll
    for (int mi = 0; mi < MI_N; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) ft_mma(acc[mi][ni], ah[mi], bh[ni]);
}

// A warp's accumulators: positions warp + 8 p (2 x 4 tiles each), half of 32 + warp / 2
struct FtAcc {
    float a[4][2][4][4], b[1][4][4];
};

__device__ __forceinline__ void ft_zero(FtAcc& acc)
{
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int r = 0; r < 4; ++r) acc.a[p][mi][ni][r] = 0.0f;
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc.b[0][ni][r] = 0.0f;
}

// the products of the stage at us (U, then V): between(p) before position p, between(4) before
// the half position (FT_INTERLEAVE's copies)
template <typename Between>
__device__ __forceinline__ void ft_products(const float* us, int warp, int g, int q, FtAcc& acc, Between between)
{
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        between(p);
        ft_position<2>(us, us + FT_OPER, warp + 8 * p, 0, g, q, acc.a[p]);
    }
    between(4);
    ft_position<1>(us, us + FT_OPER, 32 + warp / 2, warp & 1, g, q, acc.b);
}

// M[e][k][t] in shared memory (ms), then thread (warp, lane) the 4 (k, t) pairs k = warp + 8 r,
// t = t0 + lane: A^T m A into y. sync: the 256 threads' barrier.
template <bool VEC, typename Sync>
__device__ __forceinline__ void ft_epilogue(const FtAcc& acc, float* ms, const FtWindow& f, int t, int T, int warp,
                                            int lane, int k0, int K, int H, int W, float* __restrict__ y, Sync sync)
{
    const int g = lane >> 2, q = lane & 3;
    auto put = [&](const float a[4], int e, int k, int tt) {
        *reinterpret_cast<float2*>(ms + e * FT_MEW + k * FT_MROW + tt) = make_float2(a[0], a[1]);
        *reinterpret_cast<float2*>(ms + e * FT_MEW + (k + 8) * FT_MROW + tt) = make_float2(a[2], a[3]);
    };
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int p = 0; p < 4; ++p)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) put(acc.a[p][mi][ni], warp + 8 * p, 16 * mi + g, 8 * ni + 2 * q);
        put(acc.b[0][ni], 32 + warp / 2, 16 * (warp & 1) + g, 8 * ni + 2 * q);
    }
    sync();
    if (t >= T) return;
    const int oh = f.h0 + 1, ow = f.w0 + 1;
#pragma unroll 1
    for (int r = 0; r < 4; ++r) {
        const int k = warp + 8 * r;
        if (k0 + k >= K) break;
        float mv[36];
#pragma unroll
        for (int e = 0; e < 36; ++e) mv[e] = ms[e * FT_MEW + k * FT_MROW + lane];
        float out[4][4];
        f4_at_tile(mv, out);
        float* yk = y + ((i64)f.n * K + k0 + k) * H * W + (i64)oh * W + ow;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if (oh + i >= H) break;
            if (VEC && gridDim.z == 1) {
                *reinterpret_cast<float4*>(yk + i * W) = make_float4(out[i][0], out[i][1], out[i][2], out[i][3]);
                continue;
            }
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (ow + j < W) {
                    if (gridDim.z > 1) atomicAdd(yk + i * W + j, out[i][j]);
                    else yk[i * W + j] = out[i][j];
                }
        }
    }
}

// every warp in every phase: thread tid's window is channel c0 + warp of tile t0 + lane
template <bool VEC>
__device__ __forceinline__ void ft_kernel(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
                                          int N, int C, int H, int W, int K, int TH, int TW, int Cp, int Kp, int ipp)
{
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int T = N * TH * TW, t0 = blockIdx.x * 32, k0 = blockIdx.y * 32, t = t0 + lane;
    const int it0 = blockIdx.z * ipp, it1 = min(it0 + ipp, Cp / 8);
    const FtWindow f = ft_window(x, t, T, C, H, W, TH, TW);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem), raw = sbase + 4 * FT_STAGES;
    // chunk it's copies into stage it % 2 in 5 pieces: U's in pieces 0-1, the windows in 2-4
    auto issue = [&](int it, int piece) {
        const int s = it & 1;
        if (piece < 2) ft_copy_u(sbase + 4 * s * 2 * FT_OPER, u, 8 * it, k0, Cp, Kp, tid + 256 * 5 * piece, 256, piece ? 4 : 5);
        if (piece == 2) ft_copy_window<VEC>(raw, tid, f, 8 * it + warp, C, H, W, x);
        if (piece == 4) ft_commit();
    };
    auto transform = [&](int it) {       // the raw windows (landed) -> V of stage it % 2
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        ft_transform_window(smem + FT_STAGES, tid, smem + (it & 1) * 2 * FT_OPER + FT_OPER + ft_col(warp, lane));
    };
    FtAcc acc;
    ft_zero(acc);
    if (it0 < it1) {
#pragma unroll
        for (int piece = 0; piece < 5; ++piece) issue(it0, piece);
        transform(it0);
        __syncthreads();
    }
    for (int it = it0; it < it1; ++it) {
        const bool next = it + 1 < it1;
        if (next && !FT_INTERLEAVE) {
#pragma unroll
            for (int piece = 0; piece < 5; ++piece) issue(it + 1, piece);
        }
        ft_products(smem + (it & 1) * 2 * FT_OPER, warp, g, q, acc, [&](int p) { if (next && FT_INTERLEAVE) issue(it + 1, p); });
        if (next) transform(it + 1);
        __syncthreads();
    }
    ft_epilogue<VEC>(acc, smem, f, t, T, warp, lane, k0, K, H, W, y, [] { __syncthreads(); });
#endif
}

// warp-specialized (sm_90a): warps 0-7 the products and the epilogue, warps 8-11 the rest.
// Producer thread p (0..127) copies U's pieces p + 128 i and the windows of channels p / 32
// and p / 32 + 4 of tile t0 + p % 32, chunk i + 1's windows before chunk i's transform.
template <bool VEC>
__device__ __forceinline__ void ft_ws_kernel(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
                                             int N, int C, int H, int W, int K, int TH, int TW, int Cp, int Kp, int ipp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int T = N * TH * TW, t0 = blockIdx.x * 32, k0 = blockIdx.y * 32, t = t0 + lane;
    const int it0 = blockIdx.z * ipp, chunks = min(it0 + ipp, Cp / 8) - it0;
    const FtWindow f = ft_window(x, t, T, C, H, W, TH, TW);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
    if (warp >= 8) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(FT_PRODUCER_REGS));
        const int p = tid - 256, c_lo = p >> 5;
        auto windows = [&](int i) {      // chunk i's windows into raw buffer i % 2
            const unsigned raw = sbase + 4 * (FT_STAGES + (i & 1) * FT_RAW_FLOATS);
            ft_copy_window<VEC>(raw, p, f, 8 * (it0 + i) + c_lo, C, H, W, x);
            ft_copy_window<VEC>(raw, p + 128, f, 8 * (it0 + i) + c_lo + 4, C, H, W, x);
        };
        if (chunks > 0) windows(0);
        ft_commit();
        for (int i = 0; i < chunks; ++i) {
            const int s = i & 1;
            if (i >= 2) ft_bar_all();        // stage s empty: the consumers are past chunk i - 2
            ft_copy_u(sbase + 4 * s * 2 * FT_OPER, u, 8 * (it0 + i), k0, Cp, Kp, p, 128, 18);
            ft_commit();
            if (i + 1 < chunks) windows(i + 1);
            ft_commit();
            asm volatile("cp.async.wait_group 1;" ::: "memory");     // all but chunk i + 1's windows
            const float* rw = smem + FT_STAGES + (i & 1) * FT_RAW_FLOATS;
            float* v = smem + s * 2 * FT_OPER + FT_OPER;
            ft_transform_window(rw, p, v + ft_col(c_lo, lane));
            ft_transform_window(rw, p + 128, v + ft_col(c_lo + 4, lane));
            __threadfence_block();
            ft_bar_arrive(FT_FULL + s, 384);
        }
        ft_bar_all();                    // the epilogue's M goes over the raw buffers
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(FT_CONSUMER_REGS));
    const int g = lane >> 2, q = lane & 3;
    FtAcc acc;
    ft_zero(acc);
    for (int i = 0; i < chunks; ++i) {
        const int s = i & 1;
        ft_bar_sync(FT_FULL + s, 384);
        ft_products(smem + s * 2 * FT_OPER, warp, g, q, acc, [](int) {});
        if (i + 2 < chunks) ft_bar_all();
    }
    ft_bar_all();
    ft_epilogue<VEC>(acc, smem, f, t, T, warp, lane, k0, K, H, W, y, [] { ft_bar_sync(FT_EPILOGUE, 256); });
#endif
}

#define FT_PARAMS const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y, int N, int C, int H, \
                  int W, int K, int TH, int TW, int Cp, int Kp, int ipp
#define FT_ARGS x, u, y, N, C, H, W, K, TH, TW, Cp, Kp, ipp

// VEC: W % 4 == 0 and x, y 16-byte aligned
extern "C" __global__ void __launch_bounds__(256, 1) f4_fused_tc(FT_PARAMS) { ft_kernel<false>(FT_ARGS); }
extern "C" __global__ void __launch_bounds__(256, 1) f4_fused_tc_vec(FT_PARAMS) { ft_kernel<true>(FT_ARGS); }
extern "C" __global__ void __launch_bounds__(384, 1) f4_fused_tc_ws(FT_PARAMS) { ft_ws_kernel<false>(FT_ARGS); }
extern "C" __global__ void __launch_bounds__(384, 1) f4_fused_tc_ws_vec(FT_PARAMS) { ft_ws_kernel<true>(FT_ARGS); }
