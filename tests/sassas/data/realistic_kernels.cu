// CUDA C kernels of the kinds people edit at the SASS level, compiled by NVRTC in the tests
// for every architecture and taken through `sassas disasm` -> `sassas asm`.

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void __launch_bounds__(256, 2)
block_reduce(const float* __restrict__ x, float* __restrict__ out, unsigned* count, int n) {
    __shared__ float partial[32];
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) { atomicAdd(out, v); atomicInc(count, 0xffffffffu); }
    }
}

extern "C" __global__ void sgemm_tile(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[16][17], Bs[16][17];
    int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[r * K + k0 + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + c] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
        __syncthreads();
    }
    if (r < M && c < N) C[r * N + c] = acc;
}

extern "C" __global__ void math_mix(const float* x, float* y, const double* dx, double* dy, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = __expf(v) + sqrtf(fabsf(v)) + __sinf(v) * rsqrtf(v * v + 1.f) + (float)(i % 7) / (float)(n | 1);
    dy[i] = dx[i] * 3.0 + sqrt(fabs(dx[i])) + (double)(i / 3);
}

extern "C" __global__ void bits_and_votes(const unsigned* x, unsigned* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? x[i] : 0u;
    unsigned ballot = __ballot_sync(0xffffffffu, v & 1u);
    int any = __any_sync(0xffffffffu, v > 1000u);
    unsigned r = __popc(v) + __clz(v) + __brev(v) + __byte_perm(v, ballot, 0x3210) + __funnelshift_l(v, ballot, 7);
    r ^= __umulhi(v, 0x9e3779b9u) + (unsigned)any + __match_any_sync(0xffffffffu, v & 3u);
    unsigned long long w = (unsigned long long)v * 0x100000001b3ull;
    if (i < n) y[i] = r + (unsigned)(w >> 29) + (unsigned)(w % 1000003ull);
}

// Packed half precision through inline PTX (NVRTC finds no cuda_fp16.h without the toolkit).
extern "C" __global__ void half_ops(const unsigned* a, const unsigned* b, unsigned* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned sq, r;
    asm("mul.rn.f16x2 %0, %1, %1;" : "=r"(sq) : "r"(a[i]));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a[i]), "r"(b[i]), "r"(sq));
    c[i] = r;
}

extern "C" __global__ void dynamic_shared(const int* x, int* y, int n) {
    extern __shared__ int buf[];
    int t = threadIdx.x;
    buf[t] = t < n ? x[blockIdx.x * blockDim.x + t] : 0;
    __syncthreads();
    int s = 0;
    for (int j = 0; j <= t; ++j) s += buf[j];
    if (blockIdx.x * blockDim.x + t < n) y[blockIdx.x * blockDim.x + t] = s;
}
