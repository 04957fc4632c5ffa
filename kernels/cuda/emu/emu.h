#pragma once
/* A CPU emulation of the CUDA features the fused kernels and the CUDA backend use, so that
 * their code runs and is checked bit for bit on a machine without a GPU: tests/emu builds the
 * fused kernels' harness on it in every build, and the build option STENCIL_CUDA_EMULATION
 * builds the whole CUDA backend on it (kernels/cuda/emu/CMakeLists.txt), so that `stencil
 * --backend cuda` and the gpu tests run on the CPU.
 *
 * Every thread of a launch is a fiber (its own stack) of one host thread; the CTAs of a
 * launch run cluster by cluster, the fibers of a cluster by warps in a random order. A fiber
 * runs until it waits: at a barrier (__syncthreads, __syncwarp, the cluster barrier), a warp
 * shuffle (every live lane of the warp writes, then reads) or an mbarrier phase. Hence every
 * interleaving the emulation runs is one a GPU may run; the emulation checks what it can see:
 *   - a warp-wide shuffle or __syncwarp in a warp where a lane has exited;
 *   - a wait that can never end (every fiber of the cluster waiting, none released): a
 *     deadlock, for example a barrier skipped by some threads;
 *   - shared-memory addresses outside the CTA's dynamic shared memory;
 *   - a launch with more than 48 KiB of dynamic shared memory that the kernel was not allowed
 *     (cudaFuncSetAttribute), as on a GPU;
 * and fills fresh shared and device memory with a NaN pattern, so a read before a write
 * shows in the results. Memory is one address space: device pointers are host pointers;
 * copies are synchronous; streams and events order nothing (everything issued has run), and
 * an event's time is when it was recorded.
 * Static __shared__ variables are one per kernel, right for launches without clusters.
 *
 * Error paths: STENCIL_EMU_FAIL=CALL:RANK makes the runtime call CALL (cudaIpcGetMemHandle or
 * cudaIpcOpenMemHandle) fail in the MPI process of that rank (the launcher's
 * OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID; none set: no process), as the
 * driver's would; the tests of the exchange's set-up use it (tests/gpu/ipc_fault.sh).
 *
 * Each error prints "emu: ..." and exits the process with status 1. Not thread safe: one host
 * thread launches. The runtime's types and calls are in emu_runtime.h (C and C++); this
 * header adds the device side (C++). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/emu/emu_runtime.h"

#ifdef __cplusplus
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/kernel_args.h"

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

/* ---- the threads ------------------------------------------------------------------------ */

namespace emu
{
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

/* mbarriers (8 bytes of shared memory at a 32-bit shared address, any CTA of the cluster):
 * init with the count of arrivals a phase needs, arrive, arrive expecting `bytes` of
 * transactions in the phase, complete `bytes` of them (st.async), and wait until the phase of
 * this parity has completed (its arrivals made and its transactions completed). */
void mbar_init(uint32_t a, unsigned count);
void mbar_arrive(uint32_t a);
void mbar_arrive_expect(uint32_t a, unsigned bytes);
void mbar_complete_tx(uint32_t a, unsigned bytes);
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

/* ---- kernels as launchable pointers --------------------------------------------------------
 * A kernel's address is a host function; emu::kernel_ptr registers with it the call that
 * unpacks cudaLaunchKernel's argument array into its parameters. */
namespace emu
{
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
/* A launch's arguments copied, for a launch on a deferred stream (emu.cc: STENCIL_EMU_DEFER),
 * which runs after the caller's argument array is gone; ptrs is the array into the copies. */
struct captured {
  virtual ~captured() {}
  void **ptrs;
};
template <typename... P> struct captured_t : captured {
  std::tuple<typename std::decay<P>::type...> v;
  void *arr[sizeof...(P) + 1];
};
template <typename... P, size_t... I>
static captured *capture_with(void **args, std::index_sequence<I...>)
{
  auto *c = new captured_t<P...>{};
  ((std::get<I>(c->v) = *static_cast<typename std::decay<P>::type *>(args[I])), ...);
  ((c->arr[I] = &std::get<I>(c->v)), ...);
  c->ptrs = c->arr;
  return c;
}
template <typename... P> static captured *capture(void **args)
{
  return capture_with<P...>(args, std::index_sequence_for<P...>{});
}
typedef captured *(*capturer)(void **args);
void register_capture(const void *fn, capturer c);
template <typename... P> static const void *kernel_ptr(void (*fn)(P...))
{
  register_capture(reinterpret_cast<const void *>(fn), &capture<P...>);
  return register_kernel(reinterpret_cast<const void *>(fn), &invoke<P...>);
}
} // namespace emu

/* The runtime's C++ overloads that take a kernel itself. */
template <typename... P>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, void (*kernel)(P...))
{
  return cudaFuncGetAttributes(a, emu::kernel_ptr(kernel));
}
template <typename... P>
static inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute a, int v)
{
  return cudaFuncSetAttribute(emu::kernel_ptr(kernel), a, v);
}
template <typename... P>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n,
                                                                        void (*kernel)(P...),
                                                                        int threads, size_t smem)
{
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, emu::kernel_ptr(kernel), threads, smem);
}

/* cudaLaunchKernelEx(config, kernel, args...), each argument converted to its parameter's
 * type. */
template <typename... P, typename... A>
static inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *cfg, void (*kernel)(P...),
                                             A... args)
{
  return kernel_args_call(
      kernel, [&](void **ptrs) { return cudaLaunchKernelExC(cfg, emu::kernel_ptr(kernel), ptrs); },
      args...);
}
#endif /* __cplusplus */
