/* kernels/cuda/strip2d.cu compiled for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/strip2d.cu"
