/* The fused kernel in 3D, host side: plan and launch of the warp-row tile kernel (tile3d.cuh). */
#include "kernels/cuda/cuda_rt.h"

#include <stdio.h>
#include <string.h>

#include "kernels/cuda/fused_model.h"
#include "kernels/cuda/tile3d.cuh"

/* Planes per CTA without a device to choose them by waves (docs/design/fused-kernels.md,
 * "Waves and chunks"). */
static int tile3d_default_chunk(int elem)
{
  return elem == 8 ? 128 : 64;
}

/* 1 when the plan's kernel applies reflecting faces at every level (a face that is not a halo
 * face; tile3d.cuh's forms 3..5): radius 1, and radius 2 without a source where n along x is
 * whole 16-byte vectors (the other tiles read the homogeneous faces through). */
static int tile3d_faces_form(const struct fused_plan *pl)
{
  int faces = 0;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      faces |= pl->faces.kind[a][s] != FUSED_FACE_HALO;
  return faces && (pl->radius == 1 ||
                   (pl->radius == 2 && !pl->has_source && pl->lay.n[0] % (16 / pl->elem) == 0));
}

/* The T of the kernel a launch of `steps` steps runs (res: with residual sums): the forms that
 * run any K <= T (radius > 1, faces applied at every level, a source term) are built for one T,
 * the others for each. */
static int tile3d_built(const struct fused_plan *pl, int steps, int res = 0)
{
  if (pl->radius > 1 || tile3d_faces_form(pl))
    return TILE3D_STEPS_R(pl->radius);
  return !pl->has_source                    ? steps
         : res || steps <= TILE3D_RES_STEPS ? TILE3D_RES_STEPS
                                            : TILE3D_SRC_STEPS;
}

/* The kernel's T where it sums residuals: the form with faces any K <= its T, the forms that
 * read the faces through TILE3D_RES_STEPS at radius 1 (ranks whose blocks plan different forms
 * take the fewest of theirs: the driver agrees it). */
int tile3d_residual_steps(const struct fused_plan *pl)
{
  const int most = tile3d_built(pl, pl->steps, 1);
  return pl->steps < most ? pl->steps : most;
}

/* 1 where a launch of `steps` steps (res: with residual sums; xy: the face tiles' kernel;
 * faces: the form with faces on every tile) of a plan with faces runs the halo faces' kernels
 * (tile3d_face_tiles): the plain form's on the other and the face tiles, or with a source the
 * source's (form 6) on the other tiles beside the form with faces on the face tiles. */
static int tile3d_lean(const struct fused_plan *pl, int steps, int res, int xy, int faces)
{
  return tile3d_faces_form(pl) && pl->lean && steps == TILE3D_STEPS_R(pl->radius) && !res &&
         !faces && !(xy && pl->has_source);
}

/* The kernel of a plan at `steps`: the clustered form where the plan has clusters (which
 * includes every plan that spans x); sig: the signalled form (one CTA only, else NULL); the
 * form with faces (and its source and residual sums, res) where the plan has them (faces: even
 * where the plan's launches of the T built run the halo faces' kernels, tile3d_lean), xy: its
 * face tiles' kernel; with a source and halo faces forms 6 and 7. */
static const void *tile3d_kernel_of(const struct fused_plan *pl, int steps, int sig = 0,
                                    int res = 0, int xy = 0, int faces = 0)
{
  int form = pl->cluster[0] * pl->cluster[1] > 1 ? (sig ? -1 : TILE3D_CLU)
             : sig                               ? TILE3D_SIG
                                                 : TILE3D_ONE;
  if (tile3d_lean(pl, steps, res, xy, faces))
    form = sig ? -1 : pl->has_source ? TILE3D_HALO_SRC : TILE3D_ONE;
  else if (tile3d_faces_form(pl))
    form = sig ? -1 : res ? TILE3D_FACE_RES : pl->has_source ? TILE3D_FACE_SRC : TILE3D_FACE;
  else if (pl->has_source) {
    form = sig ? -1 : res ? TILE3D_HALO_RES : TILE3D_HALO_SRC;
    steps = tile3d_built(pl, steps, res);
  }
  if (xy) /* (the plain form's face tiles at x faces only: radius 1's kernel without the y
             faces' code) */
    xy = form == TILE3D_ONE && pl->radius == 1 && !(pl->face_tiles & 12) ? TILE3D_XY_X : TILE3D_XY;
  return pl->elem == 8 ? tile3d_lookup_f64(steps, pl->radius, form, xy)
                       : tile3d_lookup_f32(steps, pl->radius, form, xy);
}

