// Winograd F(2x2,3x3) FP32 convolution, padding 1, stride 1: the CUDA-C reference of the SASS
// kernel (same algorithm, same layouts, same thread roles), the layout transposes, the filter
// transform (FX) and a direct convolution for checking. Compiled at run time with NVRTC
// (kernels_sass/winograd/cuda.py). Layouts: input CHWN, filter CRSK (or KCRS, by strides),
// output KHWN.
//
//   Y = A^T [ sum_c (G g G^T) * (B^T d B) ] A
//
// Main kernel (256 threads, one block per SM): bk = 64 filters, bn = 32 tiles (32 images at one
// tile position), bc = 8 channels an iteration. Each iteration: every thread loads one 4x4 input
// window (channel = warp, image = lane), transforms it and stores the 16 values to shared memory;
// the block stores 8 x 16 x 64 transformed filter values; then 16 batched GEMMs of 64x32x8,
// one per half-warp (e = tid / 16), each thread a 16x8 outer-product tile (kg = tid%16 / 4
// picks k = q*16 + kg*4 + 0..3, tg = tid%4 picks t = q*16 + tg*4 + 0..3). Double-buffered
// shared memory, global loads for the next iteration in registers during this one's GEMMs.
// Output transform through shared memory in two rounds of 32 filters.

#define BK 64
#define BN 32
#define BC 8
#define THREADS 256
#define ES_U 528              // floats per position e in the shared filter tile (8*64 + 16 pad)
#define ES_V 272              // floats per e in the shared input tile (8*32 + 16 pad)
#define V_OFF (16 * ES_U)     // input tile after the filter tile
#define BUF_FLOATS 16384      // one buffer: 64 KiB
#define KS_M 36               // floats per filter row in the output-transform staging (sassgen.py: why 36)
#define ES_M (32 * KS_M)      // floats per e there
#define SMEM_BYTES (2 * BUF_FLOATS * 4)

typedef long long i64;

extern "C" __global__ void transpose2d(const float* __restrict__ in, float* __restrict__ out,
                                       int rows, int cols)
{
    // out[c][r] = in[r][c], in: rows x cols (row-major). 1-D grid of 32x32 tiles, 32x8 threads.
    __shared__ float tile[32][33];
    const int tiles_c = (cols + 31) / 32;
    const int bx = blockIdx.x % tiles_c, by = blockIdx.x / tiles_c;
    int c = bx * 32 + threadIdx.x;
    for (int k = threadIdx.y; k < 32; k += 8) {
        int r = by * 32 + k;
        if (r < rows && c < cols) tile[k][threadIdx.x] = in[(i64)r * cols + c];
    }
    __syncthreads();
    int r = by * 32 + threadIdx.x;
    for (int k = threadIdx.y; k < 32; k += 8) {
        int cc = bx * 32 + k;
        if (r < rows && cc < cols) out[(i64)cc * rows + r] = tile[threadIdx.x][k];
    }
}

// Split-C (sassgen.py): the outputs of the tiles from `first` on are added into y by the parts
// of their channel loops, so they start at zero. Tile t = kb + KB * (nb + NB * pos): filters
// kb*64.., images nb*32.., outputs rows 2th, 2th+1, columns 2tw, 2tw+1 (pos = th * TW + tw).
// The blocks of blockIdx.y = by0.. zero one tile each, gridDim.x of them sharing it.
struct SplitTiles {
    float* y;
    int first, N, H, W, K, TW, KB, NB;
};

__device__ void zero_split_tile(const SplitTiles& z, int tile)
{
    const int kb = tile % z.KB, nb = tile / z.KB % z.NB, pos = tile / z.KB / z.NB;
    const int th = pos / z.TW, tw = pos % z.TW;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < BK * BN; i += gridDim.x * blockDim.x) {
        const int k = kb * BK + i / BN, n = nb * BN + i % BN;
        if (k >= z.K || n >= z.N) continue;
        for (int dh = 0; dh < 2; ++dh)
            for (int dw = 0; dw < 2; ++dw) {
                const int h = 2 * th + dh, w = 2 * tw + dw;
                if (h < z.H && w < z.W) z.y[(((i64)k * z.H + h) * z.W + w) * z.N + n] = 0.0f;
            }
    }
}

// grid (x, tiles - first): the split tiles' outputs zeroed, for a main kernel launched alone
extern "C" __global__ void zero_split_tiles(SplitTiles z)
{
    zero_split_tile(z, z.first + blockIdx.y);
}

