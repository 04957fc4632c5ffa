/* kernels/cuda/fused_plan.cu compiled for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_plan.cu"
