/* kernels/cuda/backend.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/backend.cu"
