// Winograd F(4x4,3x3), fused, on the tensor cores: a CUDA-C measurement (fusedtc.py, `python -m
// kernels_sass.winograd fused-tc`, NOTES.md section 21) of what the fused kernel gains with its
// products on mma.sync in 3xTF32. Compiled after winograd.cu (f4_bt, f4_at) by NVRTC, sm_80 up.
//
// x NCHW -> y NCHW, no transformed tensor in global memory but U (f4_filter_transform: rows
// e*Cp + c of Kp floats). The products in 3xTF32 on mma.sync m16n8k8 (hi = x's top 19 bits,
// lo = x - hi; lo*hi + hi*lo + hi*hi a tile). A block: 256 threads, 32 filters x 32 tiles x the
// 36 positions, 8 channels an iteration. Warp w: positions w, w + 8, w + 16, w + 24 (32 x 32
// each: 2 x 4 mma tiles) and rows 16 (w % 2) of position 32 + w / 2; 144 accumulators a thread.
// Shared memory: two stages of U[e][c][k] and V[e][c][t] (rows of 32 floats, column x at
// x ^ 8 (c % 4): a fragment's 32 loads in 32 banks), the raw 6x6 windows of the next chunk
// (cp.async, zero-filled outside the image; VEC: a window row's columns 1-4 by one 16-byte
// copy), and in the epilogue M[e][k][t] (rows FT_MROW apart) over both. The next chunk's copies
// are issued before this chunk's products (FT_INTERLEAVE: between its positions), its transform
// after them. grid (ceil(T / 32), Kp / 32, parts): part p sums chunks [p ipp, (p + 1) ipp) into
// y by atomicAdd where parts > 1 (y zeroed first).
#define FT_OPER (36 * 8 * 32)              // floats of one operand's stage
#define FT_RAW (2 * 2 * FT_OPER)           // the raw windows after both stages: [6][256][8]
#define FT_SMEM_FLOATS (FT_RAW + 6 * 256 * 8)
#define FT_MROW 40                         // the epilogue's M rows: a warp's float2 stores in 32 banks
#define FT_MEW (32 * FT_MROW)
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