// FX: U[c][e][k] = (G g G^T)[e] for g = w[k][c], zero for c >= C or k >= K; rows = Cpad + 8
// (one zero block past the end, so the main loop's last prefetch stays in bounds). Blocks with
// blockIdx.y >= rows zero the outputs of split tiles (z.y not null; one launch less).
extern "C" __global__ void filter_transform(const float* __restrict__ w, float* __restrict__ u,
                                            int K, int C, int Kpad, int rows,
                                            i64 sk, i64 sc, i64 sr, i64 ss, SplitTiles z)
{
    if (blockIdx.y >= rows) {
        zero_split_tile(z, z.first + blockIdx.y - rows);
        return;
    }
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y;
    if (k >= Kpad || c >= rows) return;
    float g[3][3];
    bool ok = k < K && c < C;
    for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s)
            g[r][s] = ok ? w[k * sk + c * sc + r * sr + s * ss] : 0.0f;
    float t[4][3];   // G g
    for (int s = 0; s < 3; ++s) {
        t[0][s] = g[0][s];
        t[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
        t[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
        t[3][s] = g[2][s];
    }
    // U[kb][e][c][64] (kb = k / 64): a main-kernel thread's 8 channels of one k-block sit
    // 256 bytes apart, within the 12-bit offset of LDGSTS
    const i64 es = (i64)rows * 64;
    float* o = u + ((i64)(k >> 6) * 16 * rows + c) * 64 + (k & 63);
    for (int i = 0; i < 4; ++i) {
        o[(4 * i + 0) * es] = t[i][0];
        o[(4 * i + 1) * es] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        o[(4 * i + 2) * es] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        o[(4 * i + 3) * es] = t[i][2];
    }
}

__device__ __forceinline__ void input_tile_transform(float d[16])
{
    // d[4*i + j] <- (B^T d B)[i][j]; B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]
    float t[16];
    for (int j = 0; j < 4; ++j) {
        t[0 + j] = d[0 + j] - d[8 + j];
        t[4 + j] = d[4 + j] + d[8 + j];
        t[8 + j] = d[8 + j] - d[4 + j];
        t[12 + j] = d[4 + j] - d[12 + j];
    }
    for (int i = 0; i < 4; ++i) {
        d[4 * i + 0] = t[4 * i + 0] - t[4 * i + 2];
        d[4 * i + 1] = t[4 * i + 1] + t[4 * i + 2];
        d[4 * i + 2] = t[4 * i + 2] - t[4 * i + 1];
        d[4 * i + 3] = t[4 * i + 1] - t[4 * i + 3];
    }
}

// grid (Kpad / 64, ceil(N / 32), TH * TW), 256 threads, SMEM_BYTES dynamic shared memory.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
winograd_2x2_3x3(const float* __restrict__ x, const float* __restrict__ u, float* __restrict__ y,
                 int N, int C, int H, int W, int K, int TW, int rows)
{
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kb = blockIdx.x, nb = blockIdx.y, pos = blockIdx.z;
    const int th = pos / TW, tw = pos - th * TW;
    const int n = nb * BN + lane;
    const int h0 = 2 * th - 1, w0 = 2 * tw - 1;
    unsigned mask = 0;
    if (n < N)
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
                if ((unsigned)(h0 + i) < (unsigned)H && (unsigned)(w0 + j) < (unsigned)W)
                    mask |= 1u << (4 * i + j);
    const i64 HWN = (i64)H * W * N;
    const float* xp = x + (i64)warp * HWN + ((i64)h0 * W + w0) * N + n;   // channel c0 + warp
    // U[kb][e][c][64] (filter_transform), rows channels (Cpad and a zero block)
    const float* up = u + (i64)(kb * 16 + (tid >> 4)) * rows * 64 + (tid & 15) * 4;
    const int e = tid >> 4, l = tid & 15, kg = l >> 2, tg = l & 3;

    float d[16];
    float4 f[8];
    auto load = [&](int c0) {
        unsigned m = (c0 + warp < C) ? mask : 0u;
        const float* p = xp + (i64)c0 * HWN;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                d[4 * i + j] = (m >> (4 * i + j) & 1) ? p[((i64)i * W + j) * N] : 0.0f;
        const float* q = up + (i64)c0 * 64;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            f[j] = *reinterpret_cast<const float4*>(q + (i64)j * 64);
    };
    auto store = [&](int buf) {
        input_tile_transform(d);
        float* vs = smem + buf * BUF_FLOATS + V_OFF + warp * 32 + lane;
#pragma unroll
        for (int q = 0; q < 16; ++q) vs[q * ES_V] = d[q];
        float* us = smem + buf * BUF_FLOATS + e * ES_U + (tid & 15) * 4;
#pragma unroll
        for (int j = 0; j < 8; ++j) *reinterpret_cast<float4*>(us + j * 64) = f[j];
    };

    float acc[16][8];
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    load(0);
    store(0);
    __syncthreads();
    int buf = 0;
    for (int c0 = 0; c0 < C; c0 += BC) {
        load(c0 + BC);     // past the end: input loads predicated off, filter rows zero-padded
        const float* us = smem + buf * BUF_FLOATS + e * ES_U + kg * 4;
        const float* vs = smem + buf * BUF_FLOATS + V_OFF + e * ES_V + tg * 4;
#pragma unroll
        for (int cc = 0; cc < BC; ++cc) {
            float a[16], b[8];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float4 t = *reinterpret_cast<const float4*>(us + cc * 64 + q * 16);
                a[4 * q] = t.x; a[4 * q + 1] = t.y; a[4 * q + 2] = t.z; a[4 * q + 3] = t.w;
            }
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                float4 t = *reinterpret_cast<const float4*>(vs + cc * 32 + q * 16);
                b[4 * q] = t.x; b[4 * q + 1] = t.y; b[4 * q + 2] = t.z; b[4 * q + 3] = t.w;
            }
#pragma unroll
            for (int i = 0; i < 16; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        store(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }

    // Output transform through shared memory, two rounds of 32 filters.
    const int oh = 2 * th, ow = 2 * tw;
    const bool nv = n < N;
    for (int r = 0; r < 2; ++r) {
        __syncthreads();
#pragma unroll
        for (int qq = 0; qq < 2; ++qq)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                int kk = (2 * r + qq) * 4 + i, kl = qq * 16 + kg * 4 + i;
#pragma unroll
                for (int tq = 0; tq < 2; ++tq)
                    *reinterpret_cast<float4*>(smem + e * ES_M + kl * KS_M + tq * 16 + tg * 4) =
                        make_float4(acc[kk][4 * tq], acc[kk][4 * tq + 1], acc[kk][4 * tq + 2], acc[kk][4 * tq + 3]);
            }
        __syncthreads();
#pragma unroll
        for (int xx = 0; xx < 4; ++xx) {
            int kl = warp * 4 + xx;
            int k = kb * BK + 32 * r + kl;
            float m[16];
#pragma unroll
            for (int q = 0; q < 16; ++q) m[q] = smem[q * ES_M + kl * KS_M + lane];
            float t0[4], t1[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                t0[j] = m[j] + m[4 + j] + m[8 + j];
                t1[j] = m[4 + j] - m[8 + j] - m[12 + j];
            }
            float o[2][2] = {{t0[0] + t0[1] + t0[2], t0[1] - t0[2] - t0[3]},
                             {t1[0] + t1[1] + t1[2], t1[1] - t1[2] - t1[3]}};
            if (nv && k < K) {
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j)
                        if (oh + i < H && ow + j < W)
                            y[(((i64)k * H + oh + i) * W + ow + j) * N + n] = o[i][j];
            }
        }
    }
}

