/* The fused multi-step path of the CUDA backend (context.h): which problems it runs and the
 * halo it needs, its plan on a rank's block (fused_plan.cu's, with the block's faces), and
 * advance() as one launch of up to T steps followed by the exchange of a T-deep halo.
 *
 * Faces. In 3D, when every reflecting face is homogeneous, they are halo faces whose ghosts
 * mirror the interior, and a mirrored field stays mirrored step by step (common/types.h) as an
 * exchanged halo stays valid. The warp-row kernel reads them (and the periodic wraps of axes
 * this rank spans) through the face itself where n along x is a multiple of its 16-byte
 * vectors (the plan reads_faces); otherwise their ghosts are filled T x radius deep after
 * every launch and mirror_edges fills their edges and corners before it. With a source term
 * (fused_mirrors: n along x whole vectors) f is read through with u, the wraps are
 * copied, and the residual fills the mirrored faces' ghosts it reads (cuda_residual). The 2D
 * kernel, and the 3D one where a face has a nonzero value (radius 1; radius 2 without a source
 * where n along x is whole vectors), apply reflecting faces
 * themselves at every level from their own cells: their ghosts are not filled between launches
 * either (fused_applies_faces), but before the residual reads them.
 *
 * Launches in parts. Where a 3D block sends messages and the kernel reads its faces and wraps,
 * a launch runs as shells (the sent planes of the z faces that send, and over the other planes
 * the tiles that compute cells within the halo of the x and y faces that send, on the halo
 * lane; then the other tiles on the bulk lane) or, where only z faces send, maybe as one
 * signalled launch on the bulk lane, the halo lane waiting on a device counter
 * (cuStreamWaitValue32) until the sent planes are stored (split_one), so the exchange overlaps
 * the rest of the launch. Which one: the model of fused_signals, or --overlap parts / signal. */
#include <stdarg.h>

#include "kernels/cuda/context.h"

/* ---- which problems, and the halo ---------------------------------------------------------- */

/* T lowered to `to` (by the smallest block or the residual launches): the note says why. */
static void note_lowered(struct halo_plan *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_lowered(struct halo_plan *out, const char *fmt, ...)
{
  const size_t used = strlen(out->note);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->note + used, sizeof out->note - used, fmt, ap);
  va_end(ap);
}

/* The largest T <= T0 whose halo T x radius every block holds along every axis; 0 with *thin
 * the axis that holds none. */
static int fit_steps(int T0, int radius, int ndim, const int64_t min_cells[3], int *thin)
{
  int fit = T0;
  for (; fit > 0; fit--) {
    int ok = 1;
    for (int a = 0; a < ndim; a++)
      if ((int64_t)fit * radius > min_cells[a]) {
        ok = 0;
        *thin = a;
      }
    if (ok)
      break;
  }
  return fit;
}

/* The refusals first: what --kernel 3 asks of the fused kernel that it never runs; auto's
 * single steps where tier 2 runs faster (3D: a source term; at radius > 1 a face of nonzero
 * value, radius 4, and radius 3 in fp64). Then T:
 * the problem class's fastest (fused_default_steps, which prepare() confirms on the block) or
 * --steps-per-launch, no more than the run's steps, lowered to the longest launch that sums
 * residuals where every launch would sum one (Poisson with --residual-every <= T), and to
 * what the thinnest block holds. The halo is T x radius on every axis, along x rounded up to
 * whole 16-byte vectors (the 3D kernel's rows start on them). */
