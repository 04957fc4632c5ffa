#pragma once
/* Tier 2, tile form: the per-thread code of update_tile (kernels/cuda/heat.cu), shared with
 * its host emulation (tests/gpu/tile_emulate.cu). Radius 1, fp32 or fp64, 2D or 3D.
 *
 * Why: the other tier-2 forms read every cell about three times from L2 (as a centre and as
 * the t1 neighbour of two rows), and Nsight Compute showed them bound by L2 throughput, not
 * DRAM (docs/gpu-runs/2026-11-29.md). Here each cell of a plane comes from L2 once per block
 * (plus a thin halo), and every neighbour read after that is on the SM.
 *
 * Logical axes as struct kstream in heat.cu: t0 = x (stride 1), t1 (stride s1) and the
 * streaming axis s (stride ss); 3D: t1 = y, s = z; 2D: t1 = z (one cell, no neighbours),
 * s = y.
 *
 * A block of TX x TT threads owns a tile of TX x TY cells of the (t0, t1) plane, TY = R TT:
 * thread (tx, ty) owns column x0 + tx and the R consecutive rows y0 + R ty .. + R - 1, and
 * streams them through the block's zc planes along s. The planes go through a ring of S
 * shared-memory buffers, filled by 16-byte cp.async copies S - 3 planes ahead of the plane
 * being updated:
 *
 *   buffer:  (TY + 2) rows x pitch elements, pitch = TX + 2 E, E = 16 / sizeof(REAL)
 *   buffer row 1 + (j - y0) holds row j of the tile, rows y0 - 1 .. y0 + TY (2D: row 1
 *   only); element c of a buffer row holds padded x position a0 + c, a0 = (x0 + h0 - 1)
 *   rounded down to a multiple of E (the rows of dev_layout are 128-byte aligned, so every
 *   copy is an aligned 16-byte vector), up to the first vector holding x0 + nx + h0.
 *
 * Plane q of the block (q = 0 .. nk + 1: s = k0 - 1 + q) goes to buffer q mod S. Per plane
 * k0 + i: wait until this thread's copies of plane q = i + 2 have landed (cp.async groups,
 * S - 4 may stay in flight), __syncthreads() (everyone's copies of that plane are visible,
 * and everyone has finished the update of plane i - 1), copy plane i + S - 1 into the buffer
 * of plane i - 1, which nobody reads any more, then update plane i: centre from registers,
 * x and t1 neighbours from the buffer of plane i + 1, the s + 1 neighbour from the buffer
 * of plane i + 2, the s - 1 neighbour from registers (the previous centre).
 *
 * The operation order is every backend's (kernels/cpu/heat_real.h); the ghost cells of the
 * known physical faces are written as by update_stream (struct kfaces in heat.cu).
 *
 * Built two ways: for the device (the default: TILE_FN is a __device__ function, the
 * primitives are cp.async and plain loads and stores), and for the host emulation
 * (TILE_EMULATION defined: TILE_FN is a host function and the includer defines the
 * primitives tile_copy16, tile_commit, tile_wait, tile_lds, tile_ldg and tile_stg before
 * including this file, checking bounds, races and reads of copies not waited for). */
#include <stdint.h>

#ifdef TILE_EMULATION
#define TILE_FN static inline
#define TILE_UNROLL
#else
#define TILE_FN static __device__ __forceinline__
#define TILE_UNROLL _Pragma("unroll")
#endif

#define TILE_MAX_COPIES 4    /* 16-byte copies per thread per plane */
#define TILE_MAX_THREADS 512 /* per block (__launch_bounds__) */
#define TILE_MIN_RING 4      /* S: buffers in the ring */
#define TILE_MAX_RING 6

/* Everything a launch needs (passed by value). */
template <typename REAL> struct tile_args {
  const REAL *u, *f; /* f: source field, or null */
  REAL *v;
  int64_t row0;         /* element of padded x position 0 of t1 row 0, plane 0 */
  int64_t s1, ss;       /* element strides of t1 and s */
  int64_t n[3];         /* interior cells along t0, t1, s */
  int64_t lo[3], hi[3]; /* the box to update (logical axes, interior coordinates) */
  int h0;               /* ghost cells along x (row position of interior x = 0) */
  int three_d;
  int tx, tt;              /* threads per block along x and t1 (block (tx, tt)) */
  int zc;                  /* cells along s per block */
  int ring;                /* S, TILE_MIN_RING .. TILE_MAX_RING */
  int pitch;               /* elements per buffer row: tx + 2 E */
  int plane;               /* elements per buffer: (R tt + 2) pitch */
  REAL c0, cx, cy, cs, cf; /* cy: t1 neighbours (3D); cs: s neighbours (z in 3D, y in 2D) */
  int kind[6];             /* faces 2 axis + side (t0, t1, s): 0 none, 1 Dirichlet, 2 Neumann */
  REAL two_g[6];
};

