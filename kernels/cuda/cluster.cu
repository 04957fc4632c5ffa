/* Tier 3: fused T-step star-stencil kernel on thread-block clusters (see cluster.h and
 * docs/cluster-kernel.md).
 *
 * Logical axes. The kernel works in three logical axes: x (stride 1, 16-byte vectors of V
 * cells, V = 4 in fp32, 2 in fp64), w (3D: y; 2D: a single cell) and s, the streaming axis
 * (3D: z; 2D: y). The update order is x, then w (3D), then s, which is x, y, z in 3D and
 * x, y in 2D, as in kernels/cpu/heat_real.h.
 *
 * Work split. A cluster of cdx x cdw CTAs owns a tile of (x, w); CTA (rx, rw) owns the
 * sub-tile [X0, X0 + tile_x) x [W0, W0 + tile_w) and the s-range [S0, S0 + chunk). A thread
 * owns one "group": V consecutive x cells of one w row, for every level and every plane.
 * Level l (0..T) is the field after l steps; the region a CTA computes at level l is its
 * sub-tile, extended by T - l cells on every side that is not shared with a CTA of its own
 * cluster (the redundant trapezoid; clipped at reflecting faces, where the ghost layer is
 * re-applied instead). Level 0 is loaded from global memory, level T stored to it.
 *
 * Pipeline. Each iteration handles one "chunk" of R planes (rows in 2D) per level: level l
 * works on chunk c_first + it - l. A level's own s-neighbours (planes above and below) stay
 * in the thread's registers (last, cur, and the chunk just produced one level down); its x
 * and w neighbours come from shared memory, written in the previous iteration:
 *
 *   smem[level 0..T-1][slot 0..1][row 0..R-1]:
 *     rowbuf[nrows][pitch]   3D only: every group's V cells (for the w neighbours)
 *     edge[nrows][2][egx]    every group's first (side 0) and last (side 1) cell (x nbrs)
 *
 * Level l writes chunk c into slot c & 1 and the next level reads slot (c - 1) & 1, so one
 * barrier per iteration orders everything: cluster.sync() (barrier.cluster arrive.release +
 * wait.acquire) when the cluster has several CTAs, __syncthreads() otherwise. A group on an
 * edge shared with a neighbouring CTA also stores its edge cells into that CTA's shared
 * memory (DSMEM, cluster.map_shared_rank), into the same level and slot. The kernel starts
 * with a cluster barrier (every CTA resident before any remote store) and ends with one (no
 * CTA exits while another may still read or write its shared memory).
 *
 * Level 0 comes through a ring of CL_RING chunks in shared memory, filled CL_DIST chunks
 * ahead by cp.async: many loads in flight per SM (memory-level parallelism), no registers.
 *
 * Host emulation. The per-thread code (cl_head, cl_body) is __host__ __device__:
 * cluster_heat_emulate runs it on the CPU for every thread of every CTA, one pipeline step at a
 * time, and checks every shared-memory access for races between barriers and for out-of-bounds
 * indices. */
#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <queue>
#include <vector>

#include "kernels/cuda/cluster_kernel.cuh"
#include "kernels/cuda/strip2d.cuh"
#include "kernels/cuda/tile3d.cuh"

int cl_fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "stencil: error: cluster kernel: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

int64_t cl_iterations(int64_t planes, int T)
{
  return (planes + 2 * T + 2) / 3 * 3;
}

int cl_wave_chunk(int64_t n, int64_t tiles, int T, int64_t resident)
{
  int best = (int)(n < 65535 ? n : 65535);
  double best_cost = -1;
  for (int64_t k = 1; k <= 65535; k++) {
    const int64_t c = (n + k - 1) / k;
    if (k > 1 && c < 4 * T)
      break;
    if (k > 1 && c == (n + k - 2) / (k - 1))
      continue;
    const int64_t chunks = (n + c - 1) / c;
    const int64_t waves = resident > 0 ? (tiles * chunks + resident - 1) / resident : 1;
    const double cost = (double)waves * (double)cl_iterations(c, T);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = (int)c;
    }
  }
  return best;
}

/* The slots' model for groups of CTAs dispatched in order, group i: count[i] CTAs of work[i]
 * iterations each, to `resident` slots as they free; returns when the last slot is done. */
static int64_t cl_groups_time(const std::vector<int64_t> &count, const std::vector<int64_t> &work,
                              int64_t resident)
{
  /* The slots' busy-until times as (time, count) in increasing time: at most `resident`
   * entries, each group of equal CTAs taken from the front. */
  std::vector<int64_t> t(1, 0), k(1, resident);
  for (size_t g = 0; g < count.size(); g++)
    for (int64_t left = count[g]; left > 0;) {
      const int64_t take = cl_min(k[0], left), at = t[0] + work[g];
      left -= take;
      if ((k[0] -= take) == 0) {
        t.erase(t.begin());
        k.erase(k.begin());
      }
      size_t i = 0;
      while (i < t.size() && t[i] < at)
        i++;
      if (i < t.size() && t[i] == at)
        k[i] += take;
      else {
        t.insert(t.begin() + (ptrdiff_t)i, at);
        k.insert(k.begin() + (ptrdiff_t)i, take);
      }
    }
  return t.back();
}

