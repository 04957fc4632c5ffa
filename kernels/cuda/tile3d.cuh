#pragma once
/* The fused kernel in 3D: the warp-row tile kernel (see fused.h and docs/design/fused-kernels.md).
 *
 * One launch advances a 3D block by T steps of the 7-point update (radius 1) in the operation
 * order of kernels/backend.h, so it gives the bits of T single steps when compiled with
 * -fmad=false:
 *
 *   v = c0 u;  v = fma(cx, u[x-1] + u[x+1], v);  v = fma(cy, u[y-1] + u[y+1], v);
 *   v = fma(cz, u[z-1] + u[z+1], v)
 *
 * Tile. A CTA of NW = 8 warps owns a tile of BX = 32 V cells along x (lane k: the 16-byte
 * vector of cells [V k, V k + V), V = 4 in fp32, 2 in fp64: BX = 128 / 64) by BY = NW RY = 32
 * rows (warp w: rows [w RY, (w + 1) RY)) and streams along z through a chunk of planes (the
 * first chunk takes what the others leave, fewer or more: tile3d.cu, by the waves). Every level
 * l = 0..T is computed on the whole tile and is right on the cells at least l from the tile's sides
 * (the overlapped trapezoid); stored: x in [E, BX - E), E = T rounded up to a 16-byte vector (keeps
 * vectors aligned), y in [T, BY - T). Tiles are placed so that the stored parts tile the block's
 * interior (the last ones clipped).
 *
 * Narrow column (one CTA, no clusters; tile3d_columns). Where the block's last columns need
 * sl <= 16 lanes (their vectors and E / V on each side), the CTAs of that column split each
 * warp into ns = 32 / sl segments of sl lanes: segment g = w ns + s of the CTA holds rows
 * [g RY, (g + 1) RY) of a tile V sl columns wide and NW ns RY rows high, lanes beyond ns sl
 * compute unstored copies. The loop is the same: a lane's x neighbour across a segment's side
 * comes by the same shuffle from another segment, garbage that (like lane 0's) reaches only
 * the E unstored columns, and the rows below / above are the neighbouring segments' rows in
 * the buffers (dn, up). 512 columns in fp32 at T = 4: 4 tiles of 120 and a narrow column of
 * 3 x 10 lanes storing 32 columns and 88 rows a CTA (94 CTAs a plane instead of 110). Where
 * the x_lo face is applied at every level and x_hi is not, the narrow column goes first (at
 * x = 0, the full columns after it: p.xfull), so that the face tiles are its few CTAs.
 *
 * Clusters (1 x ncy CTAs, DSMEM). The CTAs of a cluster stack their tiles along y: the row
 * below / above a CTA's first / last warp is the neighbouring CTA's, handed over through
 * distributed shared memory, so only the cluster's tile is trapezoidal: y in [T, ncy BY - T)
 * stored. The hand-off is asynchronous: the first / last warp stores its first / last row of
 * every level straight into the neighbour's shared memory (st.async, tile3d_put), each store
 * completing its bytes on the neighbour's "full" mbarrier of that buffer; the neighbour's
 * warp waits on that barrier by phase before it reads, and after its last read arrives on the
 * sender's "empty" mbarrier of the buffer, which the sender waits on before it stores into
 * the buffer again (thread::hand_wait .. hand_release). No fence and no cluster barrier in
 * the loop: a cluster barrier after the mbarriers are initialised (every CTA of the cluster
 * then runs) and one before exit. Within a CTA the rows go as in the one-CTA form (below).
 *
 * Pipeline (the z skew). Iteration i = 0 .. z1 - z0 + 2T - 1 brings plane p = z0 - T + i of
 * level 0, and level l = 1..T computes its plane p - l from planes p - l - 1, p - l and
 * p - l + 1 of level l - 1, computed at iterations i - 2, i - 1 and i. Level T's plane
 * z0 - 2T + i is stored for i >= 2T: exactly planes [z0, z1). Each level 0..T-1 keeps its last
 * three planes (RY rows x V cells per thread) in registers, in slots rotated by i mod 3 (the
 * loop is unrolled by 3: the slots are compile-time indices and rotate without moves). Level
 * 0 comes from a queue of QD planes loaded QD iterations ahead: 16-byte ld.global.nc into
 * registers (fp32), or cp.async into a shared-memory ring, one slot more than QD = 3 (fp64;
 * TILE3D_RING). The register queue's forms without a source also prefetch the plane after
 * the one they load into L2 (prefetch.global.L2, the thread's RY lines), so that the load
 * QD + 1 iterations ahead waits on L2 rather than on memory; the ring's are deep enough, and
 * the source's registers are full.
 *
 * Neighbours. x: the thread's own cells and one cell of lane k - 1 / k + 1 (warp shuffles;
 * lanes 0 and 31 get garbage that reaches only the unstored columns). y: inside the thread's
 * rows its own registers; the row below / above belongs to warp w - 1 / w + 1 and comes
 * through shared memory: at iteration i every warp writes the first and the last of its rows
 * of the plane each level 0..T-1 produced into buffer i mod 2, and level l reads level l - 1's
 * rows (made at iteration i - 1) from buffer (i - 1) mod 2. Warps 0 and NW - 1 without a CTA
 * below / above in the cluster read their own rows for the missing neighbour (garbage outside
 * the stored rows).
 *
 * Barrier. Iteration i writes only buffer i mod 2, every element of it, and reads only
 * buffer (i - 1) mod 2: a read at iteration i must see iteration i - 1's write, and the next
 * write of that buffer, at i + 1, must follow every read of it at i. No thread exits early,
 * and the trip count is the same in every CTA of a cluster (same z chunk). The barrier is
 * split, an mbarrier of the CTA's threads (tile3d_arrive,
 * tile3d_wait) arrived on once iteration i has made its last read of the buffers (level T's
 * rows below and above) and waited on before i + 1's first write (level 0's rows), so a warp
 * runs level T, its stores and the next plane's loads before it waits for the slowest: the
 * same two orders hold, with the phase of iteration i's arrivals in between. (Phase 0 is the
 * arrivals after the buffers are zeroed.) In fp64 the rows rotate through three buffers
 * (i mod 3, TILE3D_NBUF; two in the source's kernel of T = 4, whose rings take the room), so
 * i + 1 writes a buffer last read at i - 1, and the wait moves to
 * i + 1's first read (level 1's rows below and above): level 0's rows are written before it.
 * (fp32 with three buffers spills and is slower: docs/design/fused-kernels.md, "Designs measured
 * and not used".)
 *
 * Faces. Every face must be a halo face: the trapezoid computes into its ghost cells, T deep,
 * edges and corners included. They come from memory (a neighbour rank's cells), or level 0
 * is read through the face (rd, enum fused_read): reflected for homogeneous reflecting
 * faces (Neumann: cell m holds cell -1 - m or 2n - 1 - m; Dirichlet 0: its 0 - u), wrapped
 * for the periodic wrap of an axis the block spans (m + n or m - n). A cell beyond several
 * such faces is read through each (one 0 - u per Dirichlet reflection), and through a face
 * into a memory face's ghosts: the values a fill of the ghosts in axis order would put
 * there, so nothing is filled between launches. Where it costs nothing per cell: a thread's
 * 16-byte vectors and rows are mapped once (x faces need whole vectors: n along x a multiple
 * of one, tile3d_plan); planes per load (uniform); the reversal of a reflected vector and
 * the 0 - u by signs() as the plane leaves the queue (no instruction waits for a load in
 * flight), in the few threads that read a reflected vector or a Dirichlet-0 row (odd).
 * Reading through is exact only where the update commutes with the reflection: 0 - u and
 * the mirror do, 2g - u does not. A source term f is read through as u (its ring's planes
 * signed as they land, ring_signs): cf (0 - f) = 0 - cf f, so the source commutes too. The
 * forms with faces (FX & TILE3D_FACES, radius 1 and 2) apply a Dirichlet face of nonzero value,
 * and every reflecting face of a run with a source beside one or where n along x is not whole
 * vectors, at every level: the ghost beyond the face is 2g - u (Dirichlet) or u (Neumann) of the
 * cell it mirrors, in the tiles that meet the face only (the face tiles' kernel, on a side stream,
 * concurrently with the other tiles'; tile3d.cu, tile3d_face_tiles); a z face so applied is
 * a ghost plane written into the level's slot as the loop passes it. Without a source the
 * face tiles run the plain form (FX = 0, XY), which reads the homogeneous faces through and
 * applies the Dirichlet x and y faces of nonzero value only, their 2g negated in the images
 * beyond a Dirichlet-0 face (xyghost); with a source (fp32) the other tiles run the source's
 * form with halo faces (FX = TILE3D_SRC), reading them through, and the face tiles the form
 * with faces, applying every reflecting face. At radius 2 (no source, n whole vectors) the
 * face tiles run the form with faces that reads the z faces through (TILE3D_ZREAD), applying
 * every reflecting x and y face (2g negated in the planes beyond a Dirichlet-0 z face,
 * step_r), beside the plain form on the others; the planes next to a z wall run the form with
 * faces on every tile. Radius > 1 with such faces otherwise (a Dirichlet face of nonzero value
 * with a source or where n along x is not whole vectors, radius 3 and 4, or a source where n
 * along x is not whole vectors) runs one step per launch with the faces' ghosts filled between
 * launches (from memory).
 *
 * Edges. Every 16-byte vector of a global load is clamped into its row's aligned vectors
 * [xlo, xhi] (the rows are 16-byte aligned), its row into [-hy, ny + hy - 1] and its plane into
 * [zlo, zhi] (the array's): no load leaves the array, and a clamped vector is never needed by a
 * stored cell (those depend on cells at most T <= the halo, and T <= n, beyond the
 * interior). */
#include "kernels/cuda/cuda_rt.h"
#include <stdint.h>

#include <type_traits>
#include <utility>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/warp_sums.cuh"

#define TILE3D_V(elem) (16 / (elem))          /* cells per lane along x: one 16-byte vector */
#define TILE3D_BX(elem) (32 * TILE3D_V(elem)) /* tile width: one warp's vectors */
#define TILE3D_RY 4                           /* rows per thread */
#define TILE3D_WARPS 8                        /* warps per CTA */
#define TILE3D_MAX_STEPS 4 /* the T built for radius 1 (registers: 3 T planes of RY vectors) */
/* The T built for radius r > 1 (one kernel running K <= T steps; registers: (2r + 1) T planes
 * of RY vectors). */
#define TILE3D_STEPS_R(r) ((r) == 1 ? TILE3D_MAX_STEPS : (r) == 2 ? 2 : 1)
/* The T built for radius 1 with a source and halo faces (forms 6, 7 below): 4, level 0
 * through the shared-memory ring (TILE3D_RING) so that f's rows fit the registers beside the
 * 3 T planes of RY vectors (fp64: and two row buffers, TILE3D_NBUF, so that the rings fit the
 * shared memory), and 3 (the residual form's T) for launches of up to 3 steps (fp32 on the
 * register queue; a launch costs about the same at any K <= T). */
#define TILE3D_SRC_STEPS TILE3D_MAX_STEPS
/* The T built for the same with residual sums (form 7 below at radius 1), and for the
 * shorter source kernel: 3. */
