/* kernels/cuda/strip2d.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/strip2d.cu"