int64_t cl_chunks_time(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c)
{
  std::vector<int64_t> count, work;
  for (int64_t z = 0; z < n;) {
    const int64_t len = cl_min(z == 0 ? c0 : c, n - z);
    z += len;
    count.push_back(tiles);
    work.push_back(cl_iterations(len, T));
  }
  return cl_groups_time(count, work, resident);
}

int64_t cl_tile_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int64_t uniform,
                       int *whole, int *pieces, int *c)
{
  *whole = *pieces = *c = 0;
  int64_t best = uniform;
  /* all the whole waves (fewer modelled slower wherever tried, and cost time per launch) */
  const int64_t a = resident > 0 ? (tiles - 1) / resident * resident : 0;
  if (a > 0)
    for (int64_t k = 2; k <= 16; k++) {
      const int64_t cc = (n + k - 1) / k, first = n - (k - 1) * cc;
      if (cc < 4 * T)
        break;
      if (first < 1)
        continue;
      const int64_t time = cl_groups_time(
          {a, tiles - a, (tiles - a) * (k - 1)},
          {cl_iterations(n, T), cl_iterations(first, T), cl_iterations(cc, T)}, resident);
      if (time < best && time * 100 < uniform * 99) {
        best = time;
        *whole = (int)a;
        *pieces = (int)k;
        *c = (int)cc;
      }
    }
  return best;
}

int64_t cl_wave_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int *c0, int *c)
{
  /* equal chunks (the first one takes the rest): the candidate to beat */
  *c = cl_wave_chunk(n, tiles, T, resident);
  *c0 = cl_first_chunk(n, *c);
  int64_t best = cl_chunks_time(n, tiles, T, resident < 1 ? 1 : resident, *c0, *c);
  if (resident < 1)
    return best;
  /* A first chunk of n - m b planes, then m of b: m at most 64, within eight waves of CTAs
   * (beyond, equal chunks leave little to gain), b in steps of at most 1/1024 of n. The work
   * beyond the slots' share bounds the time from below and grows with m by each fill. */
  const int64_t step = n / 1024 + 1;
  for (int64_t m = 1; m <= 64 && (m + 1) * tiles <= 8 * resident && n - m * 4 * T >= 4 * T; m++) {
    if ((tiles * (n + (m + 1) * 2 * T) + resident - 1) / resident > best)
      break;
    for (int64_t b = 4 * T; n - m * b >= 4 * T; b += step) {
      const int64_t a = n - m * b;
      if (a > 65535 || b > 65535)
        continue;
      const int64_t time = cl_chunks_time(n, tiles, T, resident, a, b);
      if (time < best) {
        best = time;
        *c0 = (int)a;
        *c = (int)b;
      }
    }
  }
  return best;
}

int cl_range_chunks(int64_t n, int c0, int c, int waves, int64_t tiles, int T, int64_t resident,
                    int64_t nz, int *rc0, int *rc)
{
  *rc0 = c0;
  *rc = c;
  if (nz == n)
    return 0;
  const int64_t shorts = (n - c0) / c;
  if (waves && tiles > resident && nz - shorts * c >= c) {
    *rc0 = (int)(nz - shorts * c);
    return 1;
  }
  if (waves)
    *rc = cl_wave_chunk(nz, tiles, T, resident);
  *rc0 = cl_first_chunk(nz, *rc);
  return 0;
}

int64_t cl_signal_times(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c,
                        int64_t lo, int64_t *tlo, int64_t *thi)
{
  const int64_t k = n <= c0 ? 1 : 1 + (n - c0 + c - 1) / c, first = n - (k - 1) * c;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> slots;
  for (int64_t r = 0; r < cl_max(resident, 1); r++)
    slots.push(0);
  int64_t end = 0;
  *tlo = *thi = 0;
  for (int64_t j = 0; j < k; j++) {
    const int64_t chunk = j == 0 ? 0 : j == 1 ? k - 1 : j - 1; /* dispatch order */
    const int64_t w = cl_iterations(chunk == 0 ? first : c, T);
    for (int64_t t = 0; t < tiles; t++) {
      const int64_t at = slots.top();
      slots.pop();
      slots.push(at + w);
      end = cl_max(end, at + w);
      if (chunk == 0)
        *tlo = cl_max(*tlo, at + cl_min(lo, w));
      if (chunk == k - 1)
        *thi = cl_max(*thi, at + w);
    }
  }
  return end;
}

int cl_plan_steps(struct cluster_plan *pl, const struct cluster_config *want, int tmax_halo,
                  int built, int best)
{
  const int tmax = tmax_halo < built ? tmax_halo : built;
  if (tmax < 1)
    return cl_fail("the block has no ghost layer on a halo face: tier 3 needs halo >= 1");
  if (want->steps > tmax)
    return cl_fail("--steps-per-launch %d exceeds %d (the halo width or the kernels built)",
                   want->steps, tmax);
  if (want->steps > 0) {
    pl->steps = want->steps;
    snprintf(pl->why, sizeof pl->why, "T = %d requested", pl->steps);
  } else {
    pl->steps = best < tmax ? best : tmax;
    pl->auto_steps = 1;
    snprintf(pl->why, sizeof pl->why, "T = %d: the measured best %d%s", pl->steps, best,
             best > tmax ? ", capped by the halo width" : "");
  }
  return 0;
}