int fused_halo_depth(const struct backend_options *opt, const struct problem_class *p,
                     const int64_t min_cells[3], struct halo_plan *out)
{
  out->steps = 0;
  if (opt->tier != 0 && opt->tier != 3) {
    snprintf(out->why, sizeof out->why, "single steps (--kernel %d)", opt->tier);
    return STENCIL_OK;
  }
  if (opt->steps < 0 || opt->steps > FUSED_MAX_STEPS)
    FAIL0(STENCIL_ERR_USAGE, "--steps-per-launch %d: expected 0 (from the device) or 1 to %d",
          opt->steps, FUSED_MAX_STEPS);
  if (p->ndim == 2 && opt->cluster[0] > 0)
    FAIL0(STENCIL_ERR_USAGE, "--cluster-size applies to 3D problems: the 2D fused kernel runs "
                             "one CTA per strip");
  if (opt->cluster[0] > 0 && (p->radius > 1 || p->has_source || p->inhomogeneous))
    FAIL0(STENCIL_ERR_USAGE,
          "--cluster-size: the clustered 3D kernel runs radius-1 stencils with homogeneous faces "
          "(Neumann, Dirichlet 0, periodic) and no source term");
  int T = 0;
  char no[160] = "";
  if (!fused_default_steps(p->ndim, p->elem, p->radius, p->has_source, p->inhomogeneous,
                           p->x_vectors, &T, no, sizeof no)) {
    snprintf(out->why, sizeof out->why, "single steps: the fused kernel cannot run %s", no);
    return STENCIL_OK;
  }
  if (opt->tier == 0 && p->ndim == 3 && p->radius == 1 && p->has_source && p->inhomogeneous &&
      !p->x_vectors) {
    /* Tier 2 streams u, f and v once a step at the memory's rate. The fused kernel reads
     * homogeneous faces through with the source, at twice that or more; beside a face of
     * nonzero value it does so on the tiles away from that face where n along x is whole
     * vectors, elsewhere it applies every reflecting face at every level on every tile, at
     * tier 2's rate (docs/design/fused-kernels.md, "Choosing the kernel"). */
    snprintf(out->why, sizeof out->why,
             "single steps: tier 2 runs a source term in 3D with a Dirichlet face of nonzero "
             "value faster than the fused kernel where n along x is not whole 16-byte vectors "
             "(--kernel 3 runs the fused one)");
    return STENCIL_OK;
  }
  if (opt->tier == 0 && p->ndim == 3 && p->radius > 1 && T == 1) {
    /* The fused kernel runs T = 1 there (radius 3 and 4; radius 2 with a face of nonzero
     * value and a source, or either where n along x is not whole vectors, its faces filled
     * between launches): tier 2's planes in shared memory need fewer instructions a cell than its
     * warp rows (docs/design/fused-kernels.md, "Choosing the kernel"). */
    snprintf(out->why, sizeof out->why,
             "single steps: tier 2 runs %s faster than the fused kernel (--kernel 3 runs the "
             "fused one)",
             p->has_source      ? "a source term at radius > 1 in 3D"
             : p->inhomogeneous ? "a Dirichlet face of nonzero value at radius > 1 in 3D"
             : p->radius == 4   ? "the 25-point star"
                                : "the 19-point star");
    return STENCIL_OK;
  }
  if (no[0]) /* (why the default is what it is) */
    note_lowered(out, "%s. ", no);
  if (opt->steps > T) /* (the default is the most the kernel is built for) */
    FAIL0(STENCIL_ERR_USAGE,
          "--steps-per-launch %d: the %dD fused kernel is built for 1 to %d steps per launch",
          opt->steps, p->ndim, T);
  if (opt->steps > 0)
    T = opt->steps;
  else {
    const int tc = FUSED_CLUSTER_STEPS(p->elem, p->ndim == 3 ? opt->cluster[1] : 0, T);
    if (tc < T) {
      note_lowered(out, "T = %d: the clustered fp32 kernel spills at %d. ", tc, T);
      T = tc;
    }
    if (p->steps > 0 && T > p->steps)
      T = (int)p->steps; /* no deeper halo than the run can use */
  }
  const int rmax = p->ndim == 2                      ? FUSED_RESIDUAL_STEPS(p->elem)
                   : p->radius == 1 && p->has_source ? FUSED_RESIDUAL_STEPS_3D
                                                     : 0;
  if (p->residual_every > 0 && p->residual_every <= T && rmax > 0 && T > rmax) {
    note_lowered(out,
                 "T lowered from %d to %d: every launch sums Poisson residuals (--residual-every "
                 "%lld), at most %d steps. ",
                 T, rmax, (long long)p->residual_every, rmax);
    T = rmax;
  }
  int thin = 0;
  const int fit = fit_steps(T, p->radius, p->ndim, min_cells, &thin);
  if (fit == 0) {
    snprintf(out->why, sizeof out->why,
             "single steps: the smallest block has %lld cells along %c, fewer than the stencil "
             "radius %d",
             (long long)min_cells[thin], "xyz"[thin], p -> radius);
    return STENCIL_OK;
  }
  if (fit < T) {
    note_lowered(out,
                 "T lowered from %d to %d: the smallest block has %lld cells along %c (the halo "
                 "is T x radius deep). ",
                 T, fit, (long long)min_cells[thin], "xyz"[thin]);
    if (opt->steps > 0)
      log_warn0("--steps-per-launch %d lowered to %d: the smallest block has only %lld cells "
                "along %c",
                T, fit, (long long)min_cells[thin], "xyz"[thin]);
    T = fit;
  }
  const int vec = 16 / p->elem, hx = (T * p->radius + vec - 1) / vec * vec;
  if (hx > min_cells[0] && p->ndim == 3) {
    snprintf(out->why, sizeof out->why,
             "single steps: the smallest block has %lld cells along x, fewer than the %d-deep "
             "halo of 16-byte vectors the 3D fused kernel needs",
             (long long)min_cells[0], hx);
    out->note[0] = 0;
    return STENCIL_OK;
  }
  for (int a = 0; a < 3; a++)
    out->halo[a] = a < p->ndim ? T * p->radius : 0;
  if (hx <= min_cells[0])
    out->halo[0] = hx;
  out->corners = 1;
  out->steps = T;
  snprintf(out->why, sizeof out->why,
           "fused (%s): up to T = %d steps per launch%s; halos T x radius deep with edges and "
           "corners, exchanged once per launch",
           opt->tier == 3 ? "--kernel 3" : "auto", T,
           opt->steps > 0 ? " (--steps-per-launch)" : "");
  return STENCIL_OK;
}

