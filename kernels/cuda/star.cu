/* Tier 2 for radius 2 to 4 in 3D (update_star): one step of the star stencil of orders 4 to 8
 * streamed through z, the classic form of the high-order 3D stars (docs/design/fused-kernels.md,
 * "Tier 2 at radius 2 to 4").
 *
 * A CTA of NW warps (star_warps: 12, or 8) owns a tile of 32 16-byte vectors (128 cells in
 * fp32, 64 in fp64) by BY = NW NY rows of the box (NY = 1) and a chunk of its planes [k0, k1).
 * Lane l of warp w owns vector l of rows NY w .. NY w + NY - 1. One row a thread keeps the
 * registers within 80, two CTAs of 12 warps (three of 8) a multiprocessor (more rows a thread
 * share the neighbour rows among more cells but leave too few warps to hide the barrier and the
 * shared-memory latency; taller tiles copy fewer halo rows a plane: the design page).
 *
 *   Shared memory: a ring of NS = R + 1 + A slots, each one plane of the tile with its halo:
 *   ROWS = BY + 2R rows by COLS = 32 + 2H vectors (H = the vectors that hold R cells). Plane p
 *   is copied into slot (p - P0) mod NS by cp.async A planes ahead (P0 = k0 - R; A = 2, fp64
 *   radius 4 without a source 3), every thread a share of the slot.
 *   Registers: a queue of the S = 2R + 1 planes p - 2R .. p of the thread's own cells, slot
 *   (p - P0) mod S; the loop is unrolled by S so that the queue's slots are compile-time
 *   indices (and the ring's too where NS = S, at radius 2).
 *
 * Iteration i (plane p = P0 + i): wait for this thread's copies of plane p, barrier (every
 * copy of p has landed, and every thread has finished iteration i - 1); copy plane p + A into
 * the slot plane p - R - 1 held (last read at iteration i - 1); the thread's cells of plane p
 * into the queue; from i = 2R on, the output plane k = p - R: its own, its z neighbours from
 * the queue, its x neighbours (the vectors left and right in its rows) and its y neighbours
 * (rows beyond its own) from plane k's slot. One barrier a plane; a chunk costs 2R planes of
 * fill.
 *
 * Every cell takes the steps of the point update in its order (stencil_centre, the pairs of
 * x, y, z by stencil_pair, stencil_source: kernels/point.h), so the bits are the CPU backend's;
 * the y pairs of a thread's rows are taken m by m, loading rows -m and NY - 1 + m as they are
 * first needed, which keeps the registers within the launch bounds. Rows and vectors of a slot
 * beyond the array are clamped into it: they feed only cells that are not stored. The box's
 * ghosts (the layout's halo, at least R deep) hold the neighbours' values or the faces'
 * reflections; the kernel writes the reflections of the known physical y and z faces from the
 * cells it stores (as tier 2 of radius 1), so the boundary kernel skips them. The x faces'
 * ghosts too where that spills no registers (star_xg): the lanes whose whole vectors lie
 * within a sector-rounded halo of the face store their vectors reversed beyond it, the ghosts'
 * 32-byte sectors whole (x = 0 starts a sector; the cells beyond the halo are row padding).
 * Elsewhere, and for x_hi where n_x is not whole vectors, the boundary kernel fills them. */
#include "kernels/cuda/context.h"
#include "kernels/cuda/cp_async.cuh"

#ifdef STENCIL_CUDA_EMU
#define star_smem (emu::dyn_smem())
#else
extern __shared__ __align__(16) unsigned char star_smem[];
#endif

/* Warps a CTA of update_star<REAL, R, SRC> (elem = sizeof(REAL)): 12, two CTAs a
 * multiprocessor; fp32 radius 4 with a source 8, three CTAs (the design page). */
static constexpr __host__ __device__ int star_warps(int elem, int R, bool src)
{
  return elem == 4 && R == 4 && src ? 8 : 12;
}

