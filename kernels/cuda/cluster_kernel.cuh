#pragma once
/* Tier 3 internals: the kernel template, the per-thread code it shares with the host
 * emulation, and the table of instantiations. Included by cluster.cu (host side) and by
 * cluster_f32.cu / cluster_f64.cu (the instantiations). The algorithm is described in
 * cluster.cu and docs/cluster-kernel.md. */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <limits>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cluster.h"

namespace cg = cooperative_groups;

#define CL_HD __host__ __device__ __forceinline__
#define CL_MAX_THREADS 512 /* __launch_bounds__: caps registers at 128 per thread */

/* ---- errors ------------------------------------------------------------------------------ */

/* Print "stencil: error: cluster kernel: ..." on stderr and return 1 (cluster.cu). */
int cl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* T of a warp-strip or warp-row plan: the requested one, or the measured best (`best`)
 * capped by the halo and the kernels built (`built`); pl->steps, auto_steps and why. */
int cl_plan_steps(struct cluster_plan *pl, const struct cluster_config *want, int tmax_halo,
                  int built, int best);
/* Pipeline iterations of a CTA or warp on `planes` planes (rows): with the fill of 2T,
 * rounded up to the unroll of 3. */
int64_t cl_iterations(int64_t planes, int T);
/* The chunk (rows or planes per CTA or warp) of a kernel whose `tiles` x ceil(n / chunk)
 * equal work items run in waves of `resident`: the one that minimises waves x (chunk + 2T
 * of pipeline fill, rounded up to the unroll of 3), at least 4T; a partly empty last wave
 * costs a whole one. resident < 1: the smallest such chunk. */
int cl_wave_chunk(int64_t n, int64_t tiles, int T, int64_t resident);
/* The same model for CTAs dispatched chunk by chunk (the grid's slowest axis) to `resident`
 * slots as they free, where the first chunk takes what the others leave (*c0 = n - m *c planes,
 * then m chunks of *c): a long first chunk keeps the slots busy while the CTAs of the short ones
 * fill the last wave. Returns the modelled time in pipeline iterations of one slot for the
 * chunks that minimise it (each at least 4T, or cl_wave_chunk's equal chunks); resident < 1:
 * those equal chunks. cl_chunks_time models a first chunk of c0 planes, then chunks of c. */
int64_t cl_wave_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int *c0, int *c);
/* The first of n planes' chunks when the others take c each: what they leave (1..c for equal
 * chunks). The warp-row kernel places its chunks by this rule (tile3d.cuh). */
static inline int cl_first_chunk(int64_t n, int c)
{
  return (int)(n - (n - 1) / c * c);
}
int64_t cl_chunks_time(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c);
/* Chunks by tile: the first *whole tiles of a plane (the whole waves of `resident` slots that
 * leave some over) in one chunk of all n planes, dispatched first, then each of the others in
 * *pieces chunks of *c
 * (the first one what the others leave), which fill the last wave. Returns the model's time
 * (cl_chunks_time's slots) where that beats `uniform` (a launch's time in chunks the same for
 * every tile) by at least 1 %, else `uniform` with *pieces = 0. docs/cluster-kernel.md, "Chunks
 * by tile". */
int64_t cl_tile_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int64_t uniform,
                       int *whole, int *pieces, int *c);
/* The chunks of a launch on a range of nz of a block's n planes (the inner part of a launch
 * in parts), whose whole launches take c0 planes, then chunks of c, chosen by the waves
 * (cl_wave_chunks) where `waves` is set: where a plane's tiles outnumber the resident slots,
 * the plan's short chunks, the first one shortened by the planes left out (while it stays at
 * least c long: returns 1); else equal chunks, by the waves of the range where the plan's were
 * (returns 0, as for the whole block). Measured in docs/cluster-kernel.md, "The inner part's
 * chunks". */
int cl_range_chunks(int64_t n, int c0, int c, int waves, int64_t tiles, int T, int64_t resident,
                    int64_t nz, int *rc0, int *rc);
/* The same model for a signalled launch (tile3d_launch_signal: the last chunk dispatched
 * second): *tlo when the first chunk's CTAs have run `lo` iterations, *thi when the last
 * chunk's have ended; returns the launch's time (pipeline iterations of one slot). */
int64_t cl_signal_times(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c,
                        int64_t lo, int64_t *tlo, int64_t *thi);

#define CL_CHECK_CUDA(call)                                                                        \
  do {                                                                                             \
    cudaError_t cl_err_ = (call);                                                                  \
    if (cl_err_ != cudaSuccess)                                                                    \
      return cl_fail("CUDA call %s failed: %s (%s)", #call, cudaGetErrorName(cl_err_),             \
                     cudaGetErrorString(cl_err_));                                                 \
  } while (0)

/* ---- element traits and small helpers -------------------------------------------------- */

template <typename REAL> struct cl_traits;
template <> struct cl_traits<float> {
  enum { V = 4 };
  typedef float4 vec;
};
template <> struct cl_traits<double> {
  enum { V = 2 };
  typedef double2 vec;
};

