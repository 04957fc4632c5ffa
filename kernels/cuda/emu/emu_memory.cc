/* kernels/cuda/memory.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/memory.cu"
