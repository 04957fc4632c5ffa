/* The fused kernel in 2D, host side: plan and launch of the warp-strip kernel (strip2d.cuh). */
#include "kernels/cuda/cuda_rt.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/fused_model.h"
#include "kernels/cuda/strip2d.cuh"

/* The steps per launch by radius and source: the most built (docs/design/fused-kernels.md,
 * "Steps per launch"). */
int strip_default_steps(int elem, int radius, int has_source)
{
  return STRIP_STEPS_R(elem, radius, has_source);
}

/* Strip geometry at the plan's T: margin E (T r rounded up to even, so the stored width U =
 * 32 V - 2 E keeps 16-byte steps), first column xs0 with (xs0 + origin) a multiple of 16
 * bytes (origin: the element of cell (0, 0); rows are a multiple of 16 bytes long), and the
 * number of strips. */
static void strip_geometry(const struct fused_plan *pl, int *E, int *U, int64_t *xs0,
                           int64_t *nstrips)
{
  const int A = 16 / pl->elem;
  const int o = (int)(layout_index(&pl->lay, 0, 0, 0) % A);
  *E = (pl->steps * pl->radius + 1) / 2 * 2;
  *U = 32 * STRIP_V - 2 * *E;
  const int r = ((o - *E) % A + A) % A;
  *xs0 = -(int64_t)*E - r;
  *nstrips = (pl->lay.n[0] + r + *U - 1) / *U;
}

static const void *strip_kernel_of(const struct fused_plan *pl, int steps, int kind, int edge = 0)
{
  return pl->elem == 8 ? strip_lookup_f64(steps, pl->radius, kind, edge)
                       : strip_lookup_f32(steps, pl->radius, kind, edge);
}

/* The split of a launch into the lean kernel's fast region and the frame (strip2d.cuh). A
 * warp with output rows [y0, y1) computes rows y0 - 2T r .. y1 + T r (the pipeline fill, the
 * unroll by 2r + 1), so it meets no reflecting y face when y0 - 2T r >= 1 and
 * y1 + T r + r <= ny - 1.
 * Only strip 0 holds x = 0, and the strips from ceil((nx - 32 V - xs0) / U) on reach
 * x = nx - 1. The frame runs in the edge kernel (a lean kind with the faces). Without a fast
 * region (rows not aligned, gvec = 0, or a block too small) the general kernel runs every
 * strip and row. */
struct strip_split {
  int64_t fs0, fs1, r0, r1;
  int64_t lean_x, lean_y, edge_x, gen_x; /* CTAs of the lean (x, y), edge and general grids */
  int64_t side_warps, band_warps; /* edge warps: per lean chunk (side strips), in the bands */
};

static void strip_split_of(const struct fused_plan *pl, int gvec, int res, strip_split *q)
{
  const int chunk = res ? pl->chunk_res : pl->chunk;
  int E, U;
  int64_t xs0, nstrips;
  strip_geometry(pl, &E, &U, &xs0, &nstrips);
  const int64_t nx = pl->lay.n[0], ny = pl->lay.n[1];
  const int W = 32 * STRIP_V, T = pl->steps, r = pl->radius;
  /* strip s stores [xs0 + E + s U, xs0 + E + (s + 1) U), xs0 + E <= 0 */
  q->fs0 = pl->faces.kind[0][0] != FUSED_FACE_HALO;
  q->fs1 = nstrips;
  if (pl->faces.kind[0][1] != FUSED_FACE_HALO) {
    const int64_t reach = fm_ceildiv(nx - W - xs0, U);
    q->fs1 = reach < nstrips ? reach : nstrips;
  }
  q->fs1 = q->fs1 < q->fs0 ? q->fs0 : q->fs1;
  q->r0 = pl->faces.kind[1][0] != FUSED_FACE_HALO ? 2 * T * r + 1 : 0;
  q->r1 = pl->faces.kind[1][1] != FUSED_FACE_HALO ? ny - T * r - r - 1 : ny;
  if (!gvec || q->fs1 <= q->fs0 || q->r1 <= q->r0)
    q->fs0 = q->fs1 = q->r0 = q->r1 = 0;
  q->lean_x = (q->fs1 - q->fs0 + STRIP_WARPS - 1) / STRIP_WARPS;
  q->lean_y = chunk > 0 ? (q->r1 - q->r0 + chunk - 1) / chunk : 0;
  q->edge_x = q->gen_x = q->side_warps = q->band_warps = 0;
  if (q->lean_x > 0) { /* strip_where's edge warps */
    q->side_warps = (nstrips - (q->fs1 - q->fs0)) * STRIP_SIDE_SPLIT;
    q->band_warps = ((q->r0 > 0) + (q->r1 < ny)) * nstrips;
    q->edge_x = fm_ceildiv(q->lean_y * q->side_warps + q->band_warps, STRIP_WARPS);
  } else if (chunk > 0) { /* no fast region: the general kernel on every strip and row */
    q->gen_x = fm_ceildiv(nstrips * fm_ceildiv(ny, chunk), STRIP_WARPS);
  }
}