CL_HD int64_t cl_floordiv(int64_t a, int64_t b)
{
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
CL_HD int64_t cl_ceildiv(int64_t a, int64_t b)
{
  return -cl_floordiv(-a, b);
}
CL_HD int64_t cl_min(int64_t a, int64_t b)
{
  return a < b ? a : b;
}
CL_HD int64_t cl_max(int64_t a, int64_t b)
{
  return a > b ? a : b;
}

/* ---- kernel parameters ----------------------------------------------------------------- */

template <typename REAL> struct clp {
  const REAL *u;      /* cell (0, 0, 0) of the input block */
  REAL *v;            /* same cell of the output block */
  int64_t n[3];       /* interior cells along x, w, s */
  int64_t sw, ss;     /* element strides of w and s (2D: sw = 0) */
  int64_t gmin, gmax; /* element offsets from u/v that lie inside the arrays (emulation) */
  int refl[3][2];     /* per face: 0 halo (computed into), 1 Dirichlet, 2 Neumann */
  REAL two_g[3][2];   /* (REAL)(2 g) of Dirichlet faces */
  REAL c0, cx, cw, cs;
  int tile_x, tile_w, chunk; /* CTA sub-tile and s-range */
  int cdx, cdw;              /* cluster dimensions */
  int pitch;                 /* rowbuf row length (cells) = tile_x + 2 xpr */
  int xpr;                   /* rowbuf: cells left of local x = 0 */
  int wp;                    /* rows above local w = 0 (3D: T; 2D: 0) */
  int nrows;                 /* tile_w + 2 wp */
  int goff;                  /* edge arrays: groups left of local group 0 */
  int egx;                   /* edge array length (groups) */
  int rowbuf;                /* elements of rowbuf per (level, slot, row); 0 in 2D */
  int le;                    /* elements per (level, slot, row), a multiple of V */
  int gvec;                  /* 16-byte global loads/stores are aligned */
  int ring;                  /* level-0 prefetch ring: offset in shared memory (elements) */
  int nt;                    /* threads per CTA */
  int poison;                /* fill shared memory with NaN first (checks) */
};

/* Per-CTA values (identical in every thread of the CTA). */
struct clc {
  int64_t alo[3], ahi[3]; /* owned cells per axis, global coordinates */
  int64_t org[3];         /* global coordinates of local (0, 0, 0) */
  int ext_lo[3], ext_hi[3];
  int push_lo[2], push_hi[2]; /* an x / w neighbour CTA of this cluster on that side */
  int empty;
  int rank;
  int c_first, nit;
  int s_alo, s_ahi, s_clo, s_chi; /* s: owned range; clip at reflecting faces (or +-2^30) */
  unsigned sgl, sgh;              /* bit l: level l writes the s ghost plane below 0 / at n_s */
};

/* s-range of level l (recomputed: cheaper than registers for every level). */
template <int T> CL_HD int cl_slo(const clc &c, int l)
{
  const int v = c.s_alo - (T - l);
  return v < c.s_clo ? c.s_clo : v;
}
template <int T> CL_HD int cl_shi(const clc &c, int l)
{
  const int v = c.s_ahi + (T - l);
  return v > c.s_chi ? c.s_chi : v;
}

/* Per-thread values. */
struct clt {
  int valid;
  int gx, w;      /* local group column and row */
  int64_t x0, wg; /* global x of the group's first cell, global w */
  int64_t goff_g; /* x0 + wg sw */
  int ebase, own; /* offsets in a (level, slot, row) block: own edge (side 0), own rowbuf */
  unsigned act;   /* bit l: the group intersects the region of level l */
  unsigned gxl, gxh, gxin, gwl, gwh; /* bit l: ghost writes at level l (see cl_publish) */
  unsigned ldm, stm; /* lane masks of the global load (level 0) and store (level T) */
  int ldfull, stfull;
  int pxm, pxp, pwm, pwp; /* DSMEM stores to the x-, x+, w-, w+ neighbour */
  unsigned spec;          /* bit l: any ghost write or DSMEM store at level l */
  int ring;               /* own slot of the prefetch ring (elements, chunk slot 0, row 0) */
};

template <typename REAL, int T, int R> struct cls {
  REAL last[T][cl_traits<REAL>::V];   /* level l: last plane of the chunk before cur */
  REAL cur[T][R][cl_traits<REAL>::V]; /* level l: the chunk produced in the last iteration */
};

/* Level 0 arrives through a ring of CL_RING chunks in shared memory, CL_DIST chunks ahead,
 * by cp.async (16-byte copies, L2 only): each thread copies and later reads back only its
 * own group, so no barrier is involved; cp.async.wait_group orders the copy and the read. */
#define CL_RING 8
#define CL_DIST 6

/* Region of level l along axis a: [cl_rlo, cl_rhi), global coordinates. */
template <int T, typename REAL> CL_HD int64_t cl_rlo(const clp<REAL> &p, const clc &c, int a, int l)
{
  if (!c.ext_lo[a])
    return c.alo[a];
  int64_t v = c.alo[a] - (T - l);
  return p.refl[a][0] && v < 0 ? 0 : v;
}
template <int T, typename REAL> CL_HD int64_t cl_rhi(const clp<REAL> &p, const clc &c, int a, int l)
{
  if (!c.ext_hi[a])
    return c.ahi[a];
  int64_t v = c.ahi[a] + (T - l);
  return p.refl[a][1] && v > p.n[a] ? p.n[a] : v;
}

template <typename REAL> CL_HD REAL cl_ghost(const clp<REAL> &p, int a, int side, REAL in)
{
  return p.refl[a][side] == 1 ? p.two_g[a][side] - in : in;
}

template <typename REAL> CL_HD REAL cl_nan();
template <> CL_HD float cl_nan<float>()
{
#ifdef __CUDA_ARCH__
  return __int_as_float(0x7fc00000);
#else
  return std::numeric_limits<float>::quiet_NaN();
#endif
}
template <> CL_HD double cl_nan<double>()
{
#ifdef __CUDA_ARCH__
  return __longlong_as_double(0x7ff8000000000000LL);
#else
  return std::numeric_limits<double>::quiet_NaN();
#endif
}

/* ---- shared-memory access: plain on the device, checked in the host emulation ---------- */

struct cl_shadow {
  const char *base;
  size_t elem, count;
  int *wr_ep, *wr_id, *rd_ep, *rd_id;
  int epoch, id;
  long races, oob;
  char first[400];
};
static cl_shadow *cl_sh; /* host emulation only (single-threaded), per translation unit */

static inline void cl_sh_access(const void *ptr, int n, int write)
{
  cl_shadow *s = cl_sh;
  if (!s)
    return;
  const ptrdiff_t off = (const char *)ptr - s->base;
  for (int i = 0; i < n; i++) {
    const ptrdiff_t e = off / (ptrdiff_t)s->elem + i;
    if (off < 0 || e >= (ptrdiff_t)s->count) {
      if (s->oob++ == 0 && s->races == 0)
        snprintf(s->first, sizeof s->first, "shared-memory index %td outside [0, %zu) by thread %d",
                 e, s->count, s->id);
      return;
    }
    const char *kind = NULL;
    int other = -1;
    if (write) {
      if (s->wr_ep[e] == s->epoch && s->wr_id[e] != s->id)
        kind = "write after write", other = s->wr_id[e];
      else if (s->rd_ep[e] == s->epoch && s->rd_id[e] != s->id)
        kind = "write after read", other = s->rd_id[e];
      s->wr_ep[e] = s->epoch;
      s->wr_id[e] = s->id;
    } else {
      if (s->wr_ep[e] == s->epoch && s->wr_id[e] != s->id)
        kind = "read after write", other = s->wr_id[e];
      if (s->rd_ep[e] == s->epoch && s->rd_id[e] != s->id)
        s->rd_id[e] = -2;
      else
        s->rd_id[e] = s->id;
      s->rd_ep[e] = s->epoch;
    }
    if (kind && s->races++ == 0 && s->oob == 0)
      snprintf(s->first, sizeof s->first,
               "%s on shared-memory word %td between barriers %d and %d: thread %d after thread "
               "%d (-2: several)",
               kind, e, s->epoch, s->epoch + 1, s->id, other);
  }
}

static int64_t cl_g_lo, cl_g_hi; /* emulation: allowed global offsets */
static long cl_g_oob;
static inline void cl_g_check(int64_t off, int n)
{
  if (off < cl_g_lo || off + n > cl_g_hi)
    cl_g_oob++;
}

template <typename REAL> CL_HD REAL sm_ld(const REAL *p)
{
#ifndef __CUDA_ARCH__
  cl_sh_access(p, 1, 0);
#endif
  return *p;
}
template <typename REAL> CL_HD void sm_st(REAL *p, REAL x)
{
#ifndef __CUDA_ARCH__
  cl_sh_access(p, 1, 1);
#endif
  *p = x;
}
template <typename REAL> CL_HD void sm_ldv(const REAL *p, REAL (&o)[cl_traits<REAL>::V])
{
  typedef typename cl_traits<REAL>::vec VT;
#ifndef __CUDA_ARCH__
  cl_sh_access(p, cl_traits<REAL>::V, 0);
#endif
  const VT t = *reinterpret_cast<const VT *>(p);
  const REAL *q = reinterpret_cast<const REAL *>(&t);
#pragma unroll
  for (int k = 0; k < cl_traits<REAL>::V; k++)
    o[k] = q[k];
}
template <typename REAL> CL_HD void sm_stv(REAL *p, const REAL (&x)[cl_traits<REAL>::V])
{
  typedef typename cl_traits<REAL>::vec VT;
#ifndef __CUDA_ARCH__
  cl_sh_access(p, cl_traits<REAL>::V, 1);
#endif
  VT t;
  REAL *q = reinterpret_cast<REAL *>(&t);
#pragma unroll
  for (int k = 0; k < cl_traits<REAL>::V; k++)
    q[k] = x[k];
  *reinterpret_cast<VT *>(p) = t;
}

/* Global memory: u (read-only) and v. off is relative to the interior origin. */
template <typename REAL>
CL_HD void g_ldv(const clp<REAL> &p, int64_t off, REAL (&o)[cl_traits<REAL>::V])
{
  typedef typename cl_traits<REAL>::vec VT;
#ifdef __CUDA_ARCH__
  const VT t = __ldg(reinterpret_cast<const VT *>(p.u + off));
#else
  cl_g_check(off, cl_traits<REAL>::V);
  const VT t = *reinterpret_cast<const VT *>(p.u + off);
#endif
  const REAL *q = reinterpret_cast<const REAL *>(&t);
#pragma unroll
  for (int k = 0; k < cl_traits<REAL>::V; k++)
    o[k] = q[k];
}
template <typename REAL> CL_HD REAL g_ld(const clp<REAL> &p, int64_t off)
{
#ifdef __CUDA_ARCH__
  return __ldg(p.u + off);
#else
  cl_g_check(off, 1);
  return p.u[off];
#endif
}
template <typename REAL>
CL_HD void g_stv(const clp<REAL> &p, int64_t off, const REAL (&x)[cl_traits<REAL>::V])
{
  typedef typename cl_traits<REAL>::vec VT;
#ifndef __CUDA_ARCH__
  cl_g_check(off, cl_traits<REAL>::V);
#endif
  VT t;
  REAL *q = reinterpret_cast<REAL *>(&t);
#pragma unroll
  for (int k = 0; k < cl_traits<REAL>::V; k++)
    q[k] = x[k];
  *reinterpret_cast<VT *>(p.v + off) = t;
}
template <typename REAL> CL_HD void g_st(const clp<REAL> &p, int64_t off, REAL x)
{
#ifndef __CUDA_ARCH__
  cl_g_check(off, 1);
#endif
  p.v[off] = x;
}

/* ---- set-up of a CTA and of a thread --------------------------------------------------- */

template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_cta_init(const clp<REAL> &p, int64_t bx, int64_t bw, int64_t bs, clc &c)
{
  const int rx = (int)(bx % p.cdx), rw = (int)(bw % p.cdw);
  c.rank = rx + rw * p.cdx;
  c.org[0] = bx * p.tile_x;
  c.org[1] = NDIM == 3 ? bw * p.tile_w : 0;
  c.org[2] = bs * p.chunk;
  c.empty = c.org[0] >= p.n[0] || c.org[1] >= p.n[1];
  for (int a = 0; a < 3; a++) {
    const int64_t len = a == 0 ? p.tile_x : a == 1 ? p.tile_w : p.chunk;
    c.alo[a] = c.org[a];
    c.ahi[a] = cl_min(c.org[a] + len, p.n[a]);
  }
  /* x: a neighbour CTA of this cluster with cells of its own, or else an extended side. */
  c.push_lo[0] = c.org[0] > 0 && rx > 0;
  c.push_hi[0] = c.org[0] + p.tile_x < p.n[0] && rx < p.cdx - 1;
  if (NDIM == 3) {
    c.push_lo[1] = c.org[1] > 0 && rw > 0;
    c.push_hi[1] = c.org[1] + p.tile_w < p.n[1] && rw < p.cdw - 1;
  } else {
    c.push_lo[1] = c.push_hi[1] = 0;
  }
  for (int a = 0; a < 2; a++) {
    c.ext_lo[a] = NDIM == 3 || a == 0 ? !c.push_lo[a] : 0;
    c.ext_hi[a] = NDIM == 3 || a == 0 ? !c.push_hi[a] : 0;
  }
  c.ext_lo[2] = c.ext_hi[2] = 1;
  c.s_alo = (int)c.alo[2];
  c.s_ahi = (int)c.ahi[2];
  c.s_clo = p.refl[2][0] ? 0 : -(1 << 30);
  c.s_chi = p.refl[2][1] ? (int)p.n[2] : 1 << 30;
  c.sgl = c.sgh = 0;
  for (int l = 0; l < T; l++) {
    if (p.refl[2][0] && cl_slo<T>(c, l + 1) == 0)
      c.sgl |= 1u << l;
    if (p.refl[2][1] && cl_shi<T>(c, l + 1) == p.n[2])
      c.sgh |= 1u << l;
  }
  c.c_first = (int)cl_floordiv(cl_slo<T>(c, 0) - 1, R);
  const int c_last = (int)cl_floordiv(cl_shi<T>(c, T) - 1, R);
  c.nit = c_last - c.c_first + T + 1;
}

/* Groups of the CTA's level-0 bounding box: core (the sub-tile) first, then the fringe. */
struct cl_bbox {
  int bgx0, bgx1, bw0, bw1, ngc, total;
};

template <typename REAL, int NDIM, int T>
CL_HD void cl_bbox_of(const clp<REAL> &p, const clc &c, cl_bbox &b)
{
  constexpr int V = cl_traits<REAL>::V;
  b.ngc = p.tile_x / V;
  if (c.empty) {
    b.bgx0 = b.bgx1 = b.bw0 = b.bw1 = b.total = 0;
    return;
  }
  b.bgx0 = (int)cl_min(0, cl_floordiv(cl_rlo<T>(p, c, 0, 0) - c.org[0], V));
  b.bgx1 = (int)cl_max(b.ngc, cl_ceildiv(cl_rhi<T>(p, c, 0, 0) - c.org[0], V));
  if (NDIM == 3) {
    b.bw0 = (int)cl_min(0, cl_rlo<T>(p, c, 1, 0) - c.org[1]);
    b.bw1 = (int)cl_max(p.tile_w, cl_rhi<T>(p, c, 1, 0) - c.org[1]);
  } else {
    b.bw0 = 0;
    b.bw1 = 1;
  }
  b.total = (b.bgx1 - b.bgx0) * (b.bw1 - b.bw0);
}

template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_thread_init(const clp<REAL> &p, const clc &c, int tid, clt &t)
{
  constexpr int V = cl_traits<REAL>::V;
  cl_bbox b;
  cl_bbox_of<REAL, NDIM, T>(p, c, b);
  const int tw = NDIM == 3 ? p.tile_w : 1;
  const int core = b.ngc * tw;
  t.valid = tid < b.total;
  t.gx = t.w = 0;
  if (tid < core) {
    t.gx = tid % b.ngc;
    t.w = tid / b.ngc;
  } else if (t.valid) {
    const int W = b.bgx1 - b.bgx0;
    const int top = -b.bw0 * W, bot = (b.bw1 - tw) * W;
    const int L = -b.bgx0, Rr = b.bgx1 - b.ngc;
    int f = tid - core;
    if (f < top) {
      t.w = b.bw0 + f / W;
      t.gx = b.bgx0 + f % W;
    } else if ((f -= top) < bot) {
      t.w = tw + f / W;
      t.gx = b.bgx0 + f % W;
    } else {
      f -= bot;
      t.w = f / (L + Rr);
      const int j = f % (L + Rr);
      t.gx = j < L ? b.bgx0 + j : b.ngc + (j - L);
    }
  }
  t.x0 = c.org[0] + (int64_t)t.gx * V;
  t.wg = c.org[1] + t.w;
  t.goff_g = t.x0 + t.wg * p.sw;
  t.ebase = p.rowbuf + (t.w + p.wp) * 2 * p.egx + t.gx + p.goff;
  t.own = (t.w + p.wp) * p.pitch + t.gx * V + p.xpr;
  t.act = t.gxl = t.gxh = t.gxin = t.gwl = t.gwh = 0;
  for (int l = 0; l <= T; l++) {
    const int64_t xlo = cl_rlo<T>(p, c, 0, l), xhi = cl_rhi<T>(p, c, 0, l);
    const int64_t wlo = cl_rlo<T>(p, c, 1, l), whi = cl_rhi<T>(p, c, 1, l);
    if (t.valid && t.wg >= wlo && t.wg < whi && t.x0 < xhi && t.x0 + V > xlo)
      t.act |= 1u << l;
    if (l == T)
      break;
    /* Ghost cells the next level needs: only where its region touches a reflecting face. */
    const int64_t nxlo = cl_rlo<T>(p, c, 0, l + 1), nxhi = cl_rhi<T>(p, c, 0, l + 1);
    if (p.refl[0][0] && t.x0 == 0 && nxlo == 0)
      t.gxl |= 1u << l;
    if (p.refl[0][1] && t.x0 + V == p.n[0] && nxhi == p.n[0])
      t.gxh |= 1u << l;
    if (p.refl[0][1] && t.x0 < p.n[0] && p.n[0] < t.x0 + V && nxhi == p.n[0])
      t.gxin |= 1u << l;
    if (NDIM == 3) {
      if (p.refl[1][0] && t.wg == 0 && cl_rlo<T>(p, c, 1, l + 1) == 0)
        t.gwl |= 1u << l;
      if (p.refl[1][1] && t.wg == p.n[1] - 1 && cl_rhi<T>(p, c, 1, l + 1) == p.n[1])
        t.gwh |= 1u << l;
    }
  }
  t.ldm = t.stm = 0;
  const int64_t xlo0 = cl_rlo<T>(p, c, 0, 0), xhi0 = cl_rhi<T>(p, c, 0, 0);
  const int64_t xloT = cl_rlo<T>(p, c, 0, T), xhiT = cl_rhi<T>(p, c, 0, T);
  for (int k = 0; k < V; k++) {
    if (t.x0 + k >= xlo0 && t.x0 + k < xhi0)
      t.ldm |= 1u << k;
    if (t.x0 + k >= xloT && t.x0 + k < xhiT)
      t.stm |= 1u << k;
  }
  t.ldfull = p.gvec && t.ldm == (1u << V) - 1;
  t.stfull = p.gvec && t.stm == (1u << V) - 1;
  t.pxm = c.push_lo[0] && t.gx == 0;
  t.pxp = c.push_hi[0] && t.gx == b.ngc - 1;
  t.pwm = NDIM == 3 && c.push_lo[1] && t.w == 0;
  t.pwp = NDIM == 3 && c.push_hi[1] && t.w == p.tile_w - 1;
  t.spec = t.gxl | t.gxh | t.gxin | t.gwl | t.gwh;
  if (t.pxm || t.pxp || t.pwm || t.pwp)
    t.spec = ~0u;
  t.ring = p.ring + tid * V;
}

/* ---- one pipeline step of one thread --------------------------------------------------- */

/* Offset of (level, slot of chunk ch) in shared memory. */
template <typename REAL, int R> CL_HD int cl_slot(const clp<REAL> &p, int l, int ch)
{
  return (l * 2 + (int)(ch & 1)) * R * p.le;
}

/* ---- level 0: cp.async ring ----------------------------------------------------------- */

/* Copy `bytes` (4, 8 or 16; valid = bytes or 0: zero fill) from global src to shared dst. */
template <int BYTES> CL_HD void cl_cp(void *dst, const void *src, int valid)
{
#ifdef __CUDA_ARCH__
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(BYTES),
                 "r"(valid)
                 : "memory");
#else
  cl_sh_access(dst, cl_sh ? (int)(BYTES / cl_sh->elem) : 1, 1);
  if (valid)
    memcpy(dst, src, BYTES);
  else
    memset(dst, 0, BYTES);
#endif
}

