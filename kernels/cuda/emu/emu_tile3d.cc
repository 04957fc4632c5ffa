/* kernels/cuda/tile3d.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/tile3d.cu"