template <typename REAL, int R, bool SRC> struct star_shape {
  static constexpr int V = 16 / (int)sizeof(REAL); /* cells a vector */
  static constexpr int H = (R + V - 1) / V;        /* halo vectors each side along x */
  static constexpr int NW = star_warps(sizeof(REAL), R, SRC), NY = 1, BY = NW * NY;
  static constexpr int NT = 32 * NW, MINB = NW == 8 ? 3 : 2; /* threads a CTA, CTAs an SM */
  static constexpr int ROWS = BY + 2 * R, COLS = 32 + 2 * H, SLOT = ROWS * COLS;
  static constexpr int S = 2 * R + 1;                                   /* queue planes */
  static constexpr int A = sizeof(REAL) == 8 && R == 4 && !SRC ? 3 : 2; /* planes ahead */
  static constexpr int NS = R + 1 + A;                                  /* ring slots */
  static constexpr int LOADS = (SLOT + NT - 1) / NT; /* a thread's copies a plane */
  static constexpr size_t SMEM = (size_t)NS * SLOT * 16;
};

/* The box in the device layout: base is the element of padded x = 0 of row 0, plane 0
 * (interior x = padded x - h0, h0 = lead + halo); vectors are 16 bytes of padded x. Vectors
 * [0, mend) of every row lie in the array (those past a row's end are the next row's). */
struct kstar {
  int64_t base, s1, ss;
  int64_t m0, mend; /* the box's first vector; the vectors of a row: [0, mend) */
  int64_t ylo, yhi; /* the rows of the array: [ylo, yhi) */
  int64_t h0;
  int64_t zc;   /* planes a chunk */
  int64_t n[3]; /* the block's interior cells */
  int gh[3];    /* ghost layers a reflecting face's cells write: the halo */
};

/* Whether update_star<REAL, R, SRC> (elem = sizeof(REAL)) writes the x faces' ghosts itself:
 * where that spills no registers; elsewhere (radius 4 in fp64 or with a source, radius 3 in
 * fp64 with a source) the boundary kernel fills them after the step. */
static constexpr __host__ __device__ bool star_xg(int elem, int R, bool src)
{
  return R == 2 || (R == 3 && !(elem == 8 && src)) || (R == 4 && elem == 4 && !src);
}

/* How far from a face its x ghosts' stores reach (cells of elem bytes): the halo h rounded up
 * to 32-byte sectors, so that the ghosts' sectors are written whole; 0 (no stores) where
 * n_x < 2 hs, so that no vector stores for both faces. The kernel and star_covers_x use it. */
static constexpr __host__ __device__ int star_x_reach(int elem, int h, int n)
{
  const int sc = 32 / elem, hs = (h + sc - 1) / sc * sc;
  return n >= 2 * hs ? hs : 0;
}

template <typename REAL> struct alignas(16) star_vec {
  REAL e[16 / sizeof(REAL)];
};

template <typename REAL> __device__ __forceinline__ REAL star_ghost(int kind, REAL two_g, REAL c)
{
  return kind == 1 ? two_g - c : c;
}

/* Store the cells of o that lie in the box's x range (all when whole) at `at`, as the ghosts
 * of a face of `kind` (0: the cells themselves). */
template <typename REAL>
__device__ __forceinline__ void star_put(REAL *at, star_vec<REAL> o, bool whole, int64_t x0,
                                         const kbox &b, int kind, REAL two_g)
{
  constexpr int V = 16 / sizeof(REAL);
  if (kind)
#pragma unroll
    for (int e = 0; e < V; e++)
      o.e[e] = star_ghost(kind, two_g, o.e[e]);
  if (whole) {
    *reinterpret_cast<star_vec<REAL> *>(at) = o;
    return;
  }
#pragma unroll
  for (int e = 0; e < V; e++)
    if (x0 + e >= b.lo[0] && x0 + e < b.hi[0])
      at[e] = o.e[e];
}

/* The cells o of row j, plane k at `at` where the vector is not whole in the box (star_put's x
 * range) or its cells have y or z ghosts: bit 0 of gm the y_lo face's, bit 1 y_hi; the z faces' by
 * k. Out of line: it runs in the few threads at the box's sides and the faces, and inlined its
 * registers and predicated stores would cost every thread. */
