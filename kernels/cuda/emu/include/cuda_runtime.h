#pragma once
/* The CPU emulation's stand-in for the CUDA toolkit's <cuda_runtime.h> (builds with
 * STENCIL_CUDA_EMULATION: kernels/cuda/emu/CMakeLists.txt). */
#include "kernels/cuda/emu/emu.h"