CL_HD void cl_cp_commit()
{
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N> CL_HD void cl_cp_wait()
{
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Issue the copies of chunk cc (planes cc R .. cc R + R - 1) of the group into its ring
 * slot; cells outside the level-0 region are zero-filled. One commit group per chunk. */
template <typename REAL, int T, int R>
CL_HD void cl_prefetch(const clp<REAL> &p, const clc &c, const clt &t, int cc, REAL *sm)
{
  constexpr int V = cl_traits<REAL>::V;
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int s = cc * R + r;
    REAL *dst = sm + t.ring + ((cc & (CL_RING - 1)) * R + r) * p.nt * V;
    const int in = (t.act & 1u) && s >= cl_slo<T>(c, 0) && s < cl_shi<T>(c, 0);
    const REAL *src = p.u + (in ? t.goff_g + (int64_t)s * p.ss : 0);
#ifndef __CUDA_ARCH__
    for (int k = 0; k < V; k++)
      if (in && (t.ldm >> k) & 1u)
        cl_g_check(t.goff_g + (int64_t)s * p.ss + k, 1);
#endif
    if (!in || t.ldfull) {
      cl_cp<16>(dst, src, in ? 16 : 0);
    } else {
#pragma unroll
      for (int k = 0; k < V; k++) {
        const int ok = (t.ldm >> k) & 1u;
        cl_cp<sizeof(REAL)>(dst + k, ok ? src + k : p.u, ok ? (int)sizeof(REAL) : 0);
      }
    }
  }
  cl_cp_commit();
}

/* Read chunk cc of the group back from its ring slot (after cl_cp_wait). */
template <typename REAL, int R>
CL_HD void cl_take(const clp<REAL> &p, const clt &t, int cc, const REAL *sm,
                   REAL (&o)[R][cl_traits<REAL>::V])
{
  constexpr int V = cl_traits<REAL>::V;
#pragma unroll
  for (int r = 0; r < R; r++)
    sm_ldv(sm + t.ring + ((cc & (CL_RING - 1)) * R + r) * p.nt * V, o[r]);
}

/* Level l (< T) produced chunk ch into v: apply the reflections, then publish it to shared
 * memory (own CTA and DSMEM neighbours) for level l + 1. prev = level l's previous chunk. */
template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_publish(const clp<REAL> &p, const clc &c, const clt &t, int l, int ch,
                      REAL (&v)[R][cl_traits<REAL>::V], const REAL (&prev)[R][cl_traits<REAL>::V],
                      REAL *sm, REAL *const *rem)
{
  constexpr int V = cl_traits<REAL>::V;
  if ((c.sgh >> l) & 1u) {
#pragma unroll
    for (int r = 0; r < R; r++)
      if (ch * R + r == p.n[2]) {
#pragma unroll
        for (int k = 0; k < V; k++)
          v[r][k] = cl_ghost(p, 2, 1, r > 0 ? v[r - 1][k] : prev[R - 1][k]);
      }
  }
  if (!((t.act >> l) & 1u))
    return;
  const int base = cl_slot<REAL, R>(p, l, ch);
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int s = ch * R + r;
    if (s < cl_slo<T>(c, l) || s >= cl_shi<T>(c, l))
      continue;
    if ((t.gxin >> l) & 1u) {
#pragma unroll
      for (int k = 1; k < V; k++)
        if (t.x0 + k == p.n[0])
          v[r][k] = cl_ghost(p, 0, 1, v[r][k - 1]);
    }
    const int o = base + r * p.le;
    REAL *row = sm + o;
    sm_st(row + t.ebase, v[r][0]);
    sm_st(row + t.ebase + p.egx, v[r][V - 1]);
    if (NDIM == 3)
      sm_stv(row + t.own, v[r]);
    if (!((t.spec >> l) & 1u))
      continue;
    if ((t.gxl >> l) & 1u)
      sm_st(row + t.ebase + p.egx - 1, cl_ghost(p, 0, 0, v[r][0]));
    if ((t.gxh >> l) & 1u)
      sm_st(row + t.ebase + 1, cl_ghost(p, 0, 1, v[r][V - 1]));
    if (NDIM == 3 && ((t.gwl >> l) & 1u)) {
      REAL g[V];
#pragma unroll
      for (int k = 0; k < V; k++)
        g[k] = cl_ghost(p, 1, 0, v[r][k]);
      sm_stv(row + t.own - p.pitch, g);
    }
    if (NDIM == 3 && ((t.gwh >> l) & 1u)) {
      REAL g[V];
#pragma unroll
      for (int k = 0; k < V; k++)
        g[k] = cl_ghost(p, 1, 1, v[r][k]);
      sm_stv(row + t.own + p.pitch, g);
    }
    /* DSMEM: our edge cells into the neighbours' halo cells (same level, slot and row). */
    if (t.pxm)
      sm_st(rem[0] + o + t.ebase + p.tile_x / V, v[r][0]);
    if (t.pxp)
      sm_st(rem[1] + o + t.ebase + p.egx - p.tile_x / V, v[r][V - 1]);
    if (NDIM == 3 && t.pwm)
      sm_stv(rem[2] + o + t.own + p.tile_w * p.pitch, v[r]);
    if (NDIM == 3 && t.pwp)
      sm_stv(rem[3] + o + t.own - p.tile_w * p.pitch, v[r]);
  }
}

