/* The fused kernel in 3D, host side: plan and launch of the warp-row tile kernel (tile3d.cuh). */
#include "kernels/cuda/cuda_rt.h"

#include <stdio.h>
#include <string.h>

#include "kernels/cuda/fused_model.h"
#include "kernels/cuda/tile3d.cuh"

/* The fastest steps per launch, and planes per CTA without a device to choose them by waves
 * (docs/design/fused-kernels.md, "Steps per launch", "Waves and chunks"). */
static int tile3d_default_steps(int elem, int radius)
{
  (void)elem;
  return TILE3D_STEPS_R(radius);
}
static int tile3d_default_chunk(int elem)
{
  return elem == 8 ? 128 : 64;
}

/* The kernel of a plan at `steps`: the clustered form where the plan has clusters (which
 * includes every plan that spans x); sig: the signalled form (one CTA only, else NULL). */
static const void *tile3d_kernel_of(const struct fused_plan *pl, int steps, int sig = 0)
{
  const int form = pl->cluster[0] * pl->cluster[1] > 1 ? (sig ? -1 : 1) : sig ? 2 : 0;
  return pl->elem == 8 ? tile3d_lookup_f64(steps, pl->radius, form)
                       : tile3d_lookup_f32(steps, pl->radius, form);
}

/* The tile geometry of a launch of T steps on nx x ny cells with clusters of ncx x ncy CTAs
 * (tile3d.cuh's TILE3D_BX, TILE3D_E and TILE3D_RY, which the kernel uses too): rows per
 * thread RY, the columns and rows a cluster stores (x: all BX ncx when xspan, else the
 * BX - 2E of one CTA; y: its 8 RY ncy rows less T at each side), and the dynamic shared
 * memory (TILE3D_NBUF buffers of T levels x 8 warps x 2 rows of BX cells, and with clusters
 * of T levels x 8 warps x 2 x-edge columns of RY; the fp64 ring; one CTA: its mbarrier).
 *
 * One CTA (no clusters): ncol full columns of tiles storing U columns, nyt CTAs each, and where
 * fewer than U columns remain and 2 or more segments of the lanes they need fit in a warp, a
 * narrow column of nyn CTAs whose warps hold 32 / sl segments of sl lanes, their rows stacked
 * (tile3d.cuh): 512 columns in fp32 take 4 full columns and one of 3 x 10 lanes storing 32
 * columns and 88 rows a CTA, 94 CTAs a plane instead of 110. */
struct tile3d_geo {
  int U, RY, rows;
  tile3d_cols cols; /* (with clusters: the columns and rows of clusters' tiles) */
  size_t smem;
};

static tile3d_geo tile3d_geometry(int elem, int T, int r, int ncx, int ncy, int xspan, int64_t nx,
                                  int64_t ny)
{
  tile3d_geo g;
  const int bx = TILE3D_BX(elem), D = T * r;
  g.U = xspan ? bx * ncx : bx - 2 * TILE3D_E(elem, D);
  g.RY = TILE3D_RY;
  g.rows = TILE3D_WARPS * g.RY * ncy - 2 * D;
  const int clu = ncx * ncy > 1;
  g.smem =
      (size_t)TILE3D_NBUF(elem, clu) * T * TILE3D_WARPS * 2 * (r * bx + (clu ? g.RY : 0)) * elem;
  g.smem += TILE3D_RING_BYTES(elem, r) + (clu ? 0 : 16); /* (one CTA: the mbarrier) */
  g.cols = {(int)fm_ceildiv(nx, g.U), (int)fm_ceildiv(ny, g.rows), 0, 0};
  if (!clu)
    g.cols = tile3d_columns(elem, D, nx, ny);
  return g;
}

/* The grid of a launch: x, y (whole clusters; one CTA: x only, the full columns' CTAs, then the
 * narrow column's), z (a first chunk of c0 planes, then of c). */
static dim3 tile3d_grid(const tile3d_geo &g, int64_t nz, int c0, int c, int ncx, int ncy, int xspan)
{
  const unsigned z = (unsigned)(nz <= c0 ? 1 : 1 + fm_ceildiv(nz - c0, c));
  if (ncx * ncy == 1)
    return dim3((unsigned)(g.cols.ncol * g.cols.nyt + g.cols.nyn), 1, z);
  return dim3((unsigned)(xspan ? ncx : g.cols.ncol), (unsigned)(g.cols.nyt * ncy), z);
}

