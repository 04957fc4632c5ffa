/* How fast the halo boxes of a 3D block move between two fields: a strided copy-engine copy
 * (cudaMemcpy3DAsync, the ipc transport's field boxes) against a pack kernel, a dense copy and
 * an unpack kernel (the packed buffers), for the x, y and z faces and a z edge of a block.
 *
 *   face_copies [NX NY NZ [W [ELEM [REPS]]]]    (default 1024 512 512 4 4 50)
 *
 * The fields have the CUDA backend's device layout (rows padded to 32 elements, W ghost layers).
 * With two GPUs that can reach each other the destination field is on device 1 (peer copies
 * over NVLink), else on device 0. Each row: microseconds a box (mean over REPS, CUDA events),
 * alone and beside a kernel that streams memory on every multiprocessor (a running launch). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

struct box {
  long lo[3], hi[3];
};

struct lay {
  long n[3], w, sy, sz, elem; /* sy, sz: bytes */
  size_t bytes;
};

static size_t offset(const struct lay *l, long x, long y, long z)
{
  return (size_t)((z + l->w) * l->sz + (y + l->w) * l->sy + (x + l->w) * l->elem);
}

/* Rows of the box in a dense buffer (pack = 1) or back (pack = 0), 4-byte words. */
__global__ void move(char *field, char *dense, long sy, long sz, long rowb, long rows, long planes,
                     size_t base, int pack)
{
  const long words = rowb / 4, total = words * rows * planes;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total;
       i += (long)gridDim.x * blockDim.x) {
    const long wd = i % words, r = i / words % rows, p = i / words / rows;
    unsigned *f = (unsigned *)(field + base + p * sz + r * sy) + wd;
    unsigned *d = (unsigned *)dense + i;
    if (pack)
      *d = *f;
    else
      *f = *d;
  }
}

/* Copies src to dst in short blocks (16 vectors a thread): a launch of many waves beside the
 * copies, whose blocks a higher-priority kernel can come between. */
__global__ void busy(const float4 *src, float4 *dst, long n)
{
  const long base = blockIdx.x * (long)blockDim.x * 16 + threadIdx.x;
  for (int k = 0; k < 16; k++)
    if (base + k * blockDim.x < n)
      dst[base + k * blockDim.x] = src[base + k * blockDim.x];
}