/* Level l = (level l - 1 at chunk ch) advanced by one step:
 *   v = c0 u; v += cx (u[x-1] + u[x+1]); v += cw (u[w-1] + u[w+1]) (3D); v += cs (u[s-1] + u[s+1])
 * below/cur/above: level l - 1's planes in registers; x and w neighbours from shared memory. */
template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_update(const clp<REAL> &p, const clc &c, const clt &t, int l, int ch,
                     const REAL (&last)[cl_traits<REAL>::V],
                     const REAL (&cur)[R][cl_traits<REAL>::V],
                     const REAL (&above0)[cl_traits<REAL>::V], const REAL *sm,
                     REAL (&v)[R][cl_traits<REAL>::V])
{
  constexpr int V = cl_traits<REAL>::V;
  (void)c;
  const int base = cl_slot<REAL, R>(p, l - 1, ch);
#pragma unroll
  for (int r = 0; r < R; r++) {
    const REAL *row = sm + base + r * p.le;
    REAL xl = sm_ld(row + t.ebase + p.egx - 1);
#if defined(CLUSTER_INJECT_BUG) && CLUSTER_INJECT_BUG == 2
    /* Bug: read the neighbour CTA's edge cell from the slot it is filling in this very
     * step (the next chunk), i.e. one pipeline step early. */
    if (t.gx == 0 && c.push_lo[0])
      xl = sm_ld(sm + cl_slot<REAL, R>(p, l - 1, ch + 1) + r * p.le + t.ebase + p.egx - 1);
#endif
    const REAL xr = sm_ld(row + t.ebase + 1);
    REAL wl[V], wr[V];
    if (NDIM == 3) {
      sm_ldv(row + t.own - p.pitch, wl);
      sm_ldv(row + t.own + p.pitch, wr);
    }
#pragma unroll
    for (int k = 0; k < V; k++) {
      const REAL left = k > 0 ? cur[r][k - 1] : xl;
      const REAL right = k < V - 1 ? cur[r][k + 1] : xr;
      const REAL below = r > 0 ? cur[r - 1][k] : last[k];
      const REAL above = r < R - 1 ? cur[r + 1][k] : above0[k];
      REAL acc = p.c0 * cur[r][k];
      acc = stencil_fma(p.cx, left + right, acc);
      if (NDIM == 3)
        acc = stencil_fma(p.cw, wl[k] + wr[k], acc);
      acc = stencil_fma(p.cs, below + above, acc);
      v[r][k] = acc;
    }
  }
}

