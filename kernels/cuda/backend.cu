/* The CUDA backend (kernels/backend.h): the device and its context, the lanes, and the
 * stepping: single steps (step.cu through kernels/step.h) or the fused path (fused_run.cu),
 * chosen by halo_depth before the decomposition's halo exists (context.h for the files). */
#include "kernels/cuda/context.h"

/* ---- device and context -------------------------------------------------------------------- */

static int cuda_devices(int *count, char *why, size_t len)
{
  *count = 0;
  if (why && len)
    why[0] = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    *count = 0;
    if (why && len)
      snprintf(why, len, "cudaGetDeviceCount: %s (%s)%s", cudaGetErrorName(e),
               cudaGetErrorString(e),
               e == cudaErrorInsufficientDriver
                   ? "; no usable NVIDIA driver (libcuda.so.1) was found, or it is too old"
                   : "");
    cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
  } else if (*count == 0 && why && len) {
    snprintf(why, len, "the CUDA driver reports no devices");
  }
  return STENCIL_OK;
}

static int cuda_create(void **out, const struct backend_options *opt)
{
  *out = NULL;
  int count = 0;
  char why[256];
  CHECK(cuda_devices(&count, why, sizeof why));
  if (count == 0)
    FAIL(STENCIL_ERR, "--backend cuda: no CUDA device is visible to this process (%s)", why);
  if (opt->device < 0 || opt->device >= count)
    FAIL(STENCIL_ERR, "--backend cuda: device %d does not exist (%d visible)", opt->device, count);
  struct cuda_ctx *c = (struct cuda_ctx *)calloc(1, sizeof *c);
  if (!c)
    FAIL(STENCIL_ERR, "out of host memory");
  *out = c;
  c->opt = *opt;
  c->device = opt->device;
  CHECK_CUDA(cudaSetDevice(c->device));
  CHECK_CUDA(cudaGetDeviceProperties(&c->prop, c->device));
  CHECK_CUDA(cudaDeviceGetPCIBusId(c->pci, (int)sizeof c->pci, c->device));
  CHECK(cuda_check_image(c));
  if (c->prop.major < 9)
    c->opt.pdl = 0; /* programmatic dependent launch needs compute capability 9.0 */
  int lo = 0, hi = 0;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CHECK_CUDA(cudaStreamCreateWithPriority(&c->lane[LANE_HALO], cudaStreamNonBlocking, hi));
  CHECK_CUDA(cudaStreamCreateWithPriority(&c->lane[LANE_BULK], cudaStreamNonBlocking, lo));
  for (int i = 0; i < 2; i++)
    CHECK_CUDA(cudaEventCreateWithFlags(&c->mark[i], cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreateWithFlags(&c->norms_done, cudaEventDisableTiming));
  const size_t nparts = (size_t)NORM_BLOCKS_PER_SM * (size_t)c->prop.multiProcessorCount;
  CHECK_CUDA(cudaMalloc((void **)&c->partial, nparts * sizeof(knorm)));
  CHECK_CUDA(cudaMallocHost((void **)&c->partial_h, nparts * sizeof(knorm)));
  /* Until tuned: the vector form. */
  c->tile[0] = 32, c->tile[1] = 4, c->tile[2] = 8, c->tile[3] = 1;
  if (opt->tile2[2] > 0) { /* a fixed shape (tests): no tuning */
    if (opt->tile2[3] < 0 || opt->tile2[3] > 2 || tile_error(opt->tile2))
      FAIL(STENCIL_ERR, "tier-2 shape %dx%dx%dx%d: %s", opt->tile2[0], opt->tile2[1], opt->tile2[2],
           opt->tile2[3],
           opt->tile2[3] < 0 || opt->tile2[3] > 2 ? "form 0, 1 or 2" : tile_error(opt->tile2));
    memcpy(c->tile, opt->tile2, sizeof c->tile);
    c->forced = 1;
  }
  c->cur = LANE_HALO;
  return STENCIL_OK;
}

static void cuda_destroy(void *ctx)
{
  struct cuda_ctx *c = CTX(ctx);
  if (!c)
    return;
  cudaDeviceSynchronize();
  for (int i = 0; i < 2; i++) {
    if (c->lane[i])
      cudaStreamDestroy(c->lane[i]);
    if (c->mark[i])
      cudaEventDestroy(c->mark[i]);
  }
  if (c->norms_done)
    cudaEventDestroy(c->norms_done);
  cudaFree(c->partial);
  cudaFreeHost(c->partial_h);
  cudaFree(c->res_partial);
  cudaFreeHost(c->res_h);
  cudaFree(c->fu.sig);
  cudaFree(c->fu.res_scratch);
  cudaFreeHost(c->fu.res_h);
  if (c->fu.res_done)
    cudaEventDestroy(c->fu.res_done);
  cuda_xclock_free(c);
  free(c);
}

static void cuda_describe(void *ctx, char *buf, size_t len)
{
  struct cuda_ctx *c = CTX(ctx);
  char kern[800];
  const char *how = c->tuned ? ", tuned" : c->forced ? ", fixed" : "";
  if (c->fu.on)
    fused_describe_run(c, kern, sizeof kern);
  else if (c->single_tier == 2 && c->star_radius)
    star_describe(c->star_radius, c->star_elem, c->star_source, kern, sizeof kern);
  else if (c->single_tier == 2)
    snprintf(kern, sizeof kern, "tier 2 (%s, block %dx%dx%d%s)",
             c->tile[3] == 0   ? "scalar"
             : c->tile[3] == 1 ? "vector"
                               : "vector, deep queue",
             c->tile[0], c->tile[1], c->tile[2], how);
  else
    snprintf(kern, sizeof kern, "tier 1");
  snprintf(buf, len, "GPU %d %s, PCI %s, sm_%d%d, %d SMs, %.1f GiB; kernel %s, PDL %s", c->device,
           c->prop.name, c->pci, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
           (double)c->prop.totalGlobalMem / (1 << 30), kern, c->opt.pdl ? "on" : "off");
}

static void cuda_device_name(void *ctx, char *buf, size_t len)
{
  snprintf(buf, len, "%s", CTX(ctx)->prop.name);
}

/* ---- lanes, sync, bandwidth ---------------------------------------------------------------- */

static int cuda_sync(void *ctx)
{
  struct cuda_ctx *c = CTX(ctx);
  for (int i = 0; i < 2; i++)
    CHECK_CUDA(cudaStreamSynchronize(c->lane[i]));
  CHECK_CUDA(cudaGetLastError());
  return STENCIL_OK;
}

/* The best of several device-to-device copies of a buffer far larger than L2, counting
 * bytes read plus bytes written. */
static int cuda_measure_bandwidth(void *ctx, double *bytes_per_second)
{
  struct cuda_ctx *c = CTX(ctx);
  size_t free_b = 0, total_b = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
  size_t bytes = (size_t)1 << 30;
  while (bytes > ((size_t)64 << 20) && 2 * bytes > free_b / 2)
    bytes /= 2;
  void *a = NULL, *b = NULL;
  CHECK(device_malloc(c, bytes, &a, "the bandwidth measurement"));
  int status = device_malloc(c, bytes, &b, "the bandwidth measurement");
  if (status != STENCIL_OK) {
    cudaFree(a);
    return status;
  }
  cudaStream_t s = stream_of(c);
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaMemsetAsync(a, 1, bytes, s));
  double best = 0;
  for (int rep = 0; rep < 8; rep++) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    const double bw = 2.0 * (double)bytes / (1e-3 * ms);
    if (rep > 0 && bw > best)
      best = bw;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  *bytes_per_second = best;
  return STENCIL_OK;
}