/* ---- the plan on this block ---------------------------------------------------------------- */

/* The faces as the fused plan takes them (fused_faces_of), and the mirrored ones. */
static int plan_faces(struct cuda_fused *fu, const struct layout *l,
                      const struct stencil_coef *coef, int has_source,
                      const struct block_faces *faces, struct fused_faces *ff)
{
  if (fused_faces_of(coef->ndim, fused_mirrors(l, coef, has_source), faces, ff, &fu->mirrored))
    FAIL(STENCIL_ERR, "fused kernel: a periodic face whose ghost cells are not exchanged");
  memset(&fu->mirror, 0, sizeof fu->mirror);
  for (int a = 0; a < coef->ndim; a++)
    for (int s = 0; s < 2; s++)
      if (!faces->exchanged[a][s]) {
        fu->mirror.on[a][s] = 1;
        fu->mirror.neg[a][s] = faces->kind[a][s] == BC_DIRICHLET;
      }
  fu->mirror_lay = make_klay(l);
  return STENCIL_OK;
}

/* mirror_edges' blocks per face, where the kernel reads the mirrored faces from memory. */
static unsigned mirror_blocks(const struct cuda_fused *fu)
{
  if (!fu->mirrored || fu->plan.reads_faces)
    return 0;
  const klay &L = fu->mirror_lay;
  int64_t most = 0;
  for (int a = 0; a < 3; a++) {
    const int a1 = a == 0 ? 1 : 0, a2 = a == 2 ? 1 : 2;
    const int64_t w1 = L.n[a1] + 2 * L.halo[a1], w2 = L.n[a2] + 2 * L.halo[a2];
    const int64_t cells = (w1 * w2 - L.n[a1] * L.n[a2]) * L.halo[a];
    most = cells > most ? cells : most;
  }
  return (unsigned)clamp_grid((most + 255) / 256, 512);
}