/* (Radius > 1: one kernel, of the T built, runs every launch.) */
static tile3d_geo tile3d_geo_of(const struct fused_plan *pl, int T)
{
  if (pl->radius > 1)
    T = TILE3D_STEPS_R(pl->radius);
  return tile3d_geometry(pl->elem, T, pl->radius, pl->cluster[0], pl->cluster[1], pl->xspan,
                         pl->lay.n[0], pl->lay.n[1]);
}

/* Chunks by tile (fm_tile_chunks) for a launch of the plan's T on nz planes whose chunks are
 * c0, then c: by = {tiles in one chunk, pieces of each other tile, their planes}; by[1] = 0
 * where they model no faster, or for clusters or a chunk chosen by hand. */
static void tile3d_by_tile(const struct fused_plan *pl, int64_t nz, int c0, int c, int by[3])
{
  by[0] = by[1] = by[2] = 0;
  if (pl->cluster[0] * pl->cluster[1] != 1 || !pl->chunk_waves)
    return;
  const int64_t tiles = pl->grid[0] * pl->grid[1], slots = pl->active_clusters;
  const int D = pl->steps * pl->radius; /* (the model's T: the fill of 2 T r planes) */
  fm_tile_chunks(nz, tiles, D, slots, fm_chunks_time(nz, tiles, D, slots, c0, c), &by[0], &by[1],
                 &by[2]);
}

/* The launch configuration of a plan's kernel at T steps on nz planes in chunks of c0, then
 * c planes (cluster dimension in *attr). */
static const void *tile3d_config(const struct fused_plan *pl, int T, int64_t nz, int c0, int c,
                                 cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, int sig = 0)
{
  const tile3d_geo g = tile3d_geo_of(pl, T);
  memset(cfg, 0, sizeof *cfg);
  cfg->gridDim = tile3d_grid(g, nz, c0, c, pl->cluster[0], pl->cluster[1], pl->xspan);
  cfg->blockDim = dim3((unsigned)pl->threads);
  cfg->dynamicSmemBytes = g.smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = (unsigned)pl->cluster[0];
  attr->val.clusterDim.y = (unsigned)pl->cluster[1];
  attr->val.clusterDim.z = 1;
  cfg->attrs = attr;
  cfg->numAttrs = pl->cluster[0] * pl->cluster[1] > 1;
  return tile3d_kernel_of(pl, T, sig);
}

/* 1 when the block suits the kernel: every face a halo face, and every row (its first ghost
 * cell) and interior x = 0 on a 16-byte boundary (device pointers are), so no 16-byte vector
 * straddles two rows. */
int tile3d_usable(const struct layout *l, const struct fused_faces *f)
{
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      if (f->kind[a][s] != FUSED_FACE_HALO)
        return 0;
  const int A = 16 / l->elem;
  return layout_index(l, -l->halo[0], 0, 0) % A == 0 && l->halo[0] % A == 0 &&
         l->stride[1] % A == 0 && l->stride[2] < ((int64_t)1 << 31);
}

/* The attributes a launch of the plan's kernel at T needs (and of its signalled form): its
 * dynamic shared memory, and clusters of more than 8 CTAs. */
static int tile3d_optin(const struct fused_plan *pl, int T)
{
  const tile3d_geo g = tile3d_geo_of(pl, T);
  for (int sig = 0; sig < 2; sig++) {
    const void *k = tile3d_kernel_of(pl, T, sig);
    if (k)
      FM_CHECK_CUDA(
          cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g.smem));
  }
  if (pl->cluster[0] * pl->cluster[1] > 8)
    FM_CHECK_CUDA(cudaFuncSetAttribute(tile3d_kernel_of(pl, T),
                                       cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  return 0;
}

/* CTAs resident on the device for a plan's kernel at T with clusters of pl->cluster (0 if
 * none fit); after tile3d_optin. */
static int tile3d_resident(const struct fused_plan *pl, int T, int *resident)
{
  *resident = 0;
  const int size = pl->cluster[0] * pl->cluster[1];
  const tile3d_geo g = tile3d_geo_of(pl, T);
  const void *k = tile3d_kernel_of(pl, T);
  if (size == 1) {
    int per_sm = 0;
    FM_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, pl->threads, g.smem));
    *resident = per_sm * pl->sms;
    return 0;
  }
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  tile3d_config(pl, T, 1, 1, 1, &cfg, &attr); /* (one plane: the grid does not matter) */
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, k, &cfg) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  *resident = n * size;
  return 0;
}