int cuda_lane_select(void *ctx, int lane)
{
  struct cuda_ctx *c = CTX(ctx);
  struct xclock *x = c->xc;
  if (x && x->open && c->cur == LANE_BULK && lane != LANE_BULK) { /* (the bulk lane's work) */
    const int k = (int)(x->marked % XCLOCK);
    CHECK_CUDA(cudaEventRecord(x->bulk_end[k], c->lane[LANE_BULK]));
    c->last_kernel[LANE_BULK] = 0;
    x->bulk[k] = 1;
  }
  c->cur = lane == LANE_BULK ? LANE_BULK : LANE_HALO;
  return STENCIL_OK;
}

/* Read slot k of the exchange's clock back: from start to end, and the part after both the
 * start and the bulk lane's work (all of it where there was none). The bulk lane's end may
 * come before the start or after the end (negative times); where the runtime does not time
 * such a pair, the whole exchange counts as exposed. */
static int xclock_read(struct xclock *x)
{
  const int k = (int)(x->read % XCLOCK);
  float total = 0, tail = 0, after_start = 0;
  CHECK_CUDA(cudaEventSynchronize(x->end[k]));
  CHECK_CUDA(cudaEventElapsedTime(&total, x->start[k], x->end[k]));
  float exposed = total;
  if (x->bulk[k]) {
    CHECK_CUDA(cudaEventSynchronize(x->bulk_end[k]));
    if (cudaEventElapsedTime(&tail, x->bulk_end[k], x->end[k]) == cudaSuccess &&
        cudaEventElapsedTime(&after_start, x->start[k], x->bulk_end[k]) == cudaSuccess)
      exposed = after_start <= 0 ? total : tail > 0 ? tail : 0;
    else
      cudaGetLastError();
  }
  x->exchange_s += 1e-3 * (total > 0 ? total : 0);
  x->exposed_s += 1e-3 * (exposed < total ? exposed : total);
  x->read++;
  return STENCIL_OK;
}