/* The tile geometry of a launch of T steps on nx x ny cells with clusters of ncy CTAs along y
 * (tile3d.cuh's TILE3D_BX, TILE3D_E and TILE3D_RY, which the kernel uses too): rows per
 * thread RY, the columns and rows a cluster stores (x: the BX - 2E of one CTA; y: its 8 RY ncy
 * rows less T at each side), and the dynamic shared memory (TILE3D_NBUF buffers of T levels x
 * 8 warps (with clusters 9: the rows handed from the CTAs below and above) x 2 rows of BX
 * cells; the ring (res: of the kernel with residual sums); the mbarriers; one CTA with a
 * source (src 1 with the faces applied, 2 with halo faces) the source's ring).
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

static tile3d_geo tile3d_geometry(int elem, int T, int r, int ncy, int64_t nx, int64_t ny, int src,
                                  int res)
{
  tile3d_geo g;
  const int bx = TILE3D_BX(elem), D = T * r;
  g.U = bx - 2 * TILE3D_E(elem, D);
  g.RY = TILE3D_RY;
  g.rows = TILE3D_WARPS * g.RY * ncy - 2 * D;
  const int clu = ncy > 1;
  const int hs = src == 2 && !clu;
  g.smem = (size_t)TILE3D_NBUF(elem, hs, res, T) * T * (TILE3D_WARPS + clu) * 2 * r * bx * elem;
  g.smem += TILE3D_RING_BYTES(elem, r, hs, res, T) + TILE3D_BARS_BYTES(elem, clu);
  g.smem += src && !clu ? TILE3D_FRING_BYTES(elem, r, hs) : 0; /* (the source's ring) */
  g.cols = {(int)fm_ceildiv(nx, g.U), (int)fm_ceildiv(ny, g.rows), 0, 0};
  if (!clu)
    g.cols = tile3d_columns(elem, D, nx, ny);
  return g;
}

/* The grid of a launch: x, y (whole clusters; one CTA: x only, the full columns' CTAs, then the
 * narrow column's), z (a first chunk of c0 planes, then of c). */
static dim3 tile3d_grid(const tile3d_geo &g, int64_t nz, int c0, int c, int ncy)
{
  const unsigned z = (unsigned)(nz <= c0 ? 1 : 1 + fm_ceildiv(nz - c0, c));
  if (ncy == 1)
    return dim3((unsigned)(g.cols.ncol * g.cols.nyt + g.cols.nyn), 1, z);
  return dim3((unsigned)g.cols.ncol, (unsigned)(g.cols.nyt * ncy), z);
}

/* (the geometry of tile3d_kernel_of's kernel at T, tile3d_built) */
static tile3d_geo tile3d_geo_of(const struct fused_plan *pl, int T, int res = 0, int xy = 0,
                                int faces = 0)
{
  const int src = !pl->has_source                                                ? 0
                  : tile3d_faces_form(pl) && !tile3d_lean(pl, T, res, xy, faces) ? 1
                                                                                 : 2;
  T = tile3d_built(pl, T, res);
  return tile3d_geometry(pl->elem, T, pl->radius, pl->cluster[1], pl->lay.n[0], pl->lay.n[1], src,
                         res);
}

/* Chunks by tile (fm_tile_chunks) for whole launches of T steps of `tiles` tiles a plane with
 * `slots` resident on nz planes whose chunks are c0, then c: by = {tiles in one chunk, pieces
 * of each other tile, their planes}; by[1] = 0 where they model no faster, or for clusters or
 * a chunk chosen by hand. */
static void tile3d_by_tile(const struct fused_plan *pl, int64_t tiles, int slots, int T, int64_t nz,
                           int c0, int c, int by[3])
{
  by[0] = by[1] = by[2] = 0;
  if (pl->cluster[0] * pl->cluster[1] != 1 || !pl->chunk_waves)
    return;
  const int D = T * pl->radius; /* (the model's T: the fill of 2 T r planes) */
  fm_tile_chunks(nz, tiles, D, slots, fm_chunks_time(nz, tiles, D, slots, c0, c), &by[0], &by[1],
                 &by[2]);
}

/* The launch configuration of a plan's kernel at T steps on nz planes in chunks of c0, then
 * c planes (cluster dimension in *attr). */
static const void *tile3d_config(const struct fused_plan *pl, int T, int64_t nz, int c0, int c,
                                 cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, int sig = 0,
                                 int res = 0, int faces = 0)
{
  const tile3d_geo g = tile3d_geo_of(pl, T, res, 0, faces);
  memset(cfg, 0, sizeof *cfg);
  cfg->gridDim = tile3d_grid(g, nz, c0, c, pl->cluster[1]);
  cfg->blockDim = dim3((unsigned)pl->threads);
  cfg->dynamicSmemBytes = g.smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = (unsigned)pl->cluster[0];
  attr->val.clusterDim.y = (unsigned)pl->cluster[1];
  attr->val.clusterDim.z = 1;
  cfg->attrs = attr;
  cfg->numAttrs = pl->cluster[0] * pl->cluster[1] > 1;
  return tile3d_kernel_of(pl, T, sig, res, 0, faces);
}

/* 1 when the block suits the kernel: every row (its first ghost cell) and interior x = 0 on a
 * 16-byte boundary (device pointers are), so no 16-byte vector straddles two rows. */
int tile3d_usable(const struct layout *l)
{
  const int A = 16 / l->elem;
  return layout_index(l, -l->halo[0], 0, 0) % A == 0 && l->halo[0] % A == 0 &&
         l->stride[1] % A == 0 && l->stride[2] < ((int64_t)1 << 31);
}