int tile3d_plan(struct fused_plan *pl, const struct fused_config *want, int tmax_halo, int device)
{
  const struct layout *l = &pl->lay;
  if (!tile3d_usable(l, &pl->faces))
    return fused_fail("the warp-row kernel needs halo faces only (periodic, neighbour ranks or "
                      "homogeneous) and rows and interior rows on 16-byte boundaries");
  if (fused_plan_steps(pl, want, tmax_halo, TILE3D_STEPS_R(pl->radius),
                       tile3d_default_steps(pl->elem, pl->radius)))
    return 1;
  pl->threads = TILE3D_WARPS * 32;
  /* Faces read through (tile3d.cuh): x faces take whole 16-byte vectors, so n along x must
   * be a multiple of one; otherwise every face is read from memory (the caller fills). */
  const int whole = l->n[0] % (16 / pl->elem) == 0 || (pl->faces.read[0][0] == FUSED_READ_MEMORY &&
                                                       pl->faces.read[0][1] == FUSED_READ_MEMORY);
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      if (!whole)
        pl->faces.read[a][s] = FUSED_READ_MEMORY;
      pl->reads_faces |= pl->faces.read[a][s] != FUSED_READ_MEMORY;
    }
  /* Clusters. Along x, the CTAs of a cluster can span the block (n along x = BX ncx, both x
   * faces read through): x edges through DSMEM, the faces applied at every level, no
   * redundant columns. Otherwise one CTA along x. Along y, ncy CTAs exchange their edge rows
   * through DSMEM: redundant rows only at the cluster's sides. */
  const int bx = TILE3D_BX(pl->elem);
  const int span_x = l->n[0] % bx == 0 && l->n[0] / bx <= 8 &&
                     pl->faces.read[0][0] != FUSED_READ_MEMORY &&
                     pl->faces.read[0][1] != FUSED_READ_MEMORY;
  /* Only when asked (--cluster-size): with the cluster barrier the memory model asks for,
   * the clustered form is slower than one CTA (docs/design/fused-kernels.md, "Designs measured
   * and not used"). */
  const int ncx_span = span_x ? (int)(l->n[0] / bx) : 1;
  const int ncx = want->cluster[0] > 0 ? want->cluster[0] : 1;
  const int ncy = want->cluster[1] > 0 ? want->cluster[1] : 1;
  if (ncx != 1 && ncx != ncx_span)
    return fused_fail("--cluster-size %d along x: the warp-row kernel takes 1, or n_x / %d where "
                      "n_x is a multiple of %d (at most %d) and both x faces are read through "
                      "(periodic or homogeneous on a rank that spans x)%s",
                      ncx, bx, bx, 8 * bx, span_x ? "" : "; here only 1");
  if (ncx * ncy > 16)
    return fused_fail("cluster %d x %d: at most 16 CTAs", ncx, ncy);
  if (ncx * ncy > 1 && pl->radius > 1)
    return fused_fail("--cluster-size: the clustered warp-row kernel has radius 1 only");
  pl->cluster[0] = ncx;
  pl->cluster[1] = ncy;
  pl->xspan = span_x && ncx == ncx_span && ncx * ncy > 1;
  const tile3d_geo g = tile3d_geo_of(pl, pl->steps);
  int resident = 0;
  if (device >= 0) {
    FM_CHECK_CUDA(cudaDeviceGetAttribute(&pl->sms, cudaDevAttrMultiProcessorCount, device));
    /* every launch may run fewer steps than the plan: opt in for each T */
    for (int t = 1; t <= pl->steps; t++)
      if (tile3d_optin(pl, t))
        return 1;
    if (tile3d_resident(pl, pl->steps, &resident))
      return 1;
    if (resident < 1)
      return fused_fail("the warp-row kernel for T = %d with clusters of %d x %d CTAs does not "
                        "fit on the device",
                        pl->steps, ncx, ncy);
  }
  pl->active_clusters = resident;
  pl->rows = g.RY;
  pl->tile[0] = g.U;
  pl->tile[1] = g.rows;
  pl->smem_bytes = g.smem;
  const dim3 plane = tile3d_grid(g, 1, 1, 1, ncx, ncy, pl->xspan); /* a chunk's */
  /* The chunks that best fill the waves (fm_wave_chunks: a long first chunk, whose CTAs are
   * dispatched first, and short ones filling the last wave; docs/design/fused-kernels.md,
   * "Waves and chunks"), or the default without a device (tile3d_default_chunk). */
  pl->chunk_waves = want->chunk <= 0 && resident > 0;
  if (pl->chunk_waves)
    fm_wave_chunks(l->n[2], (int64_t)plane.x * plane.y, pl->steps * pl->radius, resident,
                   &pl->chunk0, &pl->chunk);
  else {
    pl->chunk = want->chunk > 0 ? want->chunk : tile3d_default_chunk(pl->elem);
    pl->chunk0 = fm_first_chunk(l->n[2], pl->chunk);
  }
  const dim3 gr = tile3d_grid(g, l->n[2], pl->chunk0, pl->chunk, ncx, ncy, pl->xspan);
  pl->grid[0] = gr.x;
  pl->grid[1] = gr.y;
  pl->grid[2] = gr.z;
  if (pl->grid[1] > 65535 || pl->grid[2] > 65535)
    return fused_fail("grid %lld x %lld x %lld CTAs is too large; use a larger chunk",
                      (long long)pl->grid[0], (long long)pl->grid[1], (long long)pl->grid[2]);
  tile3d_by_tile(pl, l->n[2], pl->chunk0, pl->chunk, pl->by_tile);
  pl->seg_lanes = g.cols.sl;
  return 0;
}

