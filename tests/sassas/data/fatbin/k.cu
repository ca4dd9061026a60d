// Two small kernels for sassas's fatbin fixtures (tests/sassas/test_fatbin.py), built by nvcc 13.0
// (V13.0.88) on Linux x86-64 with G="-gencode arch=compute_80,code=sm_80
// -gencode arch=compute_90,code=[sm_90,compute_90]":
//   nvcc $G -fatbin -o two_archs.fatbin k.cu
//   nvcc $G -Xfatbin -compress-all -fatbin -o compressed.fatbin k.cu
//   nvcc $G -cudart shared -o app k.cu && strip app
#include <cstdio>

__global__ void scale(float *y, const float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

__global__ void block_sum(float *out, const float *x, int n) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

int main() {
    float *x, *y;
    cudaMalloc(&x, 1024 * sizeof(float));
    cudaMalloc(&y, 1024 * sizeof(float));
    scale<<<4, 256>>>(y, x, 2.0f, 1024);
    block_sum<<<4, 256>>>(y, x, 1024);
    printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