template <typename REAL>
static __device__ __noinline__ void star_edge(REAL *at, star_vec<REAL> o, bool whole, int x0,
                                              const kbox b, unsigned gm, int j, int k,
                                              const kstar L, const kfaces<REAL> F)
{
  star_put(at, o, whole, x0, b, 0, (REAL)0);
  if (gm & 1u)
    star_put(at - (2 * j + 1) * L.s1, o, whole, x0, b, F.kind[2], F.two_g[2]);
  if (gm & 2u)
    star_put(at + (2 * ((int)L.n[1] - j) - 1) * L.s1, o, whole, x0, b, F.kind[3], F.two_g[3]);
  if (k < L.gh[2] && F.kind[4])
    star_put(at - (2 * k + 1) * L.ss, o, whole, x0, b, F.kind[4], F.two_g[4]);
  if (k >= (int)L.n[2] - L.gh[2] && F.kind[5])
    star_put(at + (2 * ((int)L.n[2] - k) - 1) * L.ss, o, whole, x0, b, F.kind[5], F.two_g[5]);
}

template <typename REAL, int R, bool SRC>
static __global__ void __launch_bounds__(star_shape<REAL, R, SRC>::NT,
                                         star_shape<REAL, R, SRC>::MINB)
    update_star(const REAL *__restrict__ u, const REAL *__restrict__ f, REAL *__restrict__ v,
                kstar L, kbox b, kcoef<REAL> c, kfaces<REAL> F)
{
  using G = star_shape<REAL, R, SRC>;
  using VEC = star_vec<REAL>;
  constexpr int V = G::V, H = G::H, NY = G::NY, COLS = G::COLS, SLOT = G::SLOT, S = G::S, A = G::A,
                NS = G::NS, NT = G::NT;
  pdl_enter();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int64_t mt = L.m0 + (int64_t)blockIdx.x * 32; /* the tile's first vector */
  const int64_t jt = b.lo[1] + (int64_t)blockIdx.y * G::BY;
  const int64_t k0 = b.lo[2] + (int64_t)blockIdx.z * L.zc;
  const int64_t k1 = k0 + L.zc < b.hi[2] ? k0 + L.zc : b.hi[2];
  const int np = (int)(k1 - k0) + 2 * R;
  const int64_t P0 = k0 - R;

  /* This thread's copies: byte off[q] of a plane from its row -R, vector -H into vector
   * tid + NT q of a slot (32 bits: a tile's rows span far fewer bytes). */
  const char *src =
      reinterpret_cast<const char *>(u + L.base + (jt - R) * L.s1 + (mt - H) * V + P0 * L.ss);
  const int64_t plane_bytes = L.ss * (int64_t)sizeof(REAL);
  int off[G::LOADS];
#pragma unroll
  for (int q = 0; q < G::LOADS; q++) {
    const int idx = (int)threadIdx.x + NT * q;
    const int r = idx / COLS, cc = idx - r * COLS;
    int64_t j = jt - R + r, m = mt - H + cc;
    j = j < L.ylo ? L.ylo : j >= L.yhi ? L.yhi - 1 : j;
    m = m < 0 ? 0 : m >= L.mend ? L.mend - 1 : m;
    off[q] = (int)(((j - (jt - R)) * L.s1 + (m - (mt - H)) * V) * (int64_t)sizeof(REAL));
  }
  VEC *const sm = reinterpret_cast<VEC *>(star_smem);
  const uint32_t to0 = (uint32_t)__cvta_generic_to_shared(star_smem) + threadIdx.x * 16u;
  /* The next plane's copies into ring slot `slot`. */
  auto copy = [&](int slot) {
#pragma unroll
    for (int q = 0; q < G::LOADS; q++)
      if (SLOT % NT == 0 || (int)threadIdx.x + NT * q < SLOT)
        cp_async16(to0 + (uint32_t)(slot * SLOT + NT * q) * 16u, src + off[q]);
    src += plane_bytes;
  };

  /* This thread's cells: rows jt + NY w + y, vector mt + lane. */
  const int me = (R + NY * w) * COLS + H + lane;
  const int64_t x0 = (mt + lane) * V - L.h0; /* interior x of element 0 */
  const bool whole = x0 >= b.lo[0] && x0 + V <= b.hi[0];
  const bool xin = x0 + V > b.lo[0] && x0 < b.hi[0];

  const int64_t row0 = jt + NY * w;
  bool live[NY]; /* rows of the box this thread stores */
  /* The ghosts its cells write: bits 2y and 2y + 1, the y_lo and y_hi ghosts of row y (the z
   * ghosts depend on the plane). */
  const int jrow = (int)row0;
  unsigned gm = 0;
#pragma unroll
  for (int y = 0; y < NY; y++) {
    live[y] = xin && row0 + y < b.hi[1];
    if (live[y] && jrow + y < L.gh[1] && F.kind[2])
      gm |= 1u << (2 * y);
    if (live[y] && jrow + y >= L.n[1] - L.gh[1] && F.kind[3])
      gm |= 2u << (2 * y);
  }
  REAL *ok = v + L.base + row0 * L.s1 + (mt + lane) * V + k0 * L.ss; /* plane k of the output */
  const REAL *fin = SRC ? f + L.base + row0 * L.s1 + (mt + lane) * V + k0 * L.ss : nullptr;

#pragma unroll
  for (int a = 0; a < A; a++) {
    if (a < np)
      copy(a);
    cp_async_commit();
  }
  REAL q[S][NY][V];
  int rs = 0; /* the ring slot of the next plane (where NS != S) */
  for (int i0 = 0; i0 < np; i0 += S) {
#pragma unroll
    for (int s = 0; s < S; s++) {
      /* Iteration i: plane P0 + i in slot s of the queue (i0 is a multiple of S) and ri of
       * the ring; output plane k = P0 + i - R in slots kc and ro. */
      const int i = i0 + s;
      if (i >= np)
        break;
      const int64_t k = P0 + i - R;
      const int kc = (s + S - R) % S;
      const int ri = NS == S ? s : rs;
      if (NS != S)
        rs = rs + 1 < NS ? rs + 1 : 0;
      const int ro = NS == S ? kc : (ri >= R ? ri - R : ri + NS - R);
      VEC fv[NY];
      if (SRC && i >= 2 * R)
#pragma unroll
        for (int y = 0; y < NY; y++)
          if (live[y])
            fv[y] = *reinterpret_cast<const VEC *>(fin + y * L.s1);
      cp_async_wait<A - 1>();
      __syncthreads();
      /* Ring slot (ri + A) mod NS held plane P0 + i - R - 1, last read at iteration i - 1. */
      if (i + A < np)
        copy(NS == S ? (s + A) % S : (ri + A < NS ? ri + A : ri + A - NS));
      cp_async_commit();
#pragma unroll
      for (int y = 0; y < NY; y++) {
        const VEC t = sm[ri * SLOT + me + y * COLS];
#pragma unroll
        for (int e = 0; e < V; e++)
          q[s][y][e] = t.e[e];
      }
      if (i < 2 * R)
        continue;
      const bool kg = (k < L.gh[2] && F.kind[4]) || (k >= L.n[2] - L.gh[2] && F.kind[5]);
      const VEC *xy = sm + ro * SLOT + me; /* plane k at this thread's vector of row 0 */
      REAL acc[NY][V];
      /* The centre and the x pairs, row by row (vectors -H .. H of the row). */
#pragma unroll
      for (int y = 0; y < NY; y++) {
        REAL row[(2 * H + 1) * V];
#pragma unroll
        for (int h = 1; h <= H; h++) {
          const VEC lt = xy[y * COLS - h], rt = xy[y * COLS + h];
#pragma unroll
          for (int e = 0; e < V; e++) {
            row[(H - h) * V + e] = lt.e[e];
            row[(H + h) * V + e] = rt.e[e];
          }
        }
#pragma unroll
        for (int e = 0; e < V; e++) {
          row[H * V + e] = q[kc][y][e];
          acc[y][e] = stencil_centre(c.c0, row[H * V + e]);
        }
#pragma unroll
        for (int m = 1; m <= R; m++)
#pragma unroll
          for (int e = 0; e < V; e++)
            acc[y][e] =
                stencil_pair(c.c[0][m - 1], row[H * V + e - m], row[H * V + e + m], acc[y][e]);
      }
      /* The y pairs of all rows, m by m: rows -m and NY - 1 + m are first needed at m; the
       * thread's own rows come from the queue. */
      VEC yr[NY + 2 * R]; /* rows -R .. NY + R - 1 beyond the thread's own */
#pragma unroll
      for (int m = 1; m <= R; m++) {
        yr[R - m] = xy[-m * COLS];
        yr[R + NY - 1 + m] = xy[(NY - 1 + m) * COLS];
#pragma unroll
        for (int y = 0; y < NY; y++)
#pragma unroll
          for (int e = 0; e < V; e++) {
            const int lo = y - m, hi = y + m;
            const REAL um = lo >= 0 ? q[kc][lo >= 0 ? lo : 0][e] : yr[lo + R].e[e];
            const REAL up = hi < NY ? q[kc][hi < NY ? hi : 0][e] : yr[hi + R].e[e];
            acc[y][e] = stencil_pair(c.c[1][m - 1], um, up, acc[y][e]);
          }
      }
      /* The z pairs from the queue, the source, the stores. */
#pragma unroll
      for (int y = 0; y < NY; y++) {
        VEC o;
#pragma unroll
        for (int e = 0; e < V; e++) {
#pragma unroll
          for (int m = 1; m <= R; m++)
            acc[y][e] = stencil_pair(c.c[2][m - 1], q[(kc + S - m) % S][y][e],
                                     q[(kc + m) % S][y][e], acc[y][e]);
          o.e[e] = SRC ? stencil_source(c.cf, fv[y].e[e], acc[y][e]) : acc[y][e];
        }
        if (live[y]) {
          REAL *at = ok + y * L.s1;
          const unsigned g = gm >> (2 * y) & 3u;
          if (whole && !g && !kg)
            *reinterpret_cast<VEC *>(at) = o;
          else
            star_edge(at, o, whole, (int)x0, b, g, jrow + y, (int)k, L, F);
          /* The x faces' ghosts (star_covers_x): a whole vector within hs of a known
           * reflecting face (star_x_reach) stores its reflection beyond the face, the cells
           * beyond the halo into row padding. (Worked out here, not kept in registers through
           * the loop.) */
          const int nx = (int)L.n[0], xi = (int)x0;
          const int hs = star_x_reach((int)sizeof(REAL), L.gh[0], nx);
          const bool lo = F.kind[0] && xi < hs;
          if (star_xg((int)sizeof(REAL), R, SRC) && whole && hs &&
              (lo || (F.kind[1] && nx % V == 0 && xi >= nx - hs))) {
            VEC r;
#pragma unroll
            for (int e = 0; e < V; e++)
              r.e[e] = star_ghost(lo ? F.kind[0] : F.kind[1], lo ? F.two_g[0] : F.two_g[1],
                                  o.e[V - 1 - e]);
            *reinterpret_cast<VEC *>(at + (lo ? -2 * xi - V : 2 * (nx - xi) - V)) = r;
          }
        }
      }
      ok += L.ss;
      if (SRC)
        fin += L.ss;
    }
  }
}

