/* Tier-2 laboratory: one-step 3D 7-point kernels on (a copy of) the CUDA backend's device
 * layout (dev_layout, kernels/cuda/context.h), timed side by side on one GPU, each first
 * checked bit for bit against a host reference. Not built by default:
 * cmake --build B --target tier2_lab.
 *
 *   tier2_lab [n] [reps] [top]   n^3 interior cells (default 512), fp32 and fp64; prints
 *                                the baselines and the `top` fastest variants per precision
 *   LAB_DATA=1                   non-zero fields (default zeros)
 *   LAB_PAD=E                    E more elements per row (pitch sensitivity)
 *
 * Layouts: rows of roundup(h0 + n + 1 + 2 W, 32) elements (W = 16 / sizeof(REAL)), each row
 * starting 128-byte aligned, interior x = 0 at row offset h0 = 1 (interior rows unaligned)
 * or h0 = 128 bytes ("al": interior rows aligned, as dev_layout gives).
 * Kernels:
 *   copy x1/x4  v = u over the whole padded array in 16-byte vectors (1 or 4 per thread)
 *   sc          step.cu's update_stream without faces: a thread per cell walks z, D planes
 *               ahead (r32 / r64: 32 or 64 registers), with "pipe" the x and y neighbours of
 *               the next plane loaded one iteration ahead
 *   vec ryR     a thread owns an aligned 16-byte vector of R consecutive rows and walks z:
 *               the y neighbours inside its rows are its own registers, the rows above and
 *               below and the next plane are loaded one iteration ahead, x neighbours by warp
 *               shuffles; "cs" stores with the evict-first hint
 *   gh          also writes the x ghost cells x = -1 and x = n (one cell each, as a
 *               Dirichlet face does); not checked (the reference has no ghosts)
 * Compiled with -fmad=false (the operation order of kernels/cpu/heat_real.h). */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h" /* stencil_fma */

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "tier2_lab: %s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

template <typename REAL> __global__ void init_kernel(REAL *u, int64_t n)
{
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    u[i] = (REAL)((i * 7919) % 1000) * (REAL)1e-3 - (REAL)0.5;
}

struct geo {
  int64_t n[3];
  int64_t h0;             /* row offset of interior x = 0 (row starts are 128-byte aligned) */
  int64_t sy, sz, origin; /* element of interior (0, 0, 0) */
  int64_t count;
  int ghost; /* 1: also write the ghost cells x = -1 and x = n (Dirichlet-like, ghost = v) */
};

template <typename REAL> static geo make_geo(const int64_t n[3], int aligned)
{
  geo g;
  const int64_t w = 16 / sizeof(REAL);
  for (int a = 0; a < 3; a++)
    g.n[a] = n[a];
  g.h0 = aligned ? 128 / sizeof(REAL) : 1;
  g.sy = (g.h0 + n[0] + 1 + 2 * w + 31) / 32 * 32;
  if (getenv("LAB_PAD")) /* extra elements per row (a multiple of 32) */
    g.sy += atoi(getenv("LAB_PAD"));
  g.sz = g.sy * (n[1] + 2);
  g.origin = g.h0 + g.sy + g.sz;
  g.count = g.sz * (n[2] + 2);
  g.ghost = 0;
  return g;
}

template <typename REAL> struct co {
  REAL c0, cx, cy, cz;
};

/* ---- kernels ---------------------------------------------------------------------------- */

template <typename REAL, int U>
__global__ void copy_kernel(const REAL *__restrict__ u, REAL *__restrict__ v, int64_t nvec)
{
  const int64_t i = (int64_t)blockIdx.x * blockDim.x * U + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x * U;
  const float4 *a = reinterpret_cast<const float4 *>(u);
  float4 *b = reinterpret_cast<float4 *>(v);
  for (int64_t m = i; m < nvec; m += step) {
    float4 t[U];
#pragma unroll
    for (int h = 0; h < U; h++)
      if (m + h * blockDim.x < nvec)
        t[h] = a[m + h * blockDim.x];
#pragma unroll
    for (int h = 0; h < U; h++)
      if (m + h * blockDim.x < nvec)
        b[m + h * blockDim.x] = t[h];
  }
}

/* kernels/cuda/step.cu's update_stream (D planes ahead), and with PIPE the x and y neighbours of
 * the next plane loaded one iteration ahead as well. MINB 4: 32 registers, 2: 64. */
