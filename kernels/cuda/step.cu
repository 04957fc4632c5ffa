/* The CUDA backend's single-step kernels (context.h), every one giving the CPU backend's bits:
 *   tier 1  update_ref: one thread per cell, any radius, plain global loads (the reference);
 *   tier 2  radius 1, streaming: a thread owns a column of a tile and walks through z (through
 *           y in 2D) keeping planes k-1, k, k+1 (and D planes ahead) in registers; the x and y
 *           neighbours come through L1. Two forms: update_stream (a thread per cell; in 3D
 *           without a source its lean variant update_lean) and update_vec (a thread per
 *           aligned 16-byte vector, x neighbours by warp shuffles). cuda_tune times every form
 *           and block shape on the run's own box at start-up and keeps the fastest. Tier 2
 *           also writes the reflected ghost cells of the physical faces it touches, so the
 *           separate boundary kernel is skipped for faces it covered (struct field_track). */
#include "kernels/cuda/context.h"

#ifndef STENCIL_CUDA_ARCHS
#define STENCIL_CUDA_ARCHS "unknown"
#endif

/* Tier 2 in logical axes: t0 = x (stride 1), t1 (stride s1), streaming axis s (stride ss).
 * 3D: t1 = y, s = z. 2D: t1 = z (one cell), s = y. */
struct kstream {
  int64_t origin, s1, ss;
  int64_t n[3]; /* interior cells along t0, t1, s */
  int three_d;
  int zc; /* cells of s per block */
  int h0; /* offset of interior x = 0 from the row's 128-byte aligned start: lead + halo x */
};

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
    REAL acc = stencil_star(u + at, L.s[1], L.s[2], c.three_d, c.radius, c.c0, c.c);
    if (f)
      acc = stencil_source(c.cf, f[at], acc);
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

/* D planes are loaded ahead per thread (32 registers, 2048 threads per SM). With the aligned
 * rows of dev_layout, D = 1, 2 and 4 run about alike (bench/tier2_lab.cu, docs/benchmarks.md);
 * 4 spills here. */
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
    const REAL xm = __ldg(p - 1), xp = __ldg(p + 1);
    REAL acc;
    if (L.three_d)
      acc = stencil_star1(c0, cx, cy, cz, w[1], xm, xp, __ldg(p - s1), __ldg(p + s1), w[0], w[2]);
    else
      acc = stencil_star1_2d(c0, cx, cy, w[1], xm, xp, w[0], w[2]);
    if (fs) {
      acc = stencil_source(c.cf, __ldg(fs), acc);
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
 * work per plane (the ghost tests folded into one mask), faster than update_stream on the
 * same layout (docs/benchmarks.md); the x ghosts of reflecting faces through put_sector. */
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
    const REAL acc = stencil_star1(c0, cx, cy, cz, w[1], p[-1], p[1], p[-s1], p[s1], w[0], w[2]);
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

/* Read-only loads (ld.global.nc; plain loads run as fast). */
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
      REAL acc = L.three_d ? stencil_star1(c0, cx, cy, cz, w[1].e[e], xm, xp, ym.e[e], yp.e[e],
                                           w[0].e[e], w[2].e[e])
                           : stencil_star1_2d(c0, cx, cy, w[1].e[e], xm, xp, w[0].e[e], w[2].e[e]);
      if (fs)
        acc = stencil_source(c.cf, src.e[e], acc);
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

/* A clear message when this binary carries no code the device can run. */
int cuda_check_image(struct cuda_ctx *c)
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

const char *tile_error(const int t[4])
{
  if (t[2] < 1)
    return "at least one cell along the streaming axis per block";
  if (t[0] < 1 || t[1] < 1 || t[0] * t[1] > (t[3] ? 256 : 512) || (t[3] && t[0] % 32))
    return "at most 512 threads per block (256 for the vector forms, with BX a multiple of 32)";
  return NULL;
}

int tier2_applies(const struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef)
{
  if (c->opt.tier == 1 || coef->radius != 1)
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

int cuda_update(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                const void *f, void *v, const struct box *b)
{
  struct cuda_ctx *c = CTX(ctx);
  if (box_count(b) <= 0)
    return STENCIL_OK;
  const int fp64 = l->elem == 8;
  const int t2 = tier2_applies(c, l, coef), star = !t2 && star_applies(c, l, coef);
  if (t2 || star) {
    /* Tier 2 also writes the ghosts of every known physical face it touches (at radius 2 to 4
     * the x faces where star_covers_x says so: star.cu): a face's cells in b count where b
     * holds the layers its ghosts mirror (the halo deep). */
    struct field_track *t = track_of(c, v, 1);
    for (int fc = 0; fc < 2 * coef->ndim && t; fc++) {
      const int a = fc / 2, h = l->halo[a];
      if (!c->face[fc].known)
        continue;
      if (t->rule[fc].known &&
          (t->rule[fc].kind != c->face[fc].kind || t->rule[fc].value != c->face[fc].value))
        t->covered[fc] = 0;
      t->rule[fc] = c->face[fc];
      if (star && a == 0 ? star_covers_x(l, coef->radius, f != NULL, b, fc)
          : fc % 2       ? b->lo[a] <= l->n[a] - h
                         : b->hi[a] >= h)
        t->covered[fc] += face_cells_in(l, b, fc);
    }
  }
  if (star)
    return cuda_update_star(c, l, coef, u, f, v, b);
  if (t2)
    return fp64 ? run_stream<double>(c, l, coef, u, f, v, b, c->tile)
                : run_stream<float>(c, l, coef, u, f, v, b, c->tile);
  /* (The fused kernels do not come through here: fused_run.cu.) */
  return fp64 ? run_ref<double>(c, l, coef, u, f, v, b) : run_ref<float>(c, l, coef, u, f, v, b);
}

int cuda_tune(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
              void *v, const struct box *b)
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
  /* The fastest shapes of bench/tier2_lab.cu (short chunks are faster). */
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
    if (tile_error(t))
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
