/* The fused multi-step kernels' plans and launches (fused.h), dispatched to the 2D warp-strip
 * kernel (strip2d.cu) and the 3D warp-row kernel (tile3d.cu). */
#include "kernels/cuda/cuda_rt.h"

#include <stdio.h>
#include <string.h>

#include "kernels/cuda/fused_model.h"
#include "kernels/cuda/strip2d.cuh"
#include "kernels/cuda/tile3d.cuh"

int fused_plan_steps(struct fused_plan *pl, const struct fused_config *want, int tmax_halo,
                     int built, int best)
{
  const int tmax = tmax_halo < built ? tmax_halo : built;
  if (tmax < 1)
    return fused_fail(
        "the block has no ghost layer on a halo face: the fused kernels need halo >= 1");
  if (want->steps > tmax)
    return fused_fail("--steps-per-launch %d exceeds %d (the halo width or the kernels built)",
                      want->steps, tmax);
  pl->steps = want->steps > 0 ? want->steps : best < tmax ? best : tmax;
  return 0;
}

extern "C" int fused_supported(const struct layout *l, const struct stencil_coef *coef, char *why,
                               size_t len)
{
  const char *no = NULL;
  if (coef->radius < 1 || coef->radius > 4)
    no = "a radius other than 1 to 4";
  else if (coef->ndim != 2 && coef->ndim != 3)
    no = "not a 2D or 3D problem";
  else if (l->elem != 4 && l->elem != 8)
    no = "element size is neither 4 nor 8 bytes";
  else if (coef->ndim == 2 && l->n[2] != 1)
    no = "2D problem with more than one z cell";
  if (no && why && len)
    snprintf(why, len, "%s", no);
  return no == NULL;
}

/* Steps per launch per problem class: the most T built for the radius (docs/design/
 * fused-kernels.md, "Steps per launch"). */
extern "C" int fused_default_steps(int ndim, int elem, int radius, int has_source,
                                   int inhomogeneous, int x_vectors, int *steps, char *why,
                                   size_t len)
{
  struct layout l;
  const int64_t n[3] = {8, 8, ndim == 3 ? 8 : 1};
  const int halo[3] = {1, 1, ndim == 3 ? 1 : 0};
  layout_init(&l, n, halo, elem);
  struct stencil_coef c;
  memset(&c, 0, sizeof c);
  c.ndim = ndim;
  c.radius = radius;
  *steps = 0;
  if (!fused_supported(&l, &c, why, len))
    return 0;
  *steps = ndim == 2 ? strip_default_steps(elem, radius, has_source) : TILE3D_STEPS_R(radius);
  /* (the 3D kernel of radius 2 applies reflecting faces without a source where n along x is
   * whole vectors, tile3d.cu; with a source it reads homogeneous faces through only there,
   * fused_mirrors) */
  if (ndim == 3 && radius > 1 && *steps > 1 &&
      ((inhomogeneous && has_source) || (!x_vectors && (inhomogeneous || has_source)))) {
    *steps = 1;
    snprintf(why, len,
             "radius %d in 3D with %s: one step per launch, the faces' ghosts filled between "
             "launches",
             radius,
             inhomogeneous && has_source ? "a Dirichlet face of nonzero value and a source term"
             : inhomogeneous ? "a Dirichlet face of nonzero value where n along x is not whole "
                               "16-byte vectors"
                             : "a source term where n along x is not whole 16-byte vectors");
  }
  return 1;
}

extern "C" int fused_mirrors(const struct layout *l, const struct stencil_coef *coef,
                             int has_source)
{
  return coef->ndim == 3 && (!has_source || l->n[0] % TILE3D_V(l->elem) == 0);
}