/* Per block. */
struct tile_block {
  int64_t x0, y0, k0; /* first cell of the tile and chunk */
  int nx, ny, nk;     /* cells of the tile and chunk inside the box (>= 1 each) */
  int64_t a0;         /* padded x position of element 0 of every buffer row */
  int nv;             /* 16-byte vectors copied per buffer row */
  int row_lo, rows;   /* first buffer row copied (0 in 3D, 1 in 2D), rows copied */
  int64_t g0;         /* element of padded x a0, t1 row y0 - 1, s = 0 */
};

/* Per thread (kept small: registers bound the blocks per SM). */
template <typename REAL, int R> struct tile_thread {
  /* Copy e of every plane: buffer offset soff = row pitch + col E in bits 0-15, the buffer row
   * in bits 16-30 (its global offset is soff + row (s1 - pitch)); -1: none. */
  int cp[TILE_MAX_COPIES];
  int64_t gq;  /* element of buffer row 0, element 0 of the next plane to copy */
  int qleft;   /* planes left to copy */
  int64_t at;  /* element of this thread's first cell in the plane of the next update */
  int xin;     /* column x0 + tx lies in the box */
  int rows;    /* of this thread's R rows, how many lie in the box */
  int rows_ld; /* how many have their buffer row copied (rows, or one more in 3D) */
  int fc;      /* faces this thread's cells lie on (with a rule): bit 0 x = 0, bit 1 x = n0 - 1,
                  bit 2 row 0 on t1 = 0, bit 3 + r row r on t1 = n1 - 1 */
  int sc;      /* buffer offset of this thread's first cell */
  int bq;      /* buffer of the next plane to copy */
  int bc;      /* buffer of plane i + 1 for the next update i (its centre plane) */
  REAL zm[R];  /* plane s - 1 of this thread's cells */
  REAL cur[R]; /* plane s */
};

#ifndef TILE_EMULATION
/* ---- device primitives ------------------------------------------------------------------- */