/* The time of a launch in a model of its waves (docs/design/fused-kernels.md, "Waves and
 * chunks"). The CTAs are dispatched in launch order as slots free: the lean kernel's
 * (launched first), the `x` CTAs of each chunk of c of the `rows` (the last chunk short), or
 * the general kernel's; then the edge kernel's (per lean chunk the side strips' warps, each
 * on an eighth of it, then the bands), each taking `edge_slots` of the `resident` (the lean
 * kind's CTAs a multiprocessor over the edge form's). Every busy CTA
 * advances one pipeline iteration in STRIP_WAVE_K + a time units, a the busy slots per
 * multiprocessor (at least 1): a multiprocessor with more CTAs gets more done, each CTA
 * slower. An edge CTA's iteration costs STRIP_EDGE_COST lean ones. The two constants fit
 * measured chunk sweeps of 2D launches (heat fp32 and fp64, Poisson fp32 with and without
 * residual sums; docs/benchmarks.md). */
#define STRIP_WAVE_K 3.0
#define STRIP_EDGE_COST 1.5
struct strip_ctas {
  double left; /* iterations (edge: in lean ones) */
  int64_t n;
  double slots; /* each */
};

static double strip_timeline(const strip_split *q, int64_t nstrips, int64_t ny, int64_t rows,
                             int64_t x, int64_t c, int T, double resident, double edge_slots,
                             int64_t sms)
{
  std::vector<strip_ctas> todo, busy;
  for (int64_t z = 0; z < rows; z += c)
    todo.push_back({(double)fm_iterations(fm_min(c, rows - z), T), x, 1.0});
  if (q->lean_x > 0) {
    const int64_t band = fm_ceildiv(nstrips, STRIP_WARPS);
    for (int64_t z = 0; z < rows; z += c) {
      const int64_t side = fm_ceildiv(fm_min(c, rows - z), STRIP_SIDE_SPLIT);
      todo.push_back({STRIP_EDGE_COST * (double)fm_iterations(side, T),
                      fm_ceildiv(q->side_warps, STRIP_WARPS), edge_slots});
    }
    if (q->r0 > 0)
      todo.push_back({STRIP_EDGE_COST * (double)fm_iterations(q->r0, T), band, edge_slots});
    if (q->r1 < ny)
      todo.push_back({STRIP_EDGE_COST * (double)fm_iterations(ny - q->r1, T), band, edge_slots});
  }
  double t = 0, idle = resident;
  for (size_t next = 0;;) {
    while (next < todo.size()) {
      const int64_t take = fm_min(todo[next].n, (int64_t)(idle / todo[next].slots + 1e-9));
      if (take < 1)
        break;
      busy.push_back({todo[next].left, take, todo[next].slots});
      idle -= (double)take * todo[next].slots;
      if ((todo[next].n -= take) == 0)
        next++;
    }
    if (busy.empty())
      return t;
    double step = busy[0].left;
    for (const strip_ctas &b : busy)
      step = b.left < step ? b.left : step;
    const double a = (resident - idle) / (double)sms;
    t += step * (STRIP_WAVE_K + (a > 1 ? a : 1));
    size_t kept = 0;
    for (strip_ctas &b : busy) {
      b.left -= step;
      if (b.left > 0)
        busy[kept++] = b;
      else
        idle += (double)b.n * b.slots;
    }
    busy.resize(kept);
  }
}

/* Chunks of at most this many rows, where the search below has such chunks, except with a
 * source term in fp32: longer ones measured slower than the model has them at every radius and
 * precision without a source, and in fp64 with one (docs/design/fused-kernels.md, "Waves and
 * chunks"). */
