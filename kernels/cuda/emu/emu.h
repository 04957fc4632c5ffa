#pragma once
/* A CPU emulation of the CUDA features the fused kernels use, so that their code runs and is
 * checked bit for bit on a machine without a GPU (tests/gpu/fused.cmake builds
 * fused_check_emu from the same sources with the host compiler and STENCIL_CUDA_EMU).
 *
 * Every thread of a launch is a fiber (its own stack) of one host thread; the CTAs of a
 * launch run cluster by cluster, the fibers of a cluster round robin. A fiber runs until it
 * waits: at a barrier (__syncthreads, __syncwarp, the cluster barrier), a warp shuffle (every
 * live lane of the warp writes, then reads) or an mbarrier phase. Hence every interleaving the
 * emulation runs is one a GPU may run; the emulation checks what it can see:
 *   - a warp-wide shuffle or __syncwarp in a warp where a lane has exited;
 *   - a wait that can never end (every fiber of the cluster waiting, none released): a
 *     deadlock, for example a barrier skipped by some threads;
 *   - shared-memory addresses outside the CTA's dynamic shared memory;
 * and fills fresh shared memory with a NaN pattern, so a read before a write shows in the
 * results. Memory is one address space: device pointers are host pointers; copies are
 * synchronous; streams, events and attributes are accepted and do nothing.
 *
 * Each error prints "emu: ..." and exits the process with status 1. Not thread safe: one host
 * thread launches. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>
#include <utility>

/* ---- qualifiers ------------------------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

/* ---- vector types ----------------------------------------------------------------------- */

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) double2 {
  double x, y;
};
static inline float4 make_float4(float x, float y, float z, float w)
{
  return float4{x, y, z, w};
}
static inline float2 make_float2(float x, float y)
{
  return float2{x, y};
}
static inline double2 make_double2(double x, double y)
{
  return double2{x, y};
}

/* ---- the threads ------------------------------------------------------------------------ */

namespace emu {
struct fiber;
fiber *current();
const dim3 &cluster_dim();
unsigned cluster_rank(); /* of the current CTA in its cluster, x fastest */

/* Barriers. */
void sync_threads();
void sync_warp();
void cluster_arrive();
void cluster_wait();
/* Warp shuffles of up to 8 bytes: lane l receives the value of lane src(l) (its own where src
 * is outside the warp). */
enum shfl_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
uint64_t shfl(uint64_t v, enum shfl_kind kind, int arg);

/* Shared memory: the current CTA's dynamic shared memory, and the 32-bit shared addresses of
 * the kernels (the CTA's rank in the cluster in bits 24..31, the byte offset below). */
unsigned char *dyn_smem();
uint32_t smem_addr(const void *p);
uint32_t smem_map(uint32_t a, unsigned rank);
void *smem_ptr(uint32_t a); /* any CTA of the cluster */

/* mbarriers (8 bytes of shared memory at a 32-bit shared address): init with the count of
 * arrivals a phase needs, arrive, and wait until the phase of this parity has completed. */
void mbar_init(uint32_t a, unsigned count);
void mbar_arrive(uint32_t a);
void mbar_wait_parity(uint32_t a, unsigned parity);
} // namespace emu

/* The running thread's indices: set by the scheduler whenever it switches fibers. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

static inline void __syncthreads()
{
  emu::sync_threads();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
  (void)mask;
  emu::sync_warp();
}
static inline void __threadfence() {}
static inline void cudaGridDependencySynchronize() {}
static inline void cudaTriggerProgrammaticLaunchCompletion() {}

template <typename T> static inline T emu_shfl_t(T v, emu::shfl_kind k, int arg)
{
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of <= 8 bytes");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  b = emu::shfl(b, k, arg);
  T r;
  memcpy(&r, &b, sizeof r);
  return r;
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int src)
{
  return emu_shfl_t(v, emu::SHFL_IDX, src);
}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, unsigned d)
{
  return emu_shfl_t(v, emu::SHFL_UP, (int)d);
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, unsigned d)
{
  return emu_shfl_t(v, emu::SHFL_DOWN, (int)d);
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m)
{
  return emu_shfl_t(v, emu::SHFL_XOR, m);
}

template <typename T> static inline T __ldg(const T *p)
{
  return *p;
}
static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
  const unsigned old = *p;
  *p = old + v;
  return old;
}
static inline size_t __cvta_generic_to_shared(const void *p)
{
  return emu::smem_addr(p);
}
static inline int min(int a, int b)
{
  return a < b ? a : b;
}
static inline int max(int a, int b)
{
  return a > b ? a : b;
}

/* ---- the runtime ------------------------------------------------------------------------ */

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorUnsupportedPtxVersion = 222,
};
typedef enum cudaError_t cudaError;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 12,
};
enum cudaLaunchAttributeID {
  cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeProgrammaticStreamSerialization = 5,
};
struct cudaLaunchAttributeValue {
  struct {
    unsigned x, y, z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct emu_stream;
struct emu_event;
typedef emu_stream *cudaStream_t;
typedef emu_event *cudaEvent_t;
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute *attrs;
  unsigned numAttrs;
};
struct cudaFuncAttributes {
  int numRegs;
  size_t localSizeBytes, sharedSizeBytes;
  int maxThreadsPerBlock;
};
struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
  size_t totalGlobalMem, sharedMemPerBlockOptin;
};
#define cudaStreamNonBlocking 1u
#define cudaEventDisableTiming 2u

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
  return cudaMalloc((void **)p, bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes, cudaMemcpyKind k,
                            cudaStream_t st = 0);
cudaError_t cudaMemset(void *d, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *d, int v, size_t bytes, cudaStream_t st = 0);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaFuncSetAttribute(const void *f, cudaFuncAttribute a, int v);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *f);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int threads,
                                                          size_t smem);
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *f, const cudaLaunchConfig_t *cfg);
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t s);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *f, void **args);

/* ---- kernels as launchable pointers --------------------------------------------------------
 * A kernel's address is a host function; emu::kernel_ptr registers with it the call that
 * unpacks cudaLaunchKernel's argument array into its parameters. */
namespace emu {
typedef void (*invoker)(const void *fn, void **args);
const void *register_kernel(const void *fn, invoker call);
template <typename... P, size_t... I>
static void call_with(void (*fn)(P...), void **args, std::index_sequence<I...>)
{
  fn(*static_cast<typename std::decay<P>::type *>(args[I])...);
}
template <typename... P> static void invoke(const void *fn, void **args)
{
  call_with(reinterpret_cast<void (*)(P...)>(const_cast<void *>(fn)), args,
            std::index_sequence_for<P...>{});
}
template <typename... P> static const void *kernel_ptr(void (*fn)(P...))
{
  return register_kernel(reinterpret_cast<const void *>(fn), &invoke<P...>);
}
} // namespace emu