/* The attributes a launch of the plan's kernel at T needs (and of its signalled form): its
 * dynamic shared memory, and clusters of more than 8 CTAs. */
static int tile3d_optin(const struct fused_plan *pl, int T)
{
  for (int form = 0; form < 16; form++) { /* (sig, res, xy, faces: every kernel a launch takes) */
    const int res = form >> 1 & 1, xy = form >> 2 & 1, faces = form >> 3;
    const void *k = tile3d_kernel_of(pl, T, form & 1, res, xy, faces);
    if (k)
      FM_CHECK_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)tile3d_geo_of(pl, T, res, xy, faces).smem));
  }
  if (pl->cluster[0] * pl->cluster[1] > 8)
    FM_CHECK_CUDA(cudaFuncSetAttribute(tile3d_kernel_of(pl, T),
                                       cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  return 0;
}

/* CTAs resident on the device for a plan's kernel at T (res: with residual sums) with clusters
 * of pl->cluster (0 if none fit); after tile3d_optin. */
static int tile3d_resident(const struct fused_plan *pl, int T, int *resident, int res = 0)
{
  *resident = 0;
  const int size = pl->cluster[0] * pl->cluster[1];
  const tile3d_geo g = tile3d_geo_of(pl, T, res);
  const void *k = tile3d_kernel_of(pl, T, 0, res);
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

/* The forms with faces (radius 1): which x and y faces' tiles run the face tiles' kernel
 * (tile3d.cuh), and whether the other tiles run the halo faces' kernel, reading the
 * homogeneous faces through (lean). Where the faces can be read through (`whole`) and, with a
 * source, the source's kernel is built for the T of the form with faces (fp32), only the x and
 * y Dirichlet faces of nonzero value are the face tiles', and the other tiles read the
 * homogeneous faces through: without a source the plain kernel, whose face tiles' form reads
 * them through too (with the images' signs) and applies the faces of nonzero value; with a
 * source the source's kernel (form 6, f read through as u), whose face tiles run the form with
 * faces, applying every reflecting face at every level and reading none through (a tile that
 * meets a face of nonzero value must apply every reflecting face so: reading one through
 * mirrors the field, which the face of nonzero value breaks in the ghosts beyond the other). A
 * z face of nonzero value, which reaches every tile, is applied by the form with faces on
 * every tile in the planes next to it, and the other planes run the lean kernels
 * (tile3d_zwalls). Otherwise the face tiles are those of every reflecting x or y face, and the
 * others run the lean loop of the form with faces, with the z faces in it, reading no face
 * through. */
static void tile3d_face_tiles(struct fused_plan *pl, int whole)
{
  const struct fused_faces *f = &pl->faces;
  pl->lean = whole;
  pl->face_tiles = 0;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      const int k = f->kind[a][s];
      if (k == FUSED_FACE_HALO) {
        if (!pl->lean)
          pl->faces.read[a][s] = FUSED_READ_MEMORY; /* (wraps) */
        continue;
      }
      const int inhomogeneous = k == FUSED_FACE_DIRICHLET && f->value[a][s] != 0.0;
      if (a < 2 && (!pl->lean || inhomogeneous))
        pl->face_tiles |= 1 << (2 * a + s);
      else if (pl->lean && !inhomogeneous) /* the halo faces' kernel reads it through */
        pl->faces.read[a][s] =
            k == FUSED_FACE_DIRICHLET ? FUSED_READ_MIRROR_NEG : FUSED_READ_MIRROR;
    }
}

/* The face tiles' kernel's grid in a launch of the T built on nz planes, and its chunk: the
 * face tiles' CTAs are slower and run after the other kernel's (dispatched first, they fill
 * every multiprocessor to the end), so their chunks are as short as one round of them on the
 * resident slots allows (at least 4 T r planes, at most the plan's short chunks) to keep that
 * tail short; the grid spans the tiles [b0, b1) that hold them (tile3d_face_span). */
static dim3 tile3d_face_grid(const struct fused_plan *pl, int nz, int *chunk)
{
  const int per = pl->active_clusters / pl->face_ctas;
  const int64_t c = fm_min(pl->chunk, nz), round = per > 1 ? fm_ceildiv(nz, per) : c;
  *chunk = (int)fm_min(c, fm_max(round, 4 * pl->steps * pl->radius));
  return dim3((unsigned)(pl->face_span[1] - pl->face_span[0]), 1, (unsigned)fm_ceildiv(nz, *chunk));
}

/* tile3d_params' xfull in geometry g: the narrow column's columns where it goes first. */
static int tile3d_xfull(const struct fused_plan *pl, const tile3d_geo &g)
{
  return tile3d_narrow_first(pl) && g.cols.nyn ? (int)pl->lay.n[0] - g.cols.ncol * g.U : 0;
}

/* The face tiles of the plan's T (one CTA): their count and the range [b0, b1) of tiles
 * (tile3d_kernel's CTA order) holding them, by the kernel's mapping and test. */
static void tile3d_face_span(struct fused_plan *pl, const tile3d_geo &g)
{
  const tile3d_cols &c = g.cols;
  const int V = 16 / pl->elem, D = pl->steps * pl->radius, E = TILE3D_E(pl->elem, D);
  const int xfull = tile3d_xfull(pl, g);
  pl->face_ctas = 0;
  pl->face_span[0] = c.ncol * c.nyt + c.nyn;
  pl->face_span[1] = 0;
  for (int b = 0; b < c.ncol * c.nyt + c.nyn; b++) {
    const tile3d_at at = tile3d_tile(c, b, g.U, xfull);
    const int by = TILE3D_WARPS * (32 / at.sl) * TILE3D_RY;
    const int x0 = at.tx * g.U + at.xs - E, y0 = at.ty * (by - 2 * D) - D;
    if (tile3d_meets(pl->face_tiles, pl->radius, x0, x0 + V * at.sl, y0, y0 + by, (int)pl->lay.n[0],
                     (int)pl->lay.n[1])) {
      pl->face_ctas++;
      pl->face_span[0] = b < pl->face_span[0] ? b : pl->face_span[0];
      pl->face_span[1] = b + 1;
    }
  }
}

/* The waves of whole launches of a kernel at T of geometry g with `resident` CTAs resident:
 * the chunks that best fill them (fm_wave_chunks: a long first chunk, whose CTAs are
 * dispatched first, and short ones filling the last wave; docs/design/fused-kernels.md, "Waves
 * and chunks"), the chunks by tile, and the CTAs of a launch. */
static void tile3d_waves(const struct fused_plan *pl, const tile3d_geo &g, int T, int resident,
                         struct fused_waves *w)
{
  const int64_t nz = pl->lay.n[2];
  const dim3 plane = tile3d_grid(g, 1, 1, 1, pl->cluster[1]); /* a chunk's */
  w->steps = T;
  w->active = resident;
  w->tiles = (int64_t)plane.x * plane.y;
  fm_wave_chunks(nz, w->tiles, T * pl->radius, resident, &w->chunk0, &w->chunk);
  tile3d_by_tile(pl, w->tiles, resident, T, nz, w->chunk0, w->chunk, w->by_tile);
  const int64_t z = tile3d_grid(g, nz, w->chunk0, w->chunk, pl->cluster[1]).z;
  w->ctas = w->tiles * (z > w->by_tile[1] ? z : w->by_tile[1]);
}

/* The waves of launches on a kernel built for fewer steps than the plan's (a source with halo
 * faces: fp32 plans of T = 4 run residual sums and launches of up to TILE3D_RES_STEPS on the
 * register queue at that T, whose tiles and residency differ). */
static int tile3d_short_waves(struct fused_plan *pl, int device)
{
  struct fused_waves *w = &pl->waves_short;
  memset(w, 0, sizeof *w);
  if (!pl->has_source || !pl->chunk_waves || tile3d_faces_form(pl) || device < 0)
    return 0;
  const int T = tile3d_residual_steps(pl);
  if (tile3d_built(pl, T, 1) == tile3d_built(pl, pl->steps))
    return 0; /* (the plan's kernel) */
  int resident = 0;
  if (tile3d_resident(pl, T, &resident, 1))
    return 1;
  if (resident < 1)
    return fused_fail("the warp-row kernel with residual sums for T = %d does not fit on the "
                      "device",
                      T);
  tile3d_waves(pl, tile3d_geo_of(pl, T, 1), T, resident, w);
  return 0;
}

int tile3d_plan(struct fused_plan *pl, const struct fused_config *want, int tmax_halo, int device)
{
  const struct layout *l = &pl->lay;
  if (!tile3d_usable(l))
    return fused_fail("the warp-row kernel needs rows and interior rows on 16-byte boundaries");
  /* Radius > 1 but in the form with faces (tile3d_faces_form) applies no face: a reflecting
   * face that is not mirrored (a Dirichlet face of nonzero value; with a source, any where n
   * along x is not whole vectors: fused_mirrors) has its ghosts from memory, which the caller
   * fills between launches of one step (fused_default_steps). */
  int from_memory = 0, valued = 0;
  for (int a = 0; a < 3 && pl->radius > 1 && !tile3d_faces_form(pl); a++)
    for (int s = 0; s < 2; s++)
      if (pl->faces.kind[a][s] != FUSED_FACE_HALO) {
        valued |= pl->faces.kind[a][s] == FUSED_FACE_DIRICHLET && pl->faces.value[a][s] != 0.0;
        pl->faces.kind[a][s] = FUSED_FACE_HALO;
        pl->faces.read[a][s] = FUSED_READ_MEMORY;
        from_memory = 1;
      }
  if (from_memory && (want->steps > 1 || tmax_halo < 1))
    return fused_fail("radius %d with %s: one step per launch", pl->radius,
                      !valued ? "a source term where n along x is not whole 16-byte vectors"
                      : pl->radius > 2 ? "a Dirichlet face of nonzero value"
                      : pl->has_source ? "a Dirichlet face of nonzero value and a source term"
                                       : "a Dirichlet face of nonzero value where n along x is "
                                         "not whole 16-byte vectors");
  if (from_memory)
    tmax_halo = 1;
  const int built = tile3d_built(pl, TILE3D_STEPS_R(pl->radius));
  /* (fp32 clusters: docs/design/fused-kernels.md, "The clustered form") */
  const int best = FUSED_CLUSTER_STEPS(pl->elem, want->cluster[1], built);
  if (fused_plan_steps(pl, want, tmax_halo, built, best))
    return 1;
  pl->threads = TILE3D_WARPS * 32;
  /* Faces read through (tile3d.cuh): x faces take whole 16-byte vectors, so n along x must
   * be a multiple of one; otherwise every face is read from memory (the caller fills). With a
   * source the wraps are copied (the exchange keeps their ghosts valid for the Poisson
   * residual; fused_run.cu fills the mirrored faces' ghosts before it). */
  const int whole = l->n[0] % (16 / pl->elem) == 0 || (pl->faces.read[0][0] == FUSED_READ_MEMORY &&
                                                       pl->faces.read[0][1] == FUSED_READ_MEMORY);
  if (tile3d_faces_form(pl)) /* (x faces read through need whole vectors) */
    tile3d_face_tiles(pl, l->n[0] % (16 / pl->elem) == 0);
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      if (!whole || (pl->has_source && pl->faces.read[a][s] == FUSED_READ_WRAP))
        pl->faces.read[a][s] = FUSED_READ_MEMORY;
      pl->reads_faces |= pl->faces.read[a][s] != FUSED_READ_MEMORY;
    }
  /* Clusters (--cluster-size): ncy CTAs along y hand each other their edge rows through
   * DSMEM, so only the cluster's sides compute redundant rows. Only when asked: one CTA per
   * tile measures faster (docs/design/fused-kernels.md, "Designs measured and not used"). */
  const int ncx = want->cluster[0] > 0 ? want->cluster[0] : 1;
  const int ncy = want->cluster[1] > 0 ? want->cluster[1] : 1;
  if (ncx != 1)
    return fused_fail("--cluster-size %dx%d: the warp-row kernel's clusters stack their tiles "
                      "along y (1xN)",
                      ncx, ncy);
  if (ncy > 1 && (tile3d_faces_form(pl) || pl->has_source))
    return fused_fail("--cluster-size: the clustered warp-row kernel takes halo faces only (no "
                      "Dirichlet face of a nonzero value, no source term)");
  if (ncy > 16)
    return fused_fail("cluster 1 x %d: at most 16 CTAs", ncy);
  if (ncy > 1 && pl->radius > 1)
    return fused_fail("--cluster-size: the clustered warp-row kernel has radius 1 only");
  pl->cluster[0] = 1;
  pl->cluster[1] = ncy;
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
      return fused_fail("the warp-row kernel for T = %d with clusters of 1 x %d CTAs does not "
                        "fit on the device",
                        pl->steps, ncy);
  }
  pl->active_clusters = resident;
  pl->rows = g.RY;
  pl->tile[0] = g.U;
  pl->tile[1] = g.rows;
  pl->smem_bytes = g.smem;
  /* The chunks that best fill the waves, or the default without a device
   * (tile3d_default_chunk) or as asked */
  pl->chunk_waves = want->chunk <= 0 && resident > 0;
  if (pl->chunk_waves) {
    struct fused_waves w;
    tile3d_waves(pl, g, pl->steps, resident, &w);
    pl->chunk0 = w.chunk0;
    pl->chunk = w.chunk;
    memcpy(pl->by_tile, w.by_tile, sizeof pl->by_tile);
  } else {
    pl->chunk = want->chunk > 0 ? want->chunk : tile3d_default_chunk(pl->elem);
    pl->chunk0 = fm_first_chunk(l->n[2], pl->chunk);
  }
  const dim3 gr = tile3d_grid(g, l->n[2], pl->chunk0, pl->chunk, ncy);
  pl->grid[0] = gr.x;
  pl->grid[1] = gr.y;
  pl->grid[2] = gr.z;
  if (pl->grid[1] > 65535 || pl->grid[2] > 65535)
    return fused_fail("grid %lld x %lld x %lld CTAs is too large; use a larger chunk",
                      (long long)pl->grid[0], (long long)pl->grid[1], (long long)pl->grid[2]);
  if (tile3d_short_waves(pl, device))
    return 1;
  pl->seg_lanes = g.cols.sl;
  if (tile3d_faces_form(pl) && pl->steps == TILE3D_STEPS_R(pl->radius))
    tile3d_face_span(pl, g);
  return 0;
}