#define TILE3D_RES_STEPS FUSED_RESIDUAL_STEPS_3D
/* The source's planes (a source with halo faces, hs, and at radius 1 in fp32 with the faces
 * applied too): a shared-memory ring of TILE3D_FRING slots of one vector per thread and row,
 * each plane loaded TILE3D_FQ iterations before level 1 reads it (cp.async), read by every
 * level from there. Level T reads its plane (T - 1) r iterations after level 1, so the ring
 * holds (T - 1) r + 1 planes read and TILE3D_FQ in flight. Elsewhere (fp64 with the faces
 * applied) each level loads its plane of f from memory (no room beside the other rings). */
#define TILE3D_FQ 2
#define TILE3D_FRING(elem, r, hs)                                                                  \
  ((hs) || ((r) == 1 && (elem) == 4) ? (TILE3D_STEPS_R(r) - 1) * (r) + 1 + TILE3D_FQ : 0)
#define TILE3D_FRING_BYTES(elem, r, hs)                                                            \
  (TILE3D_FRING(elem, r, hs) * TILE3D_RY * TILE3D_WARPS * 32 * 16)
/* The source's kernel of T = 4 with halo faces (hs) and no residual sums (res): level 0 and f
 * through shared-memory rings (below), in fp64 beside two row buffers (TILE3D_NBUF). */
#define TILE3D_HS_LONG(hs, res, T) ((hs) && !(res) && (T) > TILE3D_RES_STEPS)
/* Planes of level 0 in flight: fp64, fp32 of radius > 1 and fp32 in TILE3D_HS_LONG through a
 * shared-memory ring of TILE3D_RING + 1 slots of one vector per thread and row, loaded
 * TILE3D_RING planes ahead (cp.async; with the source's ring, hs: TILE3D_FQ ahead, f's planes in
 * the same copy groups); the other fp32 forms of radius 1 (0) through a register queue (QD
 * below), which is faster there (docs/design/fused-kernels.md, "Designs measured and not
 * used"). */
#define TILE3D_RING(elem, r, hs, res, T)                                                           \
  ((elem) == 8 || (r) > 1 || TILE3D_HS_LONG(hs, res, T)                                            \
       ? (TILE3D_FRING(elem, r, hs) ? TILE3D_FQ : 3)                                               \
       : 0)
#define TILE3D_RING_BYTES(elem, r, hs, res, T)                                                     \
  (TILE3D_RING(elem, r, hs, res, T)                                                                \
       ? (TILE3D_RING(elem, r, hs, res, T) + 1) * TILE3D_RY * TILE3D_WARPS * 32 * 16               \
       : 0)
/* Row buffers (tile3d_thread::NBUF): 3 in fp64 (2 in TILE3D_HS_LONG: its rings take the
 * room), 2 in fp32. */
#define TILE3D_NBUF(elem, hs, res, T) ((elem) == 8 && !TILE3D_HS_LONG(hs, res, T) ? 3 : 2)
/* The bytes of the mbarriers (tile3d_thread::bar: the CTA's; with clusters the hand-off's
 * full[2][NBUF] and empty[2][NBUF]), a multiple of 16. */
#define TILE3D_BARS_BYTES(elem, clu)                                                               \
  ((clu) ? (8 * (1 + 4 * TILE3D_NBUF(elem, 0, 0, 0)) + 15) / 16 * 16 : 16)
/* Unstored columns per tile side for a trapezoid D = T r cells deep: D rounded up to a 16-byte
 * vector (keeps vectors aligned). */
#define TILE3D_E(elem, D) (((D) + TILE3D_V(elem) - 1) / TILE3D_V(elem) * TILE3D_V(elem))

/* The tiles of an nx x ny plane for the one-CTA form with a trapezoid D = T r deep (no
 * clusters): ncol full columns of tiles, nyt CTAs each, storing BX - 2E columns; then, where fewer
 * columns remain and at least two segments of the sl lanes they need fit in a warp, a narrow column
 * of nyn CTAs whose warps hold 32 / sl segments (rows stacked: the header). The kernel and the
 * host's grid. */
struct tile3d_cols {
  int ncol, nyt, sl, nyn;
};
__host__ __device__ inline tile3d_cols tile3d_columns(int elem, int D, int64_t nx, int64_t ny)
{
  const int V = TILE3D_V(elem), m = TILE3D_E(elem, D) / V, U = TILE3D_BX(elem) - 2 * m * V;
  const int rows = TILE3D_WARPS * TILE3D_RY - 2 * D;
  tile3d_cols c;
  c.ncol = (int)((nx + U - 1) / U);
  c.nyt = (int)((ny + rows - 1) / rows);
  c.sl = c.nyn = 0;
  const int rest = (int)(nx - (int64_t)(c.ncol - 1) * U); /* 1..U */
  const int sl = (rest + V - 1) / V + 2 * m, ns = 32 / sl;
  if (rest < U && ns >= 2) {
    c.ncol--;
    c.sl = sl;
    c.nyn = (int)((ny + ns * TILE3D_WARPS * TILE3D_RY - 2 * D - 1) /
                  (ns * TILE3D_WARPS * TILE3D_RY - 2 * D));
  }
  return c;
}

/* Tile b of one CTA's tiles (c, tile3d_columns; xfull, tile3d_params): its column tx and row ty
 * of tiles, its lanes per segment sl, and xs, the first column it stores less tx U. The
 * kernel's mapping, and the host's for the face tiles. */
struct tile3d_at {
  int tx, ty, sl, xs;
};
__host__ __device__ inline tile3d_at tile3d_tile(const tile3d_cols &c, int b, int U, int xfull)
{
  const int full = b < c.ncol * c.nyt;
  return {full ? b % c.ncol : c.ncol, full ? b / c.ncol : b - c.ncol * c.nyt, full ? 32 : c.sl,
          full    ? xfull
          : xfull ? -c.ncol * U
                  : 0}; /* (the narrow column first: at 0) */
}

/* 1 when a tile computing the cells [x0, xend) x [y0, yend) of an nx x ny plane reaches within
 * d of one of the x and y faces in `faces` (bit 2 axis + side). */
__host__ __device__ inline bool tile3d_meets(int faces, int d, int x0, int xend, int y0, int yend,
                                             int nx, int ny)
{
  return ((faces & 1) && x0 < d && xend > 0) || ((faces & 2) && xend > nx - d && x0 < nx) ||
         ((faces & 4) && y0 < d && yend > 0) || ((faces & 8) && yend > ny - d && y0 < ny);
}

template <typename REAL> struct tile3d_params {
  const REAL *u; /* cell (0, 0, 0) of the input */
  REAL *v;       /* and of the output (only its interior is written) */
  int nx, ny, nz;
  int hy;              /* ghost layers that may be read along y (x: xlo, xhi) */
  int zlo, zhi;        /* the planes that may be read (a launch may run planes of a block) */
  int64_t sy, sz;      /* row and plane strides (elements) */
  int64_t xlo, xhi;    /* the first and the last 16-byte aligned vector start of a row */
  int chunk;           /* planes per CTA; the first chunk (blockIdx.z = 0) takes what the others
                          leave */
  int rd[3][2];        /* how ghosts beyond each face are read (enum fused_read) */
  int ncy;             /* CTAs per cluster (along y) */
  int xfull;           /* one CTA: the first column full tiles store after column tx U: 0, or
                          the narrow column's where it goes first (tile3d_narrow_first) */
  REAL c0, cx, cy, cz; /* radius 1 (larger radii: tile3d_ext) */
  int steps;           /* K: the steps of this launch (radius > 1; radius 1: the kernel's T) */
};

/* A whole launch that tells the exchange when the planes it sends are stored (the signalled
 * form, tile3d_launch_signal; a parameter of its own, as more parameters in tile3d_params make
 * the fp32 kernels spill): each warp of the first chunk adds 1 to *sig after lo iterations (a
 * multiple of 3, at most the chunk's; 0: never), each of the last at its end (hi). The last
 * chunk is dispatched second (tile3d_chunk). The other forms take their chunks by tile here
 * (in tile3d_params they make the fp32 kernels spill too). */
struct tile3d_sig {
  unsigned *sig;
  int lo, hi;
  int whole, pieces; /* not SIG: chunks by tile (one CTA, grid z = 1; pieces 0: not): CTAs
                        [0, whole) are tiles of all nz planes, then the other tiles' first
                        chunks, their second ones, ... (`pieces` each; fm_tile_chunks) */
  int xyfaces;       /* the x and y faces (bit 2 axis + side) whose tiles, those that compute
                        cells within `reach` of one, the face tiles' kernel (XY) or the edge
                        part of a launch in parts runs, the other kernel or part the others
                        (here, as more fields in tile3d_ext make the fp32 kernels spill too) */
  int reach;         /* ... the radius (faces applied) or the halo (the cells sent) */
  int edge;          /* 1: this launch runs the tiles of xyfaces (the XY kernel always does) */
  int all;           /* 1: this kernel runs every tile */
  int b0;            /* one CTA: CTA x runs tile b0 + x (the face tiles' kernel: its first) */
};

/* The forms with reflecting faces applied at every level, a source term, residual sums
 * (tile3d_kernel's FX bits), and the weights of radius > 1: a parameter of its own for the
 * same reason. */
enum { TILE3D_FACES = 1, TILE3D_SRC = 2, TILE3D_RES = 4, TILE3D_ZREAD = 8 };
/* The axes whose faces a face tiles' kernel applies (tile3d_kernel's XY bits; 0: the kernel of
 * the other tiles): each axis's face code costs every cell of the loop, so the plain form's
 * face tiles at x faces only have a kernel without the y faces' code (TILE3D_XY_X); the other
 * face tiles' kernels take both axes (TILE3D_XY). */
enum { TILE3D_XY_X = 1, TILE3D_XY_Y = 2, TILE3D_XY = 3 };
template <typename REAL> struct tile3d_ext {
  REAL c0, c[3][4]; /* radius > 1: c[a][m - 1], the weight of the pair m along axis a */
  REAL cf;          /* SRC: the source's weight */
  const REAL *f;    /* SRC: cell (0, 0, 0) of the source (the same layout as u), or NULL */
  int kind[3][2];   /* FACES: each face's enum fused_face_kind in this launch */
  REAL two_g[3][2]; /* ... and (REAL)(2 g) of its Dirichlet value */
  double *part;     /* RES: part[warp * 8 + l], the sum of (u' - u)^2 over the warp's stored
                       cells for the field u after l steps, for l < K with bit l of rmask */
  unsigned rmask;
};

/* The ghost m cells beyond a reflecting face from the cell c it mirrors (m - 1 inside). */
template <typename REAL> __device__ __forceinline__ REAL tile3d_ghost(int kind, REAL two_g, REAL c)
{
  return kind == FUSED_FACE_DIRICHLET ? two_g - c : c;
}

/* Cell c of an axis of n cells read through its faces (enum fused_read lo, hi): the cell
 * read, and in *neg whether it takes a 0 - u. */
__device__ __forceinline__ int tile3d_through(int c, int n, int lo, int hi, int *neg)
{
  *neg = 0;
  if (c < 0 && lo != FUSED_READ_MEMORY) {
    *neg = lo == FUSED_READ_MIRROR_NEG;
    return lo == FUSED_READ_WRAP ? c + n : -1 - c;
  }
  if (c >= n && hi != FUSED_READ_MEMORY) {
    *neg = hi == FUSED_READ_MIRROR_NEG;
    return hi == FUSED_READ_WRAP ? c - n : 2 * n - 1 - c;
  }
  return c;
}