/* faces, sig: a whole launch's signals (tile3d_launch_signal), *count what they add; 0, NULL:
 * none. */
template <typename REAL>
static int tile3d_launch_t(const struct fused_plan *pl, const void *u, void *v, int steps,
                           int64_t z0, int64_t z1, int faces, unsigned *sig, unsigned *count,
                           void *stream)
{
  const struct layout *l = &pl->lay;
  tile3d_params<REAL> p;
  memset(&p, 0, sizeof p);
  const int64_t origin = layout_index(l, 0, 0, z0);
  p.u = (const REAL *)u + origin;
  p.v = (REAL *)v + origin;
  p.nx = (int)l->n[0];
  p.ny = (int)l->n[1];
  p.nz = (int)(z1 - z0);
  p.hy = l->halo[1];
  p.zlo = (int)(-l->halo[2] - z0);
  p.zhi = (int)(l->n[2] + l->halo[2] - 1 - z0);
  p.sy = l->stride[1];
  p.sz = l->stride[2];
  p.xlo = -l->halo[0]; /* the loads' clamp: the row's vectors (tile3d_usable: rows aligned) */
  p.xhi = p.sy - l->halo[0] - 16 / (int64_t)sizeof(REAL);
  int c0; /* the plan's chunks, or a range's (a launch in parts) */
  fm_range_chunks(l->n[2], pl->chunk0, pl->chunk, pl->chunk_waves, pl->grid[0] * pl->grid[1],
                  pl->steps * pl->radius, pl->active_clusters, p.nz, &c0, &p.chunk);
  int by[3] = {0, 0, 0}; /* chunks by tile (whole launches: the plan's), the pieces in p.chunk */
  if (!sig && steps == pl->steps) {
    if (p.nz == l->n[2])
      memcpy(by, pl->by_tile, sizeof by);
    else
      tile3d_by_tile(pl, p.nz, c0, p.chunk, by);
    if (by[1])
      p.chunk = by[2];
  }
  memcpy(p.rd, pl->faces.read, sizeof p.rd);
  if (z0 > 0) /* the planes below are the block's own */
    p.rd[2][0] = FUSED_READ_MEMORY;
  if (z1 < l->n[2])
    p.rd[2][1] = FUSED_READ_MEMORY;
  p.ncx = pl->cluster[0];
  p.ncy = pl->cluster[1];
  p.xspan = pl->xspan;
  p.c0 = (REAL)pl->coef.c0;
  p.cx = (REAL)pl->coef.c[0][0];
  p.cy = (REAL)pl->coef.c[1][0];
  p.cz = (REAL)pl->coef.c[2][0];
  p.steps = steps;
  tile3d_coef<REAL> cf;
  cf.c0 = (REAL)pl->coef.c0;
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      cf.c[a][m] = (REAL)pl->coef.c[a][m];
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  const void *k = tile3d_config(pl, steps, p.nz, c0, p.chunk, &cfg, &attr, sig != NULL);
  if (!k)
    return fused_fail("no warp-row kernel for T = %d", steps);
  if (by[1]) /* the tiles of all planes, then the others' pieces, along x */
    cfg.gridDim = dim3((unsigned)(by[0] + ((int64_t)cfg.gridDim.x - by[0]) * by[1]), 1, 1);
  tile3d_sig sg;
  sg.sig = sig;
  sg.hi = (faces & 2) != 0;
  sg.whole = by[0];
  sg.pieces = by[1];
  /* the first chunk's planes [0, h) stored (one chunk sending at both faces: at its end) */
  const unsigned chunks = cfg.gridDim.z;
  sg.lo = faces & 1 && !(sg.hi && chunks == 1) ? (int)fm_iterations(l->halo[2], steps) : 0;
  /* one per warp of a plane of CTAs for each of the two signals set (the tiles of a plane are
   * this T's: the plan's T may store narrower tiles, more of them) */
  if (count)
    *count = cfg.gridDim.x * cfg.gridDim.y * (unsigned)(pl->threads / 32) *
             (unsigned)((sg.lo != 0) + sg.hi);
  cfg.stream = (cudaStream_t)stream;
  void *args[] = {&p, &sg, &cf};
  FM_CHECK_CUDA(cudaLaunchKernelExC(&cfg, k, args));
  FM_CHECK_CUDA(cudaGetLastError());
  return 0;
}