/* Level T: store chunk ch of the owned cells to v. */
template <typename REAL, int T, int R>
CL_HD void cl_store(const clp<REAL> &p, const clc &c, const clt &t, int ch,
                    const REAL (&v)[R][cl_traits<REAL>::V])
{
  constexpr int V = cl_traits<REAL>::V;
  if (!((t.act >> T) & 1u))
    return;
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int s = ch * R + r;
    if (s < cl_slo<T>(c, T) || s >= cl_shi<T>(c, T))
      continue;
    const int64_t off = t.goff_g + s * p.ss;
    if (t.stfull) {
      g_stv(p, off, v[r]);
    } else {
#pragma unroll
      for (int k = 0; k < V; k++)
        if ((t.stm >> k) & 1u)
          g_st(p, off + k, v[r][k]);
    }
  }
}

/* Pipeline step `it` of one thread: level l handles chunk c_first + it - l.
 * Head: prefetch chunk c0 + CL_DIST, wait for chunk c0 and take it (thread-private). */
template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_head(const clp<REAL> &p, const clc &c, const clt &t, int it, REAL *sm,
                   REAL (&nw0)[R][cl_traits<REAL>::V])
{
  const int c0 = c.c_first + it;
  cl_prefetch<REAL, T, R>(p, c, t, c0 + CL_DIST, sm);
  cl_cp_wait<CL_DIST>();
  cl_take<REAL, R>(p, t, c0, sm, nw0);
}