/* What a launch adds to the plan's: the source field f (NULL: none), the residual sums of
 * the fields in rmask into part (tile3d_ext; NULL: none), and a whole launch's signals
 * (tile3d_launch_signal: the faces whose planes it signals, the counter sig, *count what they
 * add; 0, NULL: none). */
struct tile3d_extra {
  const void *f;
  unsigned rmask;
  double *part;
  int faces;
  unsigned *sig, *count;
  int64_t *ctas;   /* the CTAs launched (NULL: not asked) */
  int tiles, edge; /* a launch in parts by tile (tile3d_launch): x and y faces, which part */
  int zfaces;      /* 1: the form with faces on every tile (the planes next to a z wall) */
};

/* The sides of planes [z0, z1) that are z faces of nonzero value in a plan whose launches of
 * the T built run the halo faces' kernels (bit 0: z0 = 0, bit 1: z1 = n_z): the planes within
 * TILE3D_ZWALL of such a face run the form with faces on every tile, the others the halo
 * faces' kernels (which read the homogeneous faces through and never reach the wall's ghosts).
 * Not in launches with residual sums, which run the form with faces on every tile. */
#define TILE3D_ZWALL(T, r) ((T) * (r))
static int tile3d_zwalls(const struct fused_plan *pl, int steps, int64_t z0, int64_t z1)
{
  const int w = steps == TILE3D_STEPS_R(pl->radius) ? tile3d_zwall_faces(pl) : 0;
  return (w & 1 && z0 == 0) | (w & 2 && z1 == pl->lay.n[2]) << 1;
}

