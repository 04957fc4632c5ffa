/* The CUDA backend's reductions: norms and the Poisson residual, summed on the device in an
 * order that depends on the block's shape only (context.h). */
#include "kernels/cuda/context.h"

/* ---- norms ------------------------------------------------------------------------------- */

/* Per-block partial norms over the interior; the host adds the partials in order, so the
 * result does not depend on scheduling. A warp reads a row at a time, eight coalesced loads
 * in flight per thread (one at a time leaves the kernel far below the memory's bandwidth:
 * docs/benchmarks.md). */
template <typename REAL> static __global__ void norms_partial(const REAL *u, klay L, knorm *partial)
{
  pdl_enter();
  const int64_t rows = L.n[1] * L.n[2], n = L.n[0];
  const int lane = threadIdx.x % 32, wpb = (int)blockDim.x / 32;
  double sum = 0, sumsq = 0, maxabs = 0, bad = 0;
  auto add = [&](double x) {
    if (!isfinite(x)) {
      bad += 1;
      return;
    }
    sum += x;
    sumsq += x * x;
    maxabs = fabs(x) > maxabs ? fabs(x) : maxabs;
  };
  for (int64_t r = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; r < rows;
       r += (int64_t)gridDim.x * wpb) {
    const int64_t j = r % L.n[1], k = r / L.n[1];
    const REAL *row = u + L.origin + j * L.s[1] + k * L.s[2];
    int64_t i = lane;
    for (; i + 7 * 32 < n; i += 8 * 32) {
      REAL x[8];
#pragma unroll
      for (int q = 0; q < 8; q++)
        x[q] = row[i + 32 * q];
#pragma unroll
      for (int q = 0; q < 8; q++)
        add((double)x[q]);
    }
    for (; i < n; i += 32)
      add((double)row[i]);
  }
  for (int o = 16; o > 0; o /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, o);
    sumsq += __shfl_down_sync(0xffffffffu, sumsq, o);
    maxabs = fmax(maxabs, __shfl_down_sync(0xffffffffu, maxabs, o));
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  __shared__ knorm w[32];
  if (lane == 0)
    w[threadIdx.x / 32] = knorm{sum, sumsq, maxabs, bad};
  __syncthreads();
  if (threadIdx.x == 0) {
    knorm t = w[0];
    for (int k = 1; k < (int)blockDim.x / 32; k++) {
      t.sum += w[k].sum;
      t.sumsq += w[k].sumsq;
      t.maxabs = fmax(t.maxabs, w[k].maxabs);
      t.nonfinite += w[k].nonfinite;
    }
    partial[blockIdx.x] = t;
  }
}

int cuda_norms_begin(void *ctx, const struct layout *l, const void *u)
{
  struct cuda_ctx *c = CTX(ctx);
  const int nb = NORM_BLOCKS_PER_SM * c->prop.multiProcessorCount;
  /* All work issued so far on both lanes comes first; later work on either lane after it
   * (both wait for the current one at the next lane_fence or wait_other). */
  CHECK(wait_other(c));
  if (l->elem == 8)
    CHECK(launch(c, norms_partial<double>, dim3(nb), dim3(256), (const double *)u, make_klay(l),
                 c->partial));
  else
    CHECK(launch(c, norms_partial<float>, dim3(nb), dim3(256), (const float *)u, make_klay(l),
                 c->partial));
  CHECK_CUDA(cudaMemcpyAsync(c->partial_h, c->partial, (size_t)nb * sizeof(knorm),
                             cudaMemcpyDeviceToHost, stream_of(c)));
  CHECK_CUDA(cudaEventRecord(c->norms_done, stream_of(c)));
  return STENCIL_OK;
}

int cuda_norms_end(void *ctx, struct norms *out)
{
  struct cuda_ctx *c = CTX(ctx);
  const int nb = NORM_BLOCKS_PER_SM * c->prop.multiProcessorCount;
  CHECK_CUDA(cudaEventSynchronize(c->norms_done));
  double sum = 0, sumsq = 0, maxabs = 0, bad = 0;
  for (int i = 0; i < nb; i++) {
    sum += c->partial_h[i].sum;
    sumsq += c->partial_h[i].sumsq;
    maxabs = c->partial_h[i].maxabs > maxabs ? c->partial_h[i].maxabs : maxabs;
    bad += c->partial_h[i].nonfinite;
  }
  out->sum = sum;
  out->sumsq = sumsq;
  out->maxabs = maxabs;
  out->nonfinite = (int64_t)bad;
  return STENCIL_OK;
}