/* Planes a chunk: the fewest waves of CTAs times the planes each streams (its chunk and 2R of
 * fill), over 1 to 64 chunks of at least 4R planes. */
static int64_t star_chunk(int64_t tiles, int64_t nz, int64_t resident, int R)
{
  int64_t best = nz, best_cost = -1;
  for (int64_t n = 1; n <= 64; n++) {
    const int64_t zc = (nz + n - 1) / n;
    if (n > 1 && zc < 4 * R)
      break;
    const int64_t ctas = tiles * ((nz + zc - 1) / zc);
    const int64_t cost = (ctas + resident - 1) / resident * (zc + 2 * R);
    if (best_cost < 0 || cost < best_cost)
      best = zc, best_cost = cost;
  }
  return best;
}

/* Resident CTAs a multiprocessor of kernel K (the same on every device of a run), its shared
 * memory allowed on the first call. */
template <typename REAL, int R, bool SRC> static int star_resident(int *per_sm)
{
  static int n = 0;
  const auto kernel = update_star<REAL, R, SRC>;
  if (!n) {
    const size_t smem = star_shape<REAL, R, SRC>::SMEM;
    CHECK_CUDA(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel,
                                                             star_shape<REAL, R, SRC>::NT, smem));
    if (n < 1)
      FAIL(STENCIL_ERR, "tier 2 (radius %d): the kernel does not fit a multiprocessor", R);
  }
  *per_sm = n;
  return STENCIL_OK;
}

