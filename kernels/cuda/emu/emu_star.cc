/* kernels/cuda/star.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/star.cu"
