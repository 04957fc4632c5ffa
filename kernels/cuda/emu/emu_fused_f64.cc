/* kernels/cuda/fused_f64.cu built for the CPU emulation (CMakeLists.txt). */
#include "kernels/cuda/fused_f64.cu"
