#pragma once
/* The fused kernel in 2D: the warp-strip kernel (see fused.h and docs/design/fused-kernels.md).
 *
 * One launch advances a 2D block by K <= T steps of the star update of radius r (1 to 4) in
 * the operation order of kernels/point.h, so it gives the bits of K single steps when
 * compiled with -fmad=false:
 *
 *   v = c0 u;  v = fma(cx_m, u[x-m] + u[x+m], v) for m = 1..r;  v = fma(cy_m, u[y-m] + u[y+m], v)
 *   for m = 1..r;  [v = fma(cf, f, v)]
 *
 * Work split. A warp owns a strip of W = 32 V columns (V = 4 cells per thread, consecutive
 * in x) and a chunk of rows; it streams through the rows, and no two warps share anything:
 * there is no shared memory (but the source ring) and no barrier. A strip computes all W
 * columns at every level but stores only the middle U = W - 2E (E = T r rounded up to even):
 * the E columns on each side are the redundant trapezoid that makes the neighbouring strips
 * unnecessary.
 *
 * Pipeline. Level l = 0..T is the field after l steps. When iteration j brings row j of
 * level 0, level l computes its row j - l r from rows j - l r - r .. j - l r + r of level
 * l - 1, computed at iterations j - 2r .. j. Each level keeps those S = 2r + 1 rows in
 * registers, in S slots rotated by the iteration number modulo S (the loop is unrolled by S,
 * so the rotation costs no moves). Level K's row is stored: K = T (radius 1, a kernel per T)
 * or the launch's steps (radius > 1: one kernel of the largest T, running K <= T). x
 * neighbours: the thread's own cells, and r cells from each neighbouring lane
 * (__shfl_up/down_sync). Level 0 comes from a queue of QD rows loaded QD iterations ahead.
 *
 * Faces. Halo faces (periodic or a neighbour rank) must hold valid ghost cells T r deep
 * (corners included); the trapezoid computes into them. Reflecting faces are applied at
 * every level where a neighbour falls outside the block: the ghost m cells beyond the face
 * is 2g - u or u of the cell m - 1 inside it, as kernels/backend.h's boundary() fills them.
 * Cells outside the valid region of a level hold garbage that never reaches a stored cell.
 *
 * Alignment. The strips start at x = xs0 + s U with (xs0 + halo_x) a multiple of 16 bytes,
 * so when the row stride is too every thread's V cells are one or two 16-byte vectors
 * (gvec); otherwise the kernel falls back to scalar accesses (same results). */
#include "kernels/cuda/cuda_rt.h"
#include <stdint.h>

#include <type_traits>
#include <utility>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/warp_sums.cuh"

#define STRIP_V 4          /* cells per thread along x */
#define STRIP_WARPS 4      /* warps per CTA (independent of each other) */
#define STRIP_SIDE_SPLIT 8 /* edge kernel: warps per side strip and lean chunk */
/* The T built for radius r > 1 (one kernel per kind, running K <= T), by precision and by
 * whether the kind has a source (src: the source and residual kinds; the general kind, which
 * runs both, is built for the larger): the registers of T levels x (2r + 1) rows x V cells
 * (fp32 radius 2 without a source: T = 6 at 168 registers, three CTAs a multiprocessor as at
 * T = 5; T = 7 takes 203, two; fp64 takes two CTAs a multiprocessor from T = 2 on, so its T is
 * what measured fastest: radius 3 without a source at T = 4, 255 registers and 20 bytes
 * spilled), and the source ring's rows (T - 1) r + 1 <= 12. */
#define STRIP_STEPS_R(elem, r, src)                                                                \
  ((r) == 1      ? 8                                                                               \
   : (elem) == 8 ? ((r) == 2   ? 4                                                                 \
                    : (r) == 3 ? ((src) ? 3 : 4)                                                   \
                               : 2)                                                                \
                 : ((r) == 2   ? ((src) ? 4 : 6)                                                   \
                    : (r) == 3 ? 4                                                                 \
                               : 3))
/* The same for a kind (STRIP_LEAN...). */
#define STRIP_KIND_STEPS(elem, r, kind)                                                            \
  STRIP_STEPS_R(elem, r, (kind) == STRIP_LEAN_SRC || (kind) == STRIP_LEAN_RES)
/* Rows of f in the lean kernel's ring: those of levels 2..T, (T - 1) r + 1 (at most 12: 48 KB
 * per CTA in fp64). */
#define STRIP_FRING 12