extern "C" int fused_faces_of(int ndim, int mirrors, const struct block_faces *bf,
                              struct fused_faces *ff, int *mirrored)
{
  int mirror = ndim == 3 && mirrors, reflecting = 0;
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++)
      if (!bf->exchanged[a][s]) {
        reflecting = 1;
        mirror &= bc_homogeneous(bf->kind[a][s], bf->value[a][s]);
      }
  *mirrored = mirror && reflecting;
  memset(ff, 0, sizeof *ff);
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      ff->kind[a][s] = FUSED_FACE_HALO;
      if (a >= ndim)
        continue;
      if (bf->wrapped[a][s])
        ff->read[a][s] = FUSED_READ_WRAP;
      if (bf->exchanged[a][s])
        continue;
      if (*mirrored) {
        ff->read[a][s] = bf->kind[a][s] == BC_DIRICHLET ? FUSED_READ_MIRROR_NEG : FUSED_READ_MIRROR;
      } else if (bf->kind[a][s] == BC_DIRICHLET) {
        ff->kind[a][s] = FUSED_FACE_DIRICHLET;
        ff->value[a][s] = bf->value[a][s];
      } else if (bf->kind[a][s] == BC_NEUMANN) {
        ff->kind[a][s] = FUSED_FACE_NEUMANN;
      } else {
        return 1;
      }
    }
  return 0;
}

/* Steps per launch the ghost layers allow: T r <= halo on every axis with a halo face. */
static int fused_halo_steps(const struct layout *l, const struct fused_faces *f, int ndim,
                            int radius)
{
  int most = FUSED_MAX_STEPS;
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++)
      if (f->kind[a][s] == FUSED_FACE_HALO && l->halo[a] / radius < most)
        most = l->halo[a] / radius;
  return most;
}

extern "C" int fused_plan_block(const struct layout *l, const struct stencil_coef *coef,
                                int has_source, const struct fused_faces *faces,
                                const struct fused_config *want, int device, struct fused_plan *pl)
{
  char why[160];
  if (!fused_supported(l, coef, why, sizeof why))
    return fused_fail("%s", why);
  memset(pl, 0, sizeof *pl);
  pl->ndim = coef->ndim;
  pl->elem = l->elem;
  pl->radius = coef->radius;
  pl->lay = *l;
  pl->coef = *coef;
  pl->faces = *faces;
  pl->has_source = has_source;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      if (a >= pl->ndim)
        pl->faces.kind[a][s] = FUSED_FACE_HALO;
      if (pl->faces.kind[a][s] != FUSED_FACE_HALO || a >= pl->ndim)
        pl->faces.read[a][s] = FUSED_READ_MEMORY;
    }
  const struct fused_config zero = {0, {0, 0}, 0};
  if (!want)
    want = &zero;
  const int tmax = fused_halo_steps(l, &pl->faces, pl->ndim, pl->radius);
  if (pl->ndim == 2) {
    if (want->cluster[0] > 1 || want->cluster[1] > 1)
      return fused_fail("the 2D warp-strip kernel has no clusters");
    return strip_plan(pl, want, tmax, device);
  }
  return tile3d_plan(pl, want, tmax, device);
}

extern "C" int fused_launch(const struct fused_plan *pl, const void *u, const void *f, void *v,
                            int steps, void *stream)
{
  if (steps < 1 || steps > pl->steps)
    return fused_fail("launch of %d steps with a plan of %d", steps, pl->steps);
  if ((f != NULL) != (pl->has_source != 0))
    return fused_fail("the plan was made %s a source field, the launch passes %s",
                      pl->has_source ? "with" : "without", f ? "one" : "none");
  return pl->ndim == 3 ? tile3d_launch(pl, u, f, v, steps, 0, pl->lay.n[2], 0, 0, stream)
                       : strip_launch(pl, u, f, v, steps, stream);
}

extern "C" int fused_splits_z(const struct fused_plan *pl)
{
  return pl->ndim == 3 && pl->faces.read[2][0] != FUSED_READ_WRAP &&
         pl->faces.read[2][1] != FUSED_READ_WRAP;
}

extern "C" int fused_splits_xy(const struct fused_plan *pl)
{
  return pl->ndim == 3 && tile3d_splits_xy(pl);
}