template <typename REAL, int D, int MINB, bool PIPE>
__global__ void __launch_bounds__(512, MINB)
    scalar_kernel(const REAL *__restrict__ u, REAL *__restrict__ v, geo g, co<REAL> c, int zc)
{
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t j = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
  const int64_t k0 = (int64_t)blockIdx.z * zc;
  const int64_t k1 = k0 + zc < g.n[2] ? k0 + zc : g.n[2];
  if (i >= g.n[0] || j >= g.n[1])
    return;
  const int64_t s1 = g.sy, ss = g.sz;
  const REAL *p = u + g.origin + i + j * s1 + k0 * ss;
  REAL *q = v + g.origin + i + j * s1 + k0 * ss;
  REAL w[D + 2];
  w[0] = p[-ss];
  w[1] = p[0];
#pragma unroll
  for (int d = 1; d <= D; d++)
    w[1 + d] = k0 + d <= k1 ? p[d * ss] : (REAL)0;
  REAL nb[4];
  if (PIPE) {
    nb[0] = p[-1], nb[1] = p[1], nb[2] = p[-s1], nb[3] = p[s1];
  }
#pragma unroll 2
  for (int64_t k = k0; k < k1; k++) {
    const REAL ahead = k + 1 + D <= k1 ? p[(D + 1) * ss] : (REAL)0;
    REAL xm, xp, ym, yp;
    if (PIPE) {
      xm = nb[0], xp = nb[1], ym = nb[2], yp = nb[3];
      if (k + 1 < k1) {
        nb[0] = p[ss - 1], nb[1] = p[ss + 1], nb[2] = p[ss - s1], nb[3] = p[ss + s1];
      }
    } else {
      xm = p[-1], xp = p[1], ym = p[-s1], yp = p[s1];
    }
    REAL acc = c.c0 * w[1];
    acc = stencil_fma(c.cx, xm + xp, acc);
    acc = stencil_fma(c.cy, ym + yp, acc);
    acc = stencil_fma(c.cz, w[0] + w[2], acc);
    q[0] = acc;
    if (g.ghost && (i == 0 || i == g.n[0] - 1))
      q[i == 0 ? -1 : 1] = acc;
#pragma unroll
    for (int d = 0; d <= D; d++)
      w[d] = w[d + 1];
    w[D + 1] = ahead;
    p += ss;
    q += ss;
  }
}

/* E = VW * W cells per thread along x, RY rows. */
template <typename REAL, int VW> struct cells {
  REAL e[VW * 16 / sizeof(REAL)];
};

template <typename REAL, int VW>
__device__ __forceinline__ void ldc(cells<REAL, VW> &d, const REAL *p)
{
#pragma unroll
  for (int h = 0; h < VW; h++) {
    if constexpr (sizeof(REAL) == 4) {
      const float4 t = __ldg(reinterpret_cast<const float4 *>(p) + h);
      d.e[4 * h] = t.x, d.e[4 * h + 1] = t.y, d.e[4 * h + 2] = t.z, d.e[4 * h + 3] = t.w;
    } else {
      const double2 t = __ldg(reinterpret_cast<const double2 *>(p) + h);
      d.e[2 * h] = t.x, d.e[2 * h + 1] = t.y;
    }
  }
}

template <typename REAL, int VW, bool CS>
__device__ __forceinline__ void stc(REAL *q, const cells<REAL, VW> &d)
{
#pragma unroll
  for (int h = 0; h < VW; h++) {
    if constexpr (sizeof(REAL) == 4) {
      const float4 t = make_float4(d.e[4 * h], d.e[4 * h + 1], d.e[4 * h + 2], d.e[4 * h + 3]);
      if (CS)
        __stcs(reinterpret_cast<float4 *>(q) + h, t);
      else
        reinterpret_cast<float4 *>(q)[h] = t;
    } else {
      const double2 t = make_double2(d.e[2 * h], d.e[2 * h + 1]);
      if (CS)
        __stcs(reinterpret_cast<double2 *>(q) + h, t);
      else
        reinterpret_cast<double2 *>(q)[h] = t;
    }
  }
}