// Direct convolution, NCHW / KCRS / NKHW, padding 1, stride 1: one thread per output.
template <typename T>
__device__ void direct_conv(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                            int N, int C, int H, int W, int K)
{
    i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 total = (i64)N * K * H * W;
    if (idx >= total) return;
    int ow = idx % W;
    int oh = (idx / W) % H;
    int k = (idx / ((i64)W * H)) % K;
    int n = idx / ((i64)W * H * K);
    T s = 0;
    for (int c = 0; c < C; ++c) {
        const T* xc = x + ((i64)n * C + c) * H * W;
        const T* wc = w + ((i64)k * C + c) * 9;
        for (int r = 0; r < 3; ++r) {
            int ih = oh + r - 1;
            if (ih < 0 || ih >= H) continue;
            for (int q = 0; q < 3; ++q) {
                int iw = ow + q - 1;
                if (iw < 0 || iw >= W) continue;
                s += xc[ih * W + iw] * wc[r * 3 + q];
            }
        }
    }
    y[idx] = s;
}

extern "C" __global__ void direct_conv_f32(const float* x, const float* w, float* y,
                                           int N, int C, int H, int W, int K)
{
    direct_conv<float>(x, w, y, N, C, H, W, K);
}

extern "C" __global__ void direct_conv_f64(const double* x, const double* w, double* y,
                                           int N, int C, int H, int W, int K)
{
    direct_conv<double>(x, w, y, N, C, H, W, K);
}