/* Launches in parts where faces send messages and the kernel reads the faces and wraps itself
 * (reads_all; without, the wrap copies and mirror_edges would read cells of the inner part
 * while it runs), the plan can split the launch along each axis that sends (z: planes, of a
 * block with planes besides the sent ones; x, y: tiles), and in which form; the signal's
 * counter and cuStreamWaitValue32 where it is one. */
static int plan_parts(struct cuda_ctx *c, const struct layout *l, const struct block_faces *faces,
                      int reads_all)
{
  struct cuda_fused *fu = &c->fu;
  fu->split_faces = fu->split_xy = 0;
  for (int a = 0; a < fu->plan.ndim; a++)
    for (int s = 0; s < 2; s++) {
      const int msg = faces->exchanged[a][s] && !faces->wrapped[a][s];
      if (a == 2)
        fu->split_faces |= msg << s;
      else
        fu->split_xy |= msg << (2 * a + s);
    }
  if (!reads_all ||
      (fu->split_faces && (!fused_splits_z(&fu->plan) || l->n[2] <= 2 * l->halo[2])) ||
      (fu->split_xy && !fused_splits_xy(&fu->plan)))
    fu->split_faces = fu->split_xy = 0;
  const int form = c->opt.overlap; /* 2 parts (shells), 3 signal, else the model's */
  fu->split_one = fu->split_faces && !fu->split_xy && form != 2 &&
                  fused_signals(&fu->plan, form == 3 ? 0 : fu->split_faces);
  if (!fu->split_one || fu->sig)
    return STENCIL_OK;
  cudaDriverEntryPointQueryResult q;
  void *fn = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !fn) {
    cudaGetLastError();
    fu->split_one = 0; /* (a driver without it: the shells) */
    return STENCIL_OK;
  }
  memcpy(&fu->wait_value, &fn, sizeof fn);
  CHECK_CUDA(cudaMalloc((void **)&fu->sig, sizeof *fu->sig));
  CHECK_CUDA(cudaMemset(fu->sig, 0, sizeof *fu->sig));
  CHECK_CUDA(cudaDeviceSynchronize());
  fu->sig_target = 0;
  return STENCIL_OK;
}

/* The kernel gets the device copy's layout (rows padded to 32 elements, dev_layout), which is
 * what the fields are. The plan's T is the halo's (the y halo over the radius: x may be
 * rounded up), the T fused_halo_depth chose: its margins and chunks are those of the launches
 * that run, also where no face of the block is a halo face (one rank, Dirichlet all round)
 * and T was lowered for residual launches or a short run. */