template <typename REAL, int VW, int RY, bool CS>
__global__ void __launch_bounds__(256)
    ry_kernel(const REAL *__restrict__ u, REAL *__restrict__ v, geo g, co<REAL> c, int zc)
{
  constexpr int E = VW * 16 / sizeof(REAL);
  typedef cells<REAL, VW> C;
  /* Thread's first element: padded x position E m of the row (row start aligned). */
  const int64_t m = g.h0 / E + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t x0 = E * m - g.h0; /* interior x of element 0 */
  const int64_t j0 = ((int64_t)blockIdx.y * blockDim.y + threadIdx.y) * RY;
  const int64_t k0 = (int64_t)blockIdx.z * zc;
  const int64_t k1 = k0 + zc < g.n[2] ? k0 + zc : g.n[2];
  /* Lanes past the row still load (inside the padding) so that every lane shuffles. */
  const int64_t mlast = (g.h0 + g.n[0] - 1) / E + 1; /* one vector past the last used */
  const int64_t ml = m < mlast ? m : mlast;
  const bool xact = x0 + E > 0 && x0 < g.n[0];
  const bool whole = x0 >= 0 && x0 + E <= g.n[0];
  if (j0 >= g.n[1])
    return; /* whole warp: blockDim.x is a multiple of 32 */
  const int lane = threadIdx.x & 31;
  const int64_t s1 = g.sy, ss = g.sz;
  /* Rows j0 - 1 .. j0 + RY of plane k: clamp the rows past the block to its ghost row. */
  int64_t roff[RY + 2];
#pragma unroll
  for (int r = 0; r < RY + 2; r++) {
    int64_t j = j0 - 1 + r;
    j = j > g.n[1] ? g.n[1] : j;
    roff[r] = (g.origin - g.h0) + E * ml + j * s1;
  }
  C P[RY][3];     /* planes k-1, k, k+1 of rows j0..j0+RY-1 */
  C Hc[2], Hn[2]; /* rows j0-1 and j0+RY of plane k (current) and k+1 (next) */
  C N[RY];        /* plane k+2, loaded during iteration k */
#pragma unroll
  for (int r = 0; r < RY; r++) {
    ldc(P[r][0], u + roff[r + 1] + (k0 - 1) * ss);
    ldc(P[r][1], u + roff[r + 1] + k0 * ss);
    ldc(P[r][2], u + roff[r + 1] + (k0 + 1) * ss); /* k0 + 1 <= n: the ghost plane at most */
  }
  ldc(Hc[0], u + roff[0] + k0 * ss);
  ldc(Hc[1], u + roff[RY + 1] + k0 * ss);
  for (int64_t k = k0; k < k1; k++) {
    const bool more = k + 1 < k1;
    if (more) {
#pragma unroll
      for (int r = 0; r < RY; r++)
        ldc(N[r], u + roff[r + 1] + (k + 2) * ss);
      ldc(Hn[0], u + roff[0] + (k + 1) * ss);
      ldc(Hn[1], u + roff[RY + 1] + (k + 1) * ss);
    }
#pragma unroll
    for (int r = 0; r < RY; r++) {
      const C &ctr = P[r][1];
      REAL left = __shfl_up_sync(0xffffffffu, ctr.e[E - 1], 1);
      REAL right = __shfl_down_sync(0xffffffffu, ctr.e[0], 1);
      if (lane == 0)
        left = u[roff[r + 1] + k * ss - 1];
      if (lane == 31)
        right = u[roff[r + 1] + k * ss + E];
      C out;
#pragma unroll
      for (int e = 0; e < E; e++) {
        const REAL xm = e > 0 ? ctr.e[e - 1] : left, xp = e < E - 1 ? ctr.e[e + 1] : right;
        REAL acc = c.c0 * ctr.e[e];
        acc = stencil_fma(c.cx, xm + xp, acc);
        const REAL dn = r == 0 ? Hc[0].e[e] : P[r > 0 ? r - 1 : 0][1].e[e];
        const REAL up = r == RY - 1 ? Hc[1].e[e] : P[r < RY - 1 ? r + 1 : 0][1].e[e];
        acc = stencil_fma(c.cy, dn + up, acc);
        acc = stencil_fma(c.cz, P[r][0].e[e] + P[r][2].e[e], acc);
        out.e[e] = acc;
      }
      if (xact && j0 + r < g.n[1]) {
        REAL *q = v + roff[r + 1] + k * ss;
        if (whole)
          stc<REAL, VW, CS>(q, out);
        else
#pragma unroll
          for (int e = 0; e < E; e++)
            if (x0 + e >= 0 && x0 + e < g.n[0])
              q[e] = out.e[e];
        if (g.ghost) {
#pragma unroll
          for (int e = 0; e < E; e++) {
            if (x0 + e == 0)
              q[e - 1] = out.e[e];
            if (x0 + e == g.n[0] - 1)
              q[e + 1] = out.e[e];
          }
        }
      }
    }
    if (more) {
#pragma unroll
      for (int r = 0; r < RY; r++) {
        P[r][0] = P[r][1];
        P[r][1] = P[r][2];
        P[r][2] = N[r];
      }
      Hc[0] = Hn[0];
      Hc[1] = Hn[1];
    }
  }
}