/* ---- residual ---------------------------------------------------------------------------- */

/* residual() (kernels/backend.h): *sumsq = sum over the interior of (v - u)^2, with
 *
 *   v = c0 u, then v = fma(c[a][m-1], u[-m e_a] + u[+m e_a], v) over axes a = x, y[, z] and
 *       m = 1..r, [v = fma(cf, f, v)],
 *
 * in the field's precision, in that order: the order of update() and of residual_ in
 * kernels/cpu/heat_real.h (kernels/backend.h), so that with -fmad=false each v - u has the CPU
 * backend's bits; its square is summed in double (exact for fp32), and only the order of the
 * sum differs.
 *
 * The sum runs in a fixed order that depends on the block's shape only (not on the device or
 * on scheduling), so the same input gives the same bits on every run and every GPU:
 *   residual_partial  RES_BLOCKS blocks of RES_THREADS threads; the interior is cut into items
 *                     of up to RES_CHUNK cells of one row (item q: row q / chunks, x from
 *                     RES_CHUNK (q % chunks); row = j + n_y k). Warp g of the grid takes the
 *                     items g, g + G, g + 2G, ... (G warps in all); lane t adds the w^2 of the
 *                     cells x = t, t + 32, ... of each item into one double, in order. Then a
 *                     shuffle tree in each warp and the warps of the block in order give
 *                     partial[block].
 *   residual_total    one block: thread t adds partial[t], partial[t + RES_THREADS], ... in
 *                     order, then the same tree: partial[RES_BLOCKS] = the total.
 * No atomics. The host gets one 8-byte copy (page-locked, cudaMemcpyAsync on the current lane)
 * and waits once for the lane. A lane reads rows of u through L1/L2: neighbouring rows are
 * read by warps in flight at the same time, so u and f come from DRAM about once. */
#define RES_BLOCKS 1024
#define RES_THREADS 256
#define RES_CHUNK 512 /* cells of a row per item: 16 per lane */

struct kres {
  double c0, cf;
  double c[3][4];
  int three_d;
};

/* The sum of v over the block (RES_THREADS threads, all of them calling), in a fixed order: a
 * shuffle tree in each warp, then the warp sums in order. Valid in thread 0. */
static __device__ double res_block_sum(double v)
{
  __shared__ double warp_sum[RES_THREADS / 32];
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0)
    warp_sum[threadIdx.x / 32] = v;
  __syncthreads();
  double t = 0;
  if (threadIdx.x == 0) {
    t = warp_sum[0];
    for (int w = 1; w < RES_THREADS / 32; w++)
      t += warp_sum[w];
  }
  return t;
}

/* Per-block partial sums of w^2 (see above); R = the stencil radius. */
template <typename REAL, int R>
static __global__ void __launch_bounds__(RES_THREADS)
    residual_partial(const REAL *__restrict__ u, const REAL *__restrict__ f, klay L, kres c,
                     double *__restrict__ partial)
{
  pdl_enter();
  const int64_t chunks = (L.n[0] + RES_CHUNK - 1) / RES_CHUNK;
  const int64_t items = chunks * L.n[1] * L.n[2];
  const int64_t warps = (int64_t)gridDim.x * (RES_THREADS / 32);
  const int lane = threadIdx.x % 32;
  const int64_t sy = L.s[1], sz = L.s[2];
  const REAL k0 = (REAL)c.c0, kf = (REAL)c.cf;
  REAL kc[3][4];
#pragma unroll
  for (int a = 0; a < 3; a++)
#pragma unroll
    for (int m = 0; m < 4; m++)
      kc[a][m] = (REAL)c.c[a][m];
  double sum = 0;
  for (int64_t q = (int64_t)blockIdx.x * (RES_THREADS / 32) + threadIdx.x / 32; q < items;
       q += warps) {
    const int64_t row = q / chunks, x0 = (q - row * chunks) * RES_CHUNK;
    const int64_t x1 = x0 + RES_CHUNK < L.n[0] ? x0 + RES_CHUNK : L.n[0];
    const int64_t j = row % L.n[1], k = row / L.n[1];
    const int64_t base = L.origin + j * sy + k * sz;
    for (int64_t i = x0 + lane; i < x1; i += 32) {
      const REAL *p = u + base + i;
      REAL w = stencil_star(p, sy, sz, c.three_d, R, k0, kc);
      if (f)
        w = stencil_source(kf, f[base + i], w);
      const double d = stencil_residual(w, p[0]);
      sum += d * d;
    }
  }
  const double t = res_block_sum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = t;
}