/* Body: levels 0..T (reads and writes the levels' shared memory). */
template <typename REAL, int NDIM, int T, int R>
CL_HD void cl_body(const clp<REAL> &p, const clc &c, const clt &t, cls<REAL, T, R> &st, int it,
                   REAL *sm, REAL *const *rem, const REAL (&nw0)[R][cl_traits<REAL>::V])
{
  constexpr int V = cl_traits<REAL>::V;
  const int c0 = c.c_first + it;
  REAL nw[T + 1][R][V];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int k = 0; k < V; k++)
      nw[0][r][k] = nw0[r][k];
  cl_publish<REAL, NDIM, T, R>(p, c, t, 0, c0, nw[0], st.cur[0], sm, rem);
#pragma unroll
  for (int l = 1; l <= T; l++) {
    const int ch = c0 - l;
    if ((t.act >> l) & 1u) {
      cl_update<REAL, NDIM, T, R>(p, c, t, l, ch, st.last[l - 1], st.cur[l - 1], nw[l - 1][0], sm,
                                  nw[l]);
    } else {
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < V; k++)
          nw[l][r][k] = (REAL)0;
    }
    /* Level l - 1 moves on: its chunk ch + 1 becomes cur. */
#pragma unroll
    for (int k = 0; k < V; k++)
      st.last[l - 1][k] = st.cur[l - 1][R - 1][k];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int k = 0; k < V; k++)
        st.cur[l - 1][r][k] = nw[l - 1][r][k];
    if (((c.sgl >> (l - 1)) & 1u) && ch + 1 == 0) {
#pragma unroll
      for (int k = 0; k < V; k++)
        st.last[l - 1][k] = cl_ghost(p, 2, 0, st.cur[l - 1][0][k]);
    }
    if (l < T)
      cl_publish<REAL, NDIM, T, R>(p, c, t, l, ch, nw[l], st.cur[l], sm, rem);
    else
      cl_store<REAL, T, R>(p, c, t, ch, nw[T]);
  }
}