template <typename REAL>
static int tile3d_launch_t(const struct fused_plan *pl, const void *u, void *v, int steps,
                           int64_t z0, int64_t z1, const tile3d_extra &x, void *stream)
{
  const int zw = x.zfaces || x.part ? 0 : tile3d_zwalls(pl, steps, z0, z1);
  if (zw) { /* the planes next to the z walls beside the others, on the side stream */
    tile3d_extra xz = x;
    xz.zfaces = 1;
    const int64_t d = TILE3D_ZWALL(steps, pl->radius), b0 = zw & 1 ? z0 + d : z0,
                  b1 = zw & 2 ? z1 - d : z1;
    if (b1 - b0 < steps) /* (the others' and the walls' planes each read only the interior) */
      return tile3d_launch_t<REAL>(pl, u, v, steps, z0, z1, xz, stream);
    cudaStream_t side;
    if (fm_fork((cudaStream_t)stream, &side) ||
        tile3d_launch_t<REAL>(pl, u, v, steps, b0, b1, x, stream) ||
        (b0 > z0 && tile3d_launch_t<REAL>(pl, u, v, steps, z0, b0, xz, side)) ||
        (b1 < z1 && tile3d_launch_t<REAL>(pl, u, v, steps, b1, z1, xz, side)))
      return 1;
    return fm_join((cudaStream_t)stream);
  }
  const int faces = x.faces, res = x.part != NULL;
  unsigned *sig = x.sig, *count = x.count;
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
  /* the waves of the plan's kernel, or of the shorter one's (tile3d_short_waves) */
  const struct fused_waves own = {pl->steps,
                                  pl->chunk0,
                                  pl->chunk,
                                  {pl->by_tile[0], pl->by_tile[1], pl->by_tile[2]},
                                  pl->active_clusters,
                                  pl->grid[0] * pl->grid[1],
                                  0};
  const struct fused_waves &w =
      pl->waves_short.steps && tile3d_built(pl, steps, res) == pl->waves_short.steps
          ? pl->waves_short
          : own;
  int c0; /* the plan's chunks, or a range's (a launch in parts) */
  fm_range_chunks(l->n[2], w.chunk0, w.chunk, pl->chunk_waves, w.tiles, w.steps * pl->radius,
                  w.active, p.nz, &c0, &p.chunk);
  int by[3] = {0, 0, 0}; /* chunks by tile (whole launches of w's T), the pieces in p.chunk */
  if (!sig && steps == w.steps) {
    if (p.nz == l->n[2])
      memcpy(by, w.by_tile, sizeof by);
    else
      tile3d_by_tile(pl, w.tiles, w.active, w.steps, p.nz, c0, p.chunk, by);
    if (by[1])
      p.chunk = by[2];
  }
  memcpy(p.rd, pl->faces.read, sizeof p.rd);
  if (z0 > 0) /* the planes below are the block's own */
    p.rd[2][0] = FUSED_READ_MEMORY;
  if (z1 < l->n[2])
    p.rd[2][1] = FUSED_READ_MEMORY;
  p.ncy = pl->cluster[1];
  p.xfull = tile3d_xfull(pl, tile3d_geo_of(pl, steps, res)); /* (this launch's T) */
  p.c0 = (REAL)pl->coef.c0;
  p.cx = (REAL)pl->coef.c[0][0];
  p.cy = (REAL)pl->coef.c[1][0];
  p.cz = (REAL)pl->coef.c[2][0];
  p.steps = steps;
  tile3d_ext<REAL> ex;
  memset(&ex, 0, sizeof ex);
  ex.c0 = (REAL)pl->coef.c0;
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      ex.c[a][m] = (REAL)pl->coef.c[a][m];
  ex.cf = (REAL)pl->coef.cf;
  ex.f = x.f ? (const REAL *)x.f + origin : NULL;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      ex.kind[a][s] = pl->faces.kind[a][s];
      ex.two_g[a][s] = (REAL)(2.0 * pl->faces.value[a][s]);
    }
  if (z0 > 0) /* (a side of a plane range inside the block is no face) */
    ex.kind[2][0] = FUSED_FACE_HALO;
  if (z1 < l->n[2])
    ex.kind[2][1] = FUSED_FACE_HALO;
  ex.part = x.part;
  ex.rmask = x.rmask;
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  const void *k =
      tile3d_config(pl, steps, p.nz, c0, p.chunk, &cfg, &attr, sig != NULL, res, x.zfaces);
  if (!k)
    return fused_fail("no warp-row kernel for T = %d", steps);
  if (by[1]) /* the tiles of all planes, then the others' pieces, along x */
    cfg.gridDim = dim3((unsigned)(by[0] + ((int64_t)cfg.gridDim.x - by[0]) * by[1]), 1, 1);
  tile3d_sig sg;
  memset(&sg, 0, sizeof sg);
  sg.sig = sig;
  sg.xyfaces = x.tiles;
  sg.reach = l->halo[0] > l->halo[1] ? l->halo[0] : l->halo[1]; /* (x: whole vectors) */
  sg.edge = x.edge;
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
  if (x.ctas)
    *x.ctas = (int64_t)cfg.gridDim.x * cfg.gridDim.y * cfg.gridDim.z;
  void *args[] = {&p, &sg, &ex};
  if (!tile3d_faces_form(pl)) {
    FM_CHECK_CUDA(cudaLaunchKernelExC(&cfg, k, args));
    FM_CHECK_CUDA(cudaGetLastError());
    return 0;
  }
  /* The forms with faces (tile3d.cuh, tile3d_face_tiles): a launch of the T built runs the
   * face tiles' kernel on the face tiles, on the side stream, concurrently with the other
   * tiles' kernel; a shorter launch, and in a lean plan every launch that is not lean, runs it
   * alone, on every tile. That kernel applies every reflecting face and reads none through;
   * the plain form's (lean, no source) reads the homogeneous faces through as the other tiles'
   * kernel does and applies the others, the Dirichlet faces of nonzero value, only (radius 1),
   * or reads the z faces through and applies every x and y face (radius 2). */
  const int lean = tile3d_lean(pl, steps, res, 0, x.zfaces);
  const int plain = lean && !pl->has_source;
  tile3d_params<REAL> pxy = p;
  tile3d_ext<REAL> exy = ex;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      const int through = plain && (pl->radius == 1 || a == 2); /* (the faces it may read so) */
      if (through && p.rd[a][s] != FUSED_READ_MEMORY)
        exy.kind[a][s] = FUSED_FACE_HALO;
      else if (!through && pl->faces.kind[a][s] != FUSED_FACE_HALO)
        pxy.rd[a][s] = FUSED_READ_MEMORY;
    }
  tile3d_sig sxy = sg;
  const void *kxy = tile3d_kernel_of(pl, steps, 0, res, 1, x.zfaces);
  if (!kxy)
    return fused_fail("no warp-row kernel for the face tiles at T = %d", steps);
  void *axy[] = {&pxy, &sxy, &exy};
  if (steps != TILE3D_STEPS_R(pl->radius) || (pl->lean && !lean)) {
    sxy.all = 1; /* (cfg's kernel is the form with faces: its shared memory is kxy's) */
    FM_CHECK_CUDA(cudaLaunchKernelExC(&cfg, kxy, axy));
    FM_CHECK_CUDA(cudaGetLastError());
    return 0;
  }
  if (!pl->face_ctas) { /* (no face tiles: the other kernel runs every tile) */
    FM_CHECK_CUDA(cudaLaunchKernelExC(&cfg, k, args));
    FM_CHECK_CUDA(cudaGetLastError());
    return 0;
  }
  sg.xyfaces = sxy.xyfaces = pl->face_tiles;
  sg.reach = sxy.reach = pl->radius;
  cudaLaunchConfig_t side = cfg;
  side.gridDim = tile3d_face_grid(pl, p.nz, &pxy.chunk);
  side.dynamicSmemBytes = tile3d_geo_of(pl, steps, res, 1).smem;
  sxy.whole = sxy.pieces = 0;
  sxy.b0 = pl->face_span[0];
  if (x.part) { /* the face tiles' residual slots after the other kernel's; a CTA that returns
                   at once (a tile of the other kernel) leaves its slots 0 */
    const int64_t ctas = (int64_t)cfg.gridDim.x * cfg.gridDim.y * cfg.gridDim.z,
                  more = (int64_t)side.gridDim.x * side.gridDim.z;
    FM_CHECK_CUDA(cudaMemsetAsync(
        x.part, 0, (size_t)(ctas + more) * TILE3D_WARPS * 8 * sizeof(double), cfg.stream));
    exy.part = x.part + ctas * TILE3D_WARPS * 8;
    *x.ctas = ctas + more;
  }
  if (fm_fork(cfg.stream, &side.stream))
    return 1;
  FM_CHECK_CUDA(cudaLaunchKernelExC(&cfg, k, args));
  FM_CHECK_CUDA(cudaLaunchKernelExC(&side, kxy, axy));
  if (fm_join(cfg.stream))
    return 1;
  FM_CHECK_CUDA(cudaGetLastError());
  return 0;
}