template <typename REAL, int R>
static int run_star_r(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                      const void *u, const void *f, void *v, const struct box *b)
{
  using G0 = star_shape<REAL, R, false>;
  using G1 = star_shape<REAL, R, true>;
  const int by = f ? G1::BY : G0::BY, nt = f ? G1::NT : G0::NT;
  int per_sm = 0;
  CHECK((f ? star_resident<REAL, R, true>(&per_sm) : star_resident<REAL, R, false>(&per_sm)));
  const struct layout dl = dev_layout(l);
  constexpr int V = G0::V;
  kstar L;
  L.h0 = dl.lead + l->halo[0];
  L.base = layout_index(&dl, 0, 0, 0) - L.h0;
  L.s1 = dl.stride[1];
  L.ss = dl.stride[2];
  L.mend = (dl.stride[1] + dl.lead) / V; /* (the last row ends lead elements past its stride) */
  L.ylo = -l->halo[1];
  L.yhi = l->n[1] + l->halo[1];
  L.m0 = (b->lo[0] + L.h0) / V;
  const int64_t nvec = (b->hi[0] - 1 + L.h0) / V - L.m0 + 1;
  const int64_t gx = (nvec + 31) / 32, gy = (b->hi[1] - b->lo[1] + by - 1) / by;
  const int64_t nz = b->hi[2] - b->lo[2];
  L.zc = star_chunk(gx * gy, nz, (int64_t)per_sm * c->prop.multiProcessorCount, R);
  const int64_t gz = (nz + L.zc - 1) / L.zc;
  if (gy > 65535 || gz > 65535)
    FAIL(STENCIL_ERR, "block of %lld x %lld x %lld cells is too large for one GPU launch",
         (long long)l->n[0], (long long)l->n[1], (long long)l->n[2]);
  kfaces<REAL> F;
  for (int a = 0; a < 3; a++) {
    L.n[a] = l->n[a];
    L.gh[a] = l->halo[a];
  }
  for (int fc = 0; fc < 6; fc++) {
    const struct face_rule *r = &c->face[fc];
    F.kind[fc] = !r->known ? 0 : r->kind == BC_DIRICHLET ? 1 : 2;
    F.two_g[fc] = (REAL)(2.0 * r->value);
  }
  const dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)gz), block((unsigned)nt, 1, 1);
  return launch_smem(c, f ? update_star<REAL, R, true> : update_star<REAL, R, false>, grid, block,
                     f ? G1::SMEM : G0::SMEM, (const REAL *)u, (const REAL *)f, (REAL *)v, L,
                     make_kbox(b), make_kcoef<REAL>(coef), F);
}