/* The face (enum fused_read) a 16-byte vector of A cells from x is read through along x
 * (n a multiple of A: a vector lies inside or beyond), and its first cell read: reflected
 * vectors come reversed. */
__device__ __forceinline__ int tile3d_vec_through(int x, int n, int A, const int (&rd)[2], int *how)
{
  *how = x < 0 ? rd[0] : x >= n ? rd[1] : FUSED_READ_MEMORY;
  if (*how == FUSED_READ_MEMORY)
    return x;
  if (*how == FUSED_READ_WRAP)
    return x < 0 ? x + n : x - n;
  return x < 0 ? -x - A : 2 * n - x - A;
}

/* Sizes and queue depth by precision, T and radius (QD: the faster depth for the registers T
 * leaves). S: the planes a level keeps (2r + 1); D: the trapezoid's depth T r. */
template <typename REAL, int T, int RAD, bool HS = false, bool RES = false> struct tile3d_traits {
  static constexpr int V = TILE3D_V(sizeof(REAL)), BX = TILE3D_BX(sizeof(REAL)), RY = TILE3D_RY;
  static constexpr int S = 2 * RAD + 1, D = T * RAD;
  static constexpr int E = TILE3D_E(sizeof(REAL), D), U = BX - 2 * E; /* stored: U */
  static constexpr int RING = TILE3D_RING(sizeof(REAL), RAD, HS, RES, T);
  static constexpr int QD = RING ? RING : T < 3 ? 3 : 1;
  static constexpr int ROWV = 32; /* vectors per row: one per lane */
  typedef typename std::conditional<sizeof(REAL) == 4, float4, double2>::type VEC;
  static_assert(T >= 1 && T <= TILE3D_STEPS_R(RAD) && RAD >= 1 && RAD <= RY, "T and radius built");
  static_assert(RAD == 1 || RING, "radius > 1: level 0 through the ring (the unroll by 2r + 1)");
};

/* A lane's 16-byte vector of a row: to and from a VEC, in shared or global memory. */
__device__ __forceinline__ float4 tile3d_vec(const float (&d)[4])
{
  return make_float4(d[0], d[1], d[2], d[3]);
}
__device__ __forceinline__ double2 tile3d_vec(const double (&d)[2])
{
  return make_double2(d[0], d[1]);
}
__device__ __forceinline__ void tile3d_unvec(float (&d)[4], const float4 t)
{
  d[0] = t.x, d[1] = t.y, d[2] = t.z, d[3] = t.w;
}
__device__ __forceinline__ void tile3d_unvec(double (&d)[2], const double2 t)
{
  d[0] = t.x, d[1] = t.y;
}

/* The cluster address of shared address a in the CTA of rank `rank` of the cluster. */
__device__ __forceinline__ uint32_t tile3d_map(uint32_t a, unsigned rank)
{
#ifdef STENCIL_CUDA_EMU
  return emu::smem_map(a, rank);
#else
  uint32_t r;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
#endif
}
/* (the ring's reads: TILE3D_RING) */
__device__ __forceinline__ void tile3d_lds(float (&d)[4], uint32_t a)
{
#ifdef STENCIL_CUDA_EMU
  memcpy(d, emu::smem_ptr(a), sizeof d);
#else
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a)
               : "memory");
#endif
}
__device__ __forceinline__ void tile3d_lds(double (&d)[2], uint32_t a)
{
#ifdef STENCIL_CUDA_EMU
  memcpy(d, emu::smem_ptr(a), sizeof d);
#else
  asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];\n" : "=d"(d[0]), "=d"(d[1]) : "r"(a) : "memory");
#endif
}
/* (the source's ring: its planes' signs, in place) */
__device__ __forceinline__ void tile3d_sts(uint32_t a, const float (&d)[4])
{
#ifdef STENCIL_CUDA_EMU
  memcpy(emu::smem_ptr(a), d, sizeof d);
#else
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "f"(d[0]), "f"(d[1]),
               "f"(d[2]), "f"(d[3])
               : "memory");
#endif
}
__device__ __forceinline__ void tile3d_sts(uint32_t a, const double (&d)[2])
{
#ifdef STENCIL_CUDA_EMU
  memcpy(emu::smem_ptr(a), d, sizeof d);
#else
  asm volatile("st.shared.v2.f64 [%0], {%1, %2};\n" ::"r"(a), "d"(d[0]), "d"(d[1]) : "memory");
#endif
}

/* The cluster barrier, release / acquire: once the mbarriers are initialised and before exit
 * (the clustered form; on sm_90 it compiles to a GPU-scope memory barrier, hence none in the
 * loop). */