int fused_prepare(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                  int has_source, const struct block_faces *faces, struct advance_info *info)
{
  struct cuda_fused *fu = &c->fu;
  fu->on = 0;
  struct fused_faces ff;
  CHECK(plan_faces(fu, l, coef, has_source, faces, &ff));
  const int th = l->halo[1] / coef->radius;
  struct fused_config want;
  memset(&want, 0, sizeof want);
  want.steps = th;
  want.cluster[0] = c->opt.cluster[0];
  want.cluster[1] = coef->ndim == 3 ? c->opt.cluster[1] : 0;
  want.chunk = c->opt.chunk;
  const struct layout dl = dev_layout(l);
  if (fused_plan_block(&dl, coef, has_source, &ff, &want, c->device, &fu->plan) != 0)
    FAIL(STENCIL_ERR,
         "fused kernel: no launch plan for a block of %lld x %lld x %lld cells (halo %d %d %d) "
         "on GPU %d (%s): see the message above",
         (long long)l->n[0], (long long)l->n[1], (long long)l->n[2], l->halo[0], l->halo[1],
         l->halo[2], c->device, c->prop.name);
  if (fu->plan.steps < 1 || fu->plan.steps > FUSED_MAX_STEPS)
    FAIL(STENCIL_ERR, "fused kernel: the plan has %d steps per launch (expected 1 to %d)",
         fu->plan.steps, FUSED_MAX_STEPS);
  fu->on = 1;
  fu->residual_steps = fused_residual_steps(&fu->plan);
  fu->mirror_blocks = mirror_blocks(fu);
  /* No ghost fill between launches where no kernel reads the reflecting faces' ghosts: it
   * reads the mirrored faces through or applies them (the residual fills them, cuda_residual) */
  fu->stale_faces = (fu->plan.reads_faces && fu->mirrored) || fused_applies_faces(&fu->plan);
  if (fu->stale_faces)
    memset(c->steps.reflect, 0, sizeof c->steps.reflect);
  info->steps = fu->plan.steps;
  info->residual_steps = fu->residual_steps;
  info->reads_faces = fu->plan.reads_faces; /* (0 where it reads a wrap from memory: copied) */
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      if (faces->wrapped[a][s] && fu->plan.faces.read[a][s] == FUSED_READ_MEMORY)
        info->reads_faces = 0;
  return plan_parts(c, l, faces, info->reads_faces);
}

void fused_describe_run(const struct cuda_ctx *c, char *buf, size_t len)
{
  const struct cuda_fused *fu = &c->fu;
  char plan[640];
  fused_describe(&fu->plan, plan, sizeof plan);
  const char *parts =
      !(fu->split_faces || fu->split_xy) || !c->opt.overlap ? ""
      : fu->split_one ? "; launches in parts: one launch signalling the sent planes"
      : !fu->split_xy ? "; launches in parts: the sent planes first"
      : fu->split_faces
          ? "; launches in parts: the sent planes and the tiles of the sent x and y faces first"
          : "; launches in parts: the tiles of the sent x and y faces first";
  snprintf(buf, len, "fused (%s%s)", plan, parts);
}

/* ---- advance ------------------------------------------------------------------------------- */

enum part { PART_ALL, PART_SHELL, PART_INNER };

/* v = S^k(u) in one launch on the current lane, or its part: the cells the exchange sends
 * (the planes halo[2] deep at each z face that sends, and on the other planes the tiles that
 * compute cells within the halo of each x and y face that sends) or the others. A signalled
 * launch runs all planes on the bulk lane from its shell part, the current lane waiting until
 * the sent planes are stored; its inner part is empty. */
static int launch_part(struct cuda_ctx *c, const void *u, const void *f, void *v, int k, int part)
{
  struct cuda_fused *fu = &c->fu;
  if (part == PART_INNER && fu->split_one)
    return STENCIL_OK;
  if (part == PART_SHELL && fu->split_one) {
    cudaStream_t b = c->lane[LANE_BULK];
    unsigned add = 0;
    if (fused_launch_signal(&fu->plan, u, v, k, fu->split_faces, fu->sig, &add, (void *)b))
      FAIL(STENCIL_ERR, "fused kernel: the launch of %d steps failed: see the message above", k);
    CHECK_LAUNCH(b);
    c->last_kernel[LANE_BULK] = 0;
    fu->sig_target += add;
    const CUresult e = fu->wait_value((CUstream)stream_of(c), (CUdeviceptr)fu->sig, fu->sig_target,
                                      CU_STREAM_WAIT_VALUE_GEQ);
    if (e != CUDA_SUCCESS)
      FAIL(STENCIL_ERR, "cuStreamWaitValue32 failed (CUresult %d)", (int)e);
    return STENCIL_OK;
  }
  cudaStream_t s = stream_of(c);
  const int bad = part == PART_ALL ? fused_launch(&fu->plan, u, f, v, k, (void *)s)
                                   : fused_launch_part(&fu->plan, u, f, v, k, fu->split_faces,
                                                       fu->split_xy, part == PART_SHELL, (void *)s);
  if (bad)
    FAIL(STENCIL_ERR, "fused kernel: the launch of %d steps failed: see the message above", k);
  CHECK_LAUNCH(s);
  return STENCIL_OK;
}