int tile3d_launch(const struct fused_plan *pl, const void *u, const void *f, void *v, int steps,
                  int64_t z0, int64_t z1, int tiles, int edge, void *stream)
{
  if (tiles && !tile3d_splits_xy(pl))
    return fused_fail("launches of some tiles only need a 3D warp-row plan of one CTA per tile "
                      "that applies no face");
  if (steps < 1 || steps > pl->steps)
    return fused_fail("launch of %d steps with a plan of %d", steps, pl->steps);
  if (z0 < 0 || z1 > pl->lay.n[2] || z0 >= z1 ||
      ((z0 > 0 || z1 < pl->lay.n[2]) &&
       (pl->faces.read[2][0] == FUSED_READ_WRAP || pl->faces.read[2][1] == FUSED_READ_WRAP)))
    return fused_fail("planes [%lld, %lld) of a block of %lld planes: not a range of them, or the "
                      "block wraps along z (then all of them only)",
                      (long long)z0, (long long)z1, (long long)pl->lay.n[2]);
  const tile3d_extra x = {f, 0, NULL, 0, NULL, NULL, NULL, tiles & 15, tiles ? edge : 0, 0};
  return pl->elem == 8 ? tile3d_launch_t<double>(pl, u, v, steps, z0, z1, x, stream)
                       : tile3d_launch_t<float>(pl, u, v, steps, z0, z1, x, stream);
}