/* ---- host ------------------------------------------------------------------------------- */

template <typename REAL> static void host_step(const REAL *u, REAL *v, const geo &g, co<REAL> c)
{
  for (int64_t k = 0; k < g.n[2]; k++)
    for (int64_t j = 0; j < g.n[1]; j++)
      for (int64_t i = 0; i < g.n[0]; i++) {
        const int64_t at = g.origin + i + j * g.sy + k * g.sz;
        volatile REAL acc = c.c0 * u[at];
        acc = stencil_fma(c.cx, (REAL)(u[at - 1] + u[at + 1]), acc);
        acc = stencil_fma(c.cy, (REAL)(u[at - g.sy] + u[at + g.sy]), acc);
        acc = stencil_fma(c.cz, (REAL)(u[at - g.sz] + u[at + g.sz]), acc);
        v[at] = acc;
      }
}

struct variant {
  char name[40];
  int kind;                   /* 0 copy, 1 scalar, 2 ry */
  int bx, by, zc, vw, ry, cs; /* scalar: vw = D, ry = MINB, cs = PIPE */
  int aligned;                /* layout: interior x = 0 on a 128-byte boundary */
  int ghost;                  /* geo.ghost */
};

template <typename REAL>
static void launch(const variant &t, const REAL *u, REAL *v, const geo &g, co<REAL> c)
{
  if (t.kind == 0) {
    const int64_t nvec = g.count * (int64_t)sizeof(REAL) / 16;
    if (t.vw == 4)
      copy_kernel<REAL, 4><<<132 * 8, 256>>>(u, v, nvec);
    else
      copy_kernel<REAL, 1><<<132 * 8, 256>>>(u, v, nvec);
    return;
  }
  const unsigned gz = (unsigned)((g.n[2] + t.zc - 1) / t.zc);
  if (t.kind == 1) {
    dim3 b(t.bx, t.by),
        gr((unsigned)((g.n[0] + t.bx - 1) / t.bx), (unsigned)((g.n[1] + t.by - 1) / t.by), gz);
#define SK(D, MB, PIPE)                                                                            \
  do {                                                                                             \
    if (t.vw == D && t.ry == MB && t.cs == PIPE) {                                                 \
      scalar_kernel<REAL, D, MB, PIPE><<<gr, b>>>(u, v, g, c, t.zc);                               \
      return;                                                                                      \
    }                                                                                              \
  } while (0)
    SK(1, 4, 0);
    SK(2, 4, 0);
    SK(4, 4, 0);
    SK(1, 4, 1);
    SK(2, 4, 1);
    SK(4, 4, 1);
    SK(1, 2, 0);
    SK(2, 2, 0);
    SK(4, 2, 0);
    SK(1, 2, 1);
    SK(2, 2, 1);
    SK(4, 2, 1);
#undef SK
  } else {
    const int64_t E = t.vw * 16 / (int64_t)sizeof(REAL);
    const int64_t nv = (g.h0 + g.n[0] - 1) / E - g.h0 / E + 1; /* vectors covering x 0 .. n-1 */
    dim3 b(t.bx, t.by), gr((unsigned)((nv + t.bx - 1) / t.bx),
                           (unsigned)((g.n[1] + t.by * t.ry - 1) / (t.by * t.ry)), gz);
#define RYK(VW, RY, CS)                                                                            \
  do {                                                                                             \
    if (t.vw == VW && t.ry == RY && t.cs == CS) {                                                  \
      ry_kernel<REAL, VW, RY, CS><<<gr, b>>>(u, v, g, c, t.zc);                                    \
      return;                                                                                      \
    }                                                                                              \
  } while (0)
    RYK(1, 1, 0);
    RYK(1, 2, 0);
    RYK(1, 1, 1);
#undef RYK
  }
  fprintf(stderr, "no kernel for %s\n", t.name);
  exit(1);
}

