/* The fused kernels in fp32: every instantiation of the warp-strip and warp-row kernels for
 * this precision (strip2d.cuh, tile3d.cuh). */
#include "kernels/cuda/strip2d.cuh"

STRIP_INSTANTIATE(float, strip_lookup_f32)

#include "kernels/cuda/tile3d.cuh"

TILE3D_INSTANTIATE(float, tile3d_lookup_f32)