template <typename REAL> struct strip_params {
  const REAL *u, *f; /* cell (0, 0) of the input and of the source (or NULL) */
  REAL *v;           /* cell (0, 0) of the output */
  int64_t nx, ny;    /* interior cells */
  int sy;            /* row stride (elements) */
  int hx, hy;        /* ghost layers that may be read */
  int64_t xlo, xhi;  /* the first and the last 16-byte aligned vector of a row (lean loads) */
  int ylo, yhi;      /* the first and the last row that may be read: -hy, ny + hy - 1 */
  int kind[2][2];    /* [axis][side]: 0 halo, 1 Dirichlet, 2 Neumann */
  REAL two_g[2][2];  /* (REAL)(2 g) of Dirichlet faces */
  REAL c0, cf;
  REAL c[2][4];    /* c[a][m - 1]: the weight of the pair m = 1..r along axis a */
  int steps;       /* K: the steps of this launch (radius > 1; radius 1: the kernel's T) */
  int64_t xs0;     /* first column of strip 0 */
  int E, U;        /* strip s computes [xs, xs + 32 V), stores [xs + E, xs + E + U) */
  int64_t nstrips; /* strips along x */
  int gvec;        /* 16-byte vector accesses are aligned */
  /* The fast region, strips [fs0, fs1) x rows [r0, r1), never meets a reflecting face (no
   * ghost to apply): a lean kernel runs it in chunks of `chunk` rows per warp, and the edge
   * kernel the rest (the frame around it: strip_where). Without a fast region (fs0 = fs1,
   * r0 = r1 = 0: gvec = 0 or a small block) the general kernel runs every strip and row, in
   * chunks of `chunk` rows. */
  int64_t fs0, fs1, r0, r1;
  int chunk;
  /* Residuals: part[w * 8 + l] = the sum of (u' - u)^2 over warp w's stored cells, u the
   * field after l steps and u' its update (level l + 1), for the levels l = 0..K - 1 with
   * bit l of rmask (residual() of the backends: Jacobi's u' - u is the Poisson residual
   * times omega / d); w numbers the lean kernel's warps first, then the edge kernel's from
   * part_edge, the general kernel's from part_base. part = NULL: none. */
  double *part;
  int64_t part_base, part_edge; /* the general kernel's first slot, the edge kernel's */
  unsigned rmask;
};

/* Ghost value beyond a reflecting face from the cell c it mirrors. */
template <typename REAL> __device__ __forceinline__ REAL strip_ghost(int kind, REAL two_g, REAL c)
{
  return kind == 1 ? two_g - c : c;
}

/* The lean kernel's column of a thread's cells from x0: the first of its 16-byte vectors
 * clamped into the aligned vectors [xlo, xhi] of a row (which may reach into the array's
 * padding or shift before the first ghost cell and beyond the last), and in fp64 the offset of
 * its second vector, clamped likewise. Clamped cells are never needed by a stored cell: they
 * lie more than T r cells beyond a halo face or beyond a reflecting one. */
template <typename REAL>
__device__ __forceinline__ int strip_col(const strip_params<REAL> &p, int64_t x0, int &dcol)
{
  constexpr int A = 16 / sizeof(REAL);
  const int64_t x = x0 < p.xlo ? p.xlo : x0 > p.xhi ? p.xhi : x0;
  const int64_t x1 = x0 + A < p.xlo ? p.xlo : x0 + A > p.xhi ? p.xhi : x0 + A;
  dcol = (int)(x1 - x);
  return (int)x;
}

/* q + j rows of sy elements (rows of fewer than 2^31 bytes: strip_launch_t): the byte offset by
 * one 32 x 32 -> 64-bit multiply (mul.wide.s32), where ptxas would multiply in 64 bits. */
template <typename P> __device__ __forceinline__ P *strip_row(P *q, int j, int sy)
{
  const int bytes = sy * (int)sizeof(P);
#ifdef STENCIL_CUDA_EMU
  const int64_t off = (int64_t)j * bytes;
#else
  int64_t off;
  asm("mul.wide.s32 %0, %1, %2;\n" : "=l"(off) : "r"(j), "r"(bytes));
#endif
  typedef typename std::conditional<std::is_const<P>::value, const char, char>::type byte;
  return reinterpret_cast<P *>(reinterpret_cast<byte *>(q) + off);
}

/* V cells of row j (clamped into [ylo, yhi]) at the lean kernel's column xc (strip_col) of
 * base: one or two 16-byte loads. */
template <typename REAL>
__device__ __forceinline__ void strip_load_fast(const strip_params<REAL> &p, const REAL *base,
                                                int xc, int dcol, int j, REAL out[STRIP_V])
{
  j = j < p.ylo ? p.ylo : j > p.yhi ? p.yhi : j;
  const REAL *row = strip_row(base + xc, j, p.sy);
  if constexpr (sizeof(REAL) == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4 *>(row));
    out[0] = t.x, out[1] = t.y, out[2] = t.z, out[3] = t.w;
  } else {
    const double2 a = __ldg(reinterpret_cast<const double2 *>(row));
    const double2 b = __ldg(reinterpret_cast<const double2 *>(row + dcol));
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  }
}