template <bool VEC>
__device__ __forceinline__ void ft_kernel(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
                                          int N, int C, int H, int W, int K, int TH, int TW, int Cp, int Kp, int ipp)
{
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int T = N * TH * TW, t0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
    const int it0 = blockIdx.z * ipp, it1 = min(it0 + ipp, Cp / 8);
    // this thread's window: channel c0 + warp, tile t0 + lane; which of its 36 elements are
    // inside the image
    const int t = t0 + lane, n = t / (TH * TW), tile = t % (TH * TW);
    const int h0 = 4 * (tile / TW) - 1, w0 = 4 * (tile % TW) - 1;
    unsigned long long inside = 0;
#pragma unroll
    for (int i = 0; i < 6; ++i)
#pragma unroll
        for (int j = 0; j < 6; ++j)
            if (t < T && h0 + i >= 0 && h0 + i < H && w0 + j >= 0 && w0 + j < W) inside |= 1ull << (6 * i + j);
    const float* xw = x + (i64)(t < T ? n : 0) * C * H * W + (i64)h0 * W + w0;
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned raw = sbase + 4 * (FT_RAW + 8 * tid);     // row i at + 4 * 8 * 256 * i

    // chunk it's copies into stage it % 2, in 5 pieces (between the positions' products)
    auto issue = [&](int it, int piece) {
        const int c0 = 8 * it, s = it & 1;
        if (piece < 2 && !(FT_SKIP & 4)) {
#pragma unroll
            for (int i = 5 * piece; i < (piece ? 9 : 5); ++i) {
                const int id = tid + 256 * i, row = id >> 3, part = id & 7;     // row = e * 8 + c
                const float* src = u + ((i64)(row >> 3) * Cp + c0 + (row & 7)) * Kp + k0 + 4 * part;
                ft_copy(sbase + 4 * (s * 2 * FT_OPER + (row >> 3) * 256 + ft_col(row & 7, 4 * part)), src, 16, true);
            }
        }
        if (piece >= 2 && !(FT_SKIP & 2)) {
            const int c = c0 + warp;
            const bool ok = c < C;
            const float* xc = xw + (i64)(ok ? c : 0) * H * W;
#pragma unroll
            for (int i = 2 * piece - 4; i < 2 * piece - 2; ++i) {
                const unsigned d = raw + 4 * 8 * 256 * i;
                if (VEC) {       // columns 1-4 (inside or outside together), 0, 5
                    ft_copy(d, ok && (inside >> (6 * i + 1)) & 1 ? xc + i * W + 1 : x, 16, ok && (inside >> (6 * i + 1)) & 1);
                    ft_copy(d + 16, ok && (inside >> (6 * i)) & 1 ? xc + i * W : x, 4, ok && (inside >> (6 * i)) & 1);
                    ft_copy(d + 20, ok && (inside >> (6 * i + 5)) & 1 ? xc + i * W + 5 : x, 4, ok && (inside >> (6 * i + 5)) & 1);
                } else {
#pragma unroll
                    for (int j = 0; j < 6; ++j) {
                        const bool in = ok && (inside >> (6 * i + j)) & 1;
                        ft_copy(d + 4 * (j == 0 ? 4 : j == 5 ? 5 : j - 1), in ? xc + i * W + j : x, 4, in);   // as VEC's
                    }
                }
            }
        }
        if (piece == 4) asm volatile("cp.async.commit_group;" ::: "memory");
    };
    auto transform = [&](int it) {       // the raw windows (landed) -> V of stage it % 2
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        if (FT_SKIP & 8) return;
        const float* rw = smem + FT_RAW + 8 * tid;
        float s[6][6];
        float d[6][6];
#pragma unroll
        for (int i = 0; i < 6; ++i) {
            const float4 m = *reinterpret_cast<const float4*>(rw + 8 * 256 * i);
            const float2 e = *reinterpret_cast<const float2*>(rw + 8 * 256 * i + 4);
            d[i][0] = e.x; d[i][1] = m.x; d[i][2] = m.y; d[i][3] = m.z; d[i][4] = m.w; d[i][5] = e.y;
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
        float* vs = smem + (it & 1) * 2 * FT_OPER + FT_OPER + ft_col(warp, lane);
#pragma unroll
        for (int i = 0; i < 6; ++i) {
            float o[6];
            f4_bt(s[i], o);
#pragma unroll
            for (int j = 0; j < 6; ++j) vs[(6 * i + j) * 256] = o[j];
        }
    };

    float acc[4][2][4][4], acc2[1][4][4];
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[p][mi][ni][r] = 0.0f;
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc2[0][ni][r] = 0.0f;

    if (it0 < it1) {
#pragma unroll
        for (int piece = 0; piece < 5; ++piece) issue(it0, piece);
        transform(it0);
        __syncthreads();
    }
    for (int it = it0; it < it1; ++it) {
        const bool next = it + 1 < it1;
        const float* us = smem + (it & 1) * 2 * FT_OPER;
        if (next && !FT_INTERLEAVE) {
#pragma unroll
            for (int piece = 0; piece < 5; ++piece) issue(it + 1, piece);
        }
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            if (next && FT_INTERLEAVE) issue(it + 1, p);
            ft_position<2>(us, us + FT_OPER, warp + 8 * p, 0, g, q, acc[p]);
        }
        if (next && FT_INTERLEAVE) issue(it + 1, 4);
        ft_position<1>(us, us + FT_OPER, 32 + warp / 2, warp & 1, g, q, acc2);
        if (next) transform(it + 1);
        __syncthreads();
    }

    // epilogue: M[e][k][t] in shared memory, then thread (warp, lane) the 4 (k, t) pairs
    // k = warp + 8 r, t = lane: A^T m A into y
    float* ms = smem;
    auto put = [&](const float a[4], int e, int k, int tt) {
        *reinterpret_cast<float2*>(ms + e * FT_MEW + k * FT_MROW + tt) = make_float2(a[0], a[1]);
        *reinterpret_cast<float2*>(ms + e * FT_MEW + (k + 8) * FT_MROW + tt) = make_float2(a[2], a[3]);
    };
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int p = 0; p < 4; ++p)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) put(acc[p][mi][ni], warp + 8 * p, 16 * mi + g, 8 * ni + 2 * q);
        put(acc2[0][ni], 32 + warp / 2, 16 * (warp & 1) + g, 8 * ni + 2 * q);
    }
    __syncthreads();
    if (t >= T) return;
    const int oh = h0 + 1, ow = w0 + 1;
#pragma unroll 1
    for (int r = 0; r < 4; ++r) {
        const int k = warp + 8 * r;
        if (k0 + k >= K) break;
        float mv[36];
#pragma unroll
        for (int e = 0; e < 36; ++e) mv[e] = ms[e * FT_MEW + k * FT_MROW + lane];
        float s[4][6], out[4][4];
#pragma unroll
        for (int j = 0; j < 6; ++j) {
            float col[6], o[4];
#pragma unroll
            for (int i = 0; i < 6; ++i) col[i] = mv[6 * i + j];
            f4_at(col, o);
#pragma unroll
            for (int i = 0; i < 4; ++i) s[i][j] = o[i];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) f4_at(s[i], out[i]);
        float* yk = y + ((i64)n * K + k0 + k) * H * W + (i64)oh * W + ow;
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
#endif
}

// VEC: W % 4 == 0 and x, y 16-byte aligned
extern "C" __global__ void __launch_bounds__(256, 1)
f4_fused_tc(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
            int N, int C, int H, int W, int K, int TH, int TW, int Cp, int Kp, int ipp)
{
    ft_kernel<false>(x, u, y, N, C, H, W, K, TH, TW, Cp, Kp, ipp);
}

extern "C" __global__ void __launch_bounds__(256, 1)
f4_fused_tc_vec(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
                int N, int C, int H, int W, int K, int TH, int TW, int Cp, int Kp, int ipp)
{
    ft_kernel<true>(x, u, y, N, C, H, W, K, TH, TW, Cp, Kp, ipp);
}