int main(int argc, char **argv)
{
  struct lay L;
  L.n[0] = argc > 1 ? atol(argv[1]) : 1024;
  L.n[1] = argc > 2 ? atol(argv[2]) : 512;
  L.n[2] = argc > 3 ? atol(argv[3]) : 512;
  L.w = argc > 4 ? atol(argv[4]) : 4;
  L.elem = argc > 5 ? atol(argv[5]) : 4;
  const int reps = argc > 6 ? atoi(argv[6]) : 50;
  L.sy = (L.n[0] + 2 * L.w + 2 * (16 / L.elem) + 31) / 32 * 32 * L.elem;
  L.sz = L.sy * (L.n[1] + 2 * L.w);
  L.bytes = (size_t)L.sz * (size_t)(L.n[2] + 2 * L.w);
  int ndev = 0, peer = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev > 1)
    CK(cudaDeviceCanAccessPeer(&peer, 0, 1));
  const int dst_dev = peer ? 1 : 0;
  char *src, *dst, *pk, *pk2;
  CK(cudaSetDevice(dst_dev));
  if (peer)
    CK(cudaDeviceEnablePeerAccess(0, 0));
  CK(cudaMalloc(&dst, L.bytes));
  CK(cudaMalloc(&pk2, L.bytes / 4));
  CK(cudaMemset(dst, 0, L.bytes));
  CK(cudaSetDevice(0));
  if (peer)
    CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaMalloc(&src, L.bytes));
  CK(cudaMalloc(&pk, L.bytes / 4));
  CK(cudaMemset(src, 1, L.bytes));
  const long nbusy = 1l << 27; /* 2 GiB of float4 read and written: about a millisecond */
  float4 *b0, *b1;
  CK(cudaMalloc(&b0, nbusy * sizeof(float4)));
  CK(cudaMalloc(&b1, nbusy * sizeof(float4)));
  int lo = 0, hi = 0, nsm = 0;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s, sb, s1 = NULL;
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithPriority(&sb, cudaStreamNonBlocking, lo));
  cudaEvent_t e0, e1, sent, done;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&sent, cudaEventDisableTiming));
  CK(cudaSetDevice(dst_dev));
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  if (peer) /* the receiver's unpack runs on its own device */
    CK(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, hi));
  CK(cudaSetDevice(0));
  if (!peer)
    s1 = s;
  const long n0 = L.n[0], n1 = L.n[1], n2 = L.n[2], w = L.w;
  const struct {
    const char *name;
    struct box b;
  } faces[] = {
      {"x face", {{n0 - w, 0, 0}, {n0, n1, n2}}},
      {"y face", {{0, n1 - w, 0}, {n0, n1, n2}}},
      {"z face", {{0, 0, n2 - w}, {n0, n1, n2}}},
      {"z edge", {{n0 - w, n1 - w, 0}, {n0, n1, n2}}},
  };
  printf("block %ld x %ld x %ld, %ld ghost layers, %ld-byte cells, %s, %d reps\n", n0, n1, n2, w,
         L.elem, peer ? "device 0 -> device 1 (peer)" : "device 0 -> device 0", reps);
  printf("%-8s %10s %8s %10s %10s %12s %12s %12s\n", "box", "rows", "row B", "MB", "ce us",
         "pack us", "ce+busy us", "pack+busy us");
  for (unsigned f = 0; f < sizeof faces / sizeof faces[0]; f++) {
    const struct box *b = &faces[f].b;
    const long rowb = (b->hi[0] - b->lo[0]) * L.elem, rows = b->hi[1] - b->lo[1],
               planes = b->hi[2] - b->lo[2];
    /* the ghost box on the receiving side: the same extent, shifted beyond the face */
    const long gx = f == 0 || f == 3 ? n0 : 0, gy = f == 1 || f == 3 ? n1 : 0, gz = f == 2 ? n2 : 0;
    const size_t so = offset(&L, b->lo[0], b->lo[1], b->lo[2]),
                 dof = offset(&L, gx ? gx : b->lo[0], gy ? gy : b->lo[1], gz ? gz : b->lo[2]);
    struct cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(src + so, L.sy, L.sy, L.sz / L.sy);
    p.dstPtr = make_cudaPitchedPtr(dst + dof, L.sy, L.sy, L.sz / L.sy);
    p.extent = make_cudaExtent(rowb, rows, planes);
    p.kind = cudaMemcpyDefault;
    const size_t dense = (size_t)rowb * rows * planes;
    double t[4];
    for (int mode = 0; mode < 4; mode++) {
      const int pack = mode & 1, loaded = mode >> 1;
      CK(cudaDeviceSynchronize());
      if (loaded) /* launches of many short blocks on every multiprocessor, started first */
        for (int k = 0; k < 40; k++)
          busy<<<(unsigned)(nbusy / (256 * 16)), 256, 0, sb>>>(b0, b1, nbusy);
      CK(cudaEventRecord(e0, s));
      for (int r = 0; r < reps; r++) {
        if (!pack) {
          CK(cudaMemcpy3DAsync(&p, s));
        } else {
          move<<<nsm * 4, 256, 0, s>>>(src, pk, L.sy, L.sz, rowb, rows, planes, so, 1);
          CK(cudaMemcpyAsync(pk2, pk, dense, cudaMemcpyDefault, s));
          CK(cudaEventRecord(sent, s));
          CK(cudaSetDevice(dst_dev));
          CK(cudaStreamWaitEvent(s1, sent, 0));
          move<<<nsm * 4, 256, 0, s1>>>(dst, pk2, L.sy, L.sz, rowb, rows, planes, dof, 0);
          CK(cudaEventRecord(done, s1));
          CK(cudaSetDevice(0));
          CK(cudaStreamWaitEvent(s, done, 0));
        }
      }
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t[mode] = 1e3 * ms / reps;
    }
    printf("%-8s %10ld %8ld %10.3f %10.1f %12.1f %12.1f %12.1f\n", faces[f].name, rows * planes,
           rowb, dense / 1e6, t[0], t[1], t[2], t[3]);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