/* V cells of row j starting at column x0 (zeros where nothing may be read). */
template <typename REAL>
__device__ __forceinline__ void strip_load(const strip_params<REAL> &p, const REAL *base, int j,
                                           int64_t x0, bool vec, REAL out[STRIP_V])
{
  const bool row_ok = j >= p.ylo && j <= p.yhi;
  const REAL *q = base + (int64_t)j * p.sy + x0;
  if (row_ok && vec) {
    if constexpr (sizeof(REAL) == 4) {
      const float4 t = __ldg(reinterpret_cast<const float4 *>(q));
      out[0] = t.x, out[1] = t.y, out[2] = t.z, out[3] = t.w;
    } else {
      const double2 a = __ldg(reinterpret_cast<const double2 *>(q));
      const double2 b = __ldg(reinterpret_cast<const double2 *>(q) + 1);
      out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < STRIP_V; k++) {
    const int64_t x = x0 + k;
    out[k] = row_ok && x >= -p.hx && x < p.nx + p.hx ? __ldg(q + k) : (REAL)0;
  }
}

/* The four forms of the kernel: lean (the fast region, no source, no residuals), lean with
 * the source term (the fast region), lean with the source term and residuals (the fast
 * region of residual launches: the residual sums cost registers even when unused), general
 * (everything: reflecting faces, unaligned rows, source, residuals; the frame around the
 * fast region, or all of it). */
enum { STRIP_LEAN = 0, STRIP_LEAN_SRC = 1, STRIP_LEAN_RES = 2, STRIP_GENERAL = 3, STRIP_KINDS = 4 };

/* Rows of level 0 (and of f) in flight by radius: 3 where the unroll by 2r + 1 allows it
 * (r = 1, 4), else 1. The lean kinds also prefetch level 0's row PF rows beyond the queue
 * into L2, so that its load, issued QD iterations ahead, waits for L2 rather than memory:
 * 2 at radius 2 to 4, 4 at radius 1 but in the fp32 lean kind, whose registers are full
 * (docs/design/fused-kernels.md, "The 2D warp-strip kernel"). */
template <typename REAL, int RAD, int KIND> struct strip_queue {
  static constexpr int QD = (2 * RAD + 1) % 3 == 0 ? 3 : 1;
  static constexpr int PF = RAD > 1 ? 2 : sizeof(REAL) == 4 && KIND == STRIP_LEAN ? 0 : 4;
};

template <typename REAL, int T, int RAD, int KIND> struct strip_thread {
  static constexpr bool GEN = KIND == STRIP_GENERAL, SRC = KIND != STRIP_LEAN,
                        RES = GEN || KIND == STRIP_LEAN_RES;
  static constexpr int S = 2 * RAD + 1, QD = strip_queue<REAL, RAD, KIND>::QD,
                       PF = strip_queue<REAL, RAD, KIND>::PF, V = STRIP_V;
  static_assert(RAD >= 1 && RAD <= V, "a lane's x neighbours are its own and one lane's");
  const strip_params<REAL> &p;
  int64_t x0;                      /* first column of this thread */
  int y0, y1;                      /* output rows of this warp */
  int xc, dcol;                    /* lean: the column of the loads and the offset of the
                                      second vector in fp64 (strip_col) */
  REAL *vcol;                      /* the output's cell (x0, y0) */
  int jst;                         /* the iteration that stores row y0: y0 + K r */
  bool lvec, svec;                 /* 16-byte loads / stores */
  bool st[STRIP_V];                /* column stored */
  bool xface;                      /* one of the cells lies within r of a reflecting x face */
  bool glo[STRIP_V], ghi[STRIP_V]; /* radius 1: the cell at x = 0 / n - 1 of a reflecting face
                                      (predicates, not an index: an index would put the rows in
                                      local memory) */
  /* R[slot][level][cell]: the last S rows of levels 0..T-1. */
  REAL R[S][T][STRIP_V];
  REAL Q[QD][STRIP_V]; /* level-0 rows loaded ahead */
  REAL F[QD][STRIP_V]; /* lean kind with a source: level 1's rows of f, loaded ahead */
  /* ... and the rows of f that levels 2..T need (row j - r, level 1's at iteration j, is
   * level l's at iteration j + (l - 1) r) in the lane's part of a shared-memory ring, so a
   * level needs no global load and no address arithmetic. fring: the lane's first vector of
   * ring row 0; fslot: the ring row of row j - r at iteration j. */
  REAL *fring;
  int fslot;
  double racc[T]; /* sum of w^2 over this thread's stored cells, level 0..T-1 */

  /* The steps stored: the kernel's T (radius 1) or the launch's. */
  __device__ __forceinline__ int steps() const { return RAD == 1 ? T : p.steps; }

  /* Ring row r: the lane's V cells as 16-byte vectors; each vector of a warp is one
   * contiguous run (no bank conflict). */
  static constexpr int FA = 16 / sizeof(REAL);
  __device__ __forceinline__ void fput(int r, const REAL c[STRIP_V]) const
  {
#pragma unroll
    for (int k = 0; k < STRIP_V; k++)
      fring[r * 32 * STRIP_V + k / FA * 32 * FA + k % FA] = c[k];
  }
  __device__ __forceinline__ void fget(int r, REAL c[STRIP_V]) const
  {
#pragma unroll
    for (int k = 0; k < STRIP_V; k++)
      c[k] = fring[r * 32 * STRIP_V + k / FA * 32 * FA + k % FA];
  }

  /* The neighbours of row m of the level whose rows are in slots (slot of row m + d: sl[RAD +
   * d]): xn[RAD + d][k] = the cell at x0 + k + d, yn[RAD + d][k] = the cell of row m + d
   * (d = -r..r, 0: the cell itself), with the ghosts of reflecting faces where FACES. Every
   * lane must call it (shuffles). */
  template <bool FACES>
  __device__ __forceinline__ void nbrs(const REAL (*const rows[S])[STRIP_V], int m,
                                       REAL xn[S][STRIP_V], REAL yn[S][STRIP_V]) const
  {
    const REAL(&B)[STRIP_V] = *rows[RAD];
    REAL from_left[RAD + 1], from_right[RAD + 1]; /* [d]: the cell d before / after the lane */
#pragma unroll
    for (int d = 1; d <= RAD; d++) {
      from_left[d] = __shfl_up_sync(0xffffffffu, B[STRIP_V - d], 1);
      from_right[d] = __shfl_down_sync(0xffffffffu, B[d - 1], 1);
    }
#pragma unroll
    for (int k = 0; k < STRIP_V; k++) {
#pragma unroll
      for (int d = -RAD; d <= RAD; d++) {
        const int c = k + d;
        xn[RAD + d][k] = c < 0          ? from_left[c < 0 ? -c : 1]
                         : c >= STRIP_V ? from_right[c >= STRIP_V ? c - STRIP_V + 1 : 1]
                                        : B[c < 0 || c >= STRIP_V ? 0 : c];
        yn[RAD + d][k] = (*rows[RAD + d])[k];
      }
    }
    if (!FACES)
      return;
    /* x: a cell x within r of a face reads the ghost d cells beyond it, the mirror of the
     * cell d - 2x - 1 (low face) or 2 (n - 1 - x) + 1 - d (high face) from it. */
    if (RAD == 1 && xface) {
#pragma unroll
      for (int k = 0; k < STRIP_V; k++) {
        if (glo[k])
          xn[0][k] = strip_ghost(p.kind[0][0], p.two_g[0][0], xn[1][k]);
        if (ghi[k])
          xn[2][k] = strip_ghost(p.kind[0][1], p.two_g[0][1], xn[1][k]);
      }
    } else if (xface) {
#pragma unroll
      for (int k = 0; k < STRIP_V; k++)
#pragma unroll
        for (int d = 1; d <= RAD; d++)
#pragma unroll
          for (int e = 0; e < d; e++) { /* e: the cell's distance from the face */
            if (p.kind[0][0] && x0 + k == e)
              xn[RAD - d][k] = strip_ghost(p.kind[0][0], p.two_g[0][0], xn[RAD + d - 2 * e - 1][k]);
            if (p.kind[0][1] && x0 + k == p.nx - 1 - e)
              xn[RAD + d][k] = strip_ghost(p.kind[0][1], p.two_g[0][1], xn[RAD + 2 * e + 1 - d][k]);
          }
    }
    /* y: likewise for the rows within r of a face (the row's distance e from it). */
#pragma unroll
    for (int e = 0; e < RAD; e++) {
      if (p.kind[1][0] && m == e) {
#pragma unroll
        for (int d = e + 1; d <= RAD; d++)
#pragma unroll
          for (int k = 0; k < STRIP_V; k++)
            yn[RAD - d][k] = strip_ghost(p.kind[1][0], p.two_g[1][0], yn[RAD + d - 2 * e - 1][k]);
      }
      if (p.kind[1][1] && m == p.ny - 1 - e) {
#pragma unroll
        for (int d = e + 1; d <= RAD; d++)
#pragma unroll
          for (int k = 0; k < STRIP_V; k++)
            yn[RAD + d][k] = strip_ghost(p.kind[1][1], p.two_g[1][1], yn[RAD + 2 * e + 1 - d][k]);
      }
    }
  }

  /* Residual of level `lev` (0..K-1) at row m from that level's cells B and their update
   * `out` (level lev + 1's): out - B in the field's precision (residual()'s bits), squared
   * and summed in double (exact squares for fp32; fp64 with fused multiply-adds). */
  __device__ __forceinline__ void residual(int lev, int m, const REAL *B, const REAL *out)
  {
    if (!((p.rmask >> lev) & 1u) || m < y0 || m >= y1)
      return;
#pragma unroll
    for (int k = 0; k < STRIP_V; k++) {
      const double d = stencil_residual(out[k], B[k]);
      if (st[k])
        racc[lev] = stencil_fma(d, d, racc[lev]);
    }
  }

  /* Iteration j (phase PH = (j - first) mod S): row j of level 0 from the queue, row j - l r
   * of level l = 1..T; with residuals, also the residual of level l - 1 at that row. The slot
   * of the rows made at iteration j - e (e = 0..2r) is (PH + S - 1 - e) mod S. */
  template <int PH, bool FACES, bool FULL> __device__ __forceinline__ void step(int j)
  {
    constexpr int N = (PH + S - 1) % S, QS = PH % QD;
#pragma unroll
    for (int k = 0; k < STRIP_V; k++)
      R[N][0][k] = Q[QS][k];
    if constexpr (GEN)
      strip_load<REAL>(p, p.u, j + QD, x0, lvec, Q[QS]);
    else {
      strip_load_fast<REAL>(p, p.u, xc, dcol, j + QD, Q[QS]);
      if constexpr (PF > 0)
        prefetch_l2(strip_row(p.u + xc, j + QD + PF > p.yhi ? p.yhi : j + QD + PF, p.sy));
    }
    /* f's row j - r (level 1's) comes from the queue into the ring; the other levels read
     * theirs from the ring. */
    REAL f1[STRIP_V];
    if (!GEN && SRC && p.f) {
      fslot = fslot + 1 == STRIP_FRING ? 0 : fslot + 1;
#pragma unroll
      for (int k = 0; k < STRIP_V; k++)
        f1[k] = F[QS][k];
      fput(fslot, f1);
      strip_load_fast<REAL>(p, p.f, xc, dcol, j + QD - RAD, F[QS]);
    }
    const bool res = RES && p.part;
    const int K = FULL ? T : steps();
#pragma unroll
    for (int l = 1; l <= T; l++) {
      const int m = j - l * RAD;
      const REAL(*rows[S])[STRIP_V]; /* level l - 1's rows m - r .. m + r */
#pragma unroll
      for (int d = -RAD; d <= RAD; d++)
        rows[RAD + d] = &R[(PH + S - 1 - (RAD - d)) % S][l - 1];
      REAL xn[S][STRIP_V], yn[S][STRIP_V];
      nbrs<FACES>(rows, m, xn, yn);
      REAL s[STRIP_V];
      if (SRC && p.f) {
        if constexpr (GEN) {
          strip_load<REAL>(p, p.f, m, x0, lvec, s);
        } else if (l == 1) {
#pragma unroll
          for (int k = 0; k < STRIP_V; k++)
            s[k] = f1[k];
        } else {
          const int r = fslot - (l - 1) * RAD;
          fget(r < 0 ? r + STRIP_FRING : r, s);
        }
      }
      const REAL *B = xn[RAD];
      REAL out[STRIP_V];
#pragma unroll
      for (int k = 0; k < STRIP_V; k++) {
        REAL nm[2][4], np[2][4];
#pragma unroll
        for (int d = 1; d <= RAD; d++) {
          nm[0][d - 1] = xn[RAD - d][k], np[0][d - 1] = xn[RAD + d][k];
          nm[1][d - 1] = yn[RAD - d][k], np[1][d - 1] = yn[RAD + d][k];
        }
        out[k] = stencil_star_nb(2, RAD, p.c0, p.c, B[k], nm, np);
      }
      if (SRC && p.f) {
#pragma unroll
        for (int k = 0; k < STRIP_V; k++)
          out[k] = stencil_source(p.cf, s[k], out[k]);
      }
      if (res && l <= K)
        residual(l - 1, m, B, out);
      if (l < T) {
#pragma unroll
        for (int k = 0; k < STRIP_V; k++)
          R[N][l][k] = out[k];
      }
      if (l == K && (unsigned)(j - jst) < (unsigned)(y1 - y0)) { /* y0 <= m < y1 */
        REAL *q = strip_row(vcol, j - jst, p.sy);
        if (svec) {
          if constexpr (sizeof(REAL) == 4) {
#ifdef STENCIL_CUDA_EMU
            *reinterpret_cast<float4 *>(q) = make_float4(out[0], out[1], out[2], out[3]);
#else /* (a float4 store beside the scalar ones below compiles to four scalar stores) */
            asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(q), "f"(out[0]),
                         "f"(out[1]), "f"(out[2]), "f"(out[3]));
#endif
          } else {
            reinterpret_cast<double2 *>(q)[0] = make_double2(out[0], out[1]);
            reinterpret_cast<double2 *>(q)[1] = make_double2(out[2], out[3]);
          }
        } else {
#pragma unroll
          for (int k = 0; k < STRIP_V; k++)
            if (st[k])
              q[k] = out[k];
        }
      }
    }
  }
};

