/* tests/gpu/fused_check.cu compiled for the CPU emulation (CMakeLists.txt). */
#include "tests/gpu/fused_check.cu"