extern "C" int fused_launch_planes(const struct fused_plan *pl, const void *u, const void *f,
                                   void *v, int steps, int64_t z0, int64_t z1, int tiles, int edge,
                                   void *stream)
{
  if (pl->ndim != 3 || ((z0 > 0 || z1 < pl->lay.n[2]) && !fused_splits_z(pl)))
    return fused_fail("launches of plane ranges need a 3D warp-row plan not wrapped along z");
  if ((f != NULL) != (pl->has_source != 0))
    return fused_fail("the plan was made %s a source field, the launch passes %s",
                      pl->has_source ? "with" : "without", f ? "one" : "none");
  return tile3d_launch(pl, u, f, v, steps, z0, z1, tiles, edge, stream);
}

extern "C" int fused_launch_part(const struct fused_plan *pl, const void *u, const void *f, void *v,
                                 int steps, int zfaces, int xyfaces, int shell, void *stream)
{
  const int64_t nz = pl->lay.n[2], h = pl->lay.halo[2];
  const int lo = zfaces & 1, hi = zfaces >> 1 & 1;
  const int64_t z0 = lo ? h : 0, z1 = hi ? nz - h : nz; /* (the planes no z face sends) */
  if (!shell)
    return fused_launch_planes(pl, u, f, v, steps, z0, z1, xyfaces, 0, stream);
  if (lo && fused_launch_planes(pl, u, f, v, steps, 0, h, 0, 0, stream))
    return 1;
  if (hi && fused_launch_planes(pl, u, f, v, steps, nz - h, nz, 0, 0, stream))
    return 1;
  return xyfaces ? fused_launch_planes(pl, u, f, v, steps, z0, z1, xyfaces, 1, stream) : 0;
}

extern "C" int fused_signals(const struct fused_plan *pl, int faces)
{
  return fused_splits_z(pl) && tile3d_signals(pl, faces);
}

extern "C" int fused_launch_signal(const struct fused_plan *pl, const void *u, void *v, int steps,
                                   int faces, unsigned *counter, unsigned *count, void *stream)
{
  if (!fused_signals(pl, 0))
    return fused_fail("signalled launches need a 3D warp-row plan not wrapped along z, its "
                      "chunks longer than the planes sent");
  return tile3d_launch_signal(pl, u, v, steps, faces, counter, count, stream);
}

extern "C" int fused_launch_residual(const struct fused_plan *pl, const void *u, const void *f,
                                     void *v, int steps, unsigned mask, double *scratch,
                                     double *sums, void *stream)
{
  if (fused_residual_steps(pl) < steps)
    return fused_fail("a launch of %d steps with residual sums: this plan sums them in launches "
                      "of at most %d",
                      steps, fused_residual_steps(pl));
  if ((f != NULL) != (pl->has_source != 0))
    return fused_fail("the plan was made %s a source field, the launch passes %s",
                      pl->has_source ? "with" : "without", f ? "one" : "none");
  return pl->ndim == 3 ? tile3d_launch_residual(pl, u, f, v, steps, mask, scratch, sums, stream)
                       : strip_launch_residual(pl, u, f, v, steps, mask, scratch, sums, stream);
}

extern "C" int fused_applies_faces(const struct fused_plan *pl)
{
  return pl->ndim == 2 || tile3d_applies_faces(pl);
}

extern "C" int fused_residual_steps(const struct fused_plan *pl)
{
  if (!pl->has_source) /* (residuals are the Poisson iteration's, which has one) */
    return 0;
  if (pl->ndim == 3)
    return tile3d_residual_steps(pl);
  const int most = FUSED_RESIDUAL_STEPS(pl->elem);
  return pl->steps < most ? pl->steps : most;
}

extern "C" size_t fused_scratch(const struct fused_plan *pl)
{
  return pl->ndim == 2 ? strip_scratch(pl) : tile3d_scratch(pl);
}