int cuda_exchange_mark(void *ctx, int mark)
{
  struct cuda_ctx *c = CTX(ctx);
  if (!c->xc) {
    c->xc = (struct xclock *)calloc(1, sizeof *c->xc);
    if (!c->xc)
      FAIL(STENCIL_ERR, "out of host memory for the exchange's clock");
    for (int k = 0; k < XCLOCK; k++) {
      CHECK_CUDA(cudaEventCreate(&c->xc->start[k]));
      CHECK_CUDA(cudaEventCreate(&c->xc->bulk_end[k]));
      CHECK_CUDA(cudaEventCreate(&c->xc->end[k]));
    }
  }
  struct xclock *x = c->xc;
  const int k = (int)(x->marked % XCLOCK);
  if (mark == 0) {
    if (x->marked - x->read == XCLOCK)
      CHECK(xclock_read(x));
    CHECK_CUDA(cudaEventRecord(x->start[k], stream_of(c)));
    x->bulk[k] = 0;
    x->open = 1;
  } else {
    CHECK_CUDA(cudaEventRecord(x->end[k], stream_of(c)));
    x->marked++;
    x->open = 0;
  }
  c->last_kernel[c->cur] = 0;
  return STENCIL_OK;
}

int cuda_exchange_clock(void *ctx, double *exchange_s, double *exposed_s)
{
  struct xclock *x = CTX(ctx)->xc;
  *exchange_s = *exposed_s = 0;
  if (!x)
    return STENCIL_OK;
  while (x->read < x->marked)
    CHECK(xclock_read(x));
  *exchange_s = x->exchange_s;
  *exposed_s = x->exposed_s;
  x->exchange_s = x->exposed_s = 0;
  return STENCIL_OK;
}

void cuda_xclock_free(struct cuda_ctx *c)
{
  if (!c->xc)
    return;
  for (int k = 0; k < XCLOCK; k++) {
    cudaEventDestroy(c->xc->start[k]);
    cudaEventDestroy(c->xc->bulk_end[k]);
    cudaEventDestroy(c->xc->end[k]);
  }
  free(c->xc);
}

int cuda_lane_fence(void *ctx)
{
  struct cuda_ctx *c = CTX(ctx);
  for (int i = 0; i < 2; i++)
    CHECK_CUDA(cudaEventRecord(c->mark[i], c->lane[i]));
  for (int i = 0; i < 2; i++) {
    CHECK_CUDA(cudaStreamWaitEvent(c->lane[i], c->mark[1 - i], 0));
    c->last_kernel[i] = 0;
  }
  return STENCIL_OK;
}

static void *cuda_queue(void *ctx)
{
  struct cuda_ctx *c = CTX(ctx);
  c->last_kernel[LANE_HALO] = 0; /* the caller adds its own operations */
  return (void *)c->lane[LANE_HALO];
}

static int cuda_queue_sync(void *ctx)
{
  CHECK_CUDA(cudaStreamSynchronize(CTX(ctx)->lane[LANE_HALO]));
  return STENCIL_OK;
}
/* ---- stepping ------------------------------------------------------------------------------ */