extern "C" __global__ void fill_f32(float* p, i64 n, float v)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) p[i] = v;
}

// ---- F(4x4,3x3), non-fused: filter and input transforms to global memory, 36 batched GEMMs
// (the SASS kernel of gemmgen.py or tcgemm.py, or f4_gemm below), output transform. T = TH*TW*N
// columns, t = (th*TW + tw)*N + n (CHWN) or n*TH*TW + th*TW + tw (NCHW); U[e][c][k] (rows e*Cp + c, Kp floats), V[e][c][t] (rows e*Cp + c, Tp
// floats), M[p][e][k][t] (Tp floats a row; p: the parts of a split channel loop, summed here).

// U = G g G^T, G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
__device__ __forceinline__ void f4_g(const float g[3], float out[6])
{
    out[0] = 0.25f * g[0];
    out[1] = -(g[0] + g[1] + g[2]) * (1.0f / 6.0f);
    out[2] = -(g[0] - g[1] + g[2]) * (1.0f / 6.0f);
    out[3] = g[0] * (1.0f / 24.0f) + g[1] * (1.0f / 12.0f) + g[2] * (1.0f / 6.0f);
    out[4] = g[0] * (1.0f / 24.0f) - g[1] * (1.0f / 12.0f) + g[2] * (1.0f / 6.0f);
    out[5] = g[2];
}

// grid (Kp / 128, Cp), 128 threads; zero for k >= K or c >= C
// U = G g G^T of filter k, channel c (zero where ok is false), position 6i + j at u[6i + j]
__device__ __forceinline__ void f4_filter_tile(const float* __restrict__ w, int k, int c, bool ok,
                                               i64 sk, i64 sc, i64 sr, i64 ss, float u[36])
{
    float t[6][3];                 // G g, column by column
    for (int s = 0; s < 3; ++s) {
        float col[3], o[6];
        for (int r = 0; r < 3; ++r) col[r] = ok ? w[k * sk + c * sc + r * sr + s * ss] : 0.0f;
        f4_g(col, o);
        for (int i = 0; i < 6; ++i) t[i][s] = o[i];
    }
    for (int i = 0; i < 6; ++i) f4_g(t[i], u + 6 * i);
}

extern "C" __global__ void f4_filter_transform(const float* __restrict__ w, float* __restrict__ u,
                                               int K, int C, int Kp, int Cp,
                                               i64 sk, i64 sc, i64 sr, i64 ss)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (k >= Kp) return;
    float tile[36];
    f4_filter_tile(w, k, c, k < K && c < C, sk, sc, sr, ss, tile);
    for (int e = 0; e < 36; ++e) u[((i64)e * Cp + c) * Kp + k] = tile[e];
}

// ---- the FP16 split of the tensor-core GEMM (tcgemm, split "f16"): a value x of U or V is
// scaled by a power of two s (f4_split_scale: the largest |x s| below 2^15, in FP16's range)
// and split into hi = fp16(x s) and lo = fp16(x s - hi); three HMMA.16816 a tile (hi*hi, lo*hi,
// hi*lo), the products' sum scaled back by 1 / (s_u s_v). U's bound is max |w| (the rows of G
// sum to at most 1 in absolute value), V's the input transform's running max (f4_block_max).

// The block's largest |value| into *vmax (float bits: unsigned order is float order for
// non-negative values; NaN above everything), where vmax is given: the FP16 split's scale
// (f4_split_scale). 128 threads.
__device__ __forceinline__ void f4_block_max(float m, unsigned* vmax)
{
    __shared__ unsigned warp_max[4];
    unsigned b = __float_as_uint(fabsf(m));
    for (int d = 16; d > 0; d >>= 1) b = max(b, __shfl_xor_sync(0xffffffffu, b, d));
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = b;
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(vmax, max(max(warp_max[0], warp_max[1]), max(warp_max[2], warp_max[3])));
}

