/* CUDA backend: one GPU per rank, the fields in device memory, two streams ("lanes").
 *
 * Layout: the padded block of kernels/layout.h in device memory, x fastest, with each x row
 * padded further to a multiple of 32 elements (dev_layout):
 *   u: lead + (n[2] + 2 h[2]) x (n[1] + 2 h[1]) x sy elements of 4 or 8 bytes,
 *   sy = roundup(n[0] + 2 h[0] + 2 (16 / elem), 32); ghost x = -h[0] of each row at offset
 *   lead + row sy, with lead chosen so that interior x = 0 lies on a 128-byte boundary.
 *
 * Kernel tiers (struct cuda_ctx.tier), every one giving the CPU backend's bits (same
 * operation order as kernels/backend.h and kernels/cpu/heat_real.h, compiled with -fmad=false):
 *   1  update_ref: one thread per cell, any radius, plain global loads (the GPU reference);
 *   2  radius 1, streaming: a thread owns a column of a tile and walks through z (through y
 *      in 2D) keeping planes k-1, k, k+1 (and D planes ahead) in registers; the x and y
 *      neighbours come through L1. Two forms: update_stream (a thread per cell; in 3D
 *      without a source its lean variant update_lean) and update_vec (a thread per aligned
 *      16-byte vector, x neighbours by warp shuffles).
 *      cuda_tune times every form and block shape on the run's own box at start-up and keeps
 *      the fastest. Tier 2 also writes the reflected ghost cells of the physical faces it
 *      touches, so the separate boundary kernel is skipped for faces it covered (struct
 * field_track).
 *   3  the fused multi-step update (kernels/cuda/cluster.h: the 2D warp-strip kernel or the 3D
 *      warp-row kernel): one launch advances T steps. The driver asks
 *      cuda_fused_query before the block's layout exists (T sizes the halo), plans it with
 *      cuda_fused_prepare on the real block and calls cuda_fused_update; update() keeps
 *      running tiers 1 and 2 wherever a single step is wanted.
 *
 * The tests fix the tier-2 launch shape through backend_options.tile2 instead of tuning.
 *
 * Lanes: LANE_HALO is a high-priority stream (shell, pack, exchange, unpack, boundaries),
 * LANE_BULK a normal one (inner update); events order them (lane_fence), never a device
 * synchronisation. Kernels of the same lane may use programmatic dependent launch (PDL):
 * each kernel waits in cudaGridDependencySynchronize() before touching memory. A tier-3
 * launch in parts runs either as shells (the sent planes on the halo lane, then the rest on
 * the bulk lane) or as one signalled launch on the bulk lane, the halo lane waiting on a
 * device counter (cuStreamWaitValue32) until the sent planes are stored (split_one; the
 * request's split forces a form: docs/cluster-kernel.md). */
#include <cuda.h> /* (types of cuStreamWaitValue32, reached through the runtime: no libcuda link) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_check.h"
extern "C" {
#include "kernels/backend.h"
}
#include "kernels/cuda/cluster.h"
#include "kernels/face_track.h"

static_assert(CLUSTER_MAX_STEPS == BACKEND_FUSED_MAX_STEPS,
              "kernels/backend.h and kernels/cuda/cluster.h disagree on the most fused steps");

#ifndef STENCIL_CUDA_ARCHS
#define STENCIL_CUDA_ARCHS "unknown"
#endif

/* ---- kernel arguments (plain structs passed by value) ------------------------------------- */

/* Padded layout: element of interior cell (i, j, k) is origin + i + j s[1] + k s[2]. */
struct klay {
  int64_t origin;
  int64_t s[3];
  int64_t n[3];
  int halo[3];
};

struct kbox {
  int64_t lo[3], hi[3];
};

template <typename REAL> struct kcoef {
  REAL c0, cf; /* cf: weight of the source field f (kernels get f = nullptr without one) */
  REAL c[3][4];
  int radius, three_d;
};

/* Physical faces the tier-2 kernel fills while it updates: index 2 axis + side, kind 0 none,
 * 1 Dirichlet (ghost = two_g - u), 2 Neumann (ghost = u). Axes are the kernel's logical ones. */
template <typename REAL> struct kfaces {
  int kind[6];
  REAL two_g[6];
};

/* Tier 2 in logical axes: t0 = x (stride 1), t1 (stride s1), streaming axis s (stride ss).
 * 3D: t1 = y, s = z. 2D: t1 = z (one cell), s = y. */
struct kstream {
  int64_t origin, s1, ss;
  int64_t n[3]; /* interior cells along t0, t1, s */
  int three_d;
  int zc; /* cells of s per block */
  int h0; /* offset of interior x = 0 from the row's 128-byte aligned start: lead + halo x */
};

struct knorm {
  double sum, sumsq, maxabs, nonfinite;
};

/* ---- device helpers -------------------------------------------------------------------- */

/* PDL: wait for the previous kernel of the stream (a no-op when not launched with PDL),
 * then let the next one start its launch. */
__device__ __forceinline__ void pdl_enter()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/* ---- tier 1: the reference ------------------------------------------------------------- */

template <typename REAL>
static __global__ void update_ref(const REAL *__restrict__ u, const REAL *__restrict__ f,
                                  REAL *__restrict__ v, klay L, kbox b, kcoef<REAL> c)
{
  pdl_enter();
  const int64_t i = b.lo[0] + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t j = b.lo[1] + (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= b.hi[0] || j >= b.hi[1])
    return;
  for (int64_t k = b.lo[2] + blockIdx.z; k < b.hi[2]; k += gridDim.z) {
    const int64_t at = L.origin + i + j * L.s[1] + k * L.s[2];
    const REAL *p = u + at;
    REAL acc = c.c0 * p[0];
    for (int m = 1; m <= c.radius; m++)
      acc = stencil_fma(c.c[0][m - 1], p[-m] + p[m], acc);
    for (int m = 1; m <= c.radius; m++)
      acc = stencil_fma(c.c[1][m - 1], p[-m * L.s[1]] + p[m * L.s[1]], acc);
    if (c.three_d)
      for (int m = 1; m <= c.radius; m++)
        acc = stencil_fma(c.c[2][m - 1], p[-m * L.s[2]] + p[m * L.s[2]], acc);
    if (f)
      acc = stencil_fma(c.cf, f[at], acc);
    v[at] = acc;
  }
}

/* ---- tier 2: streaming, radius 1 ------------------------------------------------------- */

template <typename REAL>
__device__ __forceinline__ void put_ghost(REAL *q, int64_t off, int kind, REAL two_g, REAL val)
{
  q[off] = kind == 1 ? two_g - val : val;
}

/* The queue of planes moves on by one: w[0] drops out, ahead comes in last. */
template <typename T, int N> __device__ __forceinline__ void shift_in(T (&w)[N], const T &ahead)
{
#pragma unroll
  for (int d = 0; d < N - 1; d++)
    w[d] = w[d + 1];
  w[N - 1] = ahead;
}

/* The column (i, j) and the planes [k0, k1) of this thread in the scalar forms of tier 2;
 * false when it has none. */