/* One aligned 16-byte copy from global to shared memory, bypassing L1 (cp.async.cg). */
template <typename REAL> TILE_FN void tile_copy16(REAL *dst, const REAL *src)
{
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

TILE_FN void tile_commit()
{
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most `pending` (0..2) of this thread's newest copy groups are in flight. */
TILE_FN void tile_wait(int pending)
{
  if (pending <= 0)
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  else if (pending == 1)
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  else
    asm volatile("cp.async.wait_group 2;\n" ::: "memory");
}

template <typename REAL> TILE_FN REAL tile_lds(const REAL *p)
{
  return *p;
}
template <typename REAL> TILE_FN REAL tile_ldg(const REAL *p)
{
  return *p;
}
template <typename REAL> TILE_FN void tile_stg(REAL *p, REAL x)
{
  *p = x;
}
#endif

/* ---- the per-thread code ------------------------------------------------------------------ */

template <typename REAL, int R>
TILE_FN void tile_block_init(const tile_args<REAL> &a, int64_t bx, int64_t by, int64_t bz,
                             tile_block &b)
{
  constexpr int E = 16 / sizeof(REAL);
  const int64_t ty = (int64_t)R * a.tt;
  b.x0 = a.lo[0] + bx * a.tx;
  b.y0 = a.lo[1] + by * ty;
  b.k0 = a.lo[2] + bz * a.zc;
  b.nx = (int)(a.hi[0] - b.x0 < a.tx ? a.hi[0] - b.x0 : a.tx);
  b.ny = (int)(a.hi[1] - b.y0 < ty ? a.hi[1] - b.y0 : ty);
  b.nk = (int)(a.hi[2] - b.k0 < a.zc ? a.hi[2] - b.k0 : a.zc);
  /* Padded x positions needed: x0 + h0 - 1 .. x0 + nx + h0 (>= 0, inside the row). */
  b.a0 = (b.x0 + a.h0 - 1) / E * E;
  b.nv = (int)((b.x0 + b.nx + a.h0 + 1 - b.a0 + E - 1) / E);
  const int yh = a.three_d ? 1 : 0;
  b.row_lo = 1 - yh;
  b.rows = b.ny + 2 * yh;
  b.g0 = a.row0 + (b.y0 - 1) * a.s1 + b.a0;
}

template <typename REAL, int R>
TILE_FN void tile_thread_init(const tile_args<REAL> &a, const tile_block &b, int tid,
                              tile_thread<REAL, R> &t)
{
  constexpr int E = 16 / sizeof(REAL);
  const int nt = a.tx * a.tt, nvec = b.rows * b.nv;
  TILE_UNROLL
  for (int e = 0; e < TILE_MAX_COPIES; e++) {
    const int v = tid + e * nt, row = b.row_lo + v / b.nv;
    t.cp[e] = v < nvec ? row * a.pitch + v % b.nv * E + (row << 16) : -1;
  }
  t.gq = b.g0 + (b.k0 - 1) * a.ss;
  t.qleft = b.nk + 2;
  const int tx = tid % a.tx, ty = tid / a.tx;
  const int64_t x = b.x0 + tx, j0 = b.y0 + (int64_t)R * ty;
  t.at = a.row0 + j0 * a.s1 + b.k0 * a.ss + x + a.h0;
  t.xin = tx < b.nx;
  const int first = R * ty, yh = a.three_d ? 1 : 0;
  const int in = b.ny - first, ld = b.ny + yh - first;
  t.rows = in < 0 ? 0 : in > R ? R : in;
  t.rows_ld = ld < 0 ? 0 : ld > R ? R : ld;
  const int64_t last = a.n[1] - 1 - j0; /* the row on t1 face n1 - 1 */
  t.fc = (x == 0 && a.kind[0] ? 1 : 0) | (x == a.n[0] - 1 && a.kind[1] ? 2 : 0) |
         (j0 == 0 && a.kind[2] ? 4 : 0) | (a.kind[3] && last >= 0 && last < R ? 8 << last : 0);
  t.sc = (1 + first) * a.pitch + (int)(b.x0 + tx + a.h0 - b.a0);
  t.bq = 0;
  t.bc = 1;
  TILE_UNROLL
  for (int r = 0; r < R; r++)
    t.zm[r] = t.cur[r] = (REAL)0;
}

/* Copy the next plane q of the block (q = 0, 1, ..: s = k0 - 1 + q; none beyond q = nk + 1)
 * into buffer q mod S, as one cp.async group (empty or not: group counts stay uniform). */
template <typename REAL, int R>
TILE_FN void tile_issue(const tile_args<REAL> &a, tile_thread<REAL, R> &t, REAL *sm)
{
  if (t.qleft > 0) {
    REAL *dst = sm + t.bq * a.plane;
    const int64_t skip = a.s1 - a.pitch;
    TILE_UNROLL
    for (int e = 0; e < TILE_MAX_COPIES; e++)
      if (t.cp[e] >= 0) {
        const int soff = t.cp[e] & 0xffff, row = t.cp[e] >> 16;
        tile_copy16(dst + soff, a.u + (t.gq + soff + row * skip));
      }
  }
  tile_commit();
  t.qleft--;
  t.gq += a.ss;
  t.bq = t.bq + 1 == a.ring ? 0 : t.bq + 1;
}

/* Before the loop: planes 0 .. S - 2. */
template <typename REAL, int R>
TILE_FN void tile_prologue(const tile_args<REAL> &a, tile_thread<REAL, R> &t, REAL *sm)
{
  for (int q = 0; q < a.ring - 1; q++)
    tile_issue<REAL, R>(a, t, sm);
}

/* Before the barrier of update i: this thread's copies of planes up to i + 2 have landed
 * (S - 1 + i groups issued, the newest S - 4 may stay in flight). */
template <typename REAL> TILE_FN void tile_head(const tile_args<REAL> &a)
{
  tile_wait(a.ring - 4);
}

template <typename REAL>
TILE_FN void tile_ghost(REAL *q, int64_t off, int kind, REAL two_g, REAL val)
{
  tile_stg(q + off, kind == 1 ? two_g - val : val);
}

/* After the barrier: copy plane i + S - 1, then update plane s = k0 + i. */
template <typename REAL, int R>
TILE_FN void tile_body(const tile_args<REAL> &a, const tile_block &b, tile_thread<REAL, R> &t,
                       int i, REAL *sm)
{
  tile_issue<REAL, R>(a, t, sm); /* plane i + S - 1 */
  const int bp = t.bc + 1 == a.ring ? 0 : t.bc + 1;
  if (t.xin) {
    const int P = a.pitch;
    const REAL *pc = sm + t.bc * a.plane + t.sc; /* plane s, this thread's first cell */
    const REAL *pp = sm + bp * a.plane + t.sc;   /* plane s + 1 */
    if (i == 0) {
      const REAL *pm = sm + (t.bc == 0 ? a.ring - 1 : t.bc - 1) * a.plane + t.sc;
      TILE_UNROLL
      for (int r = 0; r < R; r++)
        if (r < t.rows_ld) {
          t.zm[r] = tile_lds(pm + r * P);
          t.cur[r] = tile_lds(pc + r * P);
        }
    }
    REAL zp[R];
    TILE_UNROLL
    for (int r = 0; r < R; r++)
      zp[r] = r < t.rows_ld ? tile_lds(pp + r * P) : (REAL)0;
    if (t.rows > 0) {
      const int64_t k = b.k0 + i, s1 = a.s1, ss = a.ss;
      REAL ym = (REAL)0, yp = (REAL)0;
      if (a.three_d) {
        ym = tile_lds(pc - P);
        if (t.rows == R)
          yp = tile_lds(pc + R * P);
      }
      /* All R cells first (straight-line code), then the stores, then the rare ghosts. */
      REAL out[R];
      TILE_UNROLL
      for (int r = 0; r < R; r++) {
        const REAL *p = pc + r * P;
        const bool in = r < t.rows;
        const REAL xm = in ? tile_lds(p - 1) : (REAL)0, xp = in ? tile_lds(p + 1) : (REAL)0;
        REAL acc = a.c0 * t.cur[r];
        acc = acc + a.cx * (xm + xp);
        if (a.three_d) {
          const REAL below = r > 0 ? t.cur[r - 1] : ym, above = r < R - 1 ? t.cur[r + 1] : yp;
          acc = acc + a.cy * (below + above);
        }
        acc = acc + a.cs * (t.zm[r] + zp[r]);
        if (a.f && in)
          acc = acc + a.cf * tile_ldg(a.f + (t.at + r * s1));
        out[r] = acc;
      }
      const bool fk0 = k == 0 && a.kind[4], fk1 = k == a.n[2] - 1 && a.kind[5];
      const bool faces = t.fc || fk0 || fk1;
      TILE_UNROLL
      for (int r = 0; r < R; r++) {
        REAL *q = a.v + (t.at + r * s1);
        if (r < t.rows)
          tile_stg(q, out[r]);
        if (r < t.rows && faces) {
          if (t.fc & 1)
            tile_ghost(q, -1, a.kind[0], a.two_g[0], out[r]);
          if (t.fc & 2)
            tile_ghost(q, 1, a.kind[1], a.two_g[1], out[r]);
          if (r == 0 && (t.fc & 4))
            tile_ghost(q, -s1, a.kind[2], a.two_g[2], out[r]);
          if (t.fc & (8 << r))
            tile_ghost(q, s1, a.kind[3], a.two_g[3], out[r]);
          if (fk0)
            tile_ghost(q, -ss, a.kind[4], a.two_g[4], out[r]);
          if (fk1)
            tile_ghost(q, ss, a.kind[5], a.two_g[5], out[r]);
        }
      }
    }
    TILE_UNROLL
    for (int r = 0; r < R; r++) {
      t.zm[r] = t.cur[r];
      t.cur[r] = zp[r];
    }
  }
  t.at += a.ss;
  t.bc = bp;
}

/* After the loop: no copy is left in flight when the block exits. */
TILE_FN void tile_tail()
{
  tile_wait(0);
}

/* Host-side checks of a launch shape; 0 when it is valid, else a reason. */
static inline const char *tile_shape_error(int elem, int rows_per_thread, int tx, int tt, int ring)
{
  const int e = 16 / elem;
  if (tx < 32 || tx % 32 || tt < 1 || tx * tt > TILE_MAX_THREADS)
    return "threads along x must be a multiple of 32 and at most 512 per block";
  if (ring < TILE_MIN_RING || ring > TILE_MAX_RING)
    return "the ring must hold 4 to 6 planes";
  if ((int64_t)(rows_per_thread * tt + 2) * (tx / e + 2) > (int64_t)TILE_MAX_COPIES * tx * tt)
    return "too many 16-byte copies per thread per plane";
  return 0;
}

/* Dynamic shared memory of a launch, in bytes. */
static inline size_t tile_smem_bytes(int elem, int rows_per_thread, int tx, int tt, int ring)
{
  return (size_t)ring * (size_t)(rows_per_thread * tt + 2) * (size_t)(tx + 2 * (16 / elem)) *
         (size_t)elem;
}
