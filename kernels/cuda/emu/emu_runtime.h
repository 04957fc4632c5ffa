#pragma once
/* The CUDA runtime and driver types and calls of the CPU emulation (emu.h), in C as well as
 * C++, for the backend's C files (transport/gpu.c, common/cuda_check.h). The calls behave as
 * emu.h says: device memory is host memory, copies are synchronous, streams and events order
 * nothing (everything already ran), interprocess handles are refused. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- vector types ----------------------------------------------------------------------- */

typedef struct uint3 {
  unsigned x, y, z;
} uint3;
typedef struct dim3 {
  unsigned x, y, z;
#ifdef __cplusplus
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
#endif
} dim3;
typedef struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
} float4;
typedef struct __attribute__((aligned(8))) float2 {
  float x, y;
} float2;
typedef struct __attribute__((aligned(16))) double2 {
  double x, y;
} double2;
static inline float4 make_float4(float x, float y, float z, float w)
{
  float4 r = {x, y, z, w};
  return r;
}
static inline float2 make_float2(float x, float y)
{
  float2 r = {x, y};
  return r;
}
static inline double2 make_double2(double x, double y)
{
  double2 r = {x, y};
  return r;
}

/* ---- errors, devices, memory ---------------------------------------------------------------- */

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorUnsupportedPtxVersion = 222,
  cudaErrorNotSupported = 801,
} cudaError_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 12,
};
enum cudaLaunchAttributeID {
  cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeProgrammaticStreamSerialization = 5,
};
typedef struct cudaLaunchAttributeValue {
  struct {
    unsigned x, y, z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
} cudaLaunchAttributeValue;
typedef struct cudaLaunchAttribute {
  enum cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
} cudaLaunchAttribute;
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute *attrs;
  unsigned numAttrs;
} cudaLaunchConfig_t;
typedef struct cudaFuncAttributes {
  int numRegs;
  size_t localSizeBytes, sharedSizeBytes;
  int maxThreadsPerBlock;
} cudaFuncAttributes;
typedef struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
  size_t totalGlobalMem, sharedMemPerBlockOptin;
} cudaDeviceProp;
#define cudaStreamNonBlocking 1u
#define cudaEventDisableTiming 2u
#define cudaEventInterprocess 4u
#define cudaIpcMemLazyEnablePeerAccess 1u

/* 3D copies between pitched arrays. */
typedef struct cudaPitchedPtr {
  void *ptr;
  size_t pitch, xsize, ysize;
} cudaPitchedPtr;
typedef struct cudaPos {
  size_t x, y, z;
} cudaPos;
typedef struct cudaExtent {
  size_t width, height, depth;
} cudaExtent;
typedef struct cudaMemcpy3DParms {
  void *srcArray;
  cudaPos srcPos;
  cudaPitchedPtr srcPtr;
  void *dstArray;
  cudaPos dstPos;
  cudaPitchedPtr dstPtr;
  cudaExtent extent;
  enum cudaMemcpyKind kind;
} cudaMemcpy3DParms;
static inline cudaPitchedPtr make_cudaPitchedPtr(void *d, size_t p, size_t xsz, size_t ysz)
{
  cudaPitchedPtr r = {d, p, xsz, ysz};
  return r;
}
static inline cudaPos make_cudaPos(size_t x, size_t y, size_t z)
{
  cudaPos r = {x, y, z};
  return r;
}
static inline cudaExtent make_cudaExtent(size_t w, size_t h, size_t d)
{
  cudaExtent r = {w, h, d};
  return r;
}

/* Interprocess handles (emu.cc: memory shared through /proc/PID/fd). */
typedef struct cudaIpcMemHandle_t {
  char reserved[64];
} cudaIpcMemHandle_t;
typedef struct cudaIpcEventHandle_t {
  char reserved[64];
} cudaIpcEventHandle_t;

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *id);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d);
cudaError_t cudaDeviceGetStreamPriorityRange(int *lo, int *hi);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k,
                            cudaStream_t st);
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms *p, cudaStream_t st);
cudaError_t cudaMemset(void *d, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *d, int v, size_t bytes, cudaStream_t st);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p);
cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void *p);
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *h, cudaEvent_t e);
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t h);
cudaError_t cudaFuncSetAttribute(const void *f, enum cudaFuncAttribute a, int v);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *f);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int threads,
                                                          size_t smem);
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *f, const cudaLaunchConfig_t *cfg);
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t s);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *f, void **args);

/* ---- the driver's stream memory operations, through the runtime's entry points ------------ */

typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 } CUresult;
typedef struct emu_stream *CUstream;
typedef uintptr_t CUdeviceptr;
typedef uint32_t cuuint32_t;
#define CU_STREAM_WAIT_VALUE_GEQ 0u
typedef enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
} cudaDriverEntryPointQueryResult;
#define cudaEnableDefault 0ull
/* cuStreamWaitValue32 (the only symbol): every launch before the wait has run, so the value
 * must be there already; the emulation stops with a message where it is not. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult *status);

#ifdef __cplusplus
}

template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
  return cudaMalloc((void **)p, bytes);
}
#endif