__device__ __forceinline__ bool stream_column(const kstream L, const kbox b, int64_t &i, int64_t &j,
                                              int64_t &k0, int64_t &k1)
{
  i = b.lo[0] + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  j = b.lo[1] + (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
  k0 = b.lo[2] + (int64_t)blockIdx.z * L.zc;
  k1 = k0 + L.zc < b.hi[2] ? k0 + L.zc : b.hi[2];
  return i < b.hi[0] && j < b.hi[1] && k0 < k1;
}

/* D planes are loaded ahead per thread (32 registers, 2048 threads per SM). Measured on an
 * H200 with the aligned rows of dev_layout (tests/gpu/tier2_lab.cu): D = 1, 2 and 4 within
 * 1-4 % of each other; 4 spills here. */
template <typename REAL> struct stream_depth {
  static constexpr int D = 2;
};

template <typename REAL>
static __global__ void __launch_bounds__(512, 3)
    update_stream(const REAL *__restrict__ u, const REAL *__restrict__ f, REAL *__restrict__ v,
                  kstream L, kbox b, kcoef<REAL> c, kfaces<REAL> F)
{
  constexpr int D = stream_depth<REAL>::D;
  pdl_enter();
  int64_t i, j, k0, k1;
  if (!stream_column(L, b, i, j, k0, k1))
    return;
  const int64_t s1 = L.s1, ss = L.ss;
  const int64_t at = L.origin + i + j * s1 + k0 * ss;
  const REAL *p = u + at;
  const REAL *fs = f ? f + at : nullptr;
  REAL *q = v + at;
  const REAL c0 = c.c0, cx = c.c[0][0], cy = c.c[1][0], cz = c.c[2][0];
  /* Faces this thread's column touches along t0 and t1 (fixed for the column). */
  const bool fx0 = i == 0 && F.kind[0], fx1 = i == L.n[0] - 1 && F.kind[1];
  const bool f10 = j == 0 && F.kind[2], f11 = j == L.n[1] - 1 && F.kind[3];
  const bool fcol = fx0 || fx1 || f10 || f11;
  /* w[0] = plane k-1, w[1] = plane k, w[1 + d] = plane k + d (d = 1..D), loaded ahead; a
   * plane is loaded only if an iteration of this chunk uses it (k + d <= k1 <= n, so it
   * lies inside the padded array). */
  REAL w[D + 2];
  w[0] = __ldg(p - ss);
  w[1] = __ldg(p);
#pragma unroll
  for (int d = 1; d <= D; d++)
    w[1 + d] = k0 + d <= k1 ? __ldg(p + d * ss) : (REAL)0;
#pragma unroll 2
  for (int64_t k = k0; k < k1; k++) {
    const REAL ahead = k + 1 + D <= k1 ? __ldg(p + (D + 1) * ss) : (REAL)0;
    REAL acc = c0 * w[1];
    acc = stencil_fma(cx, __ldg(p - 1) + __ldg(p + 1), acc);
    if (L.three_d) {
      acc = stencil_fma(cy, __ldg(p - s1) + __ldg(p + s1), acc);
      acc = stencil_fma(cz, w[0] + w[2], acc);
    } else {
      acc = stencil_fma(cy, w[0] + w[2], acc);
    }
    if (fs) {
      acc = stencil_fma(c.cf, __ldg(fs), acc);
      fs += ss;
    }
    q[0] = acc;
    const bool fs0 = k == 0 && F.kind[4], fs1 = k == L.n[2] - 1 && F.kind[5];
    if (fcol || fs0 || fs1) {
      if (fx0)
        put_ghost(q, -1, F.kind[0], F.two_g[0], acc);
      if (fx1)
        put_ghost(q, 1, F.kind[1], F.two_g[1], acc);
      if (f10)
        put_ghost(q, -s1, F.kind[2], F.two_g[2], acc);
      if (f11)
        put_ghost(q, s1, F.kind[3], F.two_g[3], acc);
      if (fs0)
        put_ghost(q, -ss, F.kind[4], F.two_g[4], acc);
      if (fs1)
        put_ghost(q, ss, F.kind[5], F.two_g[5], acc);
    }
    shift_in(w, ahead);
    p += ss;
    q += ss;
  }
}

/* The ghost of a reflecting x face (kind, two_g) from the edge value val, written over the
 * whole 32-byte sector that holds it (its other cells are row padding, see dev_layout), so
 * that the memory need not read the sector before writing it. */
template <typename REAL>
__device__ __forceinline__ void put_sector(REAL *q, int64_t off, int kind, REAL two_g, REAL val)
{
  const REAL g = kind == 1 ? two_g - val : val;
  constexpr int S = 32 / sizeof(REAL);
  REAL *s = q + off - (off < 0 ? S - 1 : 0); /* the sector ending at q[-1] or starting at q[1] */
  if constexpr (sizeof(REAL) == 4) {
    const float4 t = make_float4(g, g, g, g);
    reinterpret_cast<float4 *>(s)[0] = t;
    reinterpret_cast<float4 *>(s)[1] = t;
  } else {
    const double2 t = make_double2(g, g);
    reinterpret_cast<double2 *>(s)[0] = t;
    reinterpret_cast<double2 *>(s)[1] = t;
  }
}

/* Tier 2, lean scalar form for 3D without a source: update_stream's column walk with less
 * work per plane (the ghost tests folded into one mask). Measured on an H200, 512^3 with
 * Dirichlet faces, start-up tuner: 359 / 215 Gpts/s fp32 / fp64, against 309 / 180 for
 * update_stream on the same layout; the x ghosts of reflecting faces through put_sector. The
 * same loop with no ghost store at all reaches 386 / 228, and the loop of
 * tests/gpu/tier2_lab.cu with no faces and no box 410 / 240 in this program: what costs the
 * rest was not found (docs/performance.md). */
template <typename REAL>
static __global__ void __launch_bounds__(512, 4)
    update_lean(const REAL *__restrict__ u, REAL *__restrict__ v, kstream L, kbox b, kcoef<REAL> c,
                kfaces<REAL> F)
{
  constexpr int D = 2;
  pdl_enter();
  int64_t i, j, k0, k1;
  if (!stream_column(L, b, i, j, k0, k1))
    return;
  const int64_t s1 = L.s1, ss = L.ss;
  const REAL *p = u + L.origin + i + j * s1 + k0 * ss;
  REAL *q = v + L.origin + i + j * s1 + k0 * ss;
  /* Ghosts this column writes in every plane: bit 0 x = -1 (its sector), 1 x = n (its sector,
   * when n is a multiple of the sector), 2 x = n (the cell alone), 3 y = -1, 4 y = n. */
  constexpr int S = 32 / sizeof(REAL);
  const unsigned gf = (i == 0 && F.kind[0] ? 1u : 0u) |
                      (i == L.n[0] - 1 && F.kind[1] ? (L.n[0] % S ? 4u : 2u) : 0u) |
                      (j == 0 && F.kind[2] ? 8u : 0u) | (j == L.n[1] - 1 && F.kind[3] ? 16u : 0u);
  const REAL c0 = c.c0, cx = c.c[0][0], cy = c.c[1][0], cz = c.c[2][0];
  REAL w[D + 2];
  w[0] = p[-ss];
  w[1] = p[0];
#pragma unroll
  for (int d = 1; d <= D; d++)
    w[1 + d] = k0 + d <= k1 ? p[d * ss] : (REAL)0;
#pragma unroll 2
  for (int64_t k = k0; k < k1; k++) {
    const REAL ahead = k + 1 + D <= k1 ? p[(D + 1) * ss] : (REAL)0;
    REAL acc = c0 * w[1];
    acc = stencil_fma(cx, p[-1] + p[1], acc);
    acc = stencil_fma(cy, p[-s1] + p[s1], acc);
    acc = stencil_fma(cz, w[0] + w[2], acc);
    q[0] = acc;
    if (gf) {
      if (gf & 1u)
        put_sector(q, -1, F.kind[0], F.two_g[0], acc);
      if (gf & 2u)
        put_sector(q, 1, F.kind[1], F.two_g[1], acc);
      if (gf & 4u)
        put_ghost(q, 1, F.kind[1], F.two_g[1], acc);
      if (gf & 8u)
        put_ghost(q, -s1, F.kind[2], F.two_g[2], acc);
      if (gf & 16u)
        put_ghost(q, s1, F.kind[3], F.two_g[3], acc);
    }
    if (k == 0 && F.kind[4])
      put_ghost(q, -ss, F.kind[4], F.two_g[4], acc);
    if (k == L.n[2] - 1 && F.kind[5])
      put_ghost(q, ss, F.kind[5], F.two_g[5], acc);
    shift_in(w, ahead);
    p += ss;
    q += ss;
  }
}

/* Tier 2, vector form: a thread owns one aligned 16-byte vector of a row (4 floats or 2
 * doubles: padded x positions W m .. W m + W - 1) and streams it through z like
 * update_stream, D planes ahead. Centre and y neighbours are whole vector loads, the y
 * neighbours of the next plane issued one iteration ahead; the x neighbours at the vector's
 * ends come from the neighbouring lanes by shuffles (from memory at the warp's ends). Lanes
 * beyond the box still load (the vector after the last one, or a copy of it) so that every
 * lane takes part in the shuffles; they store nothing. */
template <typename REAL> struct alignas(16) vec16 {
  REAL e[16 / sizeof(REAL)];
};

/* Read-only loads (ld.global.nc; measured no different from plain loads on an H200). */
template <typename REAL> __device__ __forceinline__ vec16<REAL> ldv(const REAL *p)
{
  vec16<REAL> r;
  if constexpr (sizeof(REAL) == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4 *>(p));
    r.e[0] = t.x, r.e[1] = t.y, r.e[2] = t.z, r.e[3] = t.w;
  } else {
    const double2 t = __ldg(reinterpret_cast<const double2 *>(p));
    r.e[0] = t.x, r.e[1] = t.y;
  }
  return r;
}

/* Store the cells of o that lie in [lo, hi) of interior x (x0: the cell of element 0), as
 * one vector when all do; ghost kind g (0 none: o itself, 1 Dirichlet: two_g - o, 2 Neumann:
 * o). */
template <typename REAL>
__device__ __forceinline__ void stv(REAL *q, vec16<REAL> o, bool whole, int64_t x0, int64_t lo,
                                    int64_t hi, int g, REAL two_g)
{
  constexpr int W = 16 / sizeof(REAL);
  if (g == 1)
#pragma unroll
    for (int e = 0; e < W; e++)
      o.e[e] = two_g - o.e[e];
  if (whole) {
    *reinterpret_cast<vec16<REAL> *>(q) = o;
    return;
  }
#pragma unroll
  for (int e = 0; e < W; e++)
    if (x0 + e >= lo && x0 + e < hi)
      q[e] = o.e[e];
}

