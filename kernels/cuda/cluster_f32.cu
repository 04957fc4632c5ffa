/* Tier 3 kernels in fp32: every instantiation of cl_kernel and of its host emulation for
 * this precision (see cluster_kernel.cuh). */
#include "kernels/cuda/cluster_kernel.cuh"

cl_entry cl_lookup_f32(int ndim, int steps, int rows)
{
  return cl_lookup_t<float>(ndim, steps, rows);
}