/* The residual slots of a whole launch: 8 per warp of its CTAs, the plan's grid or its chunks
 * by tile (the forms with faces keep the T built, so every launch has that grid). */
size_t tile3d_scratch(const struct fused_plan *pl)
{
  const int64_t per_tile = pl->grid[2] > pl->by_tile[1] ? pl->grid[2] : pl->by_tile[1];
  int64_t ctas = pl->grid[0] * pl->grid[1] * per_tile;
  if (ctas < pl->waves_short.ctas) /* (the shorter kernel's waves) */
    ctas = pl->waves_short.ctas;
  if (pl->face_ctas) { /* (and the face tiles' kernel's) */
    int c;
    const dim3 g = tile3d_face_grid(pl, (int)pl->lay.n[2], &c);
    ctas += (int64_t)g.x * g.z;
  }
  return (size_t)ctas * TILE3D_WARPS * 8;
}

int tile3d_launch_residual(const struct fused_plan *pl, const void *u, const void *f, void *v,
                           int steps, unsigned mask, double *scratch, double *sums, void *stream)
{
  if (steps < 1 || steps > pl->steps || !pl->has_source)
    return fused_fail("a launch of %d steps with residual sums (plan: %d steps, %s)", steps,
                      pl->steps, pl->has_source ? "with a source" : "without a source");
  int64_t ctas = 0;
  const tile3d_extra x = {f, mask, scratch, 0, NULL, NULL, &ctas, 0, 0, 0};
  const int64_t nz = pl->lay.n[2];
  if (pl->elem == 8 ? tile3d_launch_t<double>(pl, u, v, steps, 0, nz, x, stream)
                    : tile3d_launch_t<float>(pl, u, v, steps, 0, nz, x, stream))
    return 1;
  return fm_sums(scratch, ctas * TILE3D_WARPS, sums, stream);
}