template <typename REAL, int D>
static __global__ void __launch_bounds__(256)
    update_vec(const REAL *__restrict__ u, const REAL *__restrict__ f, REAL *__restrict__ v,
               kstream L, kbox b, kcoef<REAL> c, kfaces<REAL> F)
{
  constexpr int W = 16 / sizeof(REAL);
  pdl_enter();
  const int64_t m0 = (b.lo[0] + L.h0) / W, m1 = (b.hi[0] - 1 + L.h0) / W;
  const int64_t m = m0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t j = b.lo[1] + (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
  const int64_t k0 = b.lo[2] + (int64_t)blockIdx.z * L.zc;
  const int64_t k1 = k0 + L.zc < b.hi[2] ? k0 + L.zc : b.hi[2];
  /* blockDim.x is a multiple of 32: a warp lies in one row, so this return is warp-uniform. */
  if (j >= b.hi[1] || k0 >= k1)
    return;
  const bool active = m <= m1;
  const int64_t ml = m <= m1 + 1 ? m : m1 + 1;
  const int lane = threadIdx.x & 31;
  const int64_t s1 = L.s1, ss = L.ss;
  /* Element of padded x position 0 of row j, plane k0 (a multiple of 32 elements). */
  const int64_t row = L.origin - L.h0 + j * s1 + k0 * ss;
  const REAL *p = u + row + W * ml;
  const REAL *fs = f ? f + row + W * ml : nullptr;
  REAL *q = v + row + W * ml;
  const REAL c0 = c.c0, cx = c.c[0][0], cy = c.c[1][0], cz = c.c[2][0];
  const int64_t x0 = W * m - L.h0; /* interior x of element 0 */
  const bool whole = x0 >= b.lo[0] && x0 + W <= b.hi[0];
  /* Faces this thread writes ghosts of: y (its row: warp-uniform) and x (one cell of its
   * vector) in every plane, z in planes 0 and n - 1. */
  const int gy0 = j == 0 ? F.kind[2] : 0, gy1 = j == L.n[1] - 1 ? F.kind[3] : 0;
  const bool fx = active && ((x0 <= 0 && 0 < x0 + W && b.lo[0] <= 0 && F.kind[0]) ||
                             (x0 < L.n[0] && L.n[0] <= x0 + W && b.hi[0] >= L.n[0] && F.kind[1]));
  vec16<REAL> w[D + 2];
  const vec16<REAL> zero = {};
  w[0] = ldv(p - ss);
  w[1] = ldv(p);
#pragma unroll
  for (int d = 1; d <= D; d++)
    w[1 + d] = k0 + d <= k1 ? ldv(p + d * ss) : zero;
  vec16<REAL> ym = zero, yp = zero;
  if (L.three_d) {
    ym = ldv(p - s1);
    yp = ldv(p + s1);
  }
  for (int64_t k = k0; k < k1; k++) {
    const vec16<REAL> ahead = k + 1 + D <= k1 ? ldv(p + (D + 1) * ss) : zero;
    vec16<REAL> ym_next = zero, yp_next = zero;
    if (L.three_d && k + 1 < k1) {
      ym_next = ldv(p + ss - s1);
      yp_next = ldv(p + ss + s1);
    }
    REAL left = __shfl_up_sync(0xffffffffu, w[1].e[W - 1], 1);
    REAL right = __shfl_down_sync(0xffffffffu, w[1].e[0], 1);
    if (lane == 0)
      left = __ldg(p - 1);
    if (lane == 31)
      right = __ldg(p + W);
    vec16<REAL> out, src = zero;
    if (fs) {
      src = ldv(fs);
      fs += ss;
    }
#pragma unroll
    for (int e = 0; e < W; e++) {
      const REAL xm = e > 0 ? w[1].e[e - 1] : left, xp = e < W - 1 ? w[1].e[e + 1] : right;
      REAL acc = c0 * w[1].e[e];
      acc = stencil_fma(cx, xm + xp, acc);
      if (L.three_d) {
        acc = stencil_fma(cy, ym.e[e] + yp.e[e], acc);
        acc = stencil_fma(cz, w[0].e[e] + w[2].e[e], acc);
      } else {
        acc = stencil_fma(cy, w[0].e[e] + w[2].e[e], acc);
      }
      if (fs)
        acc = stencil_fma(c.cf, src.e[e], acc);
      out.e[e] = acc;
    }
    if (active) {
      stv(q, out, whole, x0, b.lo[0], b.hi[0], 0, (REAL)0);
      if (gy0)
        stv(q - s1, out, whole, x0, b.lo[0], b.hi[0], gy0, F.two_g[2]);
      if (gy1)
        stv(q + s1, out, whole, x0, b.lo[0], b.hi[0], gy1, F.two_g[3]);
      if (k == 0 && F.kind[4])
        stv(q - ss, out, whole, x0, b.lo[0], b.hi[0], F.kind[4], F.two_g[4]);
      if (k == L.n[2] - 1 && F.kind[5])
        stv(q + ss, out, whole, x0, b.lo[0], b.hi[0], F.kind[5], F.two_g[5]);
      if (fx) {
#pragma unroll
        for (int e = 0; e < W; e++) {
          if (x0 + e == 0 && F.kind[0])
            put_ghost(q + e, -1, F.kind[0], F.two_g[0], out.e[e]);
          if (x0 + e == L.n[0] - 1 && F.kind[1])
            put_ghost(q + e, 1, F.kind[1], F.two_g[1], out.e[e]);
        }
      }
    }
    shift_in(w, ahead);
    ym = ym_next;
    yp = yp_next;
    p += ss;
    q += ss;
  }
}

/* ---- halo boxes, boundaries, norms ----------------------------------------------------- */

/* Up to MOVES_MAX box copies in one launch: move i copies ext[i] cells from `from` to `to`,
 * cell (x, y, z) at x + y s[1] + z s[2] with each side's strides (a box of the padded array,
 * or a dense buffer: strides ext[0], ext[0] ext[1]); it has the blocks first[i] ..
 * first[i + 1] - 1. */
enum { MOVES_MAX = 26 };
struct kmoves {
  int first[MOVES_MAX + 1];
  const void *from[MOVES_MAX];
  void *to[MOVES_MAX];
  int ext[MOVES_MAX][3];
  int64_t fs[MOVES_MAX][2], ts[MOVES_MAX][2]; /* y and z strides of from and to */
};

template <typename REAL> static __global__ void move_boxes(kmoves m)
{
  pdl_enter();
  int i = 0;
  while ((int)blockIdx.x >= m.first[i + 1])
    i++;
  /* 32-bit index arithmetic: 64-bit division costs more than the copy (the host checks the
   * counts) */
  const unsigned nx = m.ext[i][0], ny = m.ext[i][1], count = nx * ny * m.ext[i][2];
  const REAL *from = (const REAL *)m.from[i];
  REAL *to = (REAL *)m.to[i];
  const unsigned step = (unsigned)(m.first[i + 1] - m.first[i]) * blockDim.x;
  for (unsigned t = (blockIdx.x - m.first[i]) * blockDim.x + threadIdx.x; t < count; t += step) {
    const unsigned x = t % nx, r = t / nx, y = r % ny, z = r / ny;
    to[x + y * m.ts[i][0] + z * m.ts[i][1]] = from[x + y * m.fs[i][0] + z * m.fs[i][1]];
  }
}

/* Faces whose ghost cells mirror the interior (tier 3 with homogeneous faces in 3D): on[a][s]
 * = 1, and neg[a][s] = 1 for Dirichlet 0 (ghost = 0 - u) against Neumann (ghost = u). */
struct kmirror {
  int on[3][2], neg[3][2];
};

/* The edge and corner ghosts of mirrored faces: every ghost cell with a coordinate beyond a
 * mirrored face and another outside the interior, as filling each face's ghosts over the whole
 * padded extent of the other axes, in axis order x, y, z, after the exchange would leave it:
 * the cell reflected across every mirrored face it lies beyond (into the interior, or into
 * ghosts the exchange filled), with each Dirichlet reflection's 0 - u applied in axis order.
 * Block (., a, side) walks the ghost layers of face (a, side) over the frame of the other two
 * axes outside their interior; a cell belongs to the lowest mirrored axis it lies beyond. The
 * cells read are never written here. */
template <typename REAL> static __global__ void mirror_edges(REAL *u, klay L, kmirror m)
{
  pdl_enter();
  const int a = blockIdx.y, side = blockIdx.z;
  if (!m.on[a][side])
    return;
  const int a1 = a == 0 ? 1 : 0, a2 = a == 2 ? 1 : 2;
  const int64_t n1 = L.n[a1], n2 = L.n[a2], h1 = L.halo[a1], h2 = L.halo[a2], w1 = n1 + 2 * h1;
  const int64_t frame = w1 * (n2 + 2 * h2) - n1 * n2, count = frame * L.halo[a];
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < count;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t depth = t / frame, f = t % frame;
    int64_t c[3];
    c[a] = side ? L.n[a] + depth : -1 - depth;
    if (f < 2 * h2 * w1) { /* rows beyond a2's faces, the whole padded a1 extent */
      const int64_t r = f / w1;
      c[a1] = f % w1 - h1;
      c[a2] = r < h2 ? r - h2 : n2 + r - h2;
    } else { /* a2 inside: the columns beyond a1's faces */
      const int64_t g = f - 2 * h2 * w1, q = g % (2 * h1);
      c[a2] = g / (2 * h1);
      c[a1] = q < h1 ? q - h1 : n1 + q - h1;
    }
    int owner = -1, negate = 0;
    int64_t from[3];
    for (int b = 0; b < 3; b++) {
      const int out = c[b] < 0 ? 0 : c[b] >= L.n[b] ? 1 : -1;
      from[b] = c[b];
      if (out >= 0 && m.on[b][out]) {
        owner = owner < 0 ? b : owner;
        from[b] = out ? 2 * L.n[b] - 1 - c[b] : -1 - c[b];
        negate += m.neg[b][out];
      }
    }
    if (owner != a)
      continue;
    REAL x = u[L.origin + from[0] + from[1] * L.s[1] + from[2] * L.s[2]];
    for (int i = 0; i < negate; i++)
      x = (REAL)0 - x;
    u[L.origin + c[0] + c[1] * L.s[1] + c[2] * L.s[2]] = x;
  }
}

/* The faces one boundary launch fills (face f = 2 axis + side): the rule, 2g, and the blocks
 * of face f, [first[f], first[f + 1]) in a bx[f] x by[f] tiling (none: not filled). */
template <typename REAL> struct kbfaces {
  int dirichlet[6];
  REAL two_g[6];
  unsigned first[7], bx[6], by[6];
};

/* Ghost layers beyond physical faces by reflection (see backend.h). The faces are independent:
 * each reads interior cells and writes its own ghost slab. Face f has its own blocks, no empty
 * ones (a grid sized by the largest face on every face cost 0.2 ms per 2D launch in 16384^2,
 * mostly blocks with nothing to do: docs/performance.md). A thread writes one ghost cell per
 * iteration, consecutive threads along x: index i runs over the layers and rows of an x face
 * (m fastest) or the cells of a row otherwise, o over the rest (up to 128 blocks per face
 * along o, looping: measured faster than 1024, or than one cell per thread, in tier 3's
 * loop); 32-bit index arithmetic (64-bit division costs more than the memory traffic here). */
template <typename REAL> static __global__ void boundary_faces(REAL *u, klay L, kbfaces<REAL> F)
{
  pdl_enter();
  int f = 0;
  while (f < 5 && blockIdx.x >= F.first[f + 1])
    f++;
  const int axis = f / 2, side = f % 2;
  const unsigned b = blockIdx.x - F.first[f], bx = b % F.bx[f], by = b / F.bx[f];
  const int a1 = axis == 0 ? 1 : 0, a2 = axis == 2 ? 1 : 2;
  const unsigned n1 = (unsigned)L.n[a1], n2 = (unsigned)L.n[a2], h = (unsigned)L.halo[axis];
  const unsigned inner = axis == 0 ? h * n1 : n1, outer = axis == 0 ? n2 : h * n2;
  const unsigned i = bx * blockDim.x + threadIdx.x;
  if (i >= inner)
    return;
  const int64_t st = L.s[axis], dir = side ? 1 : -1;
  const int64_t face = side ? L.n[axis] - 1 : 0;
  const int dirichlet = F.dirichlet[f];
  const REAL two_g = F.two_g[f];
  for (unsigned o = by; o < outer; o += F.by[f]) {
    const unsigned m = axis == 0 ? i % h + 1 : o % h + 1;
    const unsigned c1 = axis == 0 ? i / h : i, c2 = axis == 0 ? o : o / h;
    REAL *edge = u + L.origin + face * st + (int64_t)c1 * L.s[a1] + (int64_t)c2 * L.s[a2];
    const REAL in = edge[-dir * (int64_t)(m - 1) * st];
    edge[dir * (int64_t)m * st] = dirichlet ? two_g - in : in;
  }
}

/* Per-block partial norms over the interior; the host adds the partials in order, so the
 * result does not depend on scheduling. A warp reads a row at a time, eight coalesced loads
 * in flight per thread (one at a time left the kernel at a third of the memory's bandwidth:
 * 3 % of a tier-3 run checked every 100 steps, docs/performance.md). */
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

/* ---- the context ----------------------------------------------------------------------- */

#define MAX_FIELDS 4
#define NORM_BLOCKS_PER_SM 4

