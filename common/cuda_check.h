#pragma once
/* Error checks for CUDA runtime calls, usable from C and from CUDA C++ (.cu) files.
 *
 *   CHECK_CUDA(call)  on failure prints the call, the error's name and description, records a
 *                     traceback line and returns STENCIL_ERR from the enclosing function.
 *   CHECK_LAUNCH()    after every kernel launch: the launch error, and with the build option
 *                     STENCIL_SYNC_CUDA also any error of the kernel itself (pinned to it).
 */
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "common/error.h"
#ifdef __cplusplus
}
#endif

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t check_cuda_ = (call);                                                              \
    if (check_cuda_ != cudaSuccess)                                                                \
      FAIL(STENCIL_ERR, "CUDA call %s failed: %s (%s)", #call, cudaGetErrorName(check_cuda_),      \
           cudaGetErrorString(check_cuda_));                                                       \
  } while (0)

#ifdef STENCIL_SYNC_CUDA
#define CHECK_LAUNCH(stream)                                                                       \
  do {                                                                                             \
    CHECK_CUDA(cudaGetLastError());                                                                \
    CHECK_CUDA(cudaStreamSynchronize(stream));                                                     \
  } while (0)
#else
#define CHECK_LAUNCH(stream)                                                                       \
  do {                                                                                             \
    (void)(stream);                                                                                \
    CHECK_CUDA(cudaGetLastError());                                                                \
  } while (0)
#endif
