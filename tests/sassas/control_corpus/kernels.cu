#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i]=a*x[i]+y[i];}
extern "C" __global__ void reduce(const float* x, float* out, int n){
  __shared__ float s[256]; int t=threadIdx.x; float acc=0;
  for(int i=blockIdx.x*blockDim.x+t;i<n;i+=gridDim.x*blockDim.x) acc+=x[i];
  s[t]=acc; __syncthreads();
  for(int k=128;k>32;k>>=1){ if(t<k) s[t]+=s[t+k]; __syncthreads();}
  if(t<32){ float v=s[t]+s[t+32]; for(int o=16;o;o>>=1) v+=__shfl_down_sync(0xffffffff,v,o); if(t==0) atomicAdd(out,v);} }
extern "C" __global__ void sgemm(const float* A,const float* B,float* C,int N){
  __shared__ float As[16][16], Bs[16][16]; int tx=threadIdx.x, ty=threadIdx.y; int r=blockIdx.y*16+ty, c=blockIdx.x*16+tx; float acc=0;
  for(int k=0;k<N;k+=16){ As[ty][tx]=A[r*N+k+tx]; Bs[ty][tx]=B[(k+ty)*N+c]; __syncthreads();
   #pragma unroll
   for(int j=0;j<16;j++) acc+=As[ty][j]*Bs[j][tx]; __syncthreads(); }
  C[r*N+c]=acc; }
extern "C" __global__ void trans(const float* x, float* y, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){float v=x[i]; y[i]=sinf(v)*expf(v)/(v+1.0f)+sqrtf(fabsf(v))+rsqrtf(v+2.f)+__logf(v+3.f);}}
extern "C" __global__ void dbl(const double* x, double* y, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){double v=x[i]; y[i]=v*v+3.0*v/(v+1.0)+sqrt(v);}}
extern "C" __global__ void idiv(const int* x, int* y, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){int v=x[i]; y[i]=v/7+v%13+(v/(i+1)) + __popc(v) + __clz(v);}}
extern "C" __global__ void hmma(const half* a, const half* b, float* c){
  wmma::fragment<wmma::matrix_a,16,16,16,half,wmma::row_major> fa; wmma::fragment<wmma::matrix_b,16,16,16,half,wmma::col_major> fb; wmma::fragment<wmma::accumulator,16,16,16,float> fc;
  wmma::fill_fragment(fc,0.0f); for(int k=0;k<4;k++){ wmma::load_matrix_sync(fa,a+k*256,16); wmma::load_matrix_sync(fb,b+k*256,16); wmma::mma_sync(fc,fa,fb,fc);} wmma::store_matrix_sync(c,fc,16,wmma::mem_row_major);}
extern "C" __global__ void atom(int* x, unsigned long long* y, float* z){int i=threadIdx.x; int old=atomicAdd(x+i%4,i); atomicMax(x+8,old); atomicCAS(y, (unsigned long long)i, 5ull); z[i]=atomicExch(z+100,1.0f); unsigned m=__ballot_sync(0xffffffff,old>3); x[20+i]=__match_any_sync(0xffffffff,old)+m
#if __CUDA_ARCH__>=800
 +__reduce_add_sync(0xffffffff,i)
#endif
;}
extern "C" __global__ void local(const int* x, int* y, int n){ int a[32]; for(int i=0;i<32;i++) a[i]=x[i*n+threadIdx.x]; int s=0; for(int i=0;i<n;i++) s+=a[(i*7+threadIdx.x)&31]; y[threadIdx.x]=s;}
extern "C" __global__ void hfma(const half2* x, half2* y, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){half2 v=x[i]; y[i]=__hfma2(v,v,__hadd2(v,v)) ; }}
extern "C" __global__ void tex(cudaTextureObject_t t, float* y){int i=threadIdx.x; y[i]=tex1Dfetch<float>(t,i)+tex2D<float>(t,i*0.5f,0.25f);}
extern "C" __global__ void fmachain(float* x, int n){ float a=x[threadIdx.x], b=x[threadIdx.x+32], c=x[threadIdx.x+64], d=x[threadIdx.x+96];
  for(int i=0;i<n;i++){ a=a*b+c; b=b*c+d; c=c*d+a; d=d*a+b; if(a>1e10f) break; } x[threadIdx.x]=a+b+c+d; }