static cl_entry cl_lookup(int ndim, int elem, int steps, int rows)
{
  cl_entry none = {NULL, NULL};
  if (steps < 1 || steps > cl_max_steps(rows))
    return none;
  return elem == 8 ? cl_lookup_f64(ndim, steps, rows) : cl_lookup_f32(ndim, steps, rows);
}

/* ---- host side: parameters, shape, plan ---------------------------------------------- */

/* Shared-memory layout at T steps (elements). */
struct cl_smem_layout {
  int pitch, xpr, wp, nrows, goff, egx, rowbuf, le;
  size_t total;
};

static void cl_layout_of(const struct cluster_plan *pl, int T, cl_smem_layout *s)
{
  const int V = 16 / pl->elem;
  const int cv = (T + V - 1) / V; /* groups the trapezoid reaches beyond the sub-tile */
  s->xpr = V * cv;
  s->pitch = pl->tile[0] + 2 * s->xpr;
  s->wp = pl->ndim == 3 ? T : 0;
  s->nrows = (pl->ndim == 3 ? pl->tile[1] : 1) + 2 * s->wp;
  s->goff = cv + 1;
  s->egx = pl->tile[0] / V + 2 * s->goff;
  s->rowbuf = pl->ndim == 3 ? s->nrows * s->pitch : 0;
  const int le = s->rowbuf + s->nrows * 2 * s->egx;
  s->le = (le + V - 1) / V * V;
  s->total = (size_t)2 * T * pl->rows * s->le;
}

template <typename REAL>
static void cl_params_of(const struct cluster_plan *pl, const void *u, void *v, int T, clp<REAL> *p)
{
  const struct layout *l = &pl->lay;
  const int is3 = pl->ndim == 3;
  memset(p, 0, sizeof *p);
  const int64_t origin = layout_index(l, 0, 0, 0);
  p->u = (const REAL *)u + origin;
  p->v = (REAL *)v + origin;
  p->gmin = -origin;
  p->gmax = l->count - origin;
  const int ax[3] = {0, is3 ? 1 : -1, is3 ? 2 : 1}; /* logical -> layout axis */
  for (int a = 0; a < 3; a++) {
    p->n[a] = ax[a] < 0 ? 1 : l->n[ax[a]];
    for (int s = 0; s < 2; s++) {
      p->refl[a][s] = ax[a] < 0 ? 0 : pl->faces.kind[ax[a]][s];
      p->two_g[a][s] = ax[a] < 0 ? (REAL)0 : (REAL)(2.0 * pl->faces.value[ax[a]][s]);
    }
  }
  p->sw = is3 ? l->stride[1] : 0;
  p->ss = is3 ? l->stride[2] : l->stride[1];
  p->c0 = (REAL)pl->coef.c0;
  p->cx = (REAL)pl->coef.c[0][0];
  p->cw = is3 ? (REAL)pl->coef.c[1][0] : (REAL)0;
  p->cs = is3 ? (REAL)pl->coef.c[2][0] : (REAL)pl->coef.c[1][0];
  p->tile_x = pl->tile[0];
  p->tile_w = is3 ? pl->tile[1] : 1;
  p->chunk = pl->chunk;
  p->cdx = pl->cluster[0];
  p->cdw = is3 ? pl->cluster[1] : 1;
  cl_smem_layout s;
  cl_layout_of(pl, T, &s);
  p->pitch = s.pitch;
  p->xpr = s.xpr;
  p->wp = s.wp;
  p->nrows = s.nrows;
  p->goff = s.goff;
  p->egx = s.egx;
  p->rowbuf = s.rowbuf;
  p->le = s.le;
  p->ring = (int)s.total;
  const int V = cl_traits<REAL>::V;
  p->gvec = ((uintptr_t)u % 16 == 0) && ((uintptr_t)v % 16 == 0) && origin % V == 0 &&
            p->sw % V == 0 && p->ss % V == 0;
}

/* Threads per CTA: the largest level-0 bounding box over the grid's CTAs, in warps. */
template <typename REAL, int NDIM, int T> static int cl_threads_t(const struct cluster_plan *pl)
{
  clp<REAL> p;
  cl_params_of<REAL>(pl, NULL, NULL, T, &p);
  int most = 1;
  for (int64_t bw = 0; bw < pl->grid[1]; bw++)
    for (int64_t bx = 0; bx < pl->grid[0]; bx++) {
      clc c;
      cl_cta_init<REAL, NDIM, T, 1>(p, bx, bw, 0, c);
      cl_bbox b;
      cl_bbox_of<REAL, NDIM, T>(p, c, b);
      most = b.total > most ? b.total : most;
    }
  return (most + 31) / 32 * 32;
}

template <typename REAL, int NDIM, int T> struct cl_threads_list {
  static int get(const struct cluster_plan *pl, int steps)
  {
    return steps == T ? cl_threads_t<REAL, NDIM, T>(pl)
                      : cl_threads_list<REAL, NDIM, T - 1>::get(pl, steps);
  }
};
template <typename REAL, int NDIM> struct cl_threads_list<REAL, NDIM, 0> {
  static int get(const struct cluster_plan *, int) { return 0; }
};