/* The split cluster barrier: arrive (release) after a step's shared-memory work, wait
 * (acquire) before the next step's; the ring prefetch of the next step runs in between. */
__device__ __forceinline__ void cl_arrive()
{
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cl_wait()
{
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* ---- the kernel ------------------------------------------------------------------------ */

template <typename REAL, int NDIM, int T, int R>
static __global__ void __launch_bounds__(CL_MAX_THREADS) cl_kernel(const clp<REAL> p)
{
  extern __shared__ __align__(16) unsigned char cl_smem_raw[];
  REAL *sm = reinterpret_cast<REAL *>(cl_smem_raw);
  clc c;
  cl_cta_init<REAL, NDIM, T, R>(p, blockIdx.x, blockIdx.y, blockIdx.z, c);
  clt t;
  cl_thread_init<REAL, NDIM, T, R>(p, c, threadIdx.x, t);
  const int csize = p.cdx * p.cdw;
  if (p.poison) {
    const int total = p.ring + CL_RING * R * p.nt * cl_traits<REAL>::V;
    for (int i = threadIdx.x; i < total; i += blockDim.x)
      sm[i] = cl_nan<REAL>();
  }
  REAL *rem[4] = {sm, sm, sm, sm};
  cg::cluster_group cluster = cg::this_cluster();
  if (csize > 1) {
    const unsigned me = cluster.block_rank();
    if (c.push_lo[0])
      rem[0] = cluster.map_shared_rank(sm, me - 1);
    if (c.push_hi[0])
      rem[1] = cluster.map_shared_rank(sm, me + 1);
    if (c.push_lo[1])
      rem[2] = cluster.map_shared_rank(sm, me - p.cdx);
    if (c.push_hi[1])
      rem[3] = cluster.map_shared_rank(sm, me + p.cdx);
    cluster.sync(); /* every CTA of the cluster has started before any DSMEM store */
  } else {
    __syncthreads();
  }
  cls<REAL, T, R> st;
#pragma unroll
  for (int l = 0; l < T; l++)
#pragma unroll
    for (int k = 0; k < cl_traits<REAL>::V; k++) {
      st.last[l][k] = (REAL)0;
#pragma unroll
      for (int r = 0; r < R; r++)
        st.cur[l][r][k] = (REAL)0;
    }
  for (int k = 0; k < CL_DIST; k++)
    cl_prefetch<REAL, T, R>(p, c, t, c.c_first + k, sm);
  bool pending = false; /* a cluster barrier arrived at but not yet waited for */
  for (int it = 0; it < c.nit; it++) {
    REAL nw0[R][cl_traits<REAL>::V];
    cl_head<REAL, NDIM, T, R>(p, c, t, it, sm, nw0);
    if (pending)
      cl_wait();
    pending = false;
    cl_body<REAL, NDIM, T, R>(p, c, t, st, it, sm, rem, nw0);
#if defined(CLUSTER_INJECT_BUG) && CLUSTER_INJECT_BUG == 1
    if (it & 1) /* Bug: every other pipeline step skips its barrier. */
      continue;
#endif
    if (csize > 1) {
      cl_arrive();
      pending = true;
    } else {
      __syncthreads();
    }
  }
  if (pending)
    cl_wait();
  cl_cp_wait<0>();
  /* Every CTA waited at the last cluster barrier: no CTA leaves while a neighbour may
   * still access its shared memory. */
}

/* ---- host emulation -------------------------------------------------------------------- */

template <typename REAL, int NDIM, int T, int R>
static int cl_emulate_t(const void *pv, const int64_t *grid, int threads)
{
  const clp<REAL> &p = *static_cast<const clp<REAL> *>(pv);
  const int csize = p.cdx * p.cdw;
  cl_g_lo = p.gmin;
  cl_g_hi = p.gmax;
  const size_t elems = (size_t)p.ring + (size_t)CL_RING * R * p.nt * cl_traits<REAL>::V;
  const size_t all = elems * csize;
  REAL *sm = (REAL *)malloc(all * sizeof(REAL));
  cl_shadow sh;
  memset(&sh, 0, sizeof sh);
  sh.wr_ep = (int *)malloc(all * sizeof(int));
  sh.wr_id = (int *)malloc(all * sizeof(int));
  sh.rd_ep = (int *)malloc(all * sizeof(int));
  sh.rd_id = (int *)malloc(all * sizeof(int));
  clc *cs = (clc *)malloc(csize * sizeof(clc));
  clt *ts = (clt *)malloc((size_t)csize * threads * sizeof(clt));
  cls<REAL, T, R> *ss = (cls<REAL, T, R> *)calloc((size_t)csize * threads, sizeof(*ss));
  if (!sm || !sh.wr_ep || !sh.wr_id || !sh.rd_ep || !sh.rd_id || !cs || !ts || !ss) {
    free(sm), free(sh.wr_ep), free(sh.wr_id), free(sh.rd_ep), free(sh.rd_id);
    free(cs), free(ts), free(ss);
    return cl_fail("emulation: out of host memory");
  }
  sh.base = (const char *)sm;
  sh.elem = sizeof(REAL);
  sh.count = all;
  cl_sh = &sh;
  cl_g_oob = 0;
  int epoch = 1;
  for (int64_t bs = 0; bs < grid[2]; bs++)
    for (int64_t cw0 = 0; cw0 < grid[1]; cw0 += p.cdw)
      for (int64_t cx0 = 0; cx0 < grid[0]; cx0 += p.cdx) {
        for (size_t i = 0; i < all; i++) {
          sm[i] = cl_nan<REAL>();
          sh.wr_ep[i] = sh.rd_ep[i] = -1;
          sh.wr_id[i] = sh.rd_id[i] = -1;
        }
        for (int q = 0; q < csize; q++) {
          const int rx = q % p.cdx, rw = q / p.cdx;
          cl_cta_init<REAL, NDIM, T, R>(p, cx0 + rx, cw0 + rw, bs, cs[q]);
          for (int i = 0; i < threads; i++) {
            cl_thread_init<REAL, NDIM, T, R>(p, cs[q], i, ts[q * threads + i]);
            memset(&ss[q * threads + i], 0, sizeof(ss[0]));
          }
        }
        sh.epoch = epoch;
        for (int q = 0; q < csize; q++)
          for (int i = 0; i < threads; i++) {
            sh.id = q * threads + i;
            for (int k = 0; k < CL_DIST; k++)
              cl_prefetch<REAL, T, R>(p, cs[q], ts[q * threads + i], cs[q].c_first + k,
                                      sm + q * elems);
          }
        epoch++; /* the kernel's first cluster barrier */
        for (int it = 0; it < cs[0].nit; it++) {
          sh.epoch = epoch;
          for (int q = 0; q < csize; q++) {
            REAL *mine = sm + q * elems;
            REAL *rem[4] = {mine, mine, mine, mine};
            if (cs[q].push_lo[0])
              rem[0] = sm + (q - 1) * elems;
            if (cs[q].push_hi[0])
              rem[1] = sm + (q + 1) * elems;
            if (cs[q].push_lo[1])
              rem[2] = sm + (q - p.cdx) * elems;
            if (cs[q].push_hi[1])
              rem[3] = sm + (q + p.cdx) * elems;
            for (int i = 0; i < threads; i++) {
              sh.id = q * threads + i;
              REAL nw0[R][cl_traits<REAL>::V];
              cl_head<REAL, NDIM, T, R>(p, cs[q], ts[q * threads + i], it, mine, nw0);
              cl_body<REAL, NDIM, T, R>(p, cs[q], ts[q * threads + i], ss[q * threads + i], it,
                                        mine, rem, nw0);
            }
          }
#if defined(CLUSTER_INJECT_BUG) && CLUSTER_INJECT_BUG == 1
          if (it & 1)
            continue;
#endif
          epoch++;
        }
      }
  cl_sh = NULL;
  int status = 0;
  if (sh.races || sh.oob || cl_g_oob) {
    fprintf(stderr,
            "stencil: error: cluster kernel emulation: %ld shared-memory races, %ld shared and "
            "%ld global out-of-bounds accesses; first: %s\n",
            sh.races, sh.oob, cl_g_oob, sh.first);
    status = 1;
  }
  free(sm), free(sh.wr_ep), free(sh.wr_id), free(sh.rd_ep), free(sh.rd_id);
  free(cs), free(ts), free(ss);
  return status;
}

/* ---- the table of instantiations --------------------------------------------------------- */

struct cl_entry {
  const void *kernel;
  int (*emulate)(const void *params, const int64_t *grid, int threads);
};

template <typename REAL, int NDIM, int R, int T> struct cl_tlist {
  static cl_entry get(int steps)
  {
    if (steps == T) {
      cl_entry e = {(const void *)cl_kernel<REAL, NDIM, T, R>, cl_emulate_t<REAL, NDIM, T, R>};
      return e;
    }
    return cl_tlist<REAL, NDIM, R, T - 1>::get(steps);
  }
};
template <typename REAL, int NDIM, int R> struct cl_tlist<REAL, NDIM, R, 0> {
  static cl_entry get(int)
  {
    cl_entry e = {NULL, NULL};
    return e;
  }
};

/* Instantiated: R = 1 with T = 1..8, R = 2 with T = 1..4, 2D and 3D, fp32 and fp64.
 * CLUSTER_BUILD_STEPS (default 8) lowers the largest T built with R = 1, and
 * CLUSTER_BUILD_ROWS2=0 leaves out R = 2: quicker builds of the bug-injection harnesses. */
#ifndef CLUSTER_BUILD_STEPS
#define CLUSTER_BUILD_STEPS CLUSTER_MAX_STEPS
#endif
#ifndef CLUSTER_BUILD_ROWS2
#define CLUSTER_BUILD_ROWS2 1
#endif
static inline int cl_max_steps(int rows)
{
  return rows == 1 ? CLUSTER_BUILD_STEPS : rows == 2 && CLUSTER_BUILD_ROWS2 ? 4 : 0;
}

template <typename REAL> static cl_entry cl_lookup_t(int ndim, int steps, int rows)
{
#if CLUSTER_BUILD_ROWS2
  if (rows == 2)
    return ndim == 3 ? cl_tlist<REAL, 3, 2, 4>::get(steps) : cl_tlist<REAL, 2, 2, 4>::get(steps);
#endif
  (void)rows;
  return ndim == 3 ? cl_tlist<REAL, 3, 1, CLUSTER_BUILD_STEPS>::get(steps)
                   : cl_tlist<REAL, 2, 1, CLUSTER_BUILD_STEPS>::get(steps);
}

/* Defined in cluster_f32.cu and cluster_f64.cu (one translation unit per precision, so the
 * 48 kernels compile in parallel). */
cl_entry cl_lookup_f32(int ndim, int steps, int rows);
cl_entry cl_lookup_f64(int ndim, int steps, int rows);