static variant variants[1024];
static int nvariants;

static void add(int kind, int bx, int by, int zc, int vw, int ry, int cs, int aligned)
{
  variant &t = variants[nvariants++];
  t = variant{"", kind, bx, by, zc, vw, ry, cs, aligned % 2, aligned / 2};
  if (kind == 0)
    snprintf(t.name, sizeof t.name, "copy x%d%s", vw, aligned ? " al" : "");
  else if (kind == 1)
    snprintf(t.name, sizeof t.name, "sc D%d r%d%s %dx%d z%d%s%s", vw, ry == 4 ? 32 : 64,
             cs ? " pipe" : "", bx, by, zc, aligned % 2 ? " al" : "", aligned / 2 ? " gh" : "");
  else
    snprintf(t.name, sizeof t.name, "vec ry%d%s %dx%d z%d%s%s", ry, cs ? " cs" : "", bx, by, zc,
             aligned % 2 ? " al" : "", aligned / 2 ? " gh" : "");
}

static void make_variants(void)
{
  add(0, 0, 0, 0, 1, 0, 0, 0);
  add(0, 0, 0, 0, 4, 0, 0, 0);
  add(1, 256, 2, 16, 2, 4, 0, 0); /* the product's form (step.cu) */
  add(1, 128, 4, 16, 2, 4, 0, 0);
  add(2, 32, 4, 8, 1, 1, 0, 3); /* ghost writes, aligned (the driver's case) */
  add(2, 32, 4, 8, 1, 1, 0, 2); /* ghost writes, not aligned */
  add(1, 64, 8, 8, 4, 4, 0, 3);
  add(1, 64, 8, 8, 4, 4, 0, 2);
  static const int tiles[][2] = {{256, 2}, {128, 4}, {64, 8}, {32, 16}};
  static const int zcs[] = {8, 16, 32, 64};
  for (int D = 1; D <= 4; D *= 2)
    for (int mb = 2; mb <= 4; mb += 2)
      for (int pipe = 0; pipe < 2; pipe++)
        for (const auto &tl : tiles)
          for (int zc : zcs)
            add(1, tl[0], tl[1], zc, D, mb, pipe, 1);
  static const int vt[][2] = {{32, 8}, {64, 4}, {128, 2}, {32, 4}};
  for (const auto &tl : vt)
    for (int zc : zcs) {
      add(2, tl[0], tl[1], zc, 1, 1, 0, 1);
      add(2, tl[0], tl[1], zc, 1, 1, 1, 1);
      add(2, tl[0], tl[1] / 2, zc, 1, 2, 0, 1);
    }
}