int tile3d_signals(const struct fused_plan *pl, int faces)
{
  /* one CTA (the signalled form); the first chunk's signal at most its iterations:
   * fm_iterations(h, T) <= h + 2 + 2T */
  const int64_t n = pl->lay.n[2], h = pl->lay.halo[2], chunks = pl->grid[2];
  const int64_t first = n - (chunks - 1) * pl->chunk;
  if (pl->cluster[0] * pl->cluster[1] != 1 || pl->radius != 1 || tile3d_faces_form(pl) ||
      pl->has_source || first < h + 2 || (chunks > 1 && pl->chunk < h))
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
  const tile3d_extra x = {NULL, 0, NULL, faces, sig, count, NULL, 0, 0, 0};
  return pl->elem == 8 ? tile3d_launch_t<double>(pl, u, v, steps, 0, nz, x, stream)
                       : tile3d_launch_t<float>(pl, u, v, steps, 0, nz, x, stream);
}

int tile3d_applies_faces(const struct fused_plan *pl)
{
  return tile3d_faces_form(pl);
}

int tile3d_zwall_faces(const struct fused_plan *pl)
{
  int w = 0;
  for (int s = 0; s < 2; s++)
    w |= (pl->lean && tile3d_faces_form(pl) && pl->faces.kind[2][s] != FUSED_FACE_HALO &&
          pl->faces.read[2][s] == FUSED_READ_MEMORY)
         << s;
  return w;
}

int tile3d_splits_xy(const struct fused_plan *pl)
{
  return pl->cluster[0] * pl->cluster[1] == 1 && !tile3d_faces_form(pl);
}

int tile3d_narrow_first(const struct fused_plan *pl)
{
  return pl->seg_lanes && (pl->face_tiles & 3) == 1 && pl->lay.n[0] % (16 / pl->elem) == 0;
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