struct cuda_ctx {
  int device;
  int tier; /* requested: 0 best, 1, 2 */
  int pdl;
  cudaDeviceProp prop;
  char pci[32];
  cudaStream_t lane[2];
  cudaEvent_t mark[2];
  cudaEvent_t norms_done; /* norms_begin: recorded after the partial sums' copy */
  int cur;
  int last_kernel[2]; /* the lane's last operation was one of our kernels (PDL may follow) */
  struct face_rule face[6];
  struct field_track track[MAX_FIELDS];
  int tile[4];   /* tier 2: threads along t0, t1; cells of s per block; form (0 scalar, 1 vector,
                    2 vector with the deeper queue) */
  int tuned;     /* tile chosen by tune() */
  int forced;    /* tile fixed by backend_options.tile2 */
  int used_tier; /* the tier the last update ran */
  int fused;     /* tier 3 planned (cuda_fused_prepare): plan is valid */
  struct cluster_plan plan;
  int mirrored;           /* the plan takes homogeneous reflecting faces as halo faces */
  kmirror mirror;         /* ... which, and their rule */
  klay mirror_lay;        /* ... on the fields' device layout */
  unsigned mirror_blocks; /* mirror_edges' blocks per face before each launch (0: none) */
  int split_faces;        /* plain launches in parts: z faces whose planes are sent (bit 0: low,
                             bit 1: high; 0: whole launches) */
  int split_one;          /* in parts as one signalled launch, the halo lane waiting on sig */
  unsigned *sig;          /* device: the signalled launches' count (cuda_fused_update) */
  unsigned sig_target;    /* its value once the last launch's sent planes are stored */
  /* cuStreamWaitValue32, from the driver through the runtime (split_one) */
  CUresult (*wait_value)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  knorm *partial;   /* device, NORM_BLOCKS_PER_SM x SMs */
  knorm *partial_h; /* host copy */
  void *scratch;    /* device staging for pack/unpack from pageable host memory */
  size_t scratch_bytes;
  double *res_partial;   /* residual(): device, RES_BLOCKS partial sums and the total (lazy) */
  double *fres_scratch;  /* fused_residual(): per-warp sums, then the 8 totals (lazy) */
  double *fres_h;        /* fused_residual(): page-locked host copy of the 8 totals */
  cudaEvent_t fres_done; /* ... recorded after the copy (fused_residual_sums waits for it) */
  double *res_h;         /* residual(): page-locked host copy of the total */
};

static struct cuda_ctx *CTX(void *p)
{
  return (struct cuda_ctx *)p;
}

/* Whether tier-2 launch shape t (struct cuda_ctx.tile) is valid for elements of `elem`
 * bytes: NULL, or why not. */
static const char *shape_error(const int t[4])
{
  if (t[2] < 1)
    return "at least one cell along the streaming axis per block";
  if (t[0] < 1 || t[1] < 1 || t[0] * t[1] > (t[3] ? 256 : 512) || (t[3] && t[0] % 32))
    return "at most 512 threads per block (256 for the vector forms, with BX a multiple of 32)";
  return NULL;
}

/* The device copy of a block pads each x row to a multiple of 32 elements, with room for two
 * 16-byte vectors beyond the ghost cells (tier 2 loads one vector past a row's end, and
 * update_lean writes a face's x ghost as the 32-byte sector that holds it), and shifts the whole
 * array by `lead` elements so that interior x = 0 of every row lies on a 128-byte boundary
 * (measured on an H200, tests/gpu/tier2_lab.cu: its one-step kernels run 3-18 % faster than with
 * the interior one element past the boundary). Same interior and ghost cells as the driver's
 * layout; only the strides and the shift differ (the driver never indexes device memory itself). */
static struct layout dev_layout(const struct layout *l)
{
  struct layout d = *l;
  const int64_t w = 16 / l->elem, line = 128 / l->elem;
  d.lead = (line - l->halo[0] % line) % line;
  d.stride[1] = (l->n[0] + 2 * l->halo[0] + 2 * w + 31) / 32 * 32;
  d.stride[2] = d.stride[1] * (l->n[1] + 2 * l->halo[1]);
  d.count = d.lead + d.stride[2] * (l->n[2] + 2 * l->halo[2]);
  return d;
}

static klay make_klay(const struct layout *lay)
{
  const struct layout dl = dev_layout(lay);
  const struct layout *l = &dl;
  klay k;
  k.origin = layout_index(l, 0, 0, 0);
  for (int a = 0; a < 3; a++) {
    k.s[a] = l->stride[a];
    k.n[a] = l->n[a];
    k.halo[a] = l->halo[a];
  }
  return k;
}

static kbox make_kbox(const struct box *b)
{
  kbox k;
  for (int a = 0; a < 3; a++) {
    k.lo[a] = b->lo[a];
    k.hi[a] = b->hi[a];
  }
  return k;
}

template <typename REAL> static kcoef<REAL> make_kcoef(const struct stencil_coef *coef)
{
  kcoef<REAL> k;
  k.c0 = (REAL)coef->c0;
  k.cf = (REAL)coef->cf;
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      k.c[a][m] = (REAL)coef->c[a][m];
  k.radius = coef->radius;
  k.three_d = coef->ndim == 3;
  return k;
}

/* Launch on the current lane, with PDL when the lane's previous operation was a kernel, and
 * `smem` bytes of dynamic shared memory. */
template <typename... P, typename... A>
static int launch_smem(struct cuda_ctx *c, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                       A... args)
{
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->lane[c->cur];
  cudaLaunchAttribute attr[1];
  if (c->pdl && c->last_kernel[c->cur]) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, args...));
  CHECK_LAUNCH(cfg.stream);
  c->last_kernel[c->cur] = 1;
  return STENCIL_OK;
}

template <typename... P, typename... A>
static int launch(struct cuda_ctx *c, void (*kernel)(P...), dim3 grid, dim3 block, A... args)
{
  return launch_smem(c, kernel, grid, block, 0, args...);
}

/* Make the current lane wait for everything issued so far to the other lane. */
static int wait_other(struct cuda_ctx *c)
{
  const int o = 1 - c->cur;
  CHECK_CUDA(cudaEventRecord(c->mark[o], c->lane[o]));
  CHECK_CUDA(cudaStreamWaitEvent(c->lane[c->cur], c->mark[o], 0));
  c->last_kernel[o] = 0;
  c->last_kernel[c->cur] = 0;
  return STENCIL_OK;
}

static cudaStream_t stream_of(struct cuda_ctx *c)
{
  c->last_kernel[c->cur] = 0; /* a non-kernel operation follows on this lane */
  return c->lane[c->cur];
}

static int64_t clamp_grid(int64_t n, int64_t max)
{
  return n < 1 ? 1 : n > max ? max : n;
}

/* ---- device discovery and errors ------------------------------------------------------- */

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

/* A clear message when this binary carries no code the device can run. */
static int check_kernel_image(struct cuda_ctx *c)
{
  cudaFuncAttributes fa;
  cudaError_t e = cudaFuncGetAttributes(&fa, update_ref<double>);
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
      e == cudaErrorUnsupportedPtxVersion) {
    cudaGetLastError();
    FAIL(STENCIL_ERR,
         "this stencil build has no GPU code for device %d (%s, compute capability %d.%d): it was "
         "built for CUDA architectures %s (%s). Rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d "
         "(or add it to the list)",
         c->device, c->prop.name, c->prop.major, c->prop.minor, STENCIL_CUDA_ARCHS,
         cudaGetErrorName(e), c->prop.major, c->prop.minor);
  }
  CHECK_CUDA(e);
  return STENCIL_OK;
}

static void cuda_destroy(void *ctx);

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
  c->device = opt->device;
  c->tier = opt->tier;
  c->pdl = opt->pdl;
  CHECK_CUDA(cudaSetDevice(c->device));
  CHECK_CUDA(cudaGetDeviceProperties(&c->prop, c->device));
  CHECK_CUDA(cudaDeviceGetPCIBusId(c->pci, (int)sizeof c->pci, c->device));
  CHECK(check_kernel_image(c));
  if (c->prop.major < 9)
    c->pdl = 0; /* programmatic dependent launch needs compute capability 9.0 */
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
    if (opt->tile2[3] < 0 || opt->tile2[3] > 2 || shape_error(opt->tile2))
      FAIL(STENCIL_ERR, "tier-2 shape %dx%dx%dx%d: %s", opt->tile2[0], opt->tile2[1], opt->tile2[2],
           opt->tile2[3],
           opt->tile2[3] < 0 || opt->tile2[3] > 2 ? "form 0, 1 or 2" : shape_error(opt->tile2));
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
  cudaFree(c->sig);
  cudaFreeHost(c->partial_h);
  cudaFree(c->res_partial);
  cudaFreeHost(c->res_h);
  cudaFree(c->fres_scratch);
  cudaFreeHost(c->fres_h);
  if (c->fres_done)
    cudaEventDestroy(c->fres_done);
  cudaFree(c->scratch);
  free(c);
}

static void cuda_describe(void *ctx, char *buf, size_t len)
{
  struct cuda_ctx *c = CTX(ctx);
  char kern[448];
  const char *how = c->tuned ? ", tuned" : c->forced ? ", fixed" : "";
  if (c->fused) {
    char plan[400];
    cluster_heat_describe(&c->plan, plan, sizeof plan);
    snprintf(kern, sizeof kern, "tier 3 (%s)", plan);
  } else if (c->used_tier == 2 || (c->tier != 1 && c->tuned))
    snprintf(kern, sizeof kern, "tier 2 (%s, block %dx%dx%d%s)",
             c->tile[3] == 0   ? "scalar"
             : c->tile[3] == 1 ? "vector"
                               : "vector, deep queue",
             c->tile[0], c->tile[1], c->tile[2], how);
  else
    snprintf(kern, sizeof kern, "tier %d", c->tier == 1 ? 1 : 2);
  snprintf(buf, len, "GPU %d %s, PCI %s, sm_%d%d, %d SMs, %.1f GiB; kernel %s, PDL %s", c->device,
           c->prop.name, c->pci, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
           (double)c->prop.totalGlobalMem / (1 << 30), kern, c->pdl ? "on" : "off");
}

/* ---- memory ---------------------------------------------------------------------------- */

static int device_malloc(struct cuda_ctx *c, size_t bytes, void **p, const char *what)
{
  size_t free_b = 0, total_b = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    *p = NULL;
    FAIL(STENCIL_ERR,
         "out of device memory on GPU %d (%s): %s needs %zu bytes (%.3f GiB) but only %zu bytes "
         "(%.3f GiB) of %.3f GiB are free; use more GPUs or a smaller grid",
         c->device, c->prop.name, what, bytes, (double)bytes / (1 << 30), free_b,
         (double)free_b / (1 << 30), (double)total_b / (1 << 30));
  }
  CHECK_CUDA(e);
  return STENCIL_OK;
}

