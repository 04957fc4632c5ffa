/* kernels/cuda/step.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/step.cu"