template <typename REAL> static void fill(REAL *h, int64_t count, uint64_t seed)
{
  for (int64_t i = 0; i < count; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    h[i] = (REAL)((double)(seed >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }
}

/* Bitwise check of every stencil variant on a ragged block; returns failures. */
template <typename REAL> static int check(co<REAL> c)
{
  const int64_t n[3] = {61, 37, 23};
  int bad = 0;
  for (int al = 0; al < 2; al++) {
    const geo g = make_geo<REAL>(n, al);
    const size_t bytes = (size_t)g.count * sizeof(REAL);
    REAL *hu = (REAL *)malloc(bytes), *hv = (REAL *)malloc(bytes), *hr = (REAL *)malloc(bytes);
    REAL *got = (REAL *)malloc(bytes);
    fill(hu, g.count, 7);
    fill(hr, g.count, 9); /* the cells the step does not write keep v's old values */
    memcpy(hv, hr, bytes);
    host_step(hu, hr, g, c);
    REAL *du, *dv; /* a row of slack: lanes past a row's end may load into the next row */
    CK(cudaMalloc(&du, bytes + g.sy * sizeof(REAL)));
    CK(cudaMalloc(&dv, bytes + g.sy * sizeof(REAL)));
    CK(cudaMemcpy(du, hu, bytes, cudaMemcpyHostToDevice));
    for (int i = 0; i < nvariants; i++) {
      variant t = variants[i];
      if (t.kind == 0 || t.aligned != al || t.ghost)
        continue;
      t.zc = t.zc > 7 ? 7 : t.zc; /* several chunks along z */
      CK(cudaMemcpy(dv, hv, bytes, cudaMemcpyHostToDevice));
      launch<REAL>(t, du, dv, g, c);
      CK(cudaGetLastError());
      CK(cudaMemcpy(got, dv, bytes, cudaMemcpyDeviceToHost));
      if (memcmp(got, hr, bytes)) {
        int64_t first = 0;
        while (memcmp(&got[first], &hr[first], sizeof(REAL)) == 0)
          first++;
        printf("CHECK FAIL %s fp%d: element %lld\n", t.name, (int)(8 * sizeof(REAL)),
               (long long)first);
        bad++;
      }
    }
    CK(cudaFree(du));
    CK(cudaFree(dv));
    free(hu);
    free(hv);
    free(hr);
    free(got);
  }
  return bad;
}

template <typename REAL> static void bench(int64_t nn, int reps, co<REAL> c, double *gpts)
{
  const int64_t n[3] = {nn, nn, nn};
  const geo ga = make_geo<REAL>(n, 1);
  const size_t bytes = (size_t)(ga.count + ga.sy) * sizeof(REAL); /* the larger layout */
  REAL *du, *dv;
  CK(cudaMalloc(&du, bytes));
  CK(cudaMalloc(&dv, bytes));
  if (getenv("LAB_DATA")) { /* non-zero fields */
    init_kernel<<<1024, 256>>>(du, (int64_t)(bytes / sizeof(REAL)));
    init_kernel<<<1024, 256>>>(dv, (int64_t)(bytes / sizeof(REAL)));
  } else {
    CK(cudaMemset(du, 0, bytes));
    CK(cudaMemset(dv, 0, bytes));
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < nvariants; i++) {
    const variant &t = variants[i];
    geo g = make_geo<REAL>(n, t.aligned);
    g.ghost = t.ghost;
    for (int r = 0; r < 3; r++) /* warm-up, alternating like a time loop */
      launch<REAL>(t, r % 2 ? dv : du, r % 2 ? du : dv, g, c);
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; r++)
      launch<REAL>(t, r % 2 ? dv : du, r % 2 ? du : dv, g, c);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    /* copy: elements of the padded array per second (the bytes of a step of that many points) */
    gpts[i] = 1e-6 * (double)(t.kind == 0 ? g.count : nn * nn * nn) * reps / ms;
  }
  CK(cudaFree(du));
  CK(cudaFree(dv));
}

static void table(const char *prec, const double *gp, int top)
{
  int order[1024];
  for (int i = 0; i < nvariants; i++)
    order[i] = i;
  for (int i = 0; i < nvariants; i++) /* fastest first; the first 8 rows stay (baselines) */
    for (int j = i + 1; j < nvariants; j++)
      if (i >= 8 && gp[order[j]] > gp[order[i]]) {
        const int x = order[i];
        order[i] = order[j];
        order[j] = x;
      }
  printf("%s: Gpts/s (copy: padded elements/s), baselines then the fastest %d\n", prec, top);
  for (int i = 0; i < nvariants && i < 8 + top; i++)
    printf("  %-34s %8.1f\n", variants[order[i]].name, gp[order[i]]);
}

int main(int argc, char **argv)
{
  const int64_t nn = argc > 1 ? atoll(argv[1]) : 512;
  const int reps = argc > 2 ? atoi(argv[2]) : 60;
  const int top = argc > 3 ? atoi(argv[3]) : 25;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "tier2_lab: no GPU\n");
    return 77;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  make_variants();
  const co<float> cf = {0.4f, 0.1f, 0.1f, 0.1f};
  const co<double> cd = {0.4, 0.1, 0.1, 0.1};
  const int bad = check(cf) + check(cd);
  printf("checks: %d failures (%d variants)\n", bad, nvariants);
  static double g32[1024], g64[1024];
  bench(nn, reps, cf, g32);
  bench(nn, reps, cd, g64);
  table("fp32", g32, top);
  table("fp64", g64, top);
  return bad ? 1 : 0;
}
