#pragma once
/* The residual sums of a warp of the fused kernels (strip2d.cuh, tile3d.cuh) into its slot of
 * 8 (fused.h): slot[l] = the sum of racc[l] over the warp's 32 lanes for l < N, 0 above, by a
 * butterfly of shuffles in a fixed order (the same bits every run). Every lane calls it; lane
 * 0 writes. */
#include "kernels/cuda/cuda_rt.h"

template <int N>
__device__ __forceinline__ void fused_warp_sums(const double (&racc)[N], double *slot)
{
#pragma unroll
  for (int l = 0; l < 8; l++) {
    double v = l < N ? racc[l < N ? l : 0] : 0.0;
#pragma unroll
    for (int d = 16; d >= 1; d /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0)
      slot[l] = v;
  }
}
