/* kernels/cuda/fused_run.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_run.cu"
