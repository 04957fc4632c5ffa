/* Tier 3 kernels in fp64: every instantiation of cl_kernel, of its host emulation and of
 * the warp-strip kernel for this precision (see cluster_kernel.cuh, strip2d.cuh). */
#include "kernels/cuda/cluster_kernel.cuh"

cl_entry cl_lookup_f64(int ndim, int steps, int rows)
{
  return cl_lookup_t<double>(ndim, steps, rows);
}

#include "kernels/cuda/strip2d.cuh"

STRIP_INSTANTIATE(double, strip_lookup_f64)

#include "kernels/cuda/tile3d.cuh"

TILE3D_INSTANTIATE(double, tile3d_lookup_f64)