/* Warp w of a launch -> strip s and output rows [y0, y1). Lean kernel: the fast region, grid
 * (strips / warps, chunks). Edge kernel (a lean kind with EDGE): the frame, all at reflecting
 * faces: the strips outside [fs0, fs1) in rows [r0, r1), each lean chunk split among
 * STRIP_SIDE_SPLIT warps (applying the x face costs every row about three times the
 * instructions: so they end with the lean warps), then the bands [0, r0) and [r1, ny), one
 * warp per strip (at most 2T + 1 rows). General kernel (no fast region): every strip and row
 * in chunks of `chunk` rows, the strip fastest. */
template <typename REAL, bool GEN, bool EDGE>
__device__ __forceinline__ bool strip_where(const strip_params<REAL> &p, int64_t w, int64_t &s,
                                            int64_t &y0, int64_t &y1)
{
  if (EDGE) {
    const int64_t side = p.nstrips - (p.fs1 - p.fs0);
    const int64_t chunks = (p.r1 - p.r0 + p.chunk - 1) / p.chunk;
    if (w < chunks * side * STRIP_SIDE_SPLIT) {
      const int64_t q = w % STRIP_SIDE_SPLIT, k = w / STRIP_SIDE_SPLIT % side,
                    base = p.r0 + w / STRIP_SIDE_SPLIT / side * p.chunk,
                    top = base + p.chunk < p.r1 ? base + p.chunk : p.r1,
                    sub = (p.chunk + STRIP_SIDE_SPLIT - 1) / STRIP_SIDE_SPLIT;
      s = k < p.fs0 ? k : p.fs1 + (k - p.fs0);
      y0 = base + q * sub;
      y1 = y0 + sub < top ? y0 + sub : top;
      return y0 < y1;
    }
    w -= chunks * side * STRIP_SIDE_SPLIT;
    s = w % p.nstrips;
    const bool lo = p.r0 > 0 && w < p.nstrips;
    y0 = lo ? 0 : p.r1;
    y1 = lo ? p.r0 : p.ny;
    return w < ((p.r0 > 0) + (p.r1 < p.ny)) * p.nstrips;
  }
  if (!GEN) {
    s = p.fs0 + w;
    y0 = p.r0 + (int64_t)blockIdx.y * p.chunk;
    y1 = y0 + p.chunk < p.r1 ? y0 + p.chunk : p.r1;
    return s < p.fs1;
  }
  s = w % p.nstrips;
  y0 = w / p.nstrips * p.chunk;
  y1 = y0 + p.chunk < p.ny ? y0 + p.chunk : p.ny;
  return y0 < p.ny;
}

