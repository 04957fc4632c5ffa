/* dsmem_handoff: the cost of handing a row of cells to the next CTA of a thread-block cluster
 * once per iteration of a streaming loop, in the forms the clustered fused kernel can take.
 *
 * Every CTA streams its own column of a large array (one 16-byte load a thread an iteration,
 * 256 threads) and, each iteration, hands 128 floats (warp 0's loads) to the next CTA of its
 * cluster (rank + 1 mod size), which adds them to its sums. Forms:
 *   none     no hand-off: the row goes through the CTA's own shared memory (__syncthreads);
 *   bar      the row in the producer's shared memory, barrier.cluster arrive.release /
 *            wait.acquire, the consumer reads it by ld.shared::cluster (the product's form);
 *   relaxed  as bar with arrive.relaxed / wait (no fence: an unsafe bound, not a form);
 *   async    st.async of the row into the consumer's ring slot, completing on the consumer's
 *            full mbarrier (expect_tx bytes); the consumer waits on it by parity, and each of
 *            its warps arrives on the producer's empty mbarrier when done with the slot; the
 *            producer waits on that before it writes the slot again. No fence in the loop.
 * The sums of bar, relaxed and async are equal bit for bit where the hand-off is right.
 *
 * Usage: dsmem_handoff [iterations] [reps]; prints a row per form and cluster size. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define NT 256 /* threads a CTA */
#define H 128  /* floats handed an iteration: 32 lanes x 4 */
#define S 4    /* ring slots (async) */
#define PLANES 64
#define D 4 /* loads in flight a thread (iterations: a multiple of D) */

enum { F_NONE, F_BAR, F_RELAXED, F_ASYNC, F_FORMS };
static const char *form_name[F_FORMS] = {"none", "bar", "relaxed", "async"};

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "dsmem_handoff: %s: %s\n", #x, cudaGetErrorString(e_));                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ unsigned sa(const void *p)
{
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ unsigned remote(unsigned a, unsigned rank)
{
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void cluster_sync()
{
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity)
{
  unsigned done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}

template <int FORM>
__global__ void __launch_bounds__(NT)
    handoff(const float4 *__restrict__ g, int64_t plane, int iters, float *out)
{
  __shared__ __align__(16) float ring[S][H];
  __shared__ __align__(8) uint64_t full[S], empty[S];
  unsigned rank, size;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(size));
  const unsigned next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (FORM == F_ASYNC && tid == 0) {
    for (int s = 0; s < S; s++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sa(&empty[s])), "r"(NT / 32));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync(); /* barriers initialised, every CTA of the cluster running */
  const float4 *src = g + (int64_t)blockIdx.x * NT + tid;
  float acc = 0;
  float4 q[D]; /* the loads D iterations ahead, as a streaming kernel keeps them */
#pragma unroll
  for (int d = 0; d < D; d++)
    q[d] = __ldg(src + (int64_t)d * plane);
  for (int i0 = 0; i0 < iters; i0 += D)
#pragma unroll
    for (int d = 0; d < D; d++) {
      const int i = i0 + d, s = i % S;
      const float4 v = q[d];
      q[d] = __ldg(src + (int64_t)((i + D) % PLANES) * plane);
      float r;
      if (FORM == F_ASYNC) {
        if (tid == 0) /* this phase of full[s] expects one row from prev */
          asm volatile(
              "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(&full[s])),
              "r"(H * 4)
              : "memory");
        if (warp == 0) {
          if (i >= S) /* next has released slot s of its ring */
            wait_parity(sa(&empty[s]), (unsigned)((i / S - 1) & 1));
          asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
                       "{%1, %2, %3, %4}, [%5];\n" ::"r"(remote(sa(&ring[s][lane * 4]), next)),
                       "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote(sa(&full[s]), next))
                       : "memory");
        }
        wait_parity(sa(&full[s]), (unsigned)((i / S) & 1));
        r = ring[s][tid % H];
        __syncwarp();
        if (lane == 0) /* this warp is done with slot s: prev may write it again */
          asm volatile(
              "mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote(sa(&empty[s]), prev))
              : "memory");
      } else if (FORM == F_NONE) {
        if (warp == 0)
          *reinterpret_cast<float4 *>(&ring[s][lane * 4]) = v;
        __syncthreads();
        r = ring[s][tid % H];
      } else {
        if (warp == 0)
          *reinterpret_cast<float4 *>(&ring[s][lane * 4]) = v;
        if (FORM == F_BAR) {
          asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
          asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
        } else {
          asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
          asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
        }
        asm volatile("ld.shared::cluster.f32 %0, [%1];\n"
                     : "=f"(r)
                     : "r"(remote(sa(&ring[s][tid % H]), prev))
                     : "memory");
      }
      acc += r + (v.x + v.y + v.z + v.w);
    }
  out[(int64_t)blockIdx.x * NT + tid] = acc;
  cluster_sync(); /* no CTA leaves while another may still reach its shared memory */
}

