#pragma once
/* cp.async, the asynchronous 16-byte copy from global into shared memory (sm_80 on): one
 * copy, the commit of this thread's copies issued since the last commit as a group, and the
 * wait until all but the n newest groups have landed (this thread's copies only: a barrier
 * makes them visible to the CTA). The emulation copies at once. */
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/cuda_rt.h"

__device__ __forceinline__ void cp_async16(uint32_t to, const void *from)
{
#ifdef STENCIL_CUDA_EMU
  memcpy(emu::smem_ptr(to), from, 16);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#ifndef STENCIL_CUDA_EMU
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* A hint: the line holding q into L2 (no register, no wait; the emulation has no caches). */
__device__ __forceinline__ void prefetch_l2(const void *q)
{
#ifndef STENCIL_CUDA_EMU
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(q));
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#ifndef STENCIL_CUDA_EMU
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