/* Iterations first .. end - 1 of a warp in groups of S, each unrolled into the slots' phases
 * 0..S - 1. FULL (the launch runs the kernel's T steps): the level stored is known at compile
 * time, and every group runs whole (its iterations beyond `end` store nothing and sum no
 * residual), so the slots return to their registers with no moves. Otherwise each phase tests
 * for `end` and the level stored is the launch's (strip_run says which kernels take which). */
template <bool FACES, bool FULL, typename TH, int... PH>
__device__ __forceinline__ void strip_loop(TH &t, int first, int end,
                                           std::integer_sequence<int, PH...>)
{
  for (int j = first; j < end; j += (int)sizeof...(PH))
    if constexpr (FULL)
      (t.template step<PH, FACES, FULL>(j + PH), ...);
    else
      (void)((j + PH < end ? (t.template step<PH, FACES, FULL>(j + PH), true) : false) && ...);
}

template <typename REAL, int T, int RAD, int KIND, bool EDGE>
__device__ __forceinline__ void strip_run(const strip_params<REAL> &p)
{
  using thread = strip_thread<REAL, T, RAD, KIND>;
  constexpr bool GEN = thread::GEN, SRC = thread::SRC, RES = thread::RES, FACES = GEN || EDGE;
  constexpr int S = thread::S, QD = thread::QD;
  const int lane = threadIdx.x & 31;
  const int64_t w = (int64_t)blockIdx.x * STRIP_WARPS + (threadIdx.x >> 5);
  /* This warp's slot of the residual sums: lean warps first, then the edge ones, then the
   * general ones. */
  const int64_t slot = GEN    ? p.part_base + w
                       : EDGE ? p.part_edge + w
                              : (int64_t)blockIdx.y * gridDim.x * STRIP_WARPS + w;
  int64_t s, y0, y1;
  if (!strip_where<REAL, GEN, EDGE>(p, w, s, y0, y1)) { /* the whole warp: no partner lost */
    if (RES && p.part && lane < 8)
      p.part[slot * 8 + lane] = 0;
    return;
  }
  thread t{p};
  if constexpr (!GEN && SRC) { /* the ring of f (zeros until written: no stale bits) */
    static_assert(STRIP_FRING >= (T - 1) * RAD + 1, "the ring of f holds the rows of levels 1..T");
    __shared__ __align__(16) REAL ring[STRIP_WARPS][STRIP_FRING * 32 * STRIP_V];
    t.fring = ring[threadIdx.x >> 5] + lane * t.FA;
    t.fslot = -1;
    const REAL zero[STRIP_V] = {};
    for (int r = 0; r < STRIP_FRING; r++)
      t.fput(r, zero);
  }
  const int64_t xs = p.xs0 + s * p.U;
  t.x0 = xs + (int64_t)lane * STRIP_V;
  t.y0 = (int)y0;
  t.y1 = (int)y1;
  if constexpr (!GEN) {
    t.xc = strip_col(p, t.x0, t.dcol);
  }
  t.vcol = p.v + y0 * p.sy + t.x0;
  t.jst = t.y0 + t.steps() * RAD;
  const int64_t olo = xs + p.E > 0 ? xs + p.E : 0;
  const int64_t ohi = xs + p.E + p.U < p.nx ? xs + p.E + p.U : p.nx;
  bool all = true;
#pragma unroll
  for (int k = 0; k < STRIP_V; k++) {
    t.st[k] = t.x0 + k >= olo && t.x0 + k < ohi;
    all = all && t.st[k];
    t.glo[k] = p.kind[0][0] && t.x0 + k == 0;
    t.ghi[k] = p.kind[0][1] && t.x0 + k == p.nx - 1;
  }
  /* the lane's cells within r of a reflecting x face (nbrs) */
  t.xface = (p.kind[0][0] && t.x0 < RAD && t.x0 + STRIP_V > 0) ||
            (p.kind[0][1] && t.x0 + STRIP_V > p.nx - RAD && t.x0 < p.nx);
  t.svec = p.gvec && all;
  t.lvec = p.gvec && t.x0 >= -p.hx && t.x0 + STRIP_V <= p.nx + p.hx;
#pragma unroll
  for (int a = 0; a < S; a++)
#pragma unroll
    for (int l = 0; l < T; l++)
#pragma unroll
      for (int k = 0; k < STRIP_V; k++)
        t.R[a][l][k] = (REAL)0;
#pragma unroll
  for (int l = 0; l < T; l++)
    t.racc[l] = 0;
  /* Level l must be valid from row y0 - (K - l) r: level 0 starts T r rows early, and the last
   * stored row y1 - 1 leaves level K at iteration y1 - 1 + K r. */
  const int first = t.y0 - T * RAD, end = t.y1 + t.steps() * RAD;
#pragma unroll
  for (int a = 0; a < QD; a++) {
    if constexpr (GEN) {
      strip_load<REAL>(p, p.u, first + a, t.x0, t.lvec, t.Q[a]);
    } else {
      strip_load_fast<REAL>(p, p.u, t.xc, t.dcol, first + a, t.Q[a]);
      if (SRC && p.f)
        strip_load_fast<REAL>(p, p.f, t.xc, t.dcol, first + a - RAD, t.F[a]);
    }
  }
  /* Radius 1 launches run the kernel's T; the lean kinds of a larger radius take the FULL loop
   * for launches of T steps (docs/design/fused-kernels.md, "The 2D warp-strip kernel"). */
  constexpr auto phases = std::make_integer_sequence<int, S>();
  if constexpr (RAD == 1)
    strip_loop<FACES, true>(t, first, end, phases);
  else if constexpr (GEN || EDGE)
    strip_loop<FACES, false>(t, first, end, phases);
  else if (t.steps() == T)
    strip_loop<FACES, true>(t, first, end, phases);
  else
    strip_loop<FACES, false>(t, first, end, phases);
  if (RES && p.part)
    fused_warp_sums(t.racc, p.part + slot * 8);
}

