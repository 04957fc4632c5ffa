/* kernels/cuda/tile3d.cu compiled for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/tile3d.cu"