/* One launch of k steps with the residual sums of the fields in mask, then a 64-byte copy of
 * the sums to page-locked memory, recorded by an event (residual_sums waits for it). */
static int launch_residual(struct cuda_ctx *c, const void *u, const void *f, void *v, int k,
                           unsigned mask)
{
  struct cuda_fused *fu = &c->fu;
  const size_t n = fused_scratch(&fu->plan);
  if (!fu->res_scratch) {
    CHECK(device_malloc(c, (n + 8) * sizeof(double), (void **)&fu->res_scratch,
                        "the fused residual's partial sums"));
    CHECK_CUDA(cudaMallocHost((void **)&fu->res_h, 8 * sizeof(double)));
    CHECK_CUDA(cudaEventCreateWithFlags(&fu->res_done, cudaEventDisableTiming));
  }
  cudaStream_t s = stream_of(c);
  if (fused_launch_residual(&fu->plan, u, f, v, k, mask, fu->res_scratch, fu->res_scratch + n,
                            (void *)s) != 0)
    FAIL(STENCIL_ERR, "fused kernel: the launch of %d steps with residuals failed: see above", k);
  CHECK_LAUNCH(s);
  CHECK_CUDA(cudaMemcpyAsync(fu->res_h, fu->res_scratch + n, 8 * sizeof(double),
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaEventRecord(fu->res_done, s));
  return STENCIL_OK;
}

/* The launch (whole, or in parts on the two lanes), the exchange of v's halo issued on the
 * halo lane right after the sent cells, the reflecting faces' fill, and the residual sums
 * awaited last. */
int fused_advance(struct cuda_ctx *c, const void *u, const void *f, void *v, int k, unsigned mask,
                  const struct exchanger *x, double sums[BACKEND_MAX_STEPS])
{
  struct cuda_fused *fu = &c->fu;
  if (k < 1 || k > fu->plan.steps)
    FAIL(STENCIL_ERR, "fused kernel: %d steps asked of a plan of %d", k, fu->plan.steps);
  mask &= (1u << k) - 1u;
  if (mask && k > fu->residual_steps)
    FAIL(STENCIL_ERR,
         "fused kernel: residuals asked of a launch of %d steps (the plan sums them in launches "
         "of at most %d)",
         k, fu->residual_steps);
  track_reset(c, v); /* v's interior changes: ghosts written by tier 2 no longer match */
  const int split = c->opt.overlap && x->messages && (fu->split_faces || fu->split_xy) && !mask;
  if (split)
    CHECK(cuda_lane_fence(c));
  CHECK(cuda_lane_select(c, LANE_HALO));
  CHECK(cuda_mirror_edges(c, (void *)u));
  if (mask)
    CHECK(launch_residual(c, u, f, v, k, mask));
  else
    CHECK(launch_part(c, u, f, v, k, split ? PART_SHELL : PART_ALL));
  CHECK(x->pack(x->arg, v));
  if (split) {
    CHECK(cuda_lane_select(c, LANE_BULK));
    CHECK(launch_part(c, u, f, v, k, PART_INNER));
    CHECK(cuda_lane_select(c, LANE_HALO));
  }
  CHECK(x->post(x->arg));
  CHECK(step_finish(&step_cuda, c, &c->steps, v, x, split));
  if (mask) {
    CHECK_CUDA(cudaEventSynchronize(fu->res_done));
    for (int l = 0; l < k; l++)
      sums[l] = mask >> l & 1u ? fu->res_h[l] : 0;
  }
  return STENCIL_OK;
}