#define STRIP_CHUNK_ROWS 448

/* The chunk of launches of T steps of radius r with the shortest modelled time, by the model
 * with T r as its T (the pipeline fill of 2 T r rows): at least 4 T r rows, within eight waves
 * of lean CTAs, at most `cmax` rows where any is (0: no bound). q: the plan's split (its
 * chunk-free fields), per_sm, edge_sm: CTAs a multiprocessor of the lean kind and of its edge
 * form (0: no device). */
static int strip_wave_chunk(const struct fused_plan *pl, const strip_split &q, int64_t nstrips,
                            int T, int per_sm, int edge_sm, int cmax)
{
  const int64_t ny = pl->lay.n[1], rows = q.lean_x > 0 ? q.r1 - q.r0 : ny,
                x = q.lean_x > 0 ? q.lean_x : fm_ceildiv(nstrips, STRIP_WARPS),
                sms = per_sm > 0 ? pl->sms : 1, slots = per_sm > 0 ? (int64_t)per_sm * sms : 1;
  const double edge_slots = per_sm > 0 && edge_sm > 0 ? (double)per_sm / edge_sm : 1.0;
  int best[2] = {(int)fm_min(rows, 65535), 0}; /* any chunk, and one within cmax */
  double best_t[2] = {-1, -1};
  for (int64_t k = 1; k == 1 || k * x <= 8 * slots; k++) {
    const int64_t c = fm_ceildiv(rows, k);
    if (k > 1 && c < 4 * T)
      break;
    if (c > 65535 || (k > 1 && c == fm_ceildiv(rows, k - 1)))
      continue;
    const double t = strip_timeline(&q, nstrips, ny, rows, x, c, T, (double)slots, edge_slots, sms);
    for (int b = 0; b < 2; b++)
      if ((b == 0 || (cmax > 0 && c <= cmax)) && (best_t[b] < 0 || t < best_t[b])) {
        best_t[b] = t;
        best[b] = (int)c;
      }
  }
  return best_t[1] >= 0 ? best[1] : best[0];
}

int strip_plan(struct fused_plan *pl, const struct fused_config *want, int tmax_halo, int device)
{
  const int built = STRIP_STEPS_R(pl->elem, pl->radius, pl->has_source);
  if (fused_plan_steps(pl, want, tmax_halo, built, built))
    return 1;
  pl->rows = 1;
  pl->cluster[0] = pl->cluster[1] = 1;
  pl->tile[1] = 1;
  pl->threads = STRIP_WARPS * 32;
  pl->smem_bytes = 0;
  int E, U;
  int64_t xs0, nstrips;
  strip_geometry(pl, &E, &U, &xs0, &nstrips);
  pl->tile[0] = U;
  int per_sm = 0, edge_sm = 0;
  const int kind = pl->has_source ? STRIP_LEAN_SRC : STRIP_LEAN;
  if (device >= 0) {
    FM_CHECK_CUDA(cudaDeviceGetAttribute(&pl->sms, cudaDevAttrMultiProcessorCount, device));
    FM_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, strip_kernel_of(pl, pl->steps, kind), pl->threads, 0));
    FM_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &edge_sm, strip_kernel_of(pl, pl->steps, kind, 1), pl->threads, 0));
    if (per_sm < 1)
      return fused_fail("the warp-strip kernel for T = %d does not fit on the device", pl->steps);
  }
  pl->active_clusters = per_sm * pl->sms;
  const int64_t ny = pl->lay.n[1];
  strip_split q; /* the fast region and the frame: their chunk-free fields */
  strip_split_of(pl, 1, 0, &q);
  pl->chunk = want->chunk > 0
                  ? want->chunk
                  : strip_wave_chunk(
                        pl, q, nstrips, pl->steps * pl->radius, per_sm, edge_sm,
                        (pl->has_source && pl->elem == 4) || per_sm < 1 ? 0 : STRIP_CHUNK_ROWS);
  /* Residual launches (Jacobi's, with the source) run a kernel of their own occupancy and T:
   * their own chunk. */
  const int tres = fused_residual_steps(pl);
  pl->chunk_res = pl->chunk;
  if (device >= 0 && tres >= 1 && pl->has_source && want->chunk <= 0) {
    int res_sm = 0, res_edge_sm = 0;
    FM_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &res_sm, strip_kernel_of(pl, tres, STRIP_LEAN_RES), pl->threads, 0));
    FM_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &res_edge_sm, strip_kernel_of(pl, tres, STRIP_LEAN_RES, 1), pl->threads, 0));
    if (res_sm >= 1)
      pl->chunk_res = strip_wave_chunk(pl, q, nstrips, tres * pl->radius, res_sm, res_edge_sm, 0);
  }
  pl->grid[0] = q.lean_x > 0 ? q.lean_x + fm_ceildiv(q.side_warps, STRIP_WARPS)
                             : fm_ceildiv(nstrips, STRIP_WARPS);
  pl->grid[1] = (ny + pl->chunk - 1) / pl->chunk;
  pl->grid[2] = 1;
  if (pl->grid[0] > 0x7fffffff || pl->grid[1] > 65535)
    return fused_fail("grid %lld x %lld CTAs is too large; use a larger chunk",
                      (long long)pl->grid[0], (long long)pl->grid[1]);
  return 0;
}