// grid-stride; the largest |w[i]| into *out (float bits), 128 threads a block
extern "C" __global__ void f4_absmax(const float* __restrict__ w, i64 n, unsigned* out)
{
    float m = 0.0f;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(w[i]));
    f4_block_max(m, out);
}

// s = 2^(14 - e), e the exponent of the largest |x| (bits `max`): |x s| < 2^15; clamped to
// normal floats (tcgemm's prologue computes the same from the same bits)
__device__ __forceinline__ float f4_split_scale(unsigned bits)
{
    return __uint_as_float((unsigned)min(max(268 - (int)(bits >> 23), 1), 254) << 23);
}

__device__ __forceinline__ unsigned f4_f16x2(float lo_half, float hi_half)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_half), "f"(lo_half));
    return r;
}

__device__ __forceinline__ float f4_f16_to_f32(unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// grid (Kp / 128, Cp / 2), 128 threads; zero for k >= K or c >= C. U in FP16 halves: rows
// (e*Cp/2 + p)*2 + {0: hi, 1: lo} of Kp words, a word the half2 of channels 2p (low half) and
// 2p + 1 of filter k (the A fragments of HMMA.16816: channel pairs of one filter). scales[0]:
// max |w| (f4_absmax).
extern "C" __global__ void f4_filter_transform_f16(const float* __restrict__ w, unsigned* __restrict__ u,
                                                   int K, int C, int Kp, int Cp,
                                                   i64 sk, i64 sc, i64 sr, i64 ss, const unsigned* scales)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (k >= Kp) return;
    const float scale = f4_split_scale(scales[0]);
    float uv[2][36];
    for (int h = 0; h < 2; ++h) {
        const int c = 2 * p + h;
        f4_filter_tile(w, k, c, k < K && c < C, sk, sc, sr, ss, uv[h]);
        for (int e = 0; e < 36; ++e) uv[h][e] *= scale;
    }
    for (int e = 0; e < 36; ++e) {
        const unsigned hi = f4_f16x2(uv[0][e], uv[1][e]);
        const float h0 = f4_f16_to_f32((unsigned short)(hi & 0xffff)), h1 = f4_f16_to_f32((unsigned short)(hi >> 16));
        const i64 row = ((i64)e * (Cp / 2) + p) * 2;
        u[row * Kp + k] = hi;
        u[(row + 1) * Kp + k] = f4_f16x2(uv[0][e] - h0, uv[1][e] - h1);
    }
}