extern "C" int cluster_heat_threads(const struct cluster_plan *pl, int steps)
{
  if (pl->strip)
    return STRIP_WARPS * 32;
  if (pl->elem == 8)
    return pl->ndim == 3 ? cl_threads_list<double, 3, CLUSTER_MAX_STEPS>::get(pl, steps)
                         : cl_threads_list<double, 2, CLUSTER_MAX_STEPS>::get(pl, steps);
  return pl->ndim == 3 ? cl_threads_list<float, 3, CLUSTER_MAX_STEPS>::get(pl, steps)
                       : cl_threads_list<float, 2, CLUSTER_MAX_STEPS>::get(pl, steps);
}

extern "C" size_t cluster_heat_smem(const struct cluster_plan *pl, int steps)
{
  if (pl->strip)
    return 0;
  cl_smem_layout s;
  cl_layout_of(pl, steps, &s);
  const size_t ring = (size_t)CL_RING * pl->rows * cluster_heat_threads(pl, steps) * 16;
  return s.total * (size_t)pl->elem + ring;
}

extern "C" int cluster_heat_supported(const struct layout *l, const struct stencil_coef *coef,
                                      int has_source, char *why, size_t len)
{
  const char *no = NULL;
  if (coef->radius != 1)
    no = "radius > 1 (tier 3 has the radius-1 star stencils only)";
  else if (coef->ndim != 2 && coef->ndim != 3)
    no = "not a 2D or 3D problem";
  else if (l->elem != 4 && l->elem != 8)
    no = "element size is neither 4 nor 8 bytes";
  else if (coef->ndim == 2 && l->n[2] != 1)
    no = "2D problem with more than one z cell";
  else if (coef->ndim == 3 && has_source)
    no = "a source term in 3D (the 3D cluster kernel has none)";
  if (no && why && len)
    snprintf(why, len, "%s", no);
  return no == NULL;
}

/* Steps per launch and whether tier 3 beats tier 2, per problem class, from the H200
 * measurements of docs/cluster-kernel.md: the 2D warp-strip kernel does, and in 3D the
 * warp-row kernel (domains whose faces are periodic or homogeneous, which it runs as halo
 * faces); the 3D cluster pipeline (inhomogeneous Dirichlet faces) does not. */
extern "C" int cluster_heat_default(int ndim, int elem, int radius, int has_source,
                                    int inhomogeneous, int *steps, int *recommended, char *why,
                                    size_t len)
{
  struct layout l;
  const int64_t n[3] = {8, 8, ndim == 3 ? 8 : 1};
  const int halo[3] = {1, 1, ndim == 3 ? 1 : 0};
  layout_init(&l, n, halo, elem);
  struct stencil_coef c;
  memset(&c, 0, sizeof c);
  c.ndim = ndim;
  c.radius = radius;
  *steps = 0;
  *recommended = 0;
  if (!cluster_heat_supported(&l, &c, has_source, why, len))
    return 0;
  *steps = ndim == 2 ? strip_default_steps(elem) : TILE3D_MAX_STEPS; /* 3D: the largest T built */
  *recommended = ndim == 2 || !inhomogeneous;
  return 1;
}

/* Steps per launch the ghost layers allow: T <= halo on every axis with a halo face. */
static int cl_halo_steps(const struct layout *l, const struct cluster_faces *f, int ndim)
{
  int most = CLUSTER_MAX_STEPS;
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++)
      if (f->kind[a][s] == CLUSTER_FACE_HALO && l->halo[a] < most)
        most = l->halo[a];
  return most;
}

static void cl_grid_of(struct cluster_plan *pl)
{
  const struct layout *l = &pl->lay;
  const int is3 = pl->ndim == 3;
  const int64_t nx = l->n[0], nw = is3 ? l->n[1] : 1, ns = is3 ? l->n[2] : l->n[1];
  const int64_t tx = (int64_t)pl->tile[0] * pl->cluster[0];
  const int64_t tw = (int64_t)pl->tile[1] * pl->cluster[1];
  pl->grid[0] = (nx + tx - 1) / tx * pl->cluster[0];
  pl->grid[1] = (nw + tw - 1) / tw * pl->cluster[1];
  pl->grid[2] = (ns + pl->chunk - 1) / pl->chunk;
}

/* Default shapes and T: the fastest measured on an H200 (docs/cluster-kernel.md, run 2:
 * 3D T4 1x1 32x16 304 (fp32) and 149 (fp64) Gpts/s; 2D T3 cluster 8 526 and 280 Gpts/s). */
static void cl_default_shape(int ndim, int elem, struct cluster_config *s)
{
  memset(s, 0, sizeof *s);
  if (ndim == 3) {
    s->steps = 4;
    s->tile[0] = 32;
    s->tile[1] = 16;
    s->cluster[0] = 1;
    s->cluster[1] = 1;
    s->chunk = 64;
    s->rows = 1;
  } else {
    s->steps = 3;
    s->tile[0] = elem == 4 ? 1024 : 512;
    s->tile[1] = 1;
    s->cluster[0] = 8;
    s->cluster[1] = 1;
    s->chunk = 256;
    s->rows = 1;
  }
}

/* Fraction of extra cell updates and extra loads over a launch of T steps, from the exact
 * regions of every CTA of one s-layer (x, w) and one s-chunk. */