__device__ __forceinline__ void tile3d_sync()
{
#ifdef STENCIL_CUDA_EMU
  emu::cluster_arrive();
  emu::cluster_wait();
#else
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/* The one-CTA form's barrier, split (the header): arrive on the mbarrier at bar, and wait for
 * the completion of its phase of that parity. */
__device__ __forceinline__ void tile3d_arrive(uint32_t bar)
{
#ifdef STENCIL_CUDA_EMU
  emu::mbar_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
__device__ __forceinline__ void tile3d_wait(uint32_t bar, uint32_t parity)
{
#ifdef STENCIL_CUDA_EMU
  emu::mbar_wait_parity(bar, parity);
#else
  asm volatile("{\n"
               ".reg .pred P1;\n"
               "WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@!P1 bra WAIT;\n"
               "}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
#endif
}

/* The clustered form's hand-off (the header, "Clusters"): st.async of a 16-byte vector into
 * another CTA's shared memory at cluster address a, completing 16 bytes of the transaction
 * on its mbarrier at cluster address bar; an arrival on this CTA's mbarrier that expects
 * `bytes` more of such stores in its phase; an arrival on another CTA's mbarrier. None of
 * them fences: the mbarriers order the data. */
template <typename VEC>
__device__ __forceinline__ void tile3d_put(uint32_t a, const VEC v, uint32_t bar)
{
  static_assert(sizeof(VEC) == 16, "one 16-byte vector");
#ifdef STENCIL_CUDA_EMU
  memcpy(emu::smem_ptr(a), &v, sizeof v);
  emu::mbar_complete_tx(bar, sizeof v);
#else
  uint4 w; /* (its bits: fp32 and fp64 vectors alike) */
  memcpy(&w, &v, sizeof w);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, "
               "%4}, [%5];\n" ::"r"(a),
               "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w), "r"(bar)
               : "memory");
#endif
}
__device__ __forceinline__ void tile3d_expect(uint32_t bar, unsigned bytes)
{
#ifdef STENCIL_CUDA_EMU
  emu::mbar_arrive_expect(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void tile3d_arrive_at(uint32_t bar)
{
#ifdef STENCIL_CUDA_EMU
  emu::mbar_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

/* The dynamic shared memory: [NBUF][T][NW + CLU][2][ROWV] vectors of rows, then the ring
 * (fp64 and radius > 1) and the mbarriers. */
#ifdef STENCIL_CUDA_EMU
#define tile3d_smem (emu::dyn_smem())
#else
extern __shared__ __align__(16) unsigned char tile3d_smem[];
#endif

/* An mbarrier, for `count` arrivals a phase; the fence that makes the initialisation visible
 * to the cluster (before the cluster barrier). */
__device__ __forceinline__ void tile3d_bar_init(uint32_t bar, unsigned count)
{
#ifdef STENCIL_CUDA_EMU
  emu::mbar_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void tile3d_bar_init_fence()
{
#ifndef STENCIL_CUDA_EMU
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/* One thread's state; the arrays live in registers (every index is a compile-time constant
 * after unrolling). */
template <typename REAL, int T, int RAD, bool CLU, int FX> struct tile3d_thread {
  static constexpr bool FACES = FX & TILE3D_FACES, SRC = FX & TILE3D_SRC, RES = FX & TILE3D_RES;
  static constexpr bool HS = SRC && !FACES && !CLU; /* a source with halo faces */
  /* the z faces applied as ghost planes (the forms with faces but radius 2's face tiles' kernel,
   * TILE3D_ZREAD, which reads them through as the plain form does) */
  static constexpr bool ZF = FACES && !(FX & TILE3D_ZREAD);
  typedef tile3d_traits<REAL, T, RAD, HS, RES> K;
  static constexpr int RY = K::RY, QD = K::QD, V = K::V, S = K::S, D = K::D;
  typedef typename K::VEC VEC;
  static_assert(RY <= 4 && V <= 4, "the bits of odd and fmask");
  static_assert(!CLU || (RAD == 1 && !FX), "clusters: radius 1, halo faces");
  const tile3d_params<REAL> &p;
  const tile3d_ext<REAL> &ex;
  REAL R[S][T][RY][V];             /* level l's last S planes, slots rotating with i mod S */
  REAL Q[K::RING ? 1 : QD][RY][V]; /* level 0's next QD planes (loads in flight) */
  uint32_t ring;    /* RING: this thread's vector of slot 0, row 0 (bytes into tile3d_smem) */
  uint32_t fring;   /* FR: the same in the source's ring (a shared address) */
  const REAL *ucol; /* u at (x, 0, 0) of the lane's vector, x mapped and clamped */
  const REAL *fcol; /* SRC: f there */
  REAL *vcol;       /* v at (the lane's first cell, 0, 0) */
  int roff[RY];     /* the rows' offsets (row mapped, clamped into the array) */
  bool sty[RY], stx[V], svec; /* stored rows, stored cells, all V cells stored */
  int odd;    /* bit 0: the lane's vector is read through a reflecting x face (reversed), bit 2:
                 a Dirichlet-0 one (0 - u), bit 4 + r: row r through a Dirichlet-0 y face */
  int z0, z1; /* the chunk's planes */
  int own;    /* this lane's vector of its warp's first row */
  int fmask;  /* XY, radius 1: bit e: cell e at x = 0, bit 4 + e: at x = n - 1 (a face
                 applied at every level beyond), bit 8 + r: row r at y = 0, 12 + r: at
                 y = n - 1; radius r > 1 (tiles, lanes and rows start on vectors and on RY
                 rows): bit 0 the lane's first cell at x = 0, bit 1 its last at n - 1, bit 2
                 the thread's first row at y = 0, bits 4..: its row h - 1 at y = n - 1 (h = 1
                 .. RY + r - 1, else 0) */
  double racc[RES ? T : 1]; /* RES: the sums of the squared residual, level 0..T-1 */
  int dn, up; /* the row below / above: another warp's vector (as own), or (CLU) the hand-off
                 row from the CTA below / above */
  int hnb;    /* CLU: -1, or 2 rank + k for the warp that hands rows across to the CTA of that
                  rank in the cluster: k = 0 the first warp (a CTA below), 1 the last (above) */
  /* row buffers: NBUF of T levels of [NW + CLU][2 sides][r rows][ROWV] vectors (a warp's
   * first r rows, side 0, and its last r, side 1; CLU: "warp" NW holds the rows handed from
   * the CTA below, side 0, and above, side 1), iteration i's i mod NBUF (fp64: 3 but in
   * TILE3D_HS_LONG, so that a warp waits only before its first read of an iteration, the
   * header; fp32 spills with 3) */
  static constexpr int NBUF = TILE3D_NBUF(sizeof(REAL), HS, RES, T),
                       LSTRIDE = (TILE3D_WARPS + CLU) * 2 * RAD * K::ROWV,
                       BSTRIDE = T * LSTRIDE;     /* vectors per level and buffer */
  static constexpr int XOFF = NBUF * BSTRIDE * V; /* cells in the row buffers */
  /* the mbarriers: after the rows and the ring; the source's ring after them
   * (TILE3D_BARS_BYTES). hfull_at(k, b) / hempty_at(k, b): CLU, the hand-off's full[k][b]
   * (the rows of every level handed into this CTA's side k of buffer b have landed) and
   * empty[k][b] (the neighbour this CTA hands its side k to has read its buffer b) */
  static __device__ __forceinline__ uint32_t bar()
  {
    return (uint32_t)__cvta_generic_to_shared(tile3d_smem) + XOFF * (uint32_t)sizeof(REAL) +
           TILE3D_RING_BYTES(sizeof(REAL), RAD, HS, RES, T);
  }
  static __device__ __forceinline__ uint32_t hfull_at(int k, int b)
  {
    return bar() + 8u * (uint32_t)(1 + k * NBUF + b);
  }
  static __device__ __forceinline__ uint32_t hempty_at(int k, int b)
  {
    return bar() + 8u * (uint32_t)(1 + (2 + k) * NBUF + b);
  }
  /* CLU: the bytes a warp hands across an iteration (one row of T levels) */
  static constexpr unsigned HBYTES = T * K::ROWV * 16u;
  /* FR: the source's ring slots (SRC, one CTA): plane j of f (z = z0 - D + j, which level l
   * computes at iteration j + l r) in slot (j + D) mod FR, loaded at iteration j + r - FQ */
  static constexpr int FQ = TILE3D_FQ, FR = SRC && !CLU ? TILE3D_FRING(sizeof(REAL), RAD, HS) : 0;
  static_assert(!FR || (FR >= (T - 1) * RAD + 1 + FQ && (K::RING == 0 || K::QD == FQ)),
                "the source's ring: (T - 1) r + 1 + FQ slots, its copy groups alone or level 0's, "
                "as deep");
  /* SRC: the launch has f (the forms with faces also run launches without one: f = NULL). */
  __device__ __forceinline__ bool has_f() const { return (SRC && !FACES) || ex.f; }
  /* The steps stored: the kernel's T where it runs launches of T steps only (radius 1: halo
   * faces, and TILE3D_HS_LONG, tile3d_built), else the launch's. */
  static constexpr bool KT = RAD == 1 && (!FX || TILE3D_HS_LONG(HS, RES, T));
  __device__ __forceinline__ int steps() const { return KT ? T : p.steps; }

  /* f's V cells of row r in plane z (SRC): from the source's ring at fa (FR: fslot; with
   * halo faces its planes read through the faces as u is, ring_signs), or from memory (the
   * forms with faces applied, which read no face through: a plane beyond the array, whose
   * cells no stored cell needs, clamped). */
  __device__ __forceinline__ void source(REAL (&d)[V], int z, int r, uint32_t fa = 0) const
  {
    static_assert(FR > 0 || FACES, "a source with halo faces comes through its ring");
    if constexpr (FR > 0) {
      tile3d_lds(d, fa + ring_at(0, r));
      return;
    }
    tile3d_unvec(d,
                 __ldg(reinterpret_cast<const VEC *>(fcol + (int64_t)zclamp(z) * p.sz + roff[r])));
  }

  /* RES: level l - 1's residual at plane z from its cells B and their update o (level l's),
   * summed over the stored cells of the chunk's planes. */
  __device__ __forceinline__ void residual(int l, int z, const REAL (&B)[RY][V],
                                           const REAL (&o)[RY][V])
  {
    if (!((ex.rmask >> (l - 1)) & 1u) || z < z0 || z >= z1)
      return;
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
      for (int e = 0; e < V; e++) {
        const double d = stencil_residual(o[r][e], B[r][e]);
        if (sty[r] && stx[e])
          racc[l - 1] = stencil_fma(d, d, racc[l - 1]);
      }
  }

  /* FR: this thread's vector of row 0 in the slot of the plane level l computes at iteration
   * i (plane j = i - l r, above; i >= 0, l <= T). */
  __device__ __forceinline__ uint32_t fslot(int i, int l) const
  {
    const unsigned s = ((unsigned)i + (unsigned)(D - l * RAD)) % (unsigned)FR;
    return fring + ring_at((int)s, 0);
  }
  /* FR: plane j of f (above) into its slot, one cp.async group (none without f); f_copies:
   * the copies alone, for level 0's group (K::RING). */
  __device__ __forceinline__ void load_f(int j) const
  {
    if (!has_f())
      return;
    f_copies(j);
    cp_async_commit();
  }
  __device__ __forceinline__ void f_copies(int j) const
  {
    const int z = z0 - D + j; /* (the forms with z faces applied read no face through) */
    const REAL *q = fcol + (int64_t)(ZF ? zclamp(z) : zplane(z)) * p.sz;
#pragma unroll
    for (int r = 0; r < RY; r++)
      cp_async16(fring + ring_at((j + D) % FR, r), q + roff[r]);
  }

  /* FR, halo faces: plane j of f (above), landed, read through the faces in its slot: the
   * signs of level 0's (signs()), applied once by the thread that reads it. f is read through
   * as u is, so the mirror commutes with the source term as with the rest of the update:
   * cf (0 - f) = 0 - cf f. */
  __device__ __forceinline__ void ring_signs(int j) const
  {
    const int negz = xyzneg(z0 - D + j);
    if (!has_f() || (!negz && !odd))
      return;
#pragma unroll
    for (int r = 0; r < RY; r++) {
      const uint32_t a = fring + ring_at((j + D) % FR, r);
      REAL d[V];
      tile3d_lds(d, a);
      sign_row(d, r, negz);
      tile3d_sts(a, d);
    }
  }

  /* The plane read for plane z: through the z faces (the signs come in signs()), clamped
   * into the array. */
  __device__ __forceinline__ int zplane(int z) const
  {
    int neg;
    if (z < 0 || z >= p.nz)
      z = tile3d_through(z, p.nz, p.rd[2][0], p.rd[2][1], &neg);
    return zclamp(z);
  }
  __device__ __forceinline__ int zclamp(int z) const
  {
    return z < p.zlo ? p.zlo : z > p.zhi ? p.zhi : z;
  }
  /* Level 0's plane z read through the faces: the lane's vector of row 0 there. */
  __device__ __forceinline__ const REAL *plane(int z) const
  {
    return ucol + (int64_t)zplane(z) * p.sz;
  }

  /* Level 0's plane z into d. */
  __device__ __forceinline__ void load(REAL (&d)[RY][V], int z) const
  {
    const REAL *q = plane(z);
#pragma unroll
    for (int r = 0; r < RY; r++)
      tile3d_unvec(d[r], __ldg(reinterpret_cast<const VEC *>(q + roff[r])));
    if constexpr (!SRC) { /* the next plane's lines into L2 (the header) */
      q = ucol + (int64_t)zclamp(z + 1) * p.sz;
#pragma unroll
      for (int r = 0; r < RY; r++)
        prefetch_l2(q + roff[r]);
    }
  }

  /* The same into ring slot s (cp.async, one group per plane), and out of it once its
   * group has landed (the QD - 1 newer ones may still be in flight). */
  __device__ __forceinline__ void load_ring(int s, int z) const
  {
    const REAL *q = plane(z);
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(tile3d_smem) + ring;
#pragma unroll
    for (int r = 0; r < RY; r++)
      cp_async16(a + ring_at(s, r), q + roff[r]);
    cp_async_commit();
  }
  __device__ __forceinline__ void from_ring(REAL (&d)[RY][V], int s) const
  {
    cp_async_wait<QD - 1>();
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(tile3d_smem) + ring;
#pragma unroll
    for (int r = 0; r < RY; r++) /* (volatile: issued here, before the next plane's copies) */
      tile3d_lds(d[r], a + ring_at(s, r));
  }
  /* Iteration i's level 0 through the ring (K::RING): plane z0 - D + i from slot i mod (QD + 1)
   * into d, signed; the plane QD ahead into the slot read at i - 1; FR: f's plane FQ = QD ahead
   * of level 1's (plane j = i - r) in the same copy group, so this iteration's wait has landed
   * f's planes j <= i - r. */
  __device__ __forceinline__ void ring_step(REAL (&d)[RY][V], int i) const
  {
    const int s = i % (QD + 1);
    from_ring(d, s);
    if constexpr (FR > 0)
      f_copies(i - RAD + FQ);
    load_ring(s == 0 ? QD : s - 1, z0 - D + i + QD);
    signs(d, z0 - D + i);
  }
  static __device__ __forceinline__ uint32_t ring_at(int s, int r)
  {
    return (uint32_t)((s * RY + r) * TILE3D_WARPS * 32 * 16);
  }

  /* The reversal of reflected x vectors and the 0 - u of every Dirichlet-0 face the cells
   * of d (level 0's plane z from load()) were read through, when the plane has left the
   * queue and the next plane's loads are issued (no instruction waits for a load in flight;
   * most threads skip it). */
  __device__ __forceinline__ void signs(REAL (&d)[RY][V], int z) const
  {
    int negz = 0;
    if (z < 0 || z >= p.nz)
      tile3d_through(z, p.nz, p.rd[2][0], p.rd[2][1], &negz);
    if (!negz && !odd)
      return;
#pragma unroll
    for (int r = 0; r < RY; r++)
      sign_row(d[r], r, negz);
  }
  /* ... of row r of such a plane (negz: read through a Dirichlet-0 z face). */
  __device__ __forceinline__ void sign_row(REAL (&d)[V], int r, int negz) const
  {
    REAL c[V];
#pragma unroll
    for (int j = 0; j < V; j++)
      c[j] = odd & 1 ? d[V - 1 - j] : d[j];
#pragma unroll
    for (int j = 0; j < V; j++) {
      REAL t = c[j];
      t = (odd >> 2) & 1 ? (REAL)0 - t : t;
      t = (odd >> (4 + r)) & 1 ? (REAL)0 - t : t;
      d[j] = negz ? (REAL)0 - t : t;
    }
  }

  __device__ __forceinline__ void store(const REAL (&o)[RY][V], int z) const
  {
    REAL *q = vcol + (int64_t)z * p.sz;
    if (svec) {
#pragma unroll
      for (int r = 0; r < RY; r++)
        if (sty[r])
          *reinterpret_cast<VEC *>(q + roff[r]) = tile3d_vec(o[r]);
    } else {
#pragma unroll
      for (int r = 0; r < RY; r++)
#pragma unroll
        for (int e = 0; e < V; e++)
          if (sty[r] && stx[e])
            q[roff[r] + e] = o[r][e];
    }
  }

  /* The hand-off (CLU, hnb >= 0, k = hnb & 1; the header, "Clusters"). Iteration i hands its
   * row of each level l into the neighbour's side 1 - k of buffer b = i mod NBUF (hand), after
   * the neighbour has read what that buffer held before (hand_wait: the phase of hempty(1 - k,
   * b) for the neighbour's read at iteration i - NBUF + 1; the zeros of buffer NBUF - 1, read
   * at iteration 0, count as its phase 0). Iteration i reads the rows handed at i - 1 once all
   * have landed (hand_landed: phase (i - 1) / NBUF of hfull(k, (i - 1) mod NBUF); iteration 0
   * reads the zeros), and after its last read (hand_release) expects the buffer's next phase
   * and tells the neighbour. The last iteration's rows are read by no one, so none hands them,
   * and no release is sent that no wait takes: every hand-off and release is waited for
   * before its target exits. */
  __device__ __forceinline__ int last_iteration() const
  {
    return z1 - z0 + 2 * T - 1;
  }
  __device__ __forceinline__ void hand_wait(int i) const
  {
    const int b = i % NBUF;
    if (hnb >= 0 && i < last_iteration() && (b == NBUF - 1 || i >= NBUF))
      tile3d_wait(hempty_at(1 - (hnb & 1), b), (uint32_t)(i / NBUF - (b != NBUF - 1)) & 1u);
  }
  __device__ __forceinline__ void hand(const REAL (&o)[RY][V], int i, int l) const
  {
    if (hnb < 0 || i >= last_iteration())
      return;
    const int b = i % NBUF, k = hnb & 1;
    const unsigned nb = (unsigned)hnb >> 1;
    REAL c[V]; /* (selected cell by cell: the rows stay in registers) */
#pragma unroll
    for (int e = 0; e < V; e++)
      c[e] = k ? o[RY - 1][e] : o[0][e];
    /* into side 1 - k of the hand-off rows ("warp" NW) */
    const int at =
        b * BSTRIDE + l * LSTRIDE + (TILE3D_WARPS * 2 + 1 - k) * K::ROWV + (threadIdx.x & 31);
    tile3d_put(tile3d_map((uint32_t)__cvta_generic_to_shared(tile3d_smem) + (uint32_t)at * 16u, nb),
               tile3d_vec(c), tile3d_map(hfull_at(1 - k, b), nb));
  }
  __device__ __forceinline__ void hand_landed(int i) const
  {
    if (hnb >= 0 && i > 0)
      tile3d_wait(hfull_at(hnb & 1, (i - 1) % NBUF), (uint32_t)((i - 1) / NBUF) & 1u);
  }
  __device__ __forceinline__ void hand_release(int i) const
  {
    if (hnb < 0)
      return;
    const int b = (i + NBUF - 1) % NBUF, k = hnb & 1;
    __syncwarp();
    if ((threadIdx.x & 31) == 0) {
      tile3d_expect(hfull_at(k, b), HBYTES);
      if (i < last_iteration() + 1 - NBUF)
        tile3d_arrive_at(tile3d_map(hempty_at(k, b), (unsigned)hnb >> 1));
    }
  }

  /* The ghost beyond x or y face (a, s) applied at every level, of the cell c it mirrors, in
   * row r of plane z (XY; zneg: plane z read through a Dirichlet-0 z face, xyzneg). The forms
   * with faces apply every x and y face: the face's rule. The plain form's face tiles (FX = 0)
   * apply only Dirichlet faces of nonzero value and read the homogeneous ones through, so a
   * cell beyond a Dirichlet-0 face read through holds the negated image of the cell it
   * mirrors, and the image of ghost 2g - u there is -2g - (-u): two_g changes sign once for
   * each such face the cell lies beyond (the plane along z, also in the form with faces that
   * reads the z faces through, ZF = 0, where step_r negates 2g once a level; the row along y
   * for an x face, the lane's vector along x for a y face; n >= T r along every axis keeps each
   * image a single reflection). */
  __device__ __forceinline__ REAL xyghost(int a, int s, int r, int zneg, REAL c) const
  {
    if constexpr (FACES) {
      static_assert(ZF, "the forms that read the z faces through take 2g from step_r's tg");
      return tile3d_ghost(ex.kind[a][s], ex.two_g[a][s], c);
    }
    const int neg = zneg ^ (a == 0 ? (odd >> (4 + r)) & 1 : (odd >> 2) & 1);
    return (neg ? (REAL)0 - ex.two_g[a][s] : ex.two_g[a][s]) - c;
  }
  /* 1 where plane z is read through a Dirichlet-0 z face (the forms without faces: XY, the
   * source's ring). */
  __device__ __forceinline__ int xyzneg(int z) const
  {
    int neg = 0;
    if (!ZF && (z < 0 || z >= p.nz))
      tile3d_through(z, p.nz, p.rd[2][0], p.rd[2][1], &neg);
    return neg;
  }

  /* g := the ghost plane of the reflecting face (kind, two_g) mirroring plane m (every cell). */
  static __device__ __forceinline__ void ghost_plane(REAL (&g)[RY][V], const REAL (&m)[RY][V],
                                                     int kind, REAL two_g)
  {
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
      for (int e = 0; e < V; e++)
        g[r][e] = tile3d_ghost(kind, two_g, m[r][e]);
  }

  /* Iteration i of radius 1, phase PH = i mod 3: slot O2 holds each level's plane of
   * iteration i - 2, O1 that of i - 1, N receives this iteration's. */
  template <int PH, int XY> __device__ __forceinline__ void step(int i)
  {
    constexpr int O2 = PH, O1 = (PH + 1) % 3, N = (PH + 2) % 3, QS = PH % QD;
    VEC *const sm = reinterpret_cast<VEC *>(tile3d_smem);
    /* written in this iteration, and in iteration i - 1 */
    VEC *wr = sm + (NBUF == 3 ? PH : i & 1) * BSTRIDE;
    const VEC *rd = sm + (NBUF == 3 ? (PH + 2) % 3 : (i & 1) ^ 1) * BSTRIDE;
    /* Level 0: plane z0 - T + i from the queue, which then loads plane z0 - T + i + QD. */
    if constexpr (K::RING) {
      ring_step(R[N][0], i);
    } else {
#pragma unroll
      for (int r = 0; r < RY; r++)
#pragma unroll
        for (int e = 0; e < V; e++)
          R[N][0][r][e] = Q[QS][r][e];
      /* (the faster order: fp64 spills with the loads first, fp32 does not) */
      if constexpr (sizeof(REAL) == 8)
        signs(R[N][0], z0 - T + i);
      load(Q[QS], z0 - T + i + QD);
      if constexpr (sizeof(REAL) == 4)
        signs(R[N][0], z0 - T + i);
    }
    if (ZF && z0 - T + i == p.nz && ex.kind[2][1]) /* the ghost plane beyond z = n - 1 */
      ghost_plane(R[N][0], R[O1][0], ex.kind[2][1], ex.two_g[2][1]);
    if constexpr (FR > 0) { /* f's plane FQ ahead; this iteration's planes j <= i - 1 landed */
      if constexpr (!K::RING) {
        load_f(i - 1 + FQ);
        cp_async_wait<FQ>();
      }
      if constexpr (!FACES) /* (plane i - 1: level 1 reads it first, below) */
        ring_signs(i - 1);
    }
    if constexpr (NBUF == 2)
      tile3d_wait(bar(), (uint32_t)i & 1u);
    if constexpr (CLU)
      hand_wait(i);
    wr[own] = tile3d_vec(R[N][0][0]);
    wr[own + K::ROWV] = tile3d_vec(R[N][0][RY - 1]);
    if constexpr (CLU)
      hand(R[N][0], i, 0);
    const int KS = steps(); /* the level stored */
#pragma unroll
    for (int l = 1; l <= T; l++) {
      const int c = z0 - T + i - l; /* the plane level l computes */
      /* (the ghost plane beyond z = 0 is the consumer's: planes -1 and 0 of level l - 1 are
       * both in registers only now) */
      if (ZF && c == 0 && ex.kind[2][0])
        ghost_plane(R[O2][l - 1], R[O1][l - 1], ex.kind[2][0], ex.two_g[2][0]);
      const REAL(&Am)[RY][V] = R[O2][l - 1]; /* plane p - l - 1 of level l - 1 */
      const REAL(&B)[RY][V] = R[O1][l - 1];  /* plane p - l */
      const REAL(&C)[RY][V] = R[N][l - 1];   /* plane p - l + 1 */
      REAL below[V], above[V];               /* rows of plane p - l, other warps */
      if (NBUF == 3 && l == 1)
        tile3d_wait(bar(), (uint32_t)i & 1u);
      if (CLU && l == 1)
        hand_landed(i);
      tile3d_unvec(below, rd[(l - 1) * LSTRIDE + dn]);
      tile3d_unvec(above, rd[(l - 1) * LSTRIDE + up]);
      if (l == T) {
        tile3d_arrive(bar());
        if constexpr (CLU)
          hand_release(i);
      }
      const int zn = XY ? xyzneg(c) : 0;
      REAL o[RY][V];
#pragma unroll
      for (int r = 0; r < RY; r++) {
        const REAL sl = __shfl_up_sync(0xffffffffu, B[r][V - 1], 1);
        const REAL sr = __shfl_down_sync(0xffffffffu, B[r][0], 1);
        REAL from_left = sl, from_right = sr;
        REAL fs[V];
        if constexpr (FR > 0) {
          if (has_f())
            source(fs, c, r, fslot(i, l));
        } else if constexpr (SRC)
          if (has_f())
            source(fs, c, r);
        /* the ghosts of the reflecting x and y faces next to the row's cells: x = 0 is a lane's
         * first cell (tiles and lanes start on vectors), x = n - 1 its last where n is whole
         * vectors (else an inner one, below); y = 0 and n - 1 whole rows */
        if constexpr (XY & TILE3D_XY_X) {
          if (fmask & 1)
            from_left = xyghost(0, 0, r, zn, B[r][0]);
          if ((fmask >> (4 + V - 1)) & 1)
            from_right = xyghost(0, 1, r, zn, B[r][V - 1]);
        }
        REAL ym[V], yp[V];
#pragma unroll
        for (int e = 0; e < V; e++) {
          ym[e] = r > 0 ? B[r > 0 ? r - 1 : 0][e] : below[e];
          yp[e] = r < RY - 1 ? B[r < RY - 1 ? r + 1 : 0][e] : above[e];
        }
        if constexpr (XY & TILE3D_XY_Y) {
          if ((fmask >> (8 + r)) & 1)
#pragma unroll
            for (int e = 0; e < V; e++)
              ym[e] = xyghost(1, 0, r, zn, B[r][e]);
          if ((fmask >> (12 + r)) & 1)
#pragma unroll
            for (int e = 0; e < V; e++)
              yp[e] = xyghost(1, 1, r, zn, B[r][e]);
        }
#pragma unroll
        for (int e = 0; e < V; e++) {
          const REAL xm = e > 0 ? B[r][e > 0 ? e - 1 : 0] : from_left;
          REAL xp = e < V - 1 ? B[r][e < V - 1 ? e + 1 : 0] : from_right;
          if ((XY & TILE3D_XY_X) && FACES && e < V - 1 && ((fmask >> (4 + e)) & 1))
            xp = xyghost(0, 1, r, zn, B[r][e]);
          o[r][e] = stencil_star1(p.c0, p.cx, p.cy, p.cz, B[r][e], xm, xp, ym[e], yp[e], Am[r][e],
                                  C[r][e]);
          if constexpr (SRC)
            if (has_f())
              o[r][e] = stencil_source(ex.cf, fs[e], o[r][e]);
        }
      }
      if constexpr (RES)
        if (l <= KS)
          residual(l, c, B, o);
      if (ZF && l < T && c == p.nz && ex.kind[2][1]) /* the ghost plane beyond z = n - 1 */
        ghost_plane(o, R[O1][l < T ? l : 0], ex.kind[2][1], ex.two_g[2][1]);
      if (l < T) {
        REAL(&Dn)[RY][V] = R[N][l < T ? l : 0];
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
          for (int e = 0; e < V; e++)
            Dn[r][e] = o[r][e];
        wr[l * LSTRIDE + own] = tile3d_vec(o[0]);
        wr[l * LSTRIDE + own + K::ROWV] = tile3d_vec(o[RY - 1]);
        if constexpr (CLU)
          hand(o, i, l);
      }
      if (l == KS && i >= T + KS)
        store(o, z0 - T - KS + i);
    }
  }

  /* The cells at offset d (|d| <= r) along x from cell e of this thread's row B: its own, or
   * a cell of the lane q to the left (lft[q]) or right (rgt[q]). */
  static __device__ __forceinline__ REAL xcell(const REAL (&B)[V], const REAL (&lft)[RAD + 1][V],
                                               const REAL (&rgt)[RAD + 1][V], int e, int d)
  {
    const int c = e + d;
    if (c < 0) {
      const int q = (-c + V - 1) / V;
      return lft[q][c + q * V];
    }
    if (c >= V)
      return rgt[c / V][c - c / V * V];
    return B[c];
  }

  /* FACES, radius r: plane c of a level, made into the ring's slot N (PH's), a ghost beyond the
   * z = n - 1 face: plane n - 1 + d mirrors plane n - d, made 2d - 1 iterations before (S =
   * 2r + 1 slots keep it). */
  template <int N> __device__ __forceinline__ void zhi_ghost(REAL (&g)[RY][V], int l, int c) const
  {
    if (!ex.kind[2][1] || c < p.nz || c >= p.nz + RAD)
      return;
#pragma unroll
    for (int d = 1; d <= RAD; d++)
      if (c == p.nz - 1 + d)
        ghost_plane(g, R[(N + S - (2 * d - 1)) % S][l], ex.kind[2][1], ex.two_g[2][1]);
  }

  /* Iteration i of radius r > 1, phase PH = i mod S (one CTA): plane p = z0 - D + i of level
   * 0 from the ring; level l = 1..T computes plane p - l r from planes p - l r - r .. p - l r +
   * r of level l - 1, made at iterations i - 2r .. i: the slot of iteration i - e is
   * (PH + S - 1 - e) mod S. The rows below and above come from the other warps' first and last
   * r rows of that centre plane, which each warp writes one iteration ahead: at iteration i,
   * level l - 1's plane made at i + 1 - r (the next iteration's centre). Level K's plane is
   * stored. The forms with faces (FACES, XY: every reflecting face) apply them at every level:
   * a neighbour beyond an x or y face takes the rule of the cell it mirrors, z as ghost planes
   * written into the level's slots: beyond z = 0 when level l's centre is plane 0 (planes -1 .. -r
   * of level l - 1 from planes 0 .. r - 1, all in registers then), beyond z = n - 1 as each is
   * made (zhi_ghost). */
  template <int PH, int XY> __device__ __forceinline__ void step_r(int i)
  {
    static_assert(!FACES || (XY == TILE3D_XY && D % RY == 0),
                  "radius > 1: the face tiles' kernel takes x and y, its rows start on RY");
    constexpr int N = (PH + S - 1) % S, W = (PH + S - RAD) % S, C = (PH + S - 1 - RAD) % S;
    VEC *const sm = reinterpret_cast<VEC *>(tile3d_smem);
    const int wb = i % NBUF, rb = (i + NBUF - 1) % NBUF;
    VEC *wr = sm + wb * BSTRIDE;
    const VEC *rd = sm + rb * BSTRIDE;
    ring_step(R[N][0], i);
    if constexpr (ZF)
      zhi_ghost<N>(R[N][0], 0, z0 - D + i);
    if constexpr (FR > 0)
      ring_signs(i - RAD);
    if constexpr (NBUF == 2)
      tile3d_wait(bar(), (uint32_t)i & 1u);
#pragma unroll
    for (int l = 0; l < T; l++)
#pragma unroll
      for (int q = 0; q < RAD; q++) {
        wr[l * LSTRIDE + own + q * K::ROWV] = tile3d_vec(R[W][l][q]);
        wr[l * LSTRIDE + own + (RAD + q) * K::ROWV] = tile3d_vec(R[W][l][RY - RAD + q]);
      }
    const int KS = steps(); /* the level stored */
#pragma unroll
    for (int l = 1; l <= T; l++) {
      const int c = z0 - D + i - l * RAD; /* the centre plane */
      if constexpr (ZF)
        if (c == 0 && ex.kind[2][0])
#pragma unroll
          for (int d = 1; d <= RAD; d++)
            ghost_plane(R[(C + S - d) % S][l - 1], R[(C + d - 1) % S][l - 1], ex.kind[2][0],
                        ex.two_g[2][0]);
      const bool xlo = fmask & 1, xhi = fmask & 2, ylo = fmask & 4; /* (FACES) */
      const int yhi = fmask >> 4, zn = FACES ? xyzneg(c) : 0;
      REAL tg[2][2]; /* (FACES) the x and y faces' 2g in this plane: negated where it is read
                        through a Dirichlet-0 z face (xyghost), once a level */
#pragma unroll
      for (int a = 0; a < 2; a++)
#pragma unroll
        for (int s = 0; s < 2; s++)
          tg[a][s] = zn ? (REAL)0 - ex.two_g[a][s] : ex.two_g[a][s];
      auto xyg = [&](int a, int s, REAL m) { return tile3d_ghost(ex.kind[a][s], tg[a][s], m); };
      const REAL(&B)[RY][V] = R[C][l - 1];       /* the centre plane p - l r of level l - 1 */
      REAL below[RAD + 1][V], above[RAD + 1][V]; /* [d]: rows d below / above, other warps */
      if (NBUF == 3 && l == 1)
        tile3d_wait(bar(), (uint32_t)i & 1u);
#pragma unroll
      for (int d = 1; d <= RAD; d++) {
        tile3d_unvec(below[d], rd[(l - 1) * LSTRIDE + dn + (RAD - d) * K::ROWV]);
        tile3d_unvec(above[d], rd[(l - 1) * LSTRIDE + up + (d - 1) * K::ROWV]);
      }
      if (l == T)
        tile3d_arrive(bar());
      /* row rr (-r .. RY - 1 + r) of the centre plane, cell e */
      auto yval = [&](int rr, int e) -> REAL {
        return rr < 0 ? below[-rr][e] : rr >= RY ? above[rr - RY + 1][e] : B[rr][e];
      };
      REAL o[RY][V];
#pragma unroll
      for (int r = 0; r < RY; r++) {
        constexpr int QL = (RAD + V - 1) / V;
        REAL lft[RAD + 1][V], rgt[RAD + 1][V];
#pragma unroll
        for (int q = 1; q <= QL; q++)
#pragma unroll
          for (int cc = 0; cc < V; cc++) {
            if (q * V - cc <= RAD)
              lft[q][cc] = __shfl_up_sync(0xffffffffu, B[r][cc], q);
            if (cc + 1 + (q - 1) * V <= RAD)
              rgt[q][cc] = __shfl_down_sync(0xffffffffu, B[r][cc], q);
          }
        REAL fs[V];
        if constexpr (SRC)
          source(fs, c, r, fslot(i, l));
#pragma unroll
        for (int e = 0; e < V; e++) {
          REAL nm[3][4], np[3][4];
#pragma unroll
          for (int d = 1; d <= RAD; d++) {
            nm[0][d - 1] = xcell(B[r], lft, rgt, e, -d);
            np[0][d - 1] = xcell(B[r], lft, rgt, e, d);
            nm[1][d - 1] = yval(r - d, e);
            np[1][d - 1] = yval(r + d, e);
            if constexpr (FACES) { /* the ghosts beyond x and y faces: their mirrors' rule */
              if (e < d && xlo)
                nm[0][d - 1] = xyg(0, 0, xcell(B[r], lft, rgt, e, d - 2 * e - 1));
              if (e + d >= V && xhi)
                np[0][d - 1] = xyg(0, 1, xcell(B[r], lft, rgt, e, 2 * V - 1 - 2 * e - d));
              if (r < d && ylo)
                nm[1][d - 1] = xyg(1, 0, yval(d - r - 1, e));
#pragma unroll
              for (int h = r + 1; h <= r + d; h++)
                if (yhi == h)
                  np[1][d - 1] = xyg(1, 1, yval(2 * h - 1 - r - d, e));
            }
            nm[2][d - 1] = R[(C + S - d) % S][l - 1][r][e];
            np[2][d - 1] = R[(C + d) % S][l - 1][r][e];
          }
          o[r][e] = stencil_star_nb(3, RAD, ex.c0, ex.c, B[r][e], nm, np);
          if constexpr (SRC)
            if (has_f())
              o[r][e] = stencil_source(ex.cf, fs[e], o[r][e]);
        }
      }
      if constexpr (RES)
        if (l <= KS)
          residual(l, c, B, o);
      if (l < T) {
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
          for (int e = 0; e < V; e++)
            R[N][l < T ? l : 0][r][e] = o[r][e];
        if constexpr (ZF)
          zhi_ghost<N>(R[N][l < T ? l : 0], l < T ? l : 0, c);
      }
      if (l == KS && i >= D + KS * RAD)
        store(o, z0 - D - KS * RAD + i);
    }
  }
};

/* This warp's stores so far are visible on the device before its one increment of *sig
 * (which a stream's wait on the value orders the exchange after). */
__device__ __forceinline__ void tile3d_signal(unsigned *sig)
{
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    __threadfence();
    atomicAdd(sig, 1u);
  }
}

/* The chunk of a CTA of the signalled form: the last chunk's for blockIdx.z = 1 (dispatched
 * second), the others in order. */
__device__ __forceinline__ int tile3d_chunk()
{
  const int bz = (int)blockIdx.z, nzc = (int)gridDim.z;
  return bz > 0 ? (bz == 1 ? nzc - 1 : bz - 1) : 0;
}

/* Iterations i .. i + S - 1 of radius r > 1, unrolled (the slots' phases), up to ni. */
template <int XY, typename TH, int... PH>
__device__ __forceinline__ void tile3d_steps_r(TH &t, int i, int ni,
                                               std::integer_sequence<int, PH...>)
{
  (void)((i + PH < ni ? (t.template step_r<PH, XY>(i + PH), true) : false) && ...);
}

/* The ni iterations of radius 1, unrolled by 3; SIG: the signals (tile3d_sig). */
template <int XY, bool SIG, typename TH>
__device__ __forceinline__ void tile3d_loop1(TH &t, int ni, const tile3d_sig &sg)
{
  for (int i = 0;; i += 3) {
    t.template step<0, XY>(i);
    if (i + 1 >= ni)
      break;
    t.template step<1, XY>(i + 1);
    if (i + 2 >= ni)
      break;
    t.template step<2, XY>(i + 2);
    if constexpr (SIG)
      if (i + 3 == sg.lo && tile3d_chunk() == 0)
        tile3d_signal(sg.sig);
    if (i + 3 >= ni)
      break;
  }
}

/* FX (radius 1): the forms that apply reflecting faces at every level. A launch of the T built
 * runs two kernels over the same grid, XY for the tiles within r of the x and y faces of
 * sg.xyfaces (the face tiles: every reflecting face applied), the other for the rest, each
 * returning at once from the other's tiles: the face code costs registers that the other
 * tiles' loop then does not pay. The other tiles run the plain kernel (FX = 0, every
 * homogeneous face read through) where the faces they meet allow it (tile3d.cu). A launch of
 * fewer steps runs the face tiles' kernel on every tile (sg.all). The same test splits the
 * plain one-CTA kernel's launches in parts by tile: the tiles within the halo of the x and y
 * faces that send (sg.edge), then the others.
 * CLU: the form with clusters (rows handed through DSMEM, the header), for clusters of several
 * CTAs; without, the one-CTA form (shared-memory rows, the split mbarrier), the default.
 * SIG (one CTA only): the signalled form of tile3d_launch_signal (sg, the chunks' order),
 * a kernel of its own: its test inside the loop slows whole launches (docs/design/fused-kernels.md,
 * "Designs measured and not used"). */
template <typename REAL, int T, int RAD, bool CLU, bool SIG, int FX, int XY>
__global__ void __launch_bounds__(TILE3D_WARPS * 32)
    tile3d_kernel(const tile3d_params<REAL> p, const tile3d_sig sg, const tile3d_ext<REAL> ex)
{
  typedef tile3d_thread<REAL, T, RAD, CLU, FX> thread;
  constexpr int RY = thread::RY, QD = thread::QD, V = thread::V, ROWV = thread::K::ROWV;
  constexpr int D = thread::D; /* the trapezoid's depth T r */
  static_assert(!SIG || (RAD == 1 && !FX), "the signalled form: radius 1, halo faces");
  typedef typename thread::VEC VEC;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  constexpr int E = thread::K::E, U = thread::K::U;
  /* the CTA's place in its cluster (its rank) and the tile's first cell and row */
  const int iy = (int)blockIdx.y % p.ncy;
  /* the tile's column and row of tiles, and its lanes per segment: sl = 32 but in a narrow
   * column, whose warps hold 32 / sl segments of sl lanes (rows stacked; see the header) */
  int tx = (int)blockIdx.x, ty = (int)blockIdx.y / p.ncy, sl = 32, xs = 0; /* xs: see x0 */
  int cz = SIG ? tile3d_chunk() : (int)blockIdx.z, nzc = (int)gridDim.z;   /* (SIG: recomputed) */
  if (!CLU) {
    int b = (int)blockIdx.x + sg.b0;
    if (!SIG && sg.pieces) { /* chunks by tile: r tiles in pieces, chunk by chunk */
      const int q = b - sg.whole, r = ((int)gridDim.x - sg.whole) / sg.pieces;
      b = q < 0 ? b : sg.whole + q % r;
      cz = q < 0 ? 0 : q / r;
      nzc = q < 0 ? 1 : sg.pieces;
    }
    const tile3d_at at = tile3d_tile(tile3d_columns(sizeof(REAL), D, p.nx, p.ny), b, U, p.xfull);
    tx = at.tx;
    ty = at.ty;
    sl = at.sl;
    xs = at.xs;
  }
  const int ns = 32 / sl, seg = min(lane / sl, ns - 1), xl = lane - seg * sl;
  const int g = w * ns + seg, by = nw * ns * RY; /* the lane's segment in the CTA; rows */
  const int x0 = tx * U + xs - E;                /* (tile tx stores the columns from tx U + xs) */
  const int y0 = ty * (p.ncy * by - 2 * D) - D + iy * by;
  const int z1 = p.nz - (nzc - 1 - cz) * p.chunk;
  const int z0 = cz ? z1 - p.chunk : 0;
  if (sg.xyfaces && !sg.all && /* (the other kernel or part runs the other tiles) */
      tile3d_meets(sg.xyfaces, sg.reach, x0, x0 + V * sl, y0, y0 + by, p.nx, p.ny) !=
          (XY != 0 || sg.edge))
    return;
  thread t{p, ex};

  const int xc = x0 + V * xl;
  int how;
  const int64_t xv = tile3d_vec_through(xc, p.nx, V, p.rd[0], &how);
  int odd = (how == FUSED_READ_MIRROR || how == FUSED_READ_MIRROR_NEG) |
            (how == FUSED_READ_MIRROR_NEG) << 2;
  t.ucol = p.u + (xv < p.xlo ? p.xlo : xv > p.xhi ? p.xhi : xv);
  t.fcol = thread::SRC && ex.f ? ex.f + (t.ucol - p.u) : NULL;
  t.vcol = p.v + xc;
  bool all = true;
#pragma unroll
  for (int e = 0; e < V; e++) {
    const int x = xc + e;
    t.stx[e] = x >= x0 + E && x < x0 + V * sl - E && x < p.nx;
    all = all && t.stx[e];
  }
  t.svec = all;
#pragma unroll
  for (int r = 0; r < RY; r++) {
    const int m = iy * by + g * RY + r, y = y0 + g * RY + r; /* m: the cluster tile's row */
    int neg, yc = tile3d_through(y, p.ny, p.rd[1][0], p.rd[1][1], &neg);
    yc = yc < -p.hy ? -p.hy : yc > p.ny + p.hy - 1 ? p.ny + p.hy - 1 : yc;
    t.roff[r] = yc * (int)p.sy;
    t.sty[r] = m >= D && m < p.ncy * by - D && y < p.ny;
    odd |= neg << (4 + r);
  }
  t.z0 = z0;
  t.z1 = z1;
  /* FACES: the cells next to reflecting x and y faces (fmask) */
  const int yc = y0 + g * RY;
  int fm = 0;
  if constexpr (RAD == 1) {
#pragma unroll
    for (int e = 0; e < V; e++)
      fm |= (ex.kind[0][0] && xc + e == 0) << e | (ex.kind[0][1] && xc + e == p.nx - 1) << (4 + e);
#pragma unroll
    for (int r = 0; r < RY; r++)
      fm |= (ex.kind[1][0] && yc + r == 0) << (8 + r) | (ex.kind[1][1] && yc + r == p.ny - 1)
                                                            << (12 + r);
  } else {
    const int h = p.ny - yc;
    fm = (ex.kind[0][0] && xc == 0) | (ex.kind[0][1] && xc == p.nx - V) << 1 |
         (ex.kind[1][0] && yc == 0) << 2 | (ex.kind[1][1] && h > 0 && h < RY + RAD ? h : 0) << 4;
  }
  t.fmask = fm;
#pragma unroll
  for (int l = 0; l < (thread::RES ? T : 1); l++)
    t.racc[l] = 0;
  t.own = w * 2 * RAD * ROWV + lane;
  /* the rows below and above: the last row of segment g - 1 and the first of segment g + 1
   * (another warp's, or in a narrow column maybe this warp's); at the tile's sides its own,
   * or (CLU) the rows the CTA below / above hands to the first / last warp */
  {
    const int nseg = nw * ns, gd = g > 0 ? g - 1 : g, gu = g < nseg - 1 ? g + 1 : g;
    t.dn = (gd / ns * 2 + 1) * RAD * ROWV + gd % ns * sl + xl;
    t.up = gu / ns * 2 * RAD * ROWV + gu % ns * sl + xl;
  }
  if constexpr (CLU) { /* (the cluster's rank of a CTA is iy) */
    t.hnb = w == 0 && iy > 0 ? 2 * (iy - 1) : w == nw - 1 && iy < p.ncy - 1 ? 2 * (iy + 1) + 1 : -1;
    if (w == 0 && iy > 0)
      t.dn = TILE3D_WARPS * 2 * ROWV + lane;
    if (w == nw - 1 && iy < p.ncy - 1)
      t.up = (TILE3D_WARPS * 2 + 1) * ROWV + lane;
  }
  t.odd = odd;

  /* Zero the buffers (iteration 0 reads the last) and the windows. */
  static_assert(sizeof(VEC) == 16, "16-byte vectors");
  float4 *z4 = reinterpret_cast<float4 *>(tile3d_smem);
  for (int k = threadIdx.x; k < thread::NBUF * thread::BSTRIDE; k += blockDim.x)
    z4[k] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int s = 0; s < thread::S; s++)
#pragma unroll
    for (int l = 0; l < T; l++)
#pragma unroll
      for (int r = 0; r < RY; r++)
#pragma unroll
        for (int e = 0; e < V; e++)
          t.R[s][l][r][e] = (REAL)0;
  if constexpr (thread::FR > 0) { /* f's planes j = -D .. FQ - r - 1 (iteration 0's, ahead) */
    t.fring = thread::bar() + 16u + threadIdx.x * 16u;
    for (int j = -D; j <= thread::FQ - RAD - 1; j++)
      t.load_f(j);
  }
  if constexpr (thread::K::RING) {
    t.ring = (uint32_t)thread::XOFF * (uint32_t)sizeof(REAL) + threadIdx.x * 16u;
#pragma unroll
    for (int s = 0; s < QD; s++)
      t.load_ring(s, z0 - D + s);
  } else {
#pragma unroll
    for (int s = 0; s < QD; s++)
      t.load(t.Q[s], z0 - D + s);
  }
  if (threadIdx.x == 0) {
    tile3d_bar_init(thread::bar(), blockDim.x);
    if constexpr (CLU) { /* (the hand-off's: phase 0 of full[k][b] expects buffer b's rows) */
      for (int k = 0; k < 2; k++)
        for (int b = 0; b < thread::NBUF; b++) {
          tile3d_bar_init(thread::hfull_at(k, b), 1);
          tile3d_bar_init(thread::hempty_at(k, b), 1);
          if (b < thread::NBUF - 1)
            tile3d_expect(thread::hfull_at(k, b), thread::HBYTES);
        }
      tile3d_bar_init_fence();
    }
  }
  if constexpr (CLU)
    tile3d_sync(); /* (and every CTA of the cluster runs before any reaches its shared memory) */
  else
    __syncthreads();
  tile3d_arrive(thread::bar()); /* phase 0, which iteration 0 waits for */

  const int ni = z1 - z0 + D + t.steps() * RAD; /* >= 3 */
  if constexpr (RAD > 1) {
    constexpr int S = thread::S;
    for (int i = 0; i < ni; i += S)
      tile3d_steps_r<XY>(t, i, ni, std::make_integer_sequence<int, S>());
  } else {
    tile3d_loop1<XY, SIG>(t, ni, sg);
    if constexpr (SIG)
      if (sg.hi && tile3d_chunk() == (int)gridDim.z - 1)
        tile3d_signal(sg.sig);
  }
  if constexpr (CLU)
    tile3d_sync(); /* no CTA exits while another may reach its shared memory */
  if constexpr (thread::K::RING || thread::FR)
    cp_async_wait<0>();
  if constexpr (thread::RES) { /* warp sums in a fixed order: the same bits every run */
    const int64_t cta =
        (int64_t)blockIdx.x + (int64_t)gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z);
    fused_warp_sums(t.racc, ex.part + (cta * nw + w) * 8);
  }
}

/* Host side (tile3d.cu), called through fused.h's functions for 3D plans.
 * tile3d_usable: rows and interior rows on 16-byte boundaries. */
int tile3d_usable(const struct layout *l);
int tile3d_plan(struct fused_plan *pl, const struct fused_config *want, int tmax_halo, int device);
/* Planes [z0, z1) of the block (0, n: all of it); a plane range's sides inside the block read
 * the planes beyond from memory. f: the source field (plans with one) or NULL. tiles: all
 * (0), or those that compute cells within the halo of the x and y faces in `tiles` (bit 2
 * axis + side; edge 1) or the others (edge 0), where tile3d_splits_xy. */
int tile3d_launch(const struct fused_plan *pl, const void *u, const void *f, void *v, int steps,
                  int64_t z0, int64_t z1, int tiles, int edge, void *stream);
/* 1 when launches in parts by tile can run: one CTA per tile, no face applied (the forms with
 * faces split their launches by tile themselves). */
int tile3d_splits_xy(const struct fused_plan *pl);
/* 1 when the narrow column of one CTA's tiles (tile3d_columns) goes first, at x = 0: the x_lo
 * face is applied at every level and the x_hi face is not, so the face tiles' kernel, slower a
 * tile, runs the narrow column's few CTAs instead of a full column's (n along x whole 16-byte
 * vectors: the full tiles then start on vectors). */
int tile3d_narrow_first(const struct fused_plan *pl);
/* The most steps of a launch with residual sums (fused_residual_steps). */
int tile3d_residual_steps(const struct fused_plan *pl);
/* A whole launch that also sums residuals (fused_launch_residual), and its scratch (doubles). */
int tile3d_launch_residual(const struct fused_plan *pl, const void *u, const void *f, void *v,
                           int steps, unsigned mask, double *scratch, double *sums, void *stream);
size_t tile3d_scratch(const struct fused_plan *pl);
/* All planes in one launch that adds to *sig once per warp of the first chunk (faces bit 0)
 * and of the last (bit 1) when its planes the exchange sends ([0, h) / [n - h, n), h the halo)
 * are stored; *count: what the launch adds. The last chunk is dispatched second. */
int tile3d_launch_signal(const struct fused_plan *pl, const void *u, void *v, int steps, int faces,
                         unsigned *sig, unsigned *count, void *stream);
/* 1 when tile3d_launch_signal can run the plan for these faces and the dispatch model
 * (fm_signal_times) has their sent planes stored within TILE3D_SIGNAL_BY of the launch,
 * leaving the exchange the rest (the split launch in shells otherwise;
 * docs/design/fused-kernels.md, "Waves and chunks"). */
#define TILE3D_SIGNAL_BY 0.8
int tile3d_signals(const struct fused_plan *pl, int faces);
int tile3d_attributes(const struct fused_plan *pl, int steps, int *regs, int *local_bytes);
/* 1 when the plan's kernel applies reflecting faces at every level (forms 3..5). */
int tile3d_applies_faces(const struct fused_plan *pl);
/* The z faces of nonzero value (bit 0 z_lo, bit 1 z_hi) of a plan whose launches of the T
 * built run the plain form's kernels: the planes next to them run the form with faces. */
int tile3d_zwall_faces(const struct fused_plan *pl);

/* The instantiations, in fused_f32.cu / fused_f64.cu. Forms: 0 one CTA, halo faces only; 1
 * clusters; 2 one CTA signalled; 3 reflecting faces applied at every level (TILE3D_FACES); 4
 * with a source term too; 5 with residual sums too. Radius 1: forms 0..2 for T = 1..4, forms
 * 3..5 for T = 4 running any K <= 4; radius 2..4, for T = TILE3D_STEPS_R running any K <= T:
 * forms 0, 6 and 7 (every face a halo face: launches of one step read the reflecting faces'
 * ghosts from memory), and at radius 2 form 3, one kernel (xy = TILE3D_XY) for launches that
 * apply every face on every tile or beside a z wall (and on fp64's face tiles), and form 0
 * with xy = TILE3D_XY the plain form's face tiles' kernel in fp32 (FX = TILE3D_FACES |
 * TILE3D_ZREAD: every x and y face applied, the z faces read through). Forms 3..5 of radius 1 come
 * in pairs: xy = TILE3D_XY the face tiles' kernel; so does form 0 of radius 1 at T = 4 (the plain
 * form's face tiles), and xy = TILE3D_XY_X its face tiles' kernel for x faces only. Forms 6 and 7:
 * a source term (and residual sums) with every face a halo face, read through or from memory:
 * radius 1 for T = TILE3D_SRC_STEPS and TILE3D_RES_STEPS (form 6 for both where they differ:
 * launches of up to TILE3D_RES_STEPS run the shorter), radius 2..4 for T = TILE3D_STEPS_R, running
 * any K <= T. The kernel of a launch of `steps` steps; NULL where none is built. */
enum {
  TILE3D_ONE = 0,
  TILE3D_CLU = 1,
  TILE3D_SIG = 2,
  TILE3D_FACE = 3,
  TILE3D_FACE_SRC = 4,
  TILE3D_FACE_RES = 5,
  TILE3D_HALO_SRC = 6,
  TILE3D_HALO_RES = 7
};
const void *tile3d_lookup_f32(int steps, int radius, int form, int xy);
const void *tile3d_lookup_f64(int steps, int radius, int form, int xy);

#define TILE3D_FORMS(REAL, T)                                                                      \
  {                                                                                                \
    STENCIL_KERNEL_PTR(tile3d_kernel<REAL, T, 1, false, false, 0, false>),                         \
        STENCIL_KERNEL_PTR(tile3d_kernel<REAL, T, 1, true, false, 0, false>),                      \
        STENCIL_KERNEL_PTR(tile3d_kernel<REAL, T, 1, false, true, 0, false>)                       \
  }
#define TILE3D_K(REAL, R, F, XY)                                                                   \
  STENCIL_KERNEL_PTR(tile3d_kernel<REAL, TILE3D_STEPS_R(R), R, false, false, F, XY>)
#define TILE3D_KS(REAL, T, F) STENCIL_KERNEL_PTR(tile3d_kernel<REAL, T, 1, false, false, F, false>)
/* [0, faces, faces + source, faces + source + residuals] of radius 1, the other tiles and the
 * face tiles (form 0's: the plain form's, applying Dirichlet faces of nonzero value only); the
 * faces alone in the kernel with a source, f = NULL (without the source's code the fp32 kernels
 * spill more) */
#define TILE3D_FACE_FORMS1(REAL, XY)                                                               \
  {                                                                                                \
    TILE3D_K(REAL, 1, 0, XY), TILE3D_K(REAL, 1, TILE3D_FACES | TILE3D_SRC, XY),                    \
        TILE3D_K(REAL, 1, TILE3D_FACES | TILE3D_SRC, XY),                                          \
        TILE3D_K(REAL, 1, TILE3D_FACES | TILE3D_SRC | TILE3D_RES, XY)                              \
  }
/* [0, faces (radius 2: FW, the face tiles' kernel, every tile's where a launch applies them
 * everywhere), source, source + residuals] of radius R > 1; of radius 1 with a source (forms 6,
 * 7) [source at TR steps, -, source at T, source + residuals at TR] */
#define TILE3D_FACE_FORMS(REAL, R, FW)                                                             \
  {                                                                                                \
    TILE3D_K(REAL, R, 0, false), FW, TILE3D_K(REAL, R, TILE3D_SRC, false),                         \
        TILE3D_K(REAL, R, TILE3D_SRC | TILE3D_RES, false)                                          \
  }
#define TILE3D_SRC_FORMS(REAL, T, TR)                                                              \
  {                                                                                                \
    TILE3D_KS(REAL, TR, TILE3D_SRC), NULL, TILE3D_KS(REAL, T, TILE3D_SRC),                         \
        TILE3D_KS(REAL, TR, TILE3D_SRC | TILE3D_RES)                                               \
  }
#define TILE3D_INSTANTIATE(REAL, name)                                                             \
  static_assert(TILE3D_MAX_STEPS == 4, "four T instantiated");                                     \
  static_assert(TILE3D_SRC_STEPS > TILE3D_RES_STEPS, "the source's kernels of two T");             \
  const void *name(int steps, int radius, int form, int xy)                                        \
  {                                                                                                \
    static const void *const k[4][3] = {TILE3D_FORMS(REAL, 1), TILE3D_FORMS(REAL, 2),              \
                                        TILE3D_FORMS(REAL, 3), TILE3D_FORMS(REAL, 4)};             \
    static const void *const kx = TILE3D_K(REAL, 1, 0, TILE3D_XY_X);                               \
    static const void *const kz = TILE3D_K(REAL, 2, TILE3D_FACES | TILE3D_ZREAD, TILE3D_XY);       \
    static const void *const kf[6][4] = {                                                          \
        TILE3D_FACE_FORMS1(REAL, 0),                                                               \
        TILE3D_FACE_FORMS1(REAL, TILE3D_XY),                                                       \
        TILE3D_FACE_FORMS(REAL, 2, TILE3D_K(REAL, 2, TILE3D_FACES, TILE3D_XY)),                    \
        TILE3D_FACE_FORMS(REAL, 3, NULL),                                                          \
        TILE3D_FACE_FORMS(REAL, 4, NULL),                                                          \
        TILE3D_SRC_FORMS(REAL, TILE3D_SRC_STEPS, TILE3D_RES_STEPS)};                               \
    if (radius < 1 || radius > 4 || steps < 1 || steps > TILE3D_STEPS_R(radius) || form < 0 ||     \
        form > TILE3D_HALO_RES || xy < 0 || xy > TILE3D_XY ||                                      \
        (xy == TILE3D_XY_X && form != TILE3D_ONE) ||                                               \
        (xy && radius == 1 &&                                                                      \
         (form == TILE3D_CLU || form == TILE3D_SIG || form >= TILE3D_HALO_SRC ||                   \
          (form == TILE3D_ONE && steps != TILE3D_MAX_STEPS))) ||                                   \
        (radius > 1 &&                                                                             \
         (form == TILE3D_FACE  ? radius != 2                                                       \
          : form == TILE3D_ONE ? xy && (radius != 2 || xy != TILE3D_XY)                            \
                               : xy || (form > TILE3D_FACE && form < TILE3D_HALO_SRC))))           \
      return NULL;                                                                                 \
    if (radius == 1 && form <= TILE3D_SIG && !xy)                                                  \
      return k[steps - 1][form];                                                                   \
    if (radius == 1 && form >= TILE3D_HALO_SRC)                                                    \
      return steps <= TILE3D_RES_STEPS && form == TILE3D_HALO_SRC ? kf[5][0]                       \
             : steps <= (form == TILE3D_HALO_RES ? TILE3D_RES_STEPS : TILE3D_SRC_STEPS)            \
                 ? kf[5][form - TILE3D_FACE - 1]                                                   \
                 : NULL;                                                                           \
    const int row = radius == 1 ? (xy ? 1 : 0) : radius;                                           \
    return form == TILE3D_ONE        ? (xy == TILE3D_XY_X   ? kx                                   \
                                        : xy && radius == 2 ? kz                                   \
                                                            : kf[row][0])                          \
           : form >= TILE3D_HALO_SRC ? kf[row][form - TILE3D_FACE - 1]                             \
           : form >= TILE3D_FACE     ? kf[row][form - TILE3D_FACE + 1]                             \
                                     : NULL;                                                           \
  }
