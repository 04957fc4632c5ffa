#pragma once
/* The CUDA runtime as the fused kernels and their harness see it: the real one, or with
 * STENCIL_CUDA_EMU its CPU emulation (kernels/cuda/emu/emu.h), which runs the same sources on
 * a machine without a GPU. Kernels are named for launches through STENCIL_KERNEL_PTR and
 * launched from host code through stencil_launch (no <<< >>>, which a host compiler does not
 * read). */
#ifdef STENCIL_CUDA_EMU
#include "kernels/cuda/emu/emu.h"
#define STENCIL_KERNEL_PTR(...) (emu::kernel_ptr(__VA_ARGS__))
#else
#include <cuda_runtime.h>
#define STENCIL_KERNEL_PTR(...) ((const void *)(__VA_ARGS__))
#endif

#include "kernels/cuda/kernel_args.h"

/* kernel<<<grid, block, smem, stream>>>(args...), each argument converted to its parameter's
 * type first. */
template <typename... P, typename... A>
static inline cudaError_t stencil_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                         cudaStream_t stream, A... args)
{
  return kernel_args_call(
      kernel,
      [&](void **ptrs) {
        return cudaLaunchKernel(STENCIL_KERNEL_PTR(kernel), grid, block, ptrs, smem, stream);
      },
      args...);
}