template <typename REAL, int T, int RAD, int KIND, bool EDGE>
__global__ void __launch_bounds__(STRIP_WARPS * 32) strip_kernel(const strip_params<REAL> p)
{
  strip_run<REAL, T, RAD, KIND, EDGE>(p);
}

/* The fp32 lean and residual kinds of radius 1 capped at 128
 * registers (4 CTAs per multiprocessor): their latency-bound loops run faster with a third
 * more warps despite small spills (radius 1: the lean kind 64 bytes at T = 8; the residual
 * kind fits at T <= 4; docs/design/fused-kernels.md, "The 2D warp-strip kernel"). A kernel of
 * its own: an explicit minimum of 1 CTA changes the other kinds' register allocation. */
template <typename REAL, int T, int RAD, int KIND, bool EDGE>
__global__ void __launch_bounds__(STRIP_WARPS * 32, 4)
    strip_kernel_4ctas(const strip_params<REAL> p)
{
  strip_run<REAL, T, RAD, KIND, EDGE>(p);
}

/* The edge kernels of the fp32 radius-1 source kind, capped at 192 registers: an edge CTA then
 * fits beside two CTAs of the lean kind where those take at most 160 (three a multiprocessor;
 * 2 x 160 + 192 = 512 registers a thread of 128), so the frame runs in the slots the lean
 * kernel's wave leaves free rather than after it (the plan's model counts the frame in the
 * wave: strip_wave_chunk). */