/* Residual slots of a launch: one per warp of its grids. */
static int64_t strip_slots(const strip_split *q)
{
  return (q->lean_x * q->lean_y + q->edge_x + q->gen_x) * STRIP_WARPS;
}

size_t strip_scratch(const struct fused_plan *pl)
{
  int64_t n = 0;
  for (int gvec = 0; gvec < 2; gvec++) {
    strip_split q;
    strip_split_of(pl, gvec, 1, &q);
    n = strip_slots(&q) > n ? strip_slots(&q) : n;
  }
  return (size_t)n * 8;
}

/* The frame's kernel (edge or general) runs on a side stream, concurrently with the lean
 * kernel (fm_fork): they write disjoint cells and only read u and f, and the frame alone would
 * leave most of the GPU idle (the plan's chunk counts the edge kernel's CTAs in the wave). */

/* One launch; with `res` (residual launches) also the per-level sums in res->sums. */
struct strip_res {
  unsigned mask;
  double *scratch, *sums;
};

template <typename REAL>
static int strip_launch_t(const struct fused_plan *pl, const void *u, const void *f, void *v,
                          int steps, const struct strip_res *res, void *stream)
{
  const struct layout *l = &pl->lay;
  strip_params<REAL> p;
  memset(&p, 0, sizeof p);
  const int64_t origin = layout_index(l, 0, 0, 0);
  p.u = (const REAL *)u + origin;
  p.f = f ? (const REAL *)f + origin : NULL;
  p.v = (REAL *)v + origin;
  p.nx = l->n[0];
  p.ny = l->n[1];
  if (l->stride[1] > INT_MAX / (int64_t)sizeof(REAL) || l->n[1] + 2 * l->halo[1] > INT_MAX)
    return fused_fail("rows of %lld bytes, %lld rows: the warp strips index rows in 32 bits",
                      (long long)(l->stride[1] * (int64_t)sizeof(REAL)),
                      (long long)(l->n[1] + 2 * l->halo[1]));
  p.sy = (int)l->stride[1];
  p.hx = l->halo[0];
  p.hy = l->halo[1];
  p.ylo = -p.hy;
  p.yhi = (int)(p.ny + p.hy - 1);
  { /* the lean loads' clamp: the aligned vectors inside the array's rows */
    const int64_t A = 16 / (int64_t)sizeof(REAL), o = origin % A;
    p.xlo = -p.hx - ((o - p.hx) % A + A) % A;
    p.xhi = p.sy - p.hx - A - ((o - p.hx) % A + A) % A;
  }
  for (int a = 0; a < 2; a++)
    for (int s = 0; s < 2; s++) {
      p.kind[a][s] = pl->faces.kind[a][s];
      p.two_g[a][s] = (REAL)(2.0 * pl->faces.value[a][s]);
    }
  p.c0 = (REAL)pl->coef.c0;
  for (int a = 0; a < 2; a++)
    for (int m = 0; m < 4; m++)
      p.c[a][m] = (REAL)pl->coef.c[a][m];
  p.cf = (REAL)pl->coef.cf;
  p.steps = steps;
  strip_geometry(pl, &p.E, &p.U, &p.xs0, &p.nstrips);
  const int A = 16 / (int)sizeof(REAL);
  p.gvec = (uintptr_t)u % 16 == 0 && (uintptr_t)v % 16 == 0 && (!f || (uintptr_t)f % 16 == 0) &&
           p.sy % A == 0;
  strip_split q;
  strip_split_of(pl, p.gvec, res != NULL, &q);
  p.fs0 = q.fs0;
  p.fs1 = q.fs1;
  p.r0 = q.r0;
  p.r1 = q.r1;
  p.chunk = res ? pl->chunk_res : pl->chunk;
  if (res) {
    if (steps > fused_residual_steps(pl))
      return fused_fail("a launch of %d steps with residuals: this plan allows %d", steps,
                        fused_residual_steps(pl));
    p.part = res->scratch;
    p.part_edge = q.lean_x * q.lean_y * STRIP_WARPS;
    p.part_base = p.part_edge + q.edge_x * STRIP_WARPS;
    p.rmask = res->mask;
  }
  if (q.lean_y > 65535 || q.gen_x > 0x7fffffff || q.edge_x > 0x7fffffff)
    return fused_fail("grid of %lld x %lld CTAs is too large; use a larger chunk",
                      (long long)q.lean_x, (long long)q.lean_y);
  void *args[] = {&p};
  const int lean = res ? STRIP_LEAN_RES : f ? STRIP_LEAN_SRC : STRIP_LEAN;
  const void *kl = strip_kernel_of(pl, steps, lean);
  const void *ke = strip_kernel_of(pl, steps, lean, 1);
  const void *kg = strip_kernel_of(pl, steps, STRIP_GENERAL);
  if (!kl || !ke || !kg)
    return fused_fail("no warp-strip kernel for T = %d", steps);
  cudaStream_t s = (cudaStream_t)stream, frame_s = s;
  const int frame = q.gen_x > 0 || q.edge_x > 0, fast = q.lean_x > 0 && q.lean_y > 0,
            both = frame && fast;
  if (both && fm_fork(s, &frame_s)) /* the frame on the side stream */
    return 1;
  if (fast) /* first: residual launches are faster so (docs/design/fused-kernels.md) */
    FM_CHECK_CUDA(cudaLaunchKernel(kl, dim3((unsigned)q.lean_x, (unsigned)q.lean_y),
                                   dim3((unsigned)pl->threads), args, 0, s));
  if (q.gen_x > 0)
    FM_CHECK_CUDA(cudaLaunchKernel(kg, dim3((unsigned)q.gen_x), dim3((unsigned)pl->threads), args,
                                   0, frame_s));
  if (q.edge_x > 0)
    FM_CHECK_CUDA(cudaLaunchKernel(ke, dim3((unsigned)q.edge_x), dim3((unsigned)pl->threads), args,
                                   0, frame_s));
  if (both && fm_join(s))
    return 1;
  FM_CHECK_CUDA(cudaGetLastError());
  if (res) {
    if (fm_sums(res->scratch, strip_slots(&q), res->sums, stream))
      return 1;
  }
  return 0;
}

int strip_launch(const struct fused_plan *pl, const void *u, const void *f, void *v, int steps,
                 void *stream)
{
  return pl->elem == 8 ? strip_launch_t<double>(pl, u, f, v, steps, NULL, stream)
                       : strip_launch_t<float>(pl, u, f, v, steps, NULL, stream);
}

int strip_launch_residual(const struct fused_plan *pl, const void *u, const void *f, void *v,
                          int steps, unsigned mask, double *scratch, double *sums, void *stream)
{
  const struct strip_res r = {mask, scratch, sums};
  return pl->elem == 8 ? strip_launch_t<double>(pl, u, f, v, steps, &r, stream)
                       : strip_launch_t<float>(pl, u, f, v, steps, &r, stream);
}

int strip_attributes(const struct fused_plan *pl, int steps, int *regs, int *local_bytes)
{
  const void *k = strip_kernel_of(pl, steps, STRIP_LEAN);
  if (!k)
    return fused_fail("no warp-strip kernel for T = %d", steps);
  cudaFuncAttributes a;
  FM_CHECK_CUDA(cudaFuncGetAttributes(&a, k));
  *regs = a.numRegs;
  *local_bytes = (int)a.localSizeBytes;
  return 0;
}
