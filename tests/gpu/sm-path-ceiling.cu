// sm-path-ceiling.cu — how fast can SMs move bytes between HBM and mapped pinned host
// memory at all? Not part of the build or of CI: an experiment kept so that the
// claim in cuda/README.md (the SM path tops out near 0.95 × D2H and 0.93 × H2D on
// the H200, whatever the load/store flavour, even with Hopper bulk copies) can be
// re-checked. Aligned spans only; the roundtrip check covers the bulk-copy paths.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/sm-path-ceiling tests/gpu/sm-path-ceiling.cu
//   /tmp/sm-path-ceiling      (needs ~2 GiB device memory and 1 GiB pinned host memory)
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>
#include <algorithm>
#define CK(x) do{cudaError_t e=(x); if(e){printf("ERR %s:%d %s\n",__FILE__,__LINE__,cudaGetErrorString(e)); exit(1);} }while(0)
struct item { uint64_t dev, host, len; };

template<int MODE> __device__ __forceinline__ uint4 ld(const uint4* p){
  uint4 r;
  if (MODE==0) return __ldcs(p);
  if (MODE==1) { asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x),"=r"(r.y),"=r"(r.z),"=r"(r.w) : "l"(p)); return r; }
  if (MODE==2) { asm volatile("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x),"=r"(r.y),"=r"(r.z),"=r"(r.w) : "l"(p)); return r; }
  if (MODE==3) { asm volatile("ld.global.cs.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x),"=r"(r.y),"=r"(r.z),"=r"(r.w) : "l"(p)); return r; }
  return *p;
}
template<int MODE> __device__ __forceinline__ void st(uint4* p, uint4 v){
  if (MODE==0) __stcs(p,v); else if (MODE==1) __stwt(p,v); else *p=v;
}
// aligned items only (len multiple of 16), U=8
template<int SC, int LM, int SM, int U>
__global__ void __launch_bounds__(512) k_simple(const item* it, size_t n){
  unsigned lane=threadIdx.x&31; size_t w=(blockIdx.x*(size_t)blockDim.x+threadIdx.x)>>5, nw=(gridDim.x*(size_t)blockDim.x)>>5;
  for(size_t i=w;i<n;i+=nw){ item d=it[i]; uint4* dst=(uint4*)(SC?d.dev:d.host); const uint4* src=(const uint4*)(SC?d.host:d.dev); size_t nv=d.len/16;
    for(size_t v=0; v<nv; v+=32*U){ uint4 r[U];
#pragma unroll
      for(int k=0;k<U;k++){ size_t j=v+k*32+lane; if(j<nv) r[k]=ld<LM>(src+j);}
#pragma unroll
      for(int k=0;k<U;k++){ size_t j=v+k*32+lane; if(j<nv) st<SM>(dst+j,r[k]);}
    }}
}
__device__ __forceinline__ unsigned smaddr(const void* p){ return (unsigned)__cvta_generic_to_shared(p); }
// gather: regs -> smem -> cp.async.bulk smem->global(host). CH bytes per buffer, 2 buffers per warp
template<int CH>
__global__ void __launch_bounds__(512) k_gather_tma(const item* it, size_t n){
  extern __shared__ __align__(128) uint4 sm[];
  unsigned lane=threadIdx.x&31, wl=threadIdx.x>>5; size_t w=(blockIdx.x*(size_t)blockDim.x+threadIdx.x)>>5, nw=(gridDim.x*(size_t)blockDim.x)>>5;
  uint4* bufs=sm + (size_t)wl*2*(CH/16); int b=0;
  constexpr int U=CH/16/32;
  for(size_t i=w;i<n;i+=nw){ item d=it[i];
    for(size_t off=0; off<d.len; off+=CH){ unsigned ch = (unsigned)min((size_t)CH, d.len-off);
      if(lane==0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      __syncwarp();
      uint4* buf=bufs + b*(CH/16); const uint4* src=(const uint4*)(d.dev+off); unsigned nv=ch/16;
      uint4 r[U];
#pragma unroll
      for(int k=0;k<U;k++){ unsigned j=k*32+lane; if(j<nv) r[k]=__ldcs(src+j);}
#pragma unroll
      for(int k=0;k<U;k++){ unsigned j=k*32+lane; if(j<nv) buf[j]=r[k];}
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if(lane==0){ asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(d.host+off), "r"(smaddr(buf)), "r"(ch) : "memory");
                   asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
      b^=1;
    }}
  if(lane==0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
// scatter: cp.async.bulk global(host)->smem with mbarrier, then regs -> st.global device. NB buffers per warp.
template<int CH, int NB>
__global__ void __launch_bounds__(512) k_scatter_tma(const item* it, size_t n){
  extern __shared__ __align__(128) uint4 sm[];
  __shared__ __align__(8) uint64_t mbar[16][NB];
  unsigned lane=threadIdx.x&31, wl=threadIdx.x>>5; size_t w=(blockIdx.x*(size_t)blockDim.x+threadIdx.x)>>5, nw=(gridDim.x*(size_t)blockDim.x)>>5;
  uint4* bufs=sm + (size_t)wl*NB*(CH/16);
  if(lane==0){ for(int k=0;k<NB;k++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smaddr(&mbar[wl][k])) : "memory");
               asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
  __syncwarp();
  unsigned phase[NB]; for(int k=0;k<NB;k++) phase[k]=0;
  constexpr int U=CH/16/32;
  // flatten (item, off) sequence for this warp: producer runs NB-1 ahead
  size_t pi=w, po=0;   // producer position
  size_t ci=w, co=0;   // consumer position
  int pb=0, cb=0; int inflight=0;
  auto produce=[&](){ if(pi>=n) return false; item d=it[pi]; unsigned ch=(unsigned)min((size_t)CH,d.len-po);
      if(lane==0){ unsigned mb=smaddr(&mbar[wl][pb]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(mb), "r"(ch) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(smaddr(bufs+pb*(CH/16))), "l"(d.host+po), "r"(ch), "r"(mb) : "memory"); }
      po+=ch; if(po>=d.len){po=0; pi+=nw;} pb=(pb+1)%NB; inflight++; return true; };
  for(int k=0;k<NB;k++) produce();
  while(inflight>0){
    item d=it[ci]; unsigned ch=(unsigned)min((size_t)CH,d.len-co);
    unsigned mb=smaddr(&mbar[wl][cb]); unsigned ok=0;
    while(!ok){ asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p; }" : "=r"(ok) : "r"(mb), "r"(phase[cb]) : "memory"); }
    phase[cb]^=1;
    uint4* buf=bufs+cb*(CH/16); uint4* dst=(uint4*)(d.dev+co); unsigned nv=ch/16; uint4 r[U];
#pragma unroll
    for(int k=0;k<U;k++){ unsigned j=k*32+lane; if(j<nv) r[k]=buf[j]; }
    __syncwarp();
    inflight--; cb=(cb+1)%NB; co+=ch; if(co>=d.len){co=0; ci+=nw;}
    produce();   // refills the buffer just consumed (pb == old cb)
#pragma unroll
    for(int k=0;k<U;k++){ unsigned j=k*32+lane; if(j<nv) __stcs(dst+j,r[k]); }
  }
}

int main(){
  size_t total=1ull<<30; uint8_t *dev, *host; CK(cudaMalloc(&dev, 2*total)); CK(cudaHostAlloc((void**)&host,total,cudaHostAllocPortable|cudaHostAllocMapped));
  CK(cudaMemset(dev,1,2*total)); memset(host,2,total);
  item* dit; CK(cudaMalloc(&dit, (total/4096)*sizeof(item)));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking)); cudaEvent_t a,b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto time=[&](auto launch){ std::vector<float> v; for(int r=0;r<6;r++){ cudaEventRecord(a,s); launch(); cudaEventRecord(b,s); CK(cudaEventSynchronize(b)); float ms; cudaEventElapsedTime(&ms,a,b); if(r) v.push_back(ms);} std::sort(v.begin(),v.end()); return total/(v[v.size()/2]*1e6); };
  // ceilings
  printf("ceiling D2H %.1f H2D %.1f\n", time([&]{cudaMemcpyAsync(host,dev,total,cudaMemcpyDeviceToHost,s);}), time([&]{cudaMemcpyAsync(dev,host,total,cudaMemcpyHostToDevice,s);}));
  for(size_t span: {4096ul, 32768ul, 1ul<<20}){
    size_t n=total/span; std::vector<item> h(n); std::vector<size_t> perm(2*n); for(size_t i=0;i<2*n;i++) perm[i]=i; srand(1); for(size_t i=2*n;i>1;i--){size_t j=rand()%i; std::swap(perm[i-1],perm[j]);}
    for(size_t i=0;i<n;i++) h[i]={(uint64_t)(dev+perm[i]*span),(uint64_t)(host+i*span),span};
    // split into <=32 KiB items for the big span
    std::vector<item> hi; for(auto&x:h) for(size_t o=0;o<x.len;o+=32768) hi.push_back({x.dev+o,x.host+o,std::min((size_t)32768,x.len-o)});
    size_t ni=hi.size(); CK(cudaMemcpy(dit,hi.data(),ni*sizeof(item),cudaMemcpyHostToDevice));
    for(int ctas: {16,32}){
      printf("span %zu ctas %d:\n", span, ctas);
      printf("  G cs/cs %.1f  G ld-plain/st-plain %.1f  G st.wt %.1f\n", time([&]{k_simple<0,0,0,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<0,4,2,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<0,0,1,8><<<ctas,512,0,s>>>(dit,ni);}));
      printf("  S cs %.1f  S L2::256B %.1f  S nc.L2::256B %.1f  S cs.L2::128B %.1f  S plain %.1f  S U16 %.1f\n", time([&]{k_simple<1,0,0,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<1,1,0,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<1,2,0,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<1,3,0,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<1,4,2,8><<<ctas,512,0,s>>>(dit,ni);}), time([&]{k_simple<1,0,0,16><<<ctas,512,0,s>>>(dit,ni);}));
      { auto kg=k_gather_tma<4096>; int smb=16*2*4096; CK(cudaFuncSetAttribute(kg,cudaFuncAttributeMaxDynamicSharedMemorySize,smb));
        auto ks=k_scatter_tma<4096,3>; int smc=16*3*4096; CK(cudaFuncSetAttribute(ks,cudaFuncAttributeMaxDynamicSharedMemorySize,smc));
        float g=time([&]{kg<<<ctas,512,smb,s>>>(dit,ni);}); CK(cudaGetLastError());
        float sc=time([&]{ks<<<ctas,512,smc,s>>>(dit,ni);}); CK(cudaGetLastError());
        printf("  G tma4K %.1f  S tma4Kx3 %.1f\n", g, sc); }
      fflush(stdout);
    }
    // correctness spot check of the TMA paths on this span set
    CK(cudaMemset(dev,0,2*total)); for(size_t i=0;i<total;i++) host[i]=(uint8_t)(i*7+3);
    { auto ks=k_scatter_tma<4096,3>; ks<<<32,512,16*3*4096,s>>>(dit,ni); CK(cudaStreamSynchronize(s)); }
    memset(host,0,total);
    { auto kg=k_gather_tma<4096>; kg<<<32,512,16*2*4096,s>>>(dit,ni); CK(cudaStreamSynchronize(s)); }
    size_t bad=0; for(size_t i=0;i<total;i++) if(host[i]!=(uint8_t)(i*7+3)) bad++;
    printf("  tma roundtrip mismatches: %zu\n", bad);
  }
}