#if defined(__CUDACC_VER_MAJOR__) &&                                                               \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define STRIP_MAXNREG(n) __maxnreg__(n)
#else /* nvcc before 12.4 (and the emulation): no cap, the frame then runs after the wave */
#define STRIP_MAXNREG(n)
#endif
template <typename REAL, int T, int RAD, int KIND, bool EDGE>
__global__ void STRIP_MAXNREG(192) strip_kernel_edge192(const strip_params<REAL> p)
{
  strip_run<REAL, T, RAD, KIND, EDGE>(p);
}

/* The kernel of a kind, T and radius, lean or edge (EDGE; the general kind has one form); NULL
 * for the residual kind of radius 1 beyond FUSED_RESIDUAL_STEPS (not built). The edge kernels
 * are kernels of their own so that the lean loop's register allocation never sees the faces. */
template <typename REAL, int T, int RAD, int KIND, bool EDGE> const void *strip_entry()
{
  if constexpr ((RAD == 1 && KIND == STRIP_LEAN_RES && T > FUSED_RESIDUAL_STEPS(sizeof(REAL))) ||
                (KIND == STRIP_GENERAL && EDGE))
    return NULL;
  else if constexpr (sizeof(REAL) == 4 && RAD == 1 && KIND == STRIP_LEAN_SRC && EDGE)
    return STENCIL_KERNEL_PTR(strip_kernel_edge192<REAL, T, RAD, KIND, EDGE>);
  else if constexpr (sizeof(REAL) == 4 && RAD == 1 &&
                     (KIND == STRIP_LEAN || KIND == STRIP_LEAN_RES))
    return STENCIL_KERNEL_PTR(strip_kernel_4ctas<REAL, T, RAD, KIND, EDGE>);
  else
    return STENCIL_KERNEL_PTR(strip_kernel<REAL, T, RAD, KIND, EDGE>);
}