extern "C" __global__ void chase(const int* next, int* out, int steps){ int p=threadIdx.x; for(int i=0;i<steps;i++) p=next[p]; out[threadIdx.x]=p; }
extern "C" __global__ void scan(int* x){ __shared__ int s[1024]; int t=threadIdx.x; s[t]=x[t]; __syncthreads();
  for(int o=1;o<blockDim.x;o<<=1){ int v= t>=o ? s[t-o] : 0; __syncthreads(); s[t]+=v; __syncthreads(); } x[t]=s[t]; }
extern "C" __global__ void warpscan(int* x){ int v=x[threadIdx.x]; for(int o=1;o<32;o<<=1){ int y=__shfl_up_sync(0xffffffff,v,o); if((threadIdx.x&31)>=o) v+=y; } x[threadIdx.x]=v; }
extern "C" __global__ void dgemv(const double* A, const double* x, double* y, int n){ int r=blockIdx.x*blockDim.x+threadIdx.x; double acc=0; for(int k=0;k<n;k++) acc+=A[r*n+k]*x[k]; y[r]=acc; }
extern "C" __global__ void vec4(const float4* a, float4* b, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){ float4 v=a[i]; v.x=v.x*2+v.w; v.y=fmaxf(v.y,v.z); v.z=__fdividef(v.z,v.x); b[i]=v; } }
extern "C" __global__ void bits(unsigned* x){ unsigned v=x[threadIdx.x]; unsigned long long w=((unsigned long long)v<<32)|x[threadIdx.x+1];
  x[threadIdx.x]= __brev(v) ^ __ffs(v) ^ (unsigned)(w>>17) ^ __funnelshift_l(v, v>>3, v&7) ^ __byte_perm(v, v+1, 0x5140) ^ __popcll(w) ^ (v*v>>3) ^ __umulhi(v,v+7) ^ (unsigned)(__umul64hi(w, w+3)); }
extern "C" __global__ void smemtile(const float* in, float* out, int w){ __shared__ float t[32][33]; int x=blockIdx.x*32+threadIdx.x, y=blockIdx.y*32+threadIdx.y;
  for(int j=0;j<32;j+=8) t[threadIdx.y+j][threadIdx.x]=in[(y+j)*w+x]; __syncthreads(); x=blockIdx.y*32+threadIdx.x; y=blockIdx.x*32+threadIdx.y;
  for(int j=0;j<32;j+=8) out[(y+j)*w+x]=t[threadIdx.x][threadIdx.y+j]; }
extern "C" __global__ void conv3(const float* in, const float* k, float* out, int n){ __shared__ float ks[9]; if(threadIdx.x<9) ks[threadIdx.x]=k[threadIdx.x]; __syncthreads();
  int i=blockIdx.x*blockDim.x+threadIdx.x+1; if(i<n-1){ float acc=0;
  #pragma unroll
  for(int a=-1;a<=1;a++) for(int b=-1;b<=1;b++) acc+=ks[(a+1)*3+b+1]*in[(i+a)*n+b+i]; out[i]=acc; } }
extern "C" __global__ void halfmath(const __half* a, __half* b, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){ __half v=a[i]; b[i]=__hmul(__hadd(v,v), hsqrt(v)) ; } }
extern "C" __global__ void mixedconv(const double* a, float* b, long long* c, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n){ double v=a[i]; b[i]=(float)v + (float)(long long)v; c[i]=(long long)(v*3.5) + (long long)__double2uint_rn(v); } }
