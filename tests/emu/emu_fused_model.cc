/* kernels/cuda/fused_model.cu compiled for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_model.cu"