/* partial[RES_BLOCKS] = the sum of partial[0 .. RES_BLOCKS - 1], in a fixed order. */
static __global__ void __launch_bounds__(RES_THREADS) residual_total(double *partial)
{
  pdl_enter();
  double s = 0;
  for (int i = threadIdx.x; i < RES_BLOCKS; i += RES_THREADS)
    s += partial[i];
  const double t = res_block_sum(s);
  if (threadIdx.x == 0)
    partial[RES_BLOCKS] = t;
}

template <typename REAL>
static int residual_launch(struct cuda_ctx *c, const struct layout *l, int radius, const void *u,
                           const void *f, const kres &k)
{
  const dim3 grid(RES_BLOCKS), block(RES_THREADS);
  const REAL *pu = (const REAL *)u, *pf = (const REAL *)f;
  const klay L = make_klay(l);
  switch (radius) {
  case 1: return launch(c, residual_partial<REAL, 1>, grid, block, pu, pf, L, k, c->res_partial);
  case 2: return launch(c, residual_partial<REAL, 2>, grid, block, pu, pf, L, k, c->res_partial);
  case 3: return launch(c, residual_partial<REAL, 3>, grid, block, pu, pf, L, k, c->res_partial);
  default: return launch(c, residual_partial<REAL, 4>, grid, block, pu, pf, L, k, c->res_partial);
  }
}

int cuda_residual(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                  const void *f, double *sumsq)
{
  struct cuda_ctx *c = CTX(ctx);
  *sumsq = 0;
  if (coef->radius < 1 || coef->radius > 4)
    FAIL(STENCIL_ERR, "residual: stencil radius %d is not 1 to 4", coef->radius);
  for (int a = 0; a < coef->ndim; a++)
    if (l->halo[a] < coef->radius)
      FAIL(STENCIL_ERR, "residual: %d ghost layers along axis %d, the radius-%d stencil needs %d",
           l->halo[a], a, coef->radius, coef->radius);
  if (l->n[0] <= 0 || l->n[1] <= 0 || l->n[2] <= 0)
    return STENCIL_OK; /* an empty block: the sum is 0 */
  if (!c->res_partial) {
    CHECK(device_malloc(c, (RES_BLOCKS + 1) * sizeof(double), (void **)&c->res_partial,
                        "the residual's partial sums"));
    CHECK_CUDA(cudaMallocHost((void **)&c->res_h, sizeof(double)));
  }
  kres k;
  k.c0 = coef->c0;
  k.cf = coef->cf;
  memcpy(k.c, coef->c, sizeof k.c);
  k.three_d = coef->ndim == 3;
  /* u may have been written on both lanes (shell and inner boxes): all of it comes first. */
  CHECK(wait_other(c));
  /* The fused kernels read mirrored faces through or apply reflecting faces themselves and
   * leave their ghosts as they were (fused_run.cu): the residual reads them. */
  if (c->fu.on && c->fu.stale_faces)
    CHECK(cuda_boundaries(c, l, (void *)u, c->fu.mirror.on, c->steps.kind, c->steps.value));
  CHECK(l->elem == 8 ? residual_launch<double>(c, l, coef->radius, u, f, k)
                     : residual_launch<float>(c, l, coef->radius, u, f, k));
  CHECK(launch(c, residual_total, dim3(1), dim3(RES_THREADS), c->res_partial));
  cudaStream_t s = stream_of(c);
  CHECK_CUDA(cudaMemcpyAsync(c->res_h, c->res_partial + RES_BLOCKS, sizeof(double),
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  *sumsq = *c->res_h;
  return STENCIL_OK;
}