static struct field_track *track_of(struct cuda_ctx *c, const void *buf, int create)
{
  return field_track_find(c->track, MAX_FIELDS, buf, create);
}

static void track_reset(struct cuda_ctx *c, const void *buf)
{
  field_track_reset(c->track, MAX_FIELDS, buf);
}

static int cuda_alloc(void *ctx, const struct layout *l, void **buf)
{
  struct cuda_ctx *c = CTX(ctx);
  const size_t bytes = (size_t)dev_layout(l).count * (size_t)l->elem;
  CHECK(device_malloc(c, bytes, buf, "a field"));
  CHECK_CUDA(cudaMemsetAsync(*buf, 0, bytes, stream_of(c)));
  CHECK_CUDA(cudaStreamSynchronize(c->lane[c->cur]));
  track_of(c, *buf, 1);
  return STENCIL_OK;
}

static void cuda_release(void *ctx, void *buf)
{
  struct cuda_ctx *c = CTX(ctx);
  struct field_track *t = track_of(c, buf, 0);
  if (t)
    t->buf = NULL;
  cudaFree(buf);
}

static int cuda_buffer_alloc(void *ctx, size_t bytes, int device, void **p)
{
  struct cuda_ctx *c = CTX(ctx);
  if (device)
    return device_malloc(c, bytes, p, "a halo buffer");
  CHECK_CUDA(cudaMallocHost(p, bytes ? bytes : 1));
  return STENCIL_OK;
}

static void cuda_buffer_release(void *ctx, void *p, int device)
{
  (void)ctx;
  if (device)
    cudaFree(p);
  else
    cudaFreeHost(p);
}