// B^T d for one column of 6 (B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
// 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1])
__device__ __forceinline__ void f4_bt(const float d[6], float o[6])
{
    o[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
    o[1] = -4.0f * (d[1] + d[2]) + d[3] + d[4];
    o[2] = 4.0f * (d[1] - d[2]) - d[3] + d[4];
    o[3] = 2.0f * (d[3] - d[1]) - d[2] + d[4];
    o[4] = 2.0f * (d[1] - d[3]) - d[2] + d[4];
    o[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
}

// grid (Tp / 128, Cp), 128 threads; zero for t >= T or c >= C. CHWN: x [C][H][W][N], columns
// t = (th*TW + tw)*N + n (a warp's 32 columns 32 images of one tile). NCHW: x [N][C][H][W],
// columns t = n*TH*TW + th*TW + tw (a warp's columns adjacent tiles: windows 16 bytes apart,
// read through L1), no layout transposes around the path.
template <bool NCHW>
__device__ __forceinline__ void f4_input_transform_body(const float* __restrict__ x, float* __restrict__ v,
                                                        int N, int C, int H, int W, int TW, int T, int Cp, int Tp,
                                                        unsigned* vmax)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (t >= Tp) {                 // (Tp a multiple of 128: whole blocks return)
        return;
    }
    const bool ok = t < T && c < C;
    const int tiles = T / N;
    const int n = !ok ? 0 : NCHW ? t / tiles : t % N, tile = !ok ? 0 : NCHW ? t % tiles : t / N;
    const int h0 = 4 * (tile / TW) - 1, w0 = 4 * (tile % TW) - 1;
    float s[6][6];                 // B^T d, column by column
    for (int j = 0; j < 6; ++j) {
        float col[6];
        const int wj = w0 + j;
        for (int i = 0; i < 6; ++i) {
            const int hi = h0 + i;
            const i64 at = NCHW ? (((i64)n * C + c) * H + hi) * W + wj : (((i64)c * H + hi) * W + wj) * N + n;
            col[i] = ok && hi >= 0 && hi < H && wj >= 0 && wj < W ? x[at] : 0.0f;
        }
        float o[6];
        f4_bt(col, o);
        for (int i = 0; i < 6; ++i) s[i][j] = o[i];
    }
    float m = 0.0f;
    for (int i = 0; i < 6; ++i) {
        float o[6];
        f4_bt(s[i], o);
        for (int j = 0; j < 6; ++j) {
            v[((i64)(6 * i + j) * Cp + c) * Tp + t] = o[j];
            m = fmaxf(m, fabsf(o[j]));
        }
    }
    if (vmax) f4_block_max(m, vmax);
}

// vmax: null, or where the largest |V| goes (f4_block_max)
extern "C" __global__ void f4_input_transform(const float* __restrict__ x, float* __restrict__ v,
                                              int N, int C, int H, int W, int TW, int T, int Cp, int Tp,
                                              unsigned* vmax)
{
    f4_input_transform_body<false>(x, v, N, C, H, W, TW, T, Cp, Tp, vmax);
}

extern "C" __global__ void f4_input_transform_nchw(const float* __restrict__ x, float* __restrict__ v,
                                                   int N, int C, int H, int W, int TW, int T, int Cp, int Tp,
                                                   unsigned* vmax)
{
    f4_input_transform_body<true>(x, v, N, C, H, W, TW, T, Cp, Tp, vmax);
}

// A^T m for one column of 6 (A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1])
__device__ __forceinline__ void f4_at(const float m[6], float o[4])
{
    const float a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
    o[0] = m[0] + a + c;
    o[1] = b + 2.0f * d;
    o[2] = a + 4.0f * c;
    o[3] = b + 8.0f * d + m[5];
}

// A^T m A: the 4x4 outputs of a tile's 36 products (m[6i + j])
__device__ __forceinline__ void f4_at_tile(const float m[36], float out[4][4])
{
    float s[4][6];                 // A^T m, column by column
#pragma unroll
    for (int j = 0; j < 6; ++j) {
        float col[6], o[4];
#pragma unroll
        for (int i = 0; i < 6; ++i) col[i] = m[6 * i + j];
        f4_at(col, o);
#pragma unroll
        for (int i = 0; i < 4; ++i) s[i][j] = o[i];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) f4_at(s[i], out[i]);
}

// The 4x4 outputs of column t, filter k: A^T (sum over the parts of M) A. A part's 36 loads are
// issued before any is used (all in flight at once): one load at a time, as a loop over the parts
// inside each position compiled, ran at ~1.2 TB/s on the H200, latency-bound.
__device__ __forceinline__ void f4_output_tile(const float* __restrict__ m, int k, int t, int Kp, int Tp,
                                               int parts, float out[4][4])
{
    const i64 stride = (i64)Kp * Tp;             // from one position to the next
    const float* mp = m + (i64)k * Tp + t;
    float mv[36];
#pragma unroll
    for (int e = 0; e < 36; ++e) mv[e] = mp[e * stride];
    for (int p = 1; p < parts; ++p) {
        float part[36];
#pragma unroll
        for (int e = 0; e < 36; ++e) part[e] = mp[(36 * (i64)p + e) * stride];
#pragma unroll
        for (int e = 0; e < 36; ++e) mv[e] += part[e];
    }
    f4_at_tile(mv, out);
}

#define F4_OUT_THREADS 128

// grid (ceil(T / 128), K), 128 threads; y KHWN [K][H][W][N], columns t = (th*TW + tw)*N + n.
extern "C" __global__ void f4_output_transform(const float* __restrict__ m, float* __restrict__ y,
                                               int N, int K, int H, int W, int TW, int T, int Kp, int Tp, int parts)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
    if (t >= T) return;
    const int n = t % N, tile = t / N;
    const int h0 = 4 * (tile / TW), w0 = 4 * (tile % TW);
    float out[4][4];
    f4_output_tile(m, k, t, Kp, Tp, parts, out);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (h0 + i < H && w0 + j < W) y[(((i64)k * H + h0 + i) * W + w0 + j) * N + n] = out[i][j];
}