template <int FORM> static const void *kernel_of()
{
  return (const void *)handoff<FORM>;
}

int main(int argc, char **argv)
{
  const int iters = (argc > 1 ? atoi(argv[1]) : 4096) / D * D, reps = argc > 2 ? atoi(argv[2]) : 5;
  const void *k[F_FORMS] = {kernel_of<F_NONE>(), kernel_of<F_BAR>(), kernel_of<F_RELAXED>(),
                            kernel_of<F_ASYNC>()};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int f = 0; f < F_FORMS; f++)
    CK(cudaFuncSetAttribute(k[f], cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const int64_t max_ctas = (int64_t)sms * 8;
  const int64_t plane = max_ctas * NT; /* float4 per plane */
  float4 *g;
  float *out, *host = (float *)malloc(sizeof(float) * plane);
  CK(cudaMalloc(&g, sizeof(float4) * plane * PLANES));
  CK(cudaMalloc(&out, sizeof(float) * plane));
  {
    float4 *h = (float4 *)malloc(sizeof(float4) * plane);
    for (int p = 0; p < PLANES; p++) {
      for (int64_t j = 0; j < plane; j++) {
        const float b = (float)((j * 7 + p * 13) % 1024) / 1024.0f;
        h[j] = make_float4(b, b + 1, b + 2, b + 3);
      }
      CK(cudaMemcpy(g + p * plane, h, sizeof(float4) * plane, cudaMemcpyHostToDevice));
    }
    free(h);
  }
  printf("%-8s %3s %6s %6s %10s %9s %14s\n", "form", "C", "CTAs", "ms", "ns/iter", "GB/s",
         "checksum");
  const int sizes[] = {1, 2, 4, 8, 16};
  for (int ci = 0; ci < 5; ci++) {
    const int C = sizes[ci];
    double ref = 0;
    for (int f = 0; f < F_FORMS; f++) {
      cudaLaunchConfig_t cfg;
      memset(&cfg, 0, sizeof cfg);
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = C;
      at[0].val.clusterDim.y = 1;
      at[0].val.clusterDim.z = 1;
      cfg.blockDim = dim3(NT);
      cfg.attrs = at;
      cfg.numAttrs = 1;
      cfg.gridDim = dim3(C);
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, k[f], &cfg) != cudaSuccess || clusters < 1) {
        cudaGetLastError();
        printf("%-8s %3d  (no cluster of this size fits)\n", form_name[f], C);
        continue;
      }
      int64_t ctas = (int64_t)clusters * C;
      ctas = ctas > max_ctas ? max_ctas / C * C : ctas;
      cfg.gridDim = dim3((unsigned)ctas);
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      int64_t plane_a = plane;
      int iters_a = iters;
      void *args[] = {&g, &plane_a, &iters_a, &out};
      float best = 1e30f;
      for (int r = 0; r <= reps; r++) { /* the first run warms up */
        CK(cudaEventRecord(e0));
        CK(cudaLaunchKernelExC(&cfg, k[f], args));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0 && ms < best)
          best = ms;
      }
      CK(cudaMemcpy(host, out, sizeof(float) * ctas * NT, cudaMemcpyDeviceToHost));
      double sum = 0;
      for (int64_t j = 0; j < ctas * NT; j++)
        sum += host[j];
      if (f == F_BAR)
        ref = sum;
      const double bytes = (double)ctas * NT * 16.0 * iters;
      printf("%-8s %3d %6lld %6.3f %10.2f %9.1f %14.6e%s\n", form_name[f], C, (long long)ctas, best,
             best * 1e6 / iters, bytes / (best * 1e-3) / 1e9, sum,
             f > F_BAR && sum != ref ? "  DIFFERS from bar" : "");
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
    }
  }
  return 0;
}