extern "C" void fused_describe(const struct fused_plan *pl, char *buf, size_t len)
{
  if (pl->ndim == 2) {
    char res[48] = "";
    if (pl->chunk_res != pl->chunk)
      snprintf(res, sizeof res, " (%d with residual sums)", pl->chunk_res);
    snprintf(buf, len,
             "warp strips, radius %d, T=%d, %d of %d columns stored per strip, chunk %d rows%s, "
             "%d CTAs of %d threads resident",
             pl->radius, pl->steps, pl->tile[0], 32 * STRIP_V, pl->chunk, res, pl->active_clusters,
             pl->threads);
    return;
  }
  char clu[64] = "no clusters";
  if (pl->cluster[0] * pl->cluster[1] > 1)
    snprintf(clu, sizeof clu, "clusters of %dx%d CTAs (DSMEM, asynchronous hand-off)",
             pl->cluster[0], pl->cluster[1]);
  char first[64] = "", narrow[96] = "";
  if (pl->chunk0 != pl->chunk) { /* and in a launch in parts (an end rank's inner part) */
    int a, b;
    const int kept = fm_range_chunks(pl->lay.n[2], pl->chunk0, pl->chunk, pl->chunk_waves,
                                     pl->grid[0] * pl->grid[1], pl->steps, pl->active_clusters,
                                     pl->lay.n[2] - pl->lay.halo[2], &a, &b);
    snprintf(first, sizeof first, " (the first %d; %s in split launches)", pl->chunk0,
             kept ? "shortened" : "equal");
  }
  if (pl->seg_lanes)
    snprintf(narrow, sizeof narrow, " (the %s column: warps of %d segments of %d lanes)",
             tile3d_narrow_first(pl) ? "first" : "last", 32 / pl->seg_lanes, pl->seg_lanes);
  char by[128] = "";
  if (pl->by_tile[1])
    snprintf(by, sizeof by,
             "; whole launches by tile: %d of %lld tiles in one chunk, the rest in %d of %d "
             "planes",
             pl->by_tile[0], (long long)(pl->grid[0] * pl->grid[1]), pl->by_tile[1],
             pl->by_tile[2]);
  const char *faces = "";
  if (tile3d_zwall_faces(pl))
    faces = ", reflecting faces applied at every level (in the planes next to a z face of nonzero "
            "value every face, elsewhere the others read through)";
  else if (tile3d_applies_faces(pl) && pl->lean && pl->has_source)
    faces = ", reflecting faces applied at every level in the tiles that meet a face of nonzero "
            "value, elsewhere the homogeneous ones and the source read through";
  else if (tile3d_applies_faces(pl))
    faces = ", reflecting faces applied at every level";
  else if (pl->reads_faces)
    faces = pl->has_source ? ", faces and the source read through in the kernel (wraps copied)"
                           : ", faces and wraps read through in the kernel";
  snprintf(buf, len,
           "warp rows, radius %d, T=%d, %s, CTA tiles of %d columns x %d rows (%d warps x %d), "
           "storing %d x %d per %s%s, chunks of %d planes%s%s, %zu B smem, %d CTAs of %d "
           "threads resident%s%s",
           pl->radius, pl->steps, clu, TILE3D_BX(pl->elem), TILE3D_WARPS * pl->rows, TILE3D_WARPS,
           pl->rows, pl->tile[0], pl->tile[1],
           pl->cluster[0] * pl->cluster[1] > 1 ? "cluster" : "CTA", narrow, pl->chunk, first, by,
           pl->smem_bytes, pl->active_clusters, pl->threads, faces,
           pl->has_source ? ", a source term" : "");
}

extern "C" int fused_attributes(const struct fused_plan *pl, int steps, int *regs, int *local_bytes)
{
  return pl->ndim == 3 ? tile3d_attributes(pl, steps, regs, local_bytes)
                       : strip_attributes(pl, steps, regs, local_bytes);
}