int tile3d_launch(const struct fused_plan *pl, const void *u, void *v, int steps, int64_t z0,
                  int64_t z1, void *stream)
{
  if (steps < 1 || steps > pl->steps)
    return fused_fail("launch of %d steps with a plan of %d", steps, pl->steps);
  if (z0 < 0 || z1 > pl->lay.n[2] || z0 >= z1 ||
      ((z0 > 0 || z1 < pl->lay.n[2]) &&
       (pl->faces.read[2][0] == FUSED_READ_WRAP || pl->faces.read[2][1] == FUSED_READ_WRAP)))
    return fused_fail("planes [%lld, %lld) of a block of %lld planes: not a range of them, or the "
                      "block wraps along z (then all of them only)",
                      (long long)z0, (long long)z1, (long long)pl->lay.n[2]);
  return pl->elem == 8 ? tile3d_launch_t<double>(pl, u, v, steps, z0, z1, 0, NULL, NULL, stream)
                       : tile3d_launch_t<float>(pl, u, v, steps, z0, z1, 0, NULL, NULL, stream);
}

int tile3d_signals(const struct fused_plan *pl, int faces)
{
  /* one CTA (the signalled form); the first chunk's signal at most its iterations:
   * fm_iterations(h, T) <= h + 2 + 2T */
  const int64_t n = pl->lay.n[2], h = pl->lay.halo[2], chunks = pl->grid[2];
  const int64_t first = n - (chunks - 1) * pl->chunk;
  if (pl->cluster[0] * pl->cluster[1] != 1 || pl->radius != 1 || first < h + 2 ||
      (chunks > 1 && pl->chunk < h))
    return 0;
  /* the dispatch model: the sent planes stored within TILE3D_SIGNAL_BY of the launch */
  int64_t lo, hi;
  const int64_t end = fm_signal_times(n, pl->grid[0] * pl->grid[1], pl->steps, pl->active_clusters,
                                      first, pl->chunk, fm_iterations(h, pl->steps), &lo, &hi);
  return (!(faces & 1) || lo <= TILE3D_SIGNAL_BY * end) &&
         (!(faces & 2) || hi <= TILE3D_SIGNAL_BY * end);
}

int tile3d_launch_signal(const struct fused_plan *pl, const void *u, void *v, int steps, int faces,
                         unsigned *sig, unsigned *count, void *stream)
{
  if (steps < 1 || steps > pl->steps || !faces || (faces & ~3) || !sig)
    return fused_fail("a signalled launch of %d steps (plan: %d), faces %d", steps, pl->steps,
                      faces);
  const int64_t nz = pl->lay.n[2];
  return pl->elem == 8 ? tile3d_launch_t<double>(pl, u, v, steps, 0, nz, faces, sig, count, stream)
                       : tile3d_launch_t<float>(pl, u, v, steps, 0, nz, faces, sig, count, stream);
}

int tile3d_attributes(const struct fused_plan *pl, int steps, int *regs, int *local_bytes)
{
  const void *k = tile3d_kernel_of(pl, steps);
  if (!k)
    return fused_fail("no warp-row kernel for T = %d", steps);
  cudaFuncAttributes a;
  FM_CHECK_CUDA(cudaFuncGetAttributes(&a, k));
  *regs = a.numRegs;
  *local_bytes = (int)a.localSizeBytes;
  return 0;
}