// grid (ceil(T / 128), K), 128 threads; y NCHW, the columns of f4_input_transform_nchw:
// t = g*TW + tw with g = n*TH + th, the block's 128 columns consecutive tiles of image rows.
// vec4 (W % 4 == 0, y 16-byte aligned): a tile's rows as float4. Otherwise the block's tiles go
// through shared memory and its threads write each tile row (4 rows of y, 4W contiguous floats)
// in order: a thread's own scalar rows of 1-3 floats, 16 bytes from the next thread's, made the
// writes of Conv4 (W = 14) and Conv5 (W = 7) 1.5-2.2x slower than their KHWN twins (H100).
extern "C" __global__ void __launch_bounds__(F4_OUT_THREADS)
f4_output_transform_nchw(const float* __restrict__ m, float* __restrict__ y, int N, int K, int H, int W,
                         int TW, int T, int Kp, int Tp, int parts, int vec4)
{
    __shared__ float stage[F4_OUT_THREADS][17];     // 17: a warp's rows and columns in distinct banks
    const int t0 = blockIdx.x * F4_OUT_THREADS, t = t0 + threadIdx.x, k = blockIdx.y;
    const int TH = T / N / TW;
    float out[4][4];
    if (t < T) f4_output_tile(m, k, t, Kp, Tp, parts, out);
    if (vec4) {
        if (t >= T) return;
        const int g = t / TW, n = g / TH, h0 = 4 * (g % TH), w0 = 4 * (t % TW);
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (h0 + i < H)
                *reinterpret_cast<float4*>(y + (((i64)n * K + k) * H + h0 + i) * W + w0) =
                    make_float4(out[i][0], out[i][1], out[i][2], out[i][3]);
        return;
    }
    if (t < T) {
#pragma unroll
        for (int q = 0; q < 16; ++q) stage[threadIdx.x][q] = out[q / 4][q % 4];
    }
    __syncthreads();
    // Element (R, c) of the block's tile rows g0.., R = 4 (g - g0) + r their rows of y one after
    // the other: thread i starts at the i-th and steps on by 128 (q rows and c_step columns), no
    // division in the loop (g / TH by the multiply-high of a reciprocal, exact for g < 2^32 / TH).
    const int t_end = min(t0 + F4_OUT_THREADS, T);
    const int g0 = t0 / TW, rows_end = 4 * ((t_end - 1) / TW - g0 + 1);
    const int q = F4_OUT_THREADS / W, c_step = F4_OUT_THREADS % W;
    const unsigned th_inverse = TH == 1 ? 0u : 0xffffffffu / TH + 1;
    int R = threadIdx.x / W, c = threadIdx.x % W;
    for (; R < rows_end; R += q) {
        const unsigned g = g0 + (R >> 2);
        const int r = R & 3, n = TH == 1 ? g : __umulhi(g, th_inverse), h = 4 * (g - n * TH) + r;
        const int tt = g * TW + (c >> 2);
        if (h < H && tt >= t0 && tt < t_end)
            y[(((i64)n * K + k) * H + h) * W + c] = stage[tt - t0][4 * r + (c & 3)];
        c += c_step;
        if (c >= W) { c -= W; ++R; }
    }
}

// The CUDA-C reference of the batched GEMM: M[0][e][k][t] = sum_c U[e][c][k] V[e][c][t].
// grid (Tp / 64, Kp / 64, 36), 256 threads, a 4x4 tile each.
extern "C" __global__ void f4_gemm(const float* __restrict__ u, const float* __restrict__ v, float* __restrict__ m,
                                   int Cp, int Kp, int Tp)
{
    __shared__ float us[8][64], vs[8][64];
    const int e = blockIdx.z, k0 = blockIdx.y * 64, t0 = blockIdx.x * 64;
    const int tk = threadIdx.x / 16, tt = threadIdx.x % 16;
    float acc[4][4] = {};
    for (int c0 = 0; c0 < Cp; c0 += 8) {
        for (int i = threadIdx.x; i < 8 * 64; i += 256) {
            const int c = i / 64, q = i % 64;
            us[c][q] = u[((i64)e * Cp + c0 + c) * Kp + k0 + q];
            vs[c][q] = v[((i64)e * Cp + c0 + c) * Tp + t0 + q];
        }
        __syncthreads();
        for (int c = 0; c < 8; ++c)
            for (int a = 0; a < 4; ++a)
                for (int b = 0; b < 4; ++b) acc[a][b] += us[c][tk * 4 + a] * vs[c][tt * 4 + b];
        __syncthreads();
    }
    for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) m[((i64)e * Kp + k0 + tk * 4 + a) * Tp + t0 + tt * 4 + b] = acc[a][b];
}