/* Copy between the interior of buf and a dense host array (pageable or pinned). */
static int copy_interior(struct cuda_ctx *c, const struct layout *l, void *dev, void *host,
                         int upload)
{
  cudaMemcpy3DParms p = {};
  const size_t e = (size_t)l->elem;
  const struct layout dl = dev_layout(l);
  const int64_t sy = dl.stride[1];
  /* Rows of sy elements from the shifted start (each row's ghost cell x = -halo). */
  cudaPitchedPtr d = make_cudaPitchedPtr((char *)dev + dl.lead * e, (size_t)sy * e, (size_t)sy,
                                         (size_t)(l->n[1] + 2 * l->halo[1]));
  cudaPitchedPtr h =
      make_cudaPitchedPtr(host, (size_t)l->n[0] * e, (size_t)l->n[0], (size_t)l->n[1]);
  cudaPos dpos = make_cudaPos((size_t)l->halo[0] * e, (size_t)l->halo[1], (size_t)l->halo[2]);
  if (upload) {
    p.srcPtr = h;
    p.dstPtr = d;
    p.dstPos = dpos;
    p.kind = cudaMemcpyHostToDevice;
  } else {
    p.srcPtr = d;
    p.srcPos = dpos;
    p.dstPtr = h;
    p.kind = cudaMemcpyDeviceToHost;
  }
  p.extent = make_cudaExtent((size_t)l->n[0] * e, (size_t)l->n[1], (size_t)l->n[2]);
  /* Everything issued before on either lane comes first. */
  CHECK(wait_other(c));
  cudaStream_t s = stream_of(c);
  CHECK_CUDA(cudaMemcpy3DAsync(&p, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return STENCIL_OK;
}

static int cuda_upload(void *ctx, const struct layout *l, void *buf, const void *host)
{
  struct cuda_ctx *c = CTX(ctx);
  track_reset(c, buf);
  return copy_interior(c, l, buf, (void *)host, 1);
}

static int cuda_download(void *ctx, const struct layout *l, void *host, const void *buf)
{
  return copy_interior(CTX(ctx), l, (void *)buf, host, 0);
}

/* ---- update ---------------------------------------------------------------------------- */

/* Cells of box b that lie on face f = 2 axis + side. */
static int64_t face_cells_in(const struct layout *l, const struct box *b, int f)
{
  const int a = f / 2, side = f % 2;
  const int64_t at = side ? l->n[a] - 1 : 0;
  if (b->lo[a] > at || b->hi[a] <= at)
    return 0;
  int64_t c = 1;
  for (int x = 0; x < 3; x++) {
    if (x == a)
      continue;
    const int64_t lo = b->lo[x] > 0 ? b->lo[x] : 0, hi = b->hi[x] < l->n[x] ? b->hi[x] : l->n[x];
    c *= hi > lo ? hi - lo : 0;
  }
  return c;
}

static int64_t face_cells(const struct layout *l, int f)
{
  struct box all = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  return face_cells_in(l, &all, f);
}

static int tier2_applies(const struct cuda_ctx *c, const struct layout *l,
                         const struct stencil_coef *coef)
{
  if (c->tier == 1 || coef->radius != 1)
    return 0;
  for (int a = 0; a < coef->ndim; a++)
    if (l->halo[a] != 1)
      return 0;
  return 1;
}

template <typename REAL>
static int run_stream(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                      const void *u, const void *f, void *v, const struct box *b, const int tile[4])
{
  const int three_d = coef->ndim == 3;
  /* Logical axes: t0 = x, t1 = y (3D) or z (2D), s = z (3D) or y (2D). */
  const int ax1 = three_d ? 1 : 2, axs = three_d ? 2 : 1;
  const struct layout dl = dev_layout(l);
  kstream L;
  L.origin = layout_index(&dl, 0, 0, 0);
  L.s1 = dl.stride[ax1];
  L.ss = dl.stride[axs];
  L.h0 = dl.lead + l->halo[0];
  L.n[0] = l->n[0], L.n[1] = l->n[ax1], L.n[2] = l->n[axs];
  L.three_d = three_d;
  L.zc = tile[2];
  kbox kb;
  const int map[3] = {0, ax1, axs};
  for (int a = 0; a < 3; a++) {
    kb.lo[a] = b->lo[map[a]];
    kb.hi[a] = b->hi[map[a]];
  }
  kfaces<REAL> F;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      const struct face_rule *r = &c->face[2 * map[a] + s];
      const int real_face = map[a] < coef->ndim;
      F.kind[2 * a + s] = !real_face || !r->known ? 0 : r->kind == BC_DIRICHLET ? 1 : 2;
      F.two_g[2 * a + s] = (REAL)(2.0 * (real_face ? r->value : 0.0));
    }
  const int64_t n1 = kb.hi[1] - kb.lo[1], ns = kb.hi[2] - kb.lo[2];
  /* Threads along x: one per cell (scalar), or one per 16-byte vector (vector forms). */
  const int64_t w = 16 / l->elem;
  const int64_t nx =
      tile[3] ? (kb.hi[0] - 1 + L.h0) / w - (kb.lo[0] + L.h0) / w + 1 : kb.hi[0] - kb.lo[0];
  dim3 block((unsigned)tile[0], (unsigned)tile[1], 1);
  dim3 grid((unsigned)((nx + tile[0] - 1) / tile[0]), (unsigned)((n1 + tile[1] - 1) / tile[1]),
            (unsigned)((ns + tile[2] - 1) / tile[2]));
  if (grid.y > 65535 || grid.z > 65535)
    FAIL(STENCIL_ERR, "block of %lld x %lld x %lld cells is too large for one GPU launch",
         (long long)l->n[0], (long long)l->n[1], (long long)l->n[2]);
  if (tile[3] == 1)
    return launch(c, update_vec<REAL, 1>, grid, block, (const REAL *)u, (const REAL *)f, (REAL *)v,
                  L, kb, make_kcoef<REAL>(coef), F);
  if (tile[3] == 2)
    return launch(c, update_vec<REAL, 2>, grid, block, (const REAL *)u, (const REAL *)f, (REAL *)v,
                  L, kb, make_kcoef<REAL>(coef), F);
  if (three_d && !f)
    return launch(c, update_lean<REAL>, grid, block, (const REAL *)u, (REAL *)v, L, kb,
                  make_kcoef<REAL>(coef), F);
  return launch(c, update_stream<REAL>, grid, block, (const REAL *)u, (const REAL *)f, (REAL *)v, L,
                kb, make_kcoef<REAL>(coef), F);
}

template <typename REAL>
static int run_ref(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                   const void *u, const void *f, void *v, const struct box *b)
{
  const int64_t nx = b->hi[0] - b->lo[0], ny = b->hi[1] - b->lo[1], nz = b->hi[2] - b->lo[2];
  dim3 block(64, 4, 1);
  dim3 grid((unsigned)((nx + 63) / 64), (unsigned)((ny + 3) / 4), (unsigned)clamp_grid(nz, 65535));
  if (grid.y > 65535)
    FAIL(STENCIL_ERR, "a block of %lld rows is too large for one GPU launch", (long long)ny);
  return launch(c, update_ref<REAL>, grid, block, (const REAL *)u, (const REAL *)f, (REAL *)v,
                make_klay(l), make_kbox(b), make_kcoef<REAL>(coef));
}

static int cuda_update(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                       const void *u, const void *f, void *v, const struct box *b)
{
  struct cuda_ctx *c = CTX(ctx);
  if (box_count(b) <= 0)
    return STENCIL_OK;
  const int fp64 = l->elem == 8;
  if (tier2_applies(c, l, coef)) {
    /* Tier 2 also writes the ghosts of every known physical face it touches. */
    struct field_track *t = track_of(c, v, 1);
    for (int fc = 0; fc < 2 * coef->ndim && t; fc++) {
      if (!c->face[fc].known)
        continue;
      if (t->rule[fc].known &&
          (t->rule[fc].kind != c->face[fc].kind || t->rule[fc].value != c->face[fc].value))
        t->covered[fc] = 0;
      t->rule[fc] = c->face[fc];
      t->covered[fc] += face_cells_in(l, b, fc);
    }
    c->used_tier = 2;
    return fp64 ? run_stream<double>(c, l, coef, u, f, v, b, c->tile)
                : run_stream<float>(c, l, coef, u, f, v, b, c->tile);
  }
  /* Tier 3 does not come through here: it advances several steps per call (fused_update). */
  c->used_tier = 1;
  return fp64 ? run_ref<double>(c, l, coef, u, f, v, b) : run_ref<float>(c, l, coef, u, f, v, b);
}

/* Time each candidate tile on update(u -> v, b) and keep the fastest. */
static int cuda_tune(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                     const void *u, void *v, const struct box *b)
{
  struct cuda_ctx *c = CTX(ctx);
  if (!tier2_applies(c, l, coef) || box_count(b) <= 0)
    return STENCIL_OK;
  if (c->forced) {
    const int fp64 = l->elem == 8;
    CHECK(fp64 ? run_stream<double>(c, l, coef, u, nullptr, v, b, c->tile)
               : run_stream<float>(c, l, coef, u, nullptr, v, b, c->tile));
    track_reset(c, v);
    return STENCIL_OK;
  }
  /* Threads along x and y (3D) or x (2D), cells per block along the streaming axis, form (0
   * scalar, 1 vector, 2 vector deep). */
  /* The fastest shapes of tests/gpu/tier2_lab.cu on an H200, 512^3 (short chunks win). */
  static const int cand3[][4] = {{32, 4, 8, 1},   {32, 8, 8, 1},  {64, 4, 8, 1},   {128, 2, 8, 1},
                                 {32, 4, 16, 1},  {32, 4, 32, 1}, {32, 4, 8, 2},   {32, 8, 16, 2},
                                 {128, 4, 16, 0}, {64, 8, 16, 0}, {128, 4, 32, 0}, {64, 8, 8, 0},
                                 {32, 16, 8, 0},  {128, 4, 8, 0}, {256, 2, 16, 0}};
  static const int cand2[][4] = {{128, 1, 32, 0}, {256, 1, 32, 0}, {512, 1, 16, 0},
                                 {64, 1, 32, 1},  {128, 1, 32, 1}, {128, 1, 64, 1},
                                 {256, 1, 16, 1}, {128, 1, 32, 2}, {256, 1, 32, 2}};
  const int three_d = coef->ndim == 3;
  const int ncand =
      three_d ? (int)(sizeof cand3 / sizeof cand3[0]) : (int)(sizeof cand2 / sizeof cand2[0]);
  const int fp64 = l->elem == 8;
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  float best = 1e30f;
  /* Fewer repetitions for large boxes; each candidate gets a warm-up launch. */
  const int reps = box_count(b) > ((int64_t)1 << 26) ? 5 : 8;
  int t[4], best_t[4] = {0, 0, 0, 0};
  for (int i = 0; i < ncand; i++) {
    memcpy(t, three_d ? cand3[i] : cand2[i], sizeof t);
    if (shape_error(t))
      continue;
    for (int r = 0; r <= reps; r++) {
      if (r == 1)
        CHECK_CUDA(cudaEventRecord(e0, stream_of(c)));
      CHECK(fp64 ? run_stream<double>(c, l, coef, u, nullptr, v, b, t)
                 : run_stream<float>(c, l, coef, u, nullptr, v, b, t));
    }
    CHECK_CUDA(cudaEventRecord(e1, stream_of(c)));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) {
      best = ms;
      memcpy(best_t, t, sizeof t);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  memcpy(c->tile, best_t, sizeof c->tile);
  c->tuned = 1;
  track_reset(c, v);
  return STENCIL_OK;
}

/* ---- halo boxes and boundaries --------------------------------------------------------- */

/* One side of a move: box b of the padded array u (dense = NULL) or the dense buffer. */
static void move_side(const struct layout *l, void *u, const struct box *b, void *dense,
                      void **base, int64_t st[2])
{
  const klay L = make_klay(l);
  const int64_t nx = b->hi[0] - b->lo[0], ny = b->hi[1] - b->lo[1];
  if (dense) {
    *base = dense;
    st[0] = nx;
    st[1] = nx * ny;
    return;
  }
  *base = (char *)u +
          (size_t)l->elem * (size_t)(L.origin + b->lo[0] + b->lo[1] * L.s[1] + b->lo[2] * L.s[2]);
  st[0] = L.s[1];
  st[1] = L.s[2];
}

/* n moves of box b[i]: from u to dense[i] (pack), dense[i] to u (unpack), or, with dense =
 * NULL, from box b[i] of u to box to[i] of u (same extents); in launches of MOVES_MAX. */
static int moves_launch(struct cuda_ctx *c, const struct layout *l, void *u, int n,
                        const struct box *b, const struct box *to, void *const *dense, int unpack)
{
  for (int done = 0; done < n; done += MOVES_MAX) {
    kmoves m = {};
    int k = 0;
    for (int i = done; i < n && i < done + MOVES_MAX; i++) {
      const int64_t cells = box_count(&b[i]);
      if (cells <= 0)
        continue;
      if (cells >= ((int64_t)1 << 31))
        FAIL(STENCIL_ERR,
             "a halo box of %lld cells is too large for the copy kernel's 32-bit "
             "indices; use more ranks",
             (long long)cells);
      for (int a = 0; a < 3; a++)
        m.ext[k][a] = (int)(b[i].hi[a] - b[i].lo[a]);
      void *box_base, *other;
      int64_t box_st[2], other_st[2];
      move_side(l, u, &b[i], NULL, &box_base, box_st);
      move_side(l, u, to ? &to[i] : &b[i], to ? NULL : dense[i], &other, other_st);
      m.from[k] = unpack ? other : box_base;
      m.to[k] = unpack ? box_base : other;
      for (int a = 0; a < 2; a++) {
        m.fs[k][a] = unpack ? other_st[a] : box_st[a];
        m.ts[k][a] = unpack ? box_st[a] : other_st[a];
      }
      m.first[k + 1] = m.first[k] + (int)clamp_grid((cells + 255) / 256, 1024);
      k++;
    }
    for (int i = k + 1; i <= MOVES_MAX; i++)
      m.first[i] = m.first[k];
    if (k == 0)
      continue;
    const dim3 grid((unsigned)m.first[k], 1, 1), block(256, 1, 1);
    if (l->elem == 8)
      CHECK(launch(c, move_boxes<double>, grid, block, m));
    else
      CHECK(launch(c, move_boxes<float>, grid, block, m));
  }
  return STENCIL_OK;
}

/* Whether the kernels can reach p directly (device or page-locked host memory). */
static int reachable(const void *p)
{
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type != cudaMemoryTypeUnregistered;
}

static int staging(struct cuda_ctx *c, size_t bytes)
{
  if (c->scratch_bytes >= bytes)
    return STENCIL_OK;
  cudaFree(c->scratch);
  c->scratch = NULL;
  c->scratch_bytes = 0;
  CHECK(device_malloc(c, bytes, &c->scratch, "a staging buffer"));
  c->scratch_bytes = bytes;
  return STENCIL_OK;
}

static int cuda_pack(void *ctx, const struct layout *l, const void *u, const struct box *b,
                     void *host)
{
  struct cuda_ctx *c = CTX(ctx);
  if (box_count(b) <= 0)
    return STENCIL_OK;
  if (reachable(host))
    return moves_launch(c, l, (void *)u, 1, b, NULL, &host, 0);
  const size_t bytes = (size_t)box_count(b) * (size_t)l->elem;
  CHECK(staging(c, bytes));
  CHECK(moves_launch(c, l, (void *)u, 1, b, NULL, &c->scratch, 0));
  CHECK_CUDA(cudaMemcpyAsync(host, c->scratch, bytes, cudaMemcpyDeviceToHost, stream_of(c)));
  CHECK_CUDA(cudaStreamSynchronize(c->lane[c->cur]));
  return STENCIL_OK;
}

static int cuda_unpack(void *ctx, const struct layout *l, void *u, const struct box *b,
                       const void *host)
{
  struct cuda_ctx *c = CTX(ctx);
  if (box_count(b) <= 0)
    return STENCIL_OK;
  struct box all = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  for (int a = 0; a < 3; a++) {
    all.lo[a] = b->lo[a] > all.lo[a] ? b->lo[a] : all.lo[a];
    all.hi[a] = b->hi[a] < all.hi[a] ? b->hi[a] : all.hi[a];
  }
  if (box_count(&all) > 0)
    track_reset(c, u); /* interior cells change: fused ghosts no longer match */
  void *dense = (void *)host;
  if (reachable(host))
    return moves_launch(c, l, u, 1, b, NULL, &dense, 1);
  const size_t bytes = (size_t)box_count(b) * (size_t)l->elem;
  CHECK(staging(c, bytes));
  CHECK_CUDA(cudaMemcpyAsync(c->scratch, host, bytes, cudaMemcpyHostToDevice, stream_of(c)));
  CHECK(moves_launch(c, l, u, 1, b, NULL, &c->scratch, 1));
  CHECK_CUDA(cudaStreamSynchronize(c->lane[c->cur]));
  return STENCIL_OK;
}

static int cuda_copy_boxes(void *ctx, const struct layout *l, void *u, int n,
                           const struct box *from, const struct box *to)
{
  return moves_launch(CTX(ctx), l, u, n, from, to, NULL, 0);
}

static int cuda_pack_boxes(void *ctx, const struct layout *l, const void *u, int n,
                           const struct box *b, void *const *bufs)
{
  return moves_launch(CTX(ctx), l, (void *)u, n, b, NULL, bufs, 0);
}

static int cuda_unpack_boxes(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                             const void *const *bufs)
{
  return moves_launch(CTX(ctx), l, u, n, b, NULL, (void *const *)bufs, 1);
}

/* Record face f's rule; 0 when fused tier-2 updates have written its ghosts with the same
 * rule since the last fill (then nothing is left to fill). */
static int face_needs_fill(struct cuda_ctx *c, const struct layout *l, const void *u, int f,
                           enum bc_kind kind, double value)
{
  c->face[f].known = 1;
  c->face[f].kind = kind;
  c->face[f].value = value;
  struct field_track *t = track_of(c, u, 0);
  const int fused = t && t->covered[f] == face_cells(l, f) && t->rule[f].known &&
                    t->rule[f].kind == kind && t->rule[f].value == value && l->halo[f / 2] == 1;
  if (t)
    t->covered[f] = 0;
  return !fused;
}

/* One launch for the faces with on[a][s] (every face's cells and values as boundary()). */
static int cuda_boundaries(void *ctx, const struct layout *l, void *u, const int on[3][2],
                           const enum bc_kind kind[3][2], const double value[3][2])
{
  struct cuda_ctx *c = CTX(ctx);
  kbfaces<double> F64 = {};
  kbfaces<float> F32 = {};
  int64_t blocks = 0;
  for (int f = 0; f < 6; f++) {
    const int a = f / 2, s = f % 2;
    F64.first[f] = F32.first[f] = (unsigned)blocks;
    if (!on[a][s] || !face_needs_fill(c, l, u, f, kind[a][s], value[a][s]))
      continue;
    F64.dirichlet[f] = F32.dirichlet[f] = kind[a][s] == BC_DIRICHLET;
    F64.two_g[f] = 2.0 * value[a][s];
    F32.two_g[f] = (float)(2.0 * value[a][s]);
    const int64_t n1 = l->n[a == 0 ? 1 : 0], n2 = l->n[a == 2 ? 1 : 2], h = l->halo[a];
    if (n1 * n2 * h >= ((int64_t)1 << 32))
      FAIL(STENCIL_ERR,
           "face %c%s has %lld ghost cells: too many for the boundary kernel's 32-bit indices; "
           "use more ranks",
           "xyz"[a], s ? "_hi" : "_lo", (long long)(n1 * n2 * h));
    const int64_t inner = a == 0 ? h * n1 : n1, outer = a == 0 ? n2 : h * n2;
    F64.bx[f] = F32.bx[f] = (unsigned)((inner + 127) / 128);
    F64.by[f] = F32.by[f] = (unsigned)clamp_grid(outer, 128);
    blocks += (int64_t)F64.bx[f] * F64.by[f];
  }
  F64.first[6] = F32.first[6] = (unsigned)blocks;
  if (blocks == 0)
    return STENCIL_OK;
  dim3 block(128, 1, 1), grid((unsigned)blocks, 1, 1);
  if (l->elem == 8)
    return launch(c, boundary_faces<double>, grid, block, (double *)u, make_klay(l), F64);
  return launch(c, boundary_faces<float>, grid, block, (float *)u, make_klay(l), F32);
}

static int cuda_boundary(void *ctx, const struct layout *l, void *u, int axis, int side,
                         enum bc_kind kind, double value)
{
  int on[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  enum bc_kind k[3][2];
  double v[3][2];
  on[axis][side] = 1;
  k[axis][side] = kind;
  v[axis][side] = value;
  return cuda_boundaries(ctx, l, u, on, k, v);
}

/* ---- norms, sync, bandwidth, lanes ----------------------------------------------------- */

static int cuda_norms_begin(void *ctx, const struct layout *l, const void *u)
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

static int cuda_norms_end(void *ctx, struct norms *out)
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

static int cuda_norms(void *ctx, const struct layout *l, const void *u, struct norms *out)
{
  CHECK(cuda_norms_begin(ctx, l, u));
  return cuda_norms_end(ctx, out);
}

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

static int cuda_lane_select(void *ctx, int lane)
{
  CTX(ctx)->cur = lane == LANE_BULK ? LANE_BULK : LANE_HALO;
  return STENCIL_OK;
}

static int cuda_lane_fence(void *ctx)
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

static int cuda_lane_sync(void *ctx, int lane)
{
  struct cuda_ctx *c = CTX(ctx);
  CHECK_CUDA(cudaStreamSynchronize(c->lane[lane == LANE_BULK ? LANE_BULK : LANE_HALO]));
  return STENCIL_OK;
}

static void *cuda_lane_queue(void *ctx, int lane)
{
  struct cuda_ctx *c = CTX(ctx);
  const int i = lane == LANE_BULK ? LANE_BULK : LANE_HALO;
  c->last_kernel[i] = 0; /* the caller adds its own operations */
  return (void *)c->lane[i];
}

/* ---- residual: the Poisson residual, reduced on the device ------------------------------ */

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
  REAL kc[3][R];
#pragma unroll
  for (int a = 0; a < 3; a++)
#pragma unroll
    for (int m = 0; m < R; m++)
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
      REAL w = k0 * p[0];
#pragma unroll
      for (int m = 1; m <= R; m++)
        w = stencil_fma(kc[0][m - 1], p[-m] + p[m], w);
#pragma unroll
      for (int m = 1; m <= R; m++)
        w = stencil_fma(kc[1][m - 1], p[-m * sy] + p[m * sy], w);
      if (c.three_d) {
#pragma unroll
        for (int m = 1; m <= R; m++)
          w = stencil_fma(kc[2][m - 1], p[-m * sz] + p[m * sz], w);
      }
      if (f)
        w = stencil_fma(kf, f[base + i], w);
      const double d = (double)(w - p[0]);
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

static int cuda_residual(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                         const void *u, const void *f, double *sumsq)
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

/* ---- tier 3: the fused multi-step update (kernels/cuda/cluster.h) ----------------------- */

/* fused_query (kernels/backend.h): tier 3 wherever it can run, under auto and --kernel 3
 * alike; forced, it refuses what it never runs (a 3D face of nonzero Dirichlet value, clusters
 * in 2D) instead of falling back. */
static int cuda_fused_query(int ndim, int elem, int radius, int has_source,
                            const struct fused_request *req, int *steps, char *why, size_t len)
{
  *steps = 0;
  if (len)
    why[0] = 0;
  if (req->tier != 0 && req->tier != 3) {
    snprintf(why, len, "--kernel %d", req->tier);
    return STENCIL_OK;
  }
  if (req->steps < 0 || req->steps > CLUSTER_MAX_STEPS)
    FAIL0(STENCIL_ERR_USAGE, "--steps-per-launch %d: expected 0 (from the device) or 1 to %d",
          req->steps, CLUSTER_MAX_STEPS);
  if (ndim == 2 && req->cluster[0] > 0)
    FAIL0(STENCIL_ERR_USAGE, "--cluster-size applies to 3D problems: the 2D fused kernel runs "
                             "one CTA per strip");
  if (req->tier == 3 && ndim == 3 && req->inhomogeneous)
    FAIL0(STENCIL_ERR_USAGE,
          "--kernel 3: the 3D fused kernel cannot run a Dirichlet face with a nonzero value "
          "(it reads faces through as 0 - u); use --kernel auto or 2");
  int t = 0;
  char no[160] = "";
  if (!cluster_heat_default(ndim, elem, radius, has_source, req->inhomogeneous, &t, no,
                            sizeof no)) {
    snprintf(why, len, "tier 3 cannot run this problem: %s", no);
    return STENCIL_OK;
  }
  if (t < 1 || t > CLUSTER_MAX_STEPS)
    FAIL(STENCIL_ERR, "tier 3: cluster_heat_default gave %d steps per launch (expected 1 to %d)", t,
         CLUSTER_MAX_STEPS);
  *steps = req->steps > 0 ? req->steps : t;
  snprintf(why, len, "%s", req->tier == 3 ? "--kernel 3" : "auto: faster than tier 2 here");
  return STENCIL_OK;
}

static int cuda_field_planes(void *ctx, const struct layout *l, int64_t z0, int64_t z1,
                             size_t *offset, size_t *bytes)
{
  (void)ctx;
  const struct layout d = dev_layout(l);
  *offset = (size_t)layout_index(&d, -l->halo[0], -l->halo[1], z0) * (size_t)l->elem;
  *bytes = (size_t)((z1 - z0) * d.stride[2]) * (size_t)l->elem;
  return z0 < z1 && z0 >= -l->halo[2] && z1 <= l->n[2] + l->halo[2];
}

/* fused_prepare: the plan for this block, kept in the context. The kernel gets the device
 * copy's layout (rows padded to 32 elements, dev_layout), which is what u and v are. */
static int cuda_fused_prepare(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                              int has_source, const struct block_faces *faces,
                              const struct fused_request *req, int *steps, int *own_faces)
{
  struct cuda_ctx *c = CTX(ctx);
  *steps = 0;
  *own_faces = 0;
  c->fused = 0;
  /* In 3D without a source, when every reflecting face is homogeneous, they are halo faces
   * whose ghosts mirror the interior, and a mirrored field stays mirrored step by step
   * (common/types.h) as an exchanged halo stays valid. The warp-row kernel reads them (and
   * the periodic wraps of axes this rank spans) through the face itself (cf.read) where n
   * along x is a multiple of its 16-byte vectors; otherwise the driver's boundary() fills them
   * T x radius deep after every launch and mirror_edges their edges and corners before it. */
  int mirror = coef->ndim == 3 && !has_source, reflecting = 0;
  memset(&c->mirror, 0, sizeof c->mirror);
  for (int a = 0; a < coef->ndim; a++)
    for (int s = 0; s < 2; s++)
      if (!faces->exchanged[a][s]) {
        reflecting = 1;
        mirror &= bc_homogeneous(faces->kind[a][s], faces->value[a][s]);
        c->mirror.on[a][s] = 1;
        c->mirror.neg[a][s] = faces->kind[a][s] == BC_DIRICHLET;
      }
  c->mirrored = mirror && reflecting;
  c->mirror_lay = make_klay(l);
  struct cluster_faces cf;
  memset(&cf, 0, sizeof cf);
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      cf.kind[a][s] = CLUSTER_FACE_HALO;
      if (a < coef->ndim && faces->wrapped[a][s])
        cf.read[a][s] = CLUSTER_READ_WRAP;
      if (a < coef->ndim && c->mirror.on[a][s] && c->mirrored)
        cf.read[a][s] = c->mirror.neg[a][s] ? CLUSTER_READ_MIRROR_NEG : CLUSTER_READ_MIRROR;
      if (a >= coef->ndim || faces->exchanged[a][s] || c->mirrored)
        continue;
      if (faces->kind[a][s] == BC_DIRICHLET) {
        cf.kind[a][s] = CLUSTER_FACE_DIRICHLET;
        cf.value[a][s] = faces->value[a][s];
      } else if (faces->kind[a][s] == BC_NEUMANN) {
        cf.kind[a][s] = CLUSTER_FACE_NEUMANN;
      } else {
        FAIL(STENCIL_ERR, "tier 3: face %c%s is periodic but its ghost cells are not exchanged",
             "xyz"[a], s ? "_hi" : "_lo");
      }
    }
  struct cluster_config want;
  memset(&want, 0, sizeof want);
  want.steps = req->steps;
  want.cluster[0] = req->cluster[0];
  want.cluster[1] = coef->ndim == 3 ? req->cluster[1] : 0;
  want.chunk = req->chunk;
  const struct layout dl = dev_layout(l);
  if (cluster_heat_plan(&dl, coef, has_source, &cf, &want, c->device, &c->plan) != 0)
    FAIL(STENCIL_ERR,
         "tier 3: no launch plan for a block of %lld x %lld x %lld cells (halo %d %d %d) on GPU "
         "%d (%s): see the message above",
         (long long)l->n[0], (long long)l->n[1], (long long)l->n[2], l->halo[0], l->halo[1],
         l->halo[2], c->device, c->prop.name);
  if (c->plan.steps < 1 || c->plan.steps > CLUSTER_MAX_STEPS)
    FAIL(STENCIL_ERR, "tier 3: the plan has %d steps per launch (expected 1 to %d)", c->plan.steps,
         CLUSTER_MAX_STEPS);
  c->fused = 1;
  *steps = c->plan.steps;
  *own_faces = c->plan.reads_faces;
  /* mirror_edges: where the kernel reads the mirrored faces from memory */
  c->mirror_blocks = 0;
  if (c->mirrored && !c->plan.reads_faces) {
    const klay &L = c->mirror_lay;
    int64_t most = 0;
    for (int a = 0; a < 3; a++) {
      const int a1 = a == 0 ? 1 : 0, a2 = a == 2 ? 1 : 2;
      const int64_t w1 = L.n[a1] + 2 * L.halo[a1], w2 = L.n[a2] + 2 * L.halo[a2];
      const int64_t cells = (w1 * w2 - L.n[a1] * L.n[a2]) * L.halo[a];
      most = cells > most ? cells : most;
    }
    c->mirror_blocks = (unsigned)clamp_grid((most + 255) / 256, 512);
  }
  /* Parts (fused_split) for the warp-row kernel when only z faces send messages and it reads
   * the faces and wraps itself: the sent planes, then the rest. (Without reads_faces the
   * driver's wrap copies and mirror_edges would read cells of the inner part while it runs.) */
  int xy = 0;
  c->split_faces = 0;
  for (int a = 0; a < coef->ndim; a++)
    for (int s = 0; s < 2; s++) {
      const int msg = faces->exchanged[a][s] && !faces->wrapped[a][s];
      xy |= msg && a < 2;
      if (a == 2)
        c->split_faces |= msg << s;
    }
  if (xy || !cluster_heat_splits_z(&c->plan) || !c->plan.reads_faces || l->n[2] <= 2 * l->halo[2])
    c->split_faces = 0;
  /* The form of a launch in parts: req->split forces one (FUSED_FORM_SIGNAL: where the plan
   * allows it); 0 lets the model decide (cluster_heat_signals for these faces). */
  c->split_one =
      c->split_faces && req->split != FUSED_FORM_SHELLS &&
      cluster_heat_signals(&c->plan, req->split == FUSED_FORM_SIGNAL ? 0 : c->split_faces);
  if (c->split_one && !c->sig) {
    cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
      cudaGetLastError();
      c->split_one = 0; /* (a driver without it: the shells) */
      return STENCIL_OK;
    }
    memcpy(&c->wait_value, &fn, sizeof fn);
    CHECK_CUDA(cudaMalloc((void **)&c->sig, sizeof *c->sig));
    CHECK_CUDA(cudaMemset(c->sig, 0, sizeof *c->sig));
    CHECK_CUDA(cudaDeviceSynchronize());
    c->sig_target = 0;
  }
  return STENCIL_OK;
}

static int cuda_fused_split(void *ctx)
{
  const struct cuda_ctx *c = CTX(ctx);
  if (!c->fused || !c->split_faces)
    return 0;
  return FUSED_SPLIT | (c->split_one ? FUSED_SPLIT_ONE : 0);
}

/* fused_update: v = S^k(u) [with f] in one launch on the current lane, or its part: the
 * planes the exchange sends (halo[2] at each z face that sends) or the others. */
static int cuda_fused_update(void *ctx, const void *u, const void *f, void *v, int k, int part)
{
  struct cuda_ctx *c = CTX(ctx);
  if (!c->fused)
    FAIL(STENCIL_ERR, "tier 3: fused_update before fused_prepare");
  if (k < 1 || k > c->plan.steps)
    FAIL(STENCIL_ERR, "tier 3: %d fused steps asked of a plan of %d", k, c->plan.steps);
  track_reset(c, v); /* v's interior changes: ghosts written by tier 2 no longer match */
  if (c->mirror_blocks) {
    const dim3 grid(c->mirror_blocks, 3, 2), block(256, 1, 1);
    if (c->plan.elem == 8)
      CHECK(launch(c, mirror_edges<double>, grid, block, (double *)u, c->mirror_lay, c->mirror));
    else
      CHECK(launch(c, mirror_edges<float>, grid, block, (float *)u, c->mirror_lay, c->mirror));
  }
  if (part != FUSED_ALL && !cuda_fused_split(ctx))
    FAIL(STENCIL_ERR, "tier 3: a launch in parts for a plan that does not split");
  if (c->split_one && part == FUSED_INNER)
    return STENCIL_OK; /* (run by the shell's part) */
  if (c->split_one && part == FUSED_SHELL) {
    /* all planes on the bulk lane; the halo lane waits until the sent ones are stored */
    cudaStream_t b = c->lane[LANE_BULK];
    unsigned add = 0;
    if (cluster_heat_launch_signal(&c->plan, u, v, k, c->split_faces, c->sig, &add, (void *)b))
      FAIL(STENCIL_ERR, "tier 3: the launch of %d fused steps failed: see the message above", k);
    CHECK_LAUNCH(b);
    c->last_kernel[LANE_BULK] = 0;
    c->sig_target += add;
    const CUresult e = c->wait_value((CUstream)stream_of(c), (CUdeviceptr)c->sig, c->sig_target,
                                     CU_STREAM_WAIT_VALUE_GEQ);
    if (e != CUDA_SUCCESS)
      FAIL(STENCIL_ERR, "cuStreamWaitValue32 failed (CUresult %d)", (int)e);
    c->used_tier = 3;
    return STENCIL_OK;
  }
  cudaStream_t s = stream_of(c);
  const int64_t nz = c->plan.lay.n[2], h = c->plan.lay.halo[2];
  int bad = 0;
  if (part == FUSED_ALL)
    bad = cluster_heat_launch(&c->plan, u, f, v, k, (void *)s);
  const int lo = c->split_faces & 1, hi = c->split_faces >> 1;
  if (part == FUSED_SHELL && lo)
    bad = cluster_heat_launch_planes(&c->plan, u, v, k, 0, h, (void *)s);
  if (part == FUSED_SHELL && hi && !bad)
    bad = cluster_heat_launch_planes(&c->plan, u, v, k, nz - h, nz, (void *)s);
  if (part == FUSED_INNER)
    bad = cluster_heat_launch_planes(&c->plan, u, v, k, lo ? h : 0, hi ? nz - h : nz, (void *)s);
  if (bad)
    FAIL(STENCIL_ERR, "tier 3: the launch of %d fused steps failed: see the message above", k);
  CHECK_LAUNCH(s);
  c->used_tier = 3;
  return STENCIL_OK;
}

/* fused_residual_steps: the warp-strip kernel (2D) sums residuals inside a launch of up to
 * cluster_heat_residual_steps() steps. */
static int cuda_fused_residual_steps(void *ctx)
{
  const struct cuda_ctx *c = CTX(ctx);
  return c->fused ? cluster_heat_residual_steps(&c->plan) : 0;
}

/* fused_residual_max: the warp-strip plans of 2D (any plan may be one). */
static int cuda_fused_residual_max(int ndim, int elem)
{
  return ndim == 2 ? CLUSTER_RESIDUAL_STEPS(elem) : 0;
}

/* fused_residual: one launch with the residual sums (cluster_heat_launch_residual), then one
 * 64-byte copy to page-locked memory, recorded by an event that fused_residual_sums waits for. */
static int cuda_fused_residual(void *ctx, const void *u, const void *f, void *v, int k,
                               unsigned mask)
{
  struct cuda_ctx *c = CTX(ctx);
  if (k < 1 || k > cuda_fused_residual_steps(ctx))
    FAIL(STENCIL_ERR, "tier 3: %d fused steps with residuals asked of a plan that allows %d", k,
         cuda_fused_residual_steps(ctx));
  const size_t n = cluster_heat_scratch(&c->plan);
  if (!c->fres_scratch) {
    CHECK(device_malloc(c, (n + 8) * sizeof(double), (void **)&c->fres_scratch,
                        "the fused residual's partial sums"));
    CHECK_CUDA(cudaMallocHost((void **)&c->fres_h, 8 * sizeof(double)));
    CHECK_CUDA(cudaEventCreateWithFlags(&c->fres_done, cudaEventDisableTiming));
  }
  track_reset(c, v);
  cudaStream_t s = stream_of(c);
  if (cluster_heat_launch_residual(&c->plan, u, f, v, k, mask, c->fres_scratch, c->fres_scratch + n,
                                   (void *)s) != 0)
    FAIL(STENCIL_ERR, "tier 3: the launch of %d fused steps with residuals failed: see above", k);
  CHECK_LAUNCH(s);
  CHECK_CUDA(cudaMemcpyAsync(c->fres_h, c->fres_scratch + n, 8 * sizeof(double),
                             cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaEventRecord(c->fres_done, s));
  c->used_tier = 3;
  return STENCIL_OK;
}

static int cuda_fused_residual_sums(void *ctx, double sumsq[BACKEND_FUSED_MAX_STEPS])
{
  struct cuda_ctx *c = CTX(ctx);
  if (!c->fres_done)
    FAIL(STENCIL_ERR, "tier 3: residual sums asked before any fused launch with residuals");
  CHECK_CUDA(cudaEventSynchronize(c->fres_done));
  for (int l = 0; l < BACKEND_FUSED_MAX_STEPS; l++)
    sumsq[l] = l < 8 ? c->fres_h[l] : 0;
  return STENCIL_OK;
}

extern "C" const struct backend_ops backend_cuda = {
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .update = cuda_update,
    .pack = cuda_pack,
    .unpack = cuda_unpack,
    .copy_boxes = cuda_copy_boxes,
    .boundary = cuda_boundary,
    .norms = cuda_norms,
    .norms_begin = cuda_norms_begin,
    .norms_end = cuda_norms_end,
    .residual = cuda_residual,
    .sync = cuda_sync,
    .measure_bandwidth = cuda_measure_bandwidth,
    .devices = cuda_devices,
    .describe = cuda_describe,
    .tune = cuda_tune,
    .lane_select = cuda_lane_select,
    .lane_fence = cuda_lane_fence,
    .lane_sync = cuda_lane_sync,
    .lane_queue = cuda_lane_queue,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_release = cuda_buffer_release,
    .field_planes = cuda_field_planes,
    .pack_boxes = cuda_pack_boxes,
    .unpack_boxes = cuda_unpack_boxes,
    .boundaries = cuda_boundaries,
    .fused_query = cuda_fused_query,
    .fused_prepare = cuda_fused_prepare,
    .fused_update = cuda_fused_update,
    .fused_split = cuda_fused_split,
    .fused_residual_steps = cuda_fused_residual_steps,
    .fused_residual_max = cuda_fused_residual_max,
    .fused_residual = cuda_fused_residual,
    .fused_residual_sums = cuda_fused_residual_sums,
};