static void cl_redundancy(const struct cluster_plan *pl, int T, double *upd, double *load)
{
  const struct layout *l = &pl->lay;
  const int is3 = pl->ndim == 3;
  const int64_t n[3] = {l->n[0], is3 ? l->n[1] : 1, is3 ? l->n[2] : l->n[1]};
  const int64_t len[3] = {pl->tile[0], is3 ? pl->tile[1] : 1, pl->chunk};
  const int cd[2] = {pl->cluster[0], is3 ? pl->cluster[1] : 1};
  double useful = 0, work = 0, loads = 0;
  for (int64_t bw = 0; bw < pl->grid[1]; bw++)
    for (int64_t bx = 0; bx < pl->grid[0]; bx++) {
      /* An interior s-chunk when there is one (extended on both sides). */
      const int64_t org[3] = {bx * len[0], bw * len[1], pl->grid[2] > 2 ? len[2] : 0};
      if (org[0] >= n[0] || org[1] >= n[1])
        continue;
      const int r[2] = {(int)(bx % cd[0]), (int)(bw % cd[1])};
      double own = 1, lvl[CLUSTER_MAX_STEPS + 1];
      for (int t = 0; t <= T; t++)
        lvl[t] = 1;
      for (int a = 0; a < 3; a++) {
        const int64_t alo = org[a], ahi = org[a] + len[a] < n[a] ? org[a] + len[a] : n[a];
        int elo = 1, ehi = 1;
        if (a < 2) {
          elo = !(alo > 0 && r[a] > 0);
          ehi = !(org[a] + len[a] < n[a] && r[a] < cd[a] - 1);
          if (a == 1 && !is3)
            elo = ehi = 0;
        }
        own *= (double)(ahi - alo);
        for (int t = 0; t <= T; t++) {
          int64_t lo = elo ? alo - (T - t) : alo, hi = ehi ? ahi + (T - t) : ahi;
          const int ax = a == 0 ? 0 : a == 1 ? (is3 ? 1 : -1) : (is3 ? 2 : 1);
          if (ax >= 0 && pl->faces.kind[ax][0] != CLUSTER_FACE_HALO && lo < 0)
            lo = 0;
          if (ax >= 0 && pl->faces.kind[ax][1] != CLUSTER_FACE_HALO && hi > n[a])
            hi = n[a];
          lvl[t] *= (double)(hi - lo);
        }
      }
      useful += own * T;
      for (int t = 1; t <= T; t++)
        work += lvl[t];
      loads += lvl[0];
    }
  /* The s-chunks: the same ratio per chunk of an interior layer, approximately. */
  *upd = useful > 0 ? work / useful : 1;
  *load = useful > 0 ? loads / (useful / T) : 1;
}

/* The kernel of a plan at T steps, its shared-memory and cluster-size attributes set, and its
 * launch configuration (grid, block, shared memory, the cluster dimension in *attr). */