extern "C" const struct step_ops step_cuda = {
    .update = cuda_update,
    .update_residual = NULL,
    .residual = cuda_residual,
    .boundaries = cuda_boundaries,
    .tune = cuda_tune,
    .lane_select = cuda_lane_select,
    .lane_fence = cuda_lane_fence,
};

enum { FORM_SINGLE = 0, FORM_FUSED = 1 };

/* Single steps have a halo of one radius, faces only; the fused path where it runs. */
static int cuda_halo_depth(const struct backend_options *opt, const struct problem_class *p,
                           const int64_t min_cells[3], struct halo_plan *out)
{
  memset(out, 0, sizeof *out);
  CHECK(fused_halo_depth(opt, p, min_cells, out));
  if (out->steps > 0) {
    out->form = FORM_FUSED;
    return STENCIL_OK;
  }
  for (int a = 0; a < p->ndim; a++)
    out->halo[a] = p->radius;
  out->steps = 1;
  out->form = FORM_SINGLE;
  if (opt->steps > 0 || opt->cluster[0] > 0 || opt->chunk > 0)
    snprintf(out->note, sizeof out->note,
             "the fused-kernel options (--steps-per-launch, --cluster-size, --chunk) are ignored "
             "without the fused kernel");
  return STENCIL_OK;
}

/* Single steps are tuned here, on the box the loop updates most: the inner one where the
 * shell overlaps the exchange. */
static int cuda_prepare(void *ctx, const struct halo_plan *hp, const struct layout *l,
                        const struct stencil_coef *coef, int has_source,
                        const struct block_faces *faces, void *u, void *v,
                        struct advance_info *info)
{
  struct cuda_ctx *c = CTX(ctx);
  step_plan_init(&c->steps, l, coef, faces, c->opt.overlap != 0);
  if (hp->form == FORM_FUSED)
    return fused_prepare(c, l, coef, has_source, faces, info);
  info->steps = 1;
  info->residual_steps = 1;
  info->reads_faces = 0;
  c->star_radius = star_applies(c, l, coef) ? coef->radius : 0;
  c->star_elem = l->elem;
  c->star_source = has_source;
  c->single_tier = tier2_applies(c, l, coef) || c->star_radius ? 2 : 1;
  int messages = 0;
  for (int a = 0; a < coef->ndim; a++)
    for (int s = 0; s < 2; s++)
      messages |= faces->exchanged[a][s] && !faces->wrapped[a][s];
  const struct box all = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  return cuda_tune(c, l, coef, u, v, c->steps.overlap && messages ? &c->steps.inner : &all);
}

static int cuda_advance(void *ctx, const void *u, const void *f, void *v, int k, unsigned mask,
                        const struct exchanger *x, double sums[BACKEND_MAX_STEPS])
{
  struct cuda_ctx *c = CTX(ctx);
  if (c->fu.on)
    return fused_advance(c, u, f, v, k, mask, x, sums);
  if (k != 1)
    FAIL(STENCIL_ERR, "advance: %d steps asked of single steps", k);
  return step_one(&step_cuda, c, &c->steps, u, f, v, mask, x, sums);
}

static int cuda_fill_ghosts(void *ctx, void *u, const struct exchanger *x)
{
  struct cuda_ctx *c = CTX(ctx);
  return step_fill_ghosts(&step_cuda, c, &c->steps, u, x);
}

extern "C" const struct backend_ops backend_cuda = {
    .name = "cuda",
    .caps = {.device_memory = 1},
    .devices = cuda_devices,
    .halo_depth = cuda_halo_depth,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .describe = cuda_describe,
    .device_name = cuda_device_name,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .prepare = cuda_prepare,
    .advance = cuda_advance,
    .fill_ghosts = cuda_fill_ghosts,
    .norms_begin = cuda_norms_begin,
    .norms_end = cuda_norms_end,
    .residual = cuda_residual,
    .sync = cuda_sync,
    .measure_bandwidth = cuda_measure_bandwidth,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_release = cuda_buffer_release,
    .pack = cuda_pack,
    .unpack = cuda_unpack,
    .copy_boxes = cuda_copy_boxes,
    .queue = cuda_queue,
    .queue_sync = cuda_queue_sync,
    .field_box = cuda_field_box,
    .exchange_mark = cuda_exchange_mark,
    .exchange_clock = cuda_exchange_clock,
};
