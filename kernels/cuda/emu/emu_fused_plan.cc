/* kernels/cuda/fused_plan.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_plan.cu"
