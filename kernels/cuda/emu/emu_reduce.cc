/* kernels/cuda/reduce.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/reduce.cu"