static int cl_setup(const struct cluster_plan *pl, int T, cl_entry *e, cudaLaunchConfig_t *cfg,
                    cudaLaunchAttribute *attr)
{
  *e = cl_lookup(pl->ndim, pl->elem, T, pl->rows);
  if (!e->kernel)
    return cl_fail("no kernel instantiated for T = %d with %d rows per step", T, pl->rows);
  const size_t smem = cluster_heat_smem(pl, T);
  CL_CHECK_CUDA(
      cudaFuncSetAttribute(e->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  if (pl->cluster[0] * pl->cluster[1] > 8)
    CL_CHECK_CUDA(
        cudaFuncSetAttribute(e->kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  memset(cfg, 0, sizeof *cfg);
  cfg->gridDim = dim3((unsigned)pl->grid[0], (unsigned)pl->grid[1], (unsigned)pl->grid[2]);
  cfg->blockDim = dim3((unsigned)cluster_heat_threads(pl, T));
  cfg->dynamicSmemBytes = smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = pl->cluster[0];
  attr->val.clusterDim.y = pl->cluster[1];
  attr->val.clusterDim.z = 1;
  cfg->attrs = attr;
  cfg->numAttrs = 1;
  return 0;
}

static int cl_occupancy(const struct cluster_plan *pl, int T, int *clusters)
{
  cl_entry e;
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  if (cl_setup(pl, T, &e, &cfg, &attr))
    return 1;
  int n = 0;
  cudaError_t err = cudaOccupancyMaxActiveClusters(&n, e.kernel, &cfg);
  if (err != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  *clusters = n;
  return 0;
}

extern "C" int cluster_heat_plan(const struct layout *l, const struct stencil_coef *coef,
                                 int has_source, const struct cluster_faces *faces,
                                 const struct cluster_config *want, int device,
                                 struct cluster_plan *pl)
{
  char why[160];
  if (!cluster_heat_supported(l, coef, has_source, why, sizeof why))
    return cl_fail("%s", why);
  memset(pl, 0, sizeof *pl);
  pl->ndim = coef->ndim;
  pl->elem = l->elem;
  pl->radius = 1;
  pl->lay = *l;
  pl->coef = *coef;
  pl->faces = *faces;
  pl->has_source = has_source;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      if (a >= pl->ndim)
        pl->faces.kind[a][s] = CLUSTER_FACE_HALO;
      if (pl->faces.kind[a][s] != CLUSTER_FACE_HALO || a >= pl->ndim)
        pl->faces.read[a][s] = CLUSTER_READ_MEMORY;
    }
  const int V = 16 / l->elem;
  struct cluster_config d;
  cl_default_shape(pl->ndim, l->elem, &d);
  const struct cluster_config zero = {0, {0, 0}, {0, 0}, 0, 0, 0, 0};
  if (!want)
    want = &zero;
  if (pl->ndim == 2 && want->strip >= 0)
    return strip_plan(pl, want, cl_halo_steps(l, &pl->faces, 2), device);
  /* 3D: the warp-row kernel (with its clusters) unless the pipeline or one of its own shapes
   * is asked for, or a face reflects or the rows are not aligned (then the pipeline) */
  const int pipeline_shape = want->tile[0] || want->tile[1] || want->rows || want->no_cluster;
  if (pl->ndim == 3 && (want->strip > 0 || (want->strip == 0 && !pipeline_shape &&
                                            tile3d_usable(l, &pl->faces) && !has_source)))
    return tile3d_plan(pl, want, cl_halo_steps(l, &pl->faces, 3), device);
  if (has_source)
    return cl_fail("the cluster pipeline has no source term (use the warp-strip kernel)");
  pl->tile[0] = want->tile[0] ? want->tile[0] : d.tile[0];
  pl->tile[1] = pl->ndim == 2 ? 1 : want->tile[1] ? want->tile[1] : d.tile[1];
  pl->cluster[0] = want->cluster[0] ? want->cluster[0] : d.cluster[0];
  pl->cluster[1] = pl->ndim == 2 ? 1 : want->cluster[1] ? want->cluster[1] : d.cluster[1];
  if (want->no_cluster)
    pl->cluster[0] = pl->cluster[1] = 1;
  pl->chunk = want->chunk ? want->chunk : d.chunk;
  pl->rows = want->rows ? want->rows : d.rows;
  if (pl->tile[0] < V || pl->tile[0] % V)
    return cl_fail("tile x = %d is not a positive multiple of %d cells", pl->tile[0], V);
  if (pl->tile[1] < 1 || pl->chunk < 1)
    return cl_fail("tile y = %d, chunk = %d: need >= 1", pl->tile[1], pl->chunk);
  const int csize = pl->cluster[0] * pl->cluster[1];
  if (pl->cluster[0] < 1 || pl->cluster[1] < 1 || csize > 16)
    return cl_fail("cluster %d x %d: need 1..16 CTAs", pl->cluster[0], pl->cluster[1]);
  if (pl->rows != 1 && pl->rows != 2)
    return cl_fail("rows per step = %d: 1 or 2 are built", pl->rows);
  cl_grid_of(pl);
  if (pl->grid[1] > 65535 || pl->grid[2] > 65535)
    return cl_fail("grid %lld x %lld x %lld CTAs is too large; use larger tiles or chunks",
                   (long long)pl->grid[0], (long long)pl->grid[1], (long long)pl->grid[2]);
  const int tmax_halo = cl_halo_steps(l, &pl->faces, pl->ndim);
  const int tmax = cl_max_steps(pl->rows) < tmax_halo ? cl_max_steps(pl->rows) : tmax_halo;
  if (tmax < 1)
    return cl_fail("the block has no ghost layer on a halo face: tier 3 needs halo >= 1");
  if (want->steps > tmax)
    return cl_fail("--steps-per-launch %d exceeds %d (the halo width or the kernels built)",
                   want->steps, tmax);

  int sms = 0, smem_optin = 0;
  if (device >= 0) {
    CL_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CL_CHECK_CUDA(
        cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  }
  pl->sms = sms;
  const int default_shape = !want->tile[0] && !want->tile[1] && !want->cluster[0] &&
                            !want->cluster[1] && !want->chunk && !want->rows && !want->no_cluster;
  int T = want->steps;
  if (T > 0) {
    snprintf(pl->why, sizeof pl->why, "T = %d requested", T);
  } else {
    /* From the device. Default shape: the measured-best T, lowered until the CTA fits
     * (threads, shared memory) and the device holds at least one CTA per SM
     * (cudaOccupancyMaxActiveClusters). Another shape: the largest T that fits with at
     * least two CTAs per SM while redundant updates stay under 40%. */
    pl->auto_steps = 1;
    const int start = default_shape && d.steps < tmax ? d.steps : tmax;
    const int per_sm = default_shape ? 1 : 2;
    T = 1;
    for (int t = start; t >= 1; t--) {
      const size_t smem = cluster_heat_smem(pl, t);
      const int threads = cluster_heat_threads(pl, t);
      double upd, load;
      cl_redundancy(pl, t, &upd, &load);
      if (threads > CL_MAX_THREADS || (smem_optin && smem > (size_t)smem_optin))
        continue;
      if (!default_shape && upd > 1.4)
        continue;
      int clusters = 0;
      if (device >= 0 && cl_occupancy(pl, t, &clusters) == 0 && clusters * csize < per_sm * sms)
        continue;
      T = t;
      snprintf(pl->why, sizeof pl->why,
               "T = %d from the device (%s): %d SMs, %d clusters of %d resident, %.0f%% "
               "redundant updates, %.2f loads per point",
               t, default_shape ? "measured-best shape" : "requested shape", sms, clusters, csize,
               100 * (upd - 1), load);
      break;
    }
  }
  pl->steps = T;
  cl_redundancy(pl, T, &pl->redundant, &pl->loads);
  pl->threads = cluster_heat_threads(pl, T);
  pl->smem_bytes = cluster_heat_smem(pl, T);
  if (pl->threads > CL_MAX_THREADS)
    return cl_fail("%d threads per CTA at T = %d exceed %d; use a smaller tile", pl->threads, T,
                   CL_MAX_THREADS);
  if (smem_optin && pl->smem_bytes > (size_t)smem_optin)
    return cl_fail("%zu bytes of shared memory per CTA at T = %d exceed the device's %d",
                   pl->smem_bytes, T, smem_optin);
  if (device >= 0 && cl_occupancy(pl, T, &pl->active_clusters))
    return 1;
  if (device >= 0 && pl->active_clusters < 1)
    return cl_fail("a cluster of %d CTAs (%d threads, %zu bytes shared memory) does not fit on "
                   "the device",
                   csize, pl->threads, pl->smem_bytes);
  return 0;
}

template <typename REAL>
static int cl_launch_t(const struct cluster_plan *pl, const void *u, void *v, int T, void *stream)
{
  cl_entry e;
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  if (cl_setup(pl, T, &e, &cfg, &attr))
    return 1;
  clp<REAL> p;
  cl_params_of<REAL>(pl, u, v, T, &p);
  p.poison = getenv("STENCIL_CLUSTER_POISON") != NULL;
  p.nt = (int)cfg.blockDim.x;
  cfg.stream = (cudaStream_t)stream;
  cfg.numAttrs = pl->cluster[0] * pl->cluster[1] > 1 ? 1 : 0;
  void *args[] = {&p};
  CL_CHECK_CUDA(cudaLaunchKernelExC(&cfg, e.kernel, args));
  CL_CHECK_CUDA(cudaGetLastError());
  return 0;
}

extern "C" int cluster_heat_launch(const struct cluster_plan *pl, const void *u, const void *f,
                                   void *v, int steps, void *stream)
{
  if (steps < 1 || steps > pl->steps)
    return cl_fail("launch of %d steps with a plan of %d", steps, pl->steps);
  if ((f != NULL) != (pl->has_source != 0))
    return cl_fail("the plan was made %s a source field, the launch passes %s",
                   pl->has_source ? "with" : "without", f ? "one" : "none");
  if (pl->strip)
    return pl->ndim == 3 ? tile3d_launch(pl, u, v, steps, 0, pl->lay.n[2], stream)
                         : strip_launch(pl, u, f, v, steps, stream);
  return pl->elem == 8 ? cl_launch_t<double>(pl, u, v, steps, stream)
                       : cl_launch_t<float>(pl, u, v, steps, stream);
}

extern "C" int cluster_heat_splits_z(const struct cluster_plan *pl)
{
  return pl->strip && pl->ndim == 3 && !pl->has_source &&
         pl->faces.read[2][0] != CLUSTER_READ_WRAP && pl->faces.read[2][1] != CLUSTER_READ_WRAP;
}

extern "C" int cluster_heat_launch_planes(const struct cluster_plan *pl, const void *u, void *v,
                                          int steps, int64_t z0, int64_t z1, void *stream)
{
  if (!cluster_heat_splits_z(pl))
    return cl_fail("launches of plane ranges need a 3D warp-row plan not wrapped along z");
  return tile3d_launch(pl, u, v, steps, z0, z1, stream);
}

extern "C" int cluster_heat_signals(const struct cluster_plan *pl, int faces)
{
  return cluster_heat_splits_z(pl) && tile3d_signals(pl, faces);
}

extern "C" int cluster_heat_launch_signal(const struct cluster_plan *pl, const void *u, void *v,
                                          int steps, int faces, unsigned *counter, unsigned *count,
                                          void *stream)
{
  if (!cluster_heat_signals(pl, 0))
    return cl_fail("signalled launches need a 3D warp-row plan not wrapped along z, its "
                   "chunks longer than the planes sent");
  return tile3d_launch_signal(pl, u, v, steps, faces, counter, count, stream);
}

extern "C" int cluster_heat_launch_residual(const struct cluster_plan *pl, const void *u,
                                            const void *f, void *v, int steps, unsigned mask,
                                            double *scratch, double *sums, void *stream)
{
  if (!pl->strip || pl->ndim != 2)
    return cl_fail("residuals inside a launch need the warp-strip kernel (2D)");
  if (steps < 1 || steps > pl->steps)
    return cl_fail("launch of %d steps with a plan of %d", steps, pl->steps);
  if ((f != NULL) != (pl->has_source != 0))
    return cl_fail("the plan was made %s a source field, the launch passes %s",
                   pl->has_source ? "with" : "without", f ? "one" : "none");
  return strip_launch_residual(pl, u, f, v, steps, mask, scratch, sums, stream);
}

extern "C" int cluster_heat_residual_steps(const struct cluster_plan *pl)
{
  if (!pl->strip || pl->ndim != 2)
    return 0;
  const int most = CLUSTER_RESIDUAL_STEPS(pl->elem);
  return pl->steps < most ? pl->steps : most;
}

extern "C" size_t cluster_heat_scratch(const struct cluster_plan *pl)
{
  return pl->strip && pl->ndim == 2 ? strip_scratch(pl) : 0;
}

template <typename REAL>
static int cl_emulate_p(const struct cluster_plan *pl, const void *u, void *v, int T)
{
  const cl_entry e = cl_lookup(pl->ndim, pl->elem, T, pl->rows);
  if (!e.emulate)
    return cl_fail("no kernel instantiated for T = %d with %d rows per step", T, pl->rows);
  clp<REAL> p;
  cl_params_of<REAL>(pl, u, v, T, &p);
  p.nt = cluster_heat_threads(pl, T);
  return e.emulate(&p, pl->grid, p.nt);
}

extern "C" int cluster_heat_emulate(const struct cluster_plan *pl, const void *u, void *v,
                                    int steps)
{
  if (steps < 1 || steps > pl->steps)
    return cl_fail("emulation of %d steps with a plan of %d", steps, pl->steps);
  if (pl->strip)
    return cl_fail("the warp-strip kernel has no host emulation (warp shuffles)");
  return pl->elem == 8 ? cl_emulate_p<double>(pl, u, v, steps)
                       : cl_emulate_p<float>(pl, u, v, steps);
}

extern "C" void cluster_heat_describe(const struct cluster_plan *pl, char *buf, size_t len)
{
  if (pl->strip && pl->ndim == 3) {
    char clu[64] = "no clusters";
    if (pl->cluster[0] * pl->cluster[1] > 1)
      snprintf(clu, sizeof clu, "clusters of %dx%d CTAs%s (DSMEM)", pl->cluster[0], pl->cluster[1],
               pl->xspan ? " spanning x" : "");
    char first[64] = "", narrow[96] = "";
    if (pl->chunk0 != pl->chunk) { /* and in a launch in parts (an end rank's inner part) */
      int a, b;
      const int kept = cl_range_chunks(pl->lay.n[2], pl->chunk0, pl->chunk, pl->chunk_waves,
                                       pl->grid[0] * pl->grid[1], pl->steps, pl->active_clusters,
                                       pl->lay.n[2] - pl->lay.halo[2], &a, &b);
      snprintf(first, sizeof first, " (the first %d; %s in split launches)", pl->chunk0,
               kept ? "shortened" : "equal");
    }
    if (pl->seg_lanes)
      snprintf(narrow, sizeof narrow, " (the last column: warps of %d segments of %d lanes)",
               32 / pl->seg_lanes, pl->seg_lanes);
    char by[128] = "";
    if (pl->by_tile[1])
      snprintf(by, sizeof by,
               "; whole launches by tile: %d of %lld tiles in one chunk, the rest in %d of %d "
               "planes",
               pl->by_tile[0], (long long)(pl->grid[0] * pl->grid[1]), pl->by_tile[1],
               pl->by_tile[2]);
    snprintf(buf, len,
             "warp rows, T=%d, %s, CTA tiles of %d columns x %d rows (%d warps x %d), storing "
             "%d x %d per %s%s, chunks of %d planes%s%s, %zu B smem, %d CTAs of %d threads "
             "resident%s",
             pl->steps, clu, TILE3D_BX(pl->elem), TILE3D_WARPS * pl->rows, TILE3D_WARPS, pl->rows,
             pl->tile[0], pl->tile[1], pl->cluster[0] * pl->cluster[1] > 1 ? "cluster" : "CTA",
             narrow, pl->chunk, first, by, pl->smem_bytes, pl->active_clusters, pl->threads,
             pl->reads_faces ? ", faces and wraps read through in the kernel" : "");
  } else if (pl->strip) {
    char res[48] = "";
    if (pl->chunk_res != pl->chunk)
      snprintf(res, sizeof res, " (%d with residual sums)", pl->chunk_res);
    snprintf(buf, len,
             "warp strips, T=%d, %d of %d columns stored per strip, chunk %d rows%s, %d CTAs of "
             "%d threads resident",
             pl->steps, pl->tile[0], 32 * STRIP_V, pl->chunk, res, pl->active_clusters,
             pl->threads);
  } else if (pl->ndim == 3)
    snprintf(buf, len,
             "T=%d cluster %dx%d tile %dx%d chunk %d rows %d, %d threads, %zu B smem, %d "
             "clusters resident",
             pl->steps, pl->cluster[0], pl->cluster[1], pl->tile[0], pl->tile[1], pl->chunk,
             pl->rows, pl->threads, pl->smem_bytes, pl->active_clusters);
  else
    snprintf(buf, len,
             "T=%d cluster %d tile %d chunk %d rows %d, %d threads, %zu B smem, %d clusters "
             "resident",
             pl->steps, pl->cluster[0], pl->tile[0], pl->chunk, pl->rows, pl->threads,
             pl->smem_bytes, pl->active_clusters);
}

extern "C" int cluster_heat_attributes(const struct cluster_plan *pl, int steps, int *regs,
                                       int *local_bytes)
{
  if (pl->strip)
    return pl->ndim == 3 ? tile3d_attributes(pl, steps, regs, local_bytes)
                         : strip_attributes(pl, steps, regs, local_bytes);
  const cl_entry e = cl_lookup(pl->ndim, pl->elem, steps, pl->rows);
  if (!e.kernel)
    return cl_fail("no kernel instantiated for T = %d with %d rows per step", steps, pl->rows);
  cudaFuncAttributes a;
  CL_CHECK_CUDA(cudaFuncGetAttributes(&a, e.kernel));
  *regs = a.numRegs;
  *local_bytes = (int)a.localSizeBytes;
  return 0;
}