int star_covers_x(const struct layout *l, int radius, int source, const struct box *b, int side)
{
  if (!star_xg(l->elem, radius, source))
    return 0;
  const int64_t v = 16 / l->elem, n = l->n[0], hv = (l->halo[0] + v - 1) / v * v;
  if (!star_x_reach(l->elem, l->halo[0], (int)n))
    return 0;
  return side ? n % v == 0 && b->lo[0] <= n - hv && b->hi[0] >= n : b->lo[0] <= 0 && b->hi[0] >= hv;
}

int star_applies(const struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef)
{
  if (c->opt.tier == 1 || coef->ndim != 3 || coef->radius < 2 || coef->radius > 4)
    return 0;
  for (int a = 0; a < 3; a++)
    if (l->halo[a] < coef->radius)
      return 0;
  return 1;
}

void star_describe(int radius, int elem, int source, char *buf, size_t len)
{
  snprintf(buf, len,
           "tier 2 (radius %d: tiles of %d x %d cells streamed through z, their planes in shared "
           "memory)",
           radius, 32 * 16 / elem, star_warps(elem, radius, source));
}

int cuda_update_star(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                     const void *u, const void *f, void *v, const struct box *b)
{
  const int fp64 = l->elem == 8;
  switch (coef->radius) {
  case 2:
    return fp64 ? run_star_r<double, 2>(c, l, coef, u, f, v, b)
                : run_star_r<float, 2>(c, l, coef, u, f, v, b);
  case 3:
    return fp64 ? run_star_r<double, 3>(c, l, coef, u, f, v, b)
                : run_star_r<float, 3>(c, l, coef, u, f, v, b);
  default:
    return fp64 ? run_star_r<double, 4>(c, l, coef, u, f, v, b)
                : run_star_r<float, 4>(c, l, coef, u, f, v, b);
  }
}