/* Host side (strip2d.cu), called through fused.h's functions for 2D plans. */
int strip_default_steps(int elem, int radius, int has_source);
int strip_plan(struct fused_plan *pl, const struct fused_config *want, int tmax_halo, int device);
int strip_launch(const struct fused_plan *pl, const void *u, const void *f, void *v, int steps,
                 void *stream);
int strip_attributes(const struct fused_plan *pl, int steps, int *regs, int *local_bytes);
size_t strip_scratch(const struct fused_plan *pl);
int strip_launch_residual(const struct fused_plan *pl, const void *u, const void *f, void *v,
                          int steps, unsigned mask, double *scratch, double *sums, void *stream);

/* The instantiations, in fused_f32.cu / fused_f64.cu: radius 1 for T = 1..8, radius 2..4 for
 * T = STRIP_KIND_STEPS (running any K <= T), every kind (STRIP_LEAN...) and edge = 0 or 1 (edge
 * kernels of the lean kinds). The kernel of a launch of `steps` steps: radius 1 its T's,
 * radius > 1 the one built (NULL beyond its T). */
const void *strip_lookup_f32(int steps, int radius, int kind, int edge);
const void *strip_lookup_f64(int steps, int radius, int kind, int edge);

#define STRIP_KERNELS(REAL, G, E)                                                                  \
  strip_entry<REAL, 1, 1, G, E>(), strip_entry<REAL, 2, 1, G, E>(),                                \
      strip_entry<REAL, 3, 1, G, E>(), strip_entry<REAL, 4, 1, G, E>(),                            \
      strip_entry<REAL, 5, 1, G, E>(), strip_entry<REAL, 6, 1, G, E>(),                            \
      strip_entry<REAL, 7, 1, G, E>(), strip_entry<REAL, 8, 1, G, E>(),                            \
      strip_entry<REAL, STRIP_KIND_STEPS(sizeof(REAL), 2, G), 2, G, E>(),                          \
      strip_entry<REAL, STRIP_KIND_STEPS(sizeof(REAL), 3, G), 3, G, E>(),                          \
      strip_entry<REAL, STRIP_KIND_STEPS(sizeof(REAL), 4, G), 4, G, E>()
#define STRIP_KIND_KERNELS(REAL, E)                                                                \
  {                                                                                                \
    {STRIP_KERNELS(REAL, STRIP_LEAN, E)}, {STRIP_KERNELS(REAL, STRIP_LEAN_SRC, E)},                \
        {STRIP_KERNELS(REAL, STRIP_LEAN_RES, E)},                                                  \
    {                                                                                              \
      STRIP_KERNELS(REAL, STRIP_GENERAL, E)                                                        \
    }                                                                                              \
  }
#define STRIP_INSTANTIATE(REAL, name)                                                              \
  const void *name(int steps, int radius, int kind, int edge)                                      \
  {                                                                                                \
    static const void *const k[2][STRIP_KINDS][11] = {STRIP_KIND_KERNELS(REAL, false),             \
                                                      STRIP_KIND_KERNELS(REAL, true)};             \
    if (kind < 0 || kind >= STRIP_KINDS || radius < 1 || radius > 4 || steps < 1 ||                \
        steps > STRIP_KIND_STEPS(sizeof(REAL), radius, kind))                                      \
      return NULL;                                                                                 \
    return k[edge ? 1 : 0][kind][radius == 1 ? steps - 1 : 6 + radius];                            \
  }
