/* kernels/cuda/fused_model.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_model.cu"
