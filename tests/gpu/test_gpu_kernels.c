/* The CUDA backend against the CPU backend, bit for bit (label gpu).
 *
 * For fp64 and fp32, 2D and 3D, ragged sizes (multiples of no tile), every kernel tier and
 * boundary kind: the same random field and ghost cells go into both backends, a few steps
 * run (update, then ghost cells: reflection on physical faces, fresh random values on
 * "received" faces), and the fields must agree in every bit. The CUDA side also updates the
 * block in pieces (shell slabs on the halo lane, the rest on the bulk lane) as the driver
 * does with --overlap on. Packs, unpacks and norms are compared too, and residual() (its
 * own section below, to rounding).
 *
 *   test_gpu_kernels           run the checks (exit 77 without a GPU, unless
 *                              STENCIL_REQUIRE_GPU=1, then 1)
 *   test_gpu_kernels --probe   only say whether a GPU is visible (exit 0, or 77 / 1 as above)
 *   test_gpu_kernels --residual         only the residual() section
 *   test_gpu_kernels --residual-large   only residual() on a block of more than 2^31 cells
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "kernels/backend.h"
#include "kernels/step.h"
#include "solvers/stencils.h"
#include "tests/unit/unit.h"

#define SKIP 77

/* Deterministic pseudo-random values in [0.5, 1.5) (xorshift64*). */
static double rnd(uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return 0.5 + (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void fill(void *p, int64_t n, int elem, uint64_t *s)
{
  for (int64_t i = 0; i < n; i++) {
    if (elem == 8)
      ((double *)p)[i] = rnd(s);
    else
      ((float *)p)[i] = (float)rnd(s);
  }
}

struct side {
  const struct backend_ops *ops;
  const struct step_ops *step;
  void *ctx;
  void *u, *v;
};

/* One reflecting face of u, through a backend's boundaries(). */
static int boundary1(const struct side *sd, const struct layout *l, void *u, int axis, int side,
                     enum bc_kind kind, double value)
{
  int on[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  enum bc_kind k[3][2] = {{kind, kind}, {kind, kind}, {kind, kind}};
  double v[3][2] = {{value, value}, {value, value}, {value, value}};
  on[axis][side] = 1;
  return sd->step->boundaries(sd->ctx, l, u, on, k, v);
}

/* Host buffers both backends' pack and unpack reach: the CUDA backend's page-locked ones. */
static void *host_buffer(const struct side *sd, size_t bytes)
{
  void *p = NULL;
  return sd[1].ops->buffer_alloc(sd[1].ctx, bytes, 0, &p) == STENCIL_OK ? p : NULL;
}

enum face_mode { FACES_DIRICHLET, FACES_NEUMANN, FACES_RECEIVED, FACES_MIXED };

/* The tier-2 launch shape the cases' contexts fix (backend_options.tile2; zeros: tuned), and
 * its name for the messages. */
static int forced_tile[4];
static const char *tile_name = "";

struct gcase {
  int64_t n[3];
  int ndim, elem, tier;
  enum face_mode mode;
  int steps;
  int source; /* update with a source field f (v = stencil(u) + cf f) */
  int radius; /* of the star (0: 1), the halo as deep */
};

/* The ghost box beyond face (axis, side) over the interior range of the other axes. */
static struct box ghost_box(const struct layout *l, int axis, int side)
{
  struct box b = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  b.lo[axis] = side ? l->n[axis] : -l->halo[axis];
  b.hi[axis] = side ? l->n[axis] + l->halo[axis] : 0;
  return b;
}

/* What a face gets in this case: -1 received (random values), else a bc_kind. */
static int face_kind(const struct gcase *g, int axis, int side)
{
  switch (g->mode) {
  case FACES_DIRICHLET: return BC_DIRICHLET;
  case FACES_NEUMANN: return BC_NEUMANN;
  case FACES_RECEIVED: return -1;
  case FACES_MIXED: return axis == 0 ? -1 : side ? BC_NEUMANN : BC_DIRICHLET;
  }
  return -1;
}

/* Ghost cells of f on both backends: reflection, or the same random values. */
static int ghosts(struct side *sd, const struct layout *l, const struct gcase *g, void *const f[2],
                  uint64_t *seed, void *tmp)
{
  for (int a = 0; a < g->ndim; a++)
    for (int s = 0; s < 2; s++) {
      const int k = face_kind(g, a, s);
      const double value = 0.25 + 0.5 * a + 0.125 * s;
      if (k < 0) {
        struct box b = ghost_box(l, a, s);
        fill(tmp, box_count(&b), l->elem, seed);
        for (int i = 0; i < 2; i++)
          CHECK(sd[i].ops->unpack(sd[i].ctx, l, f[i], 1, &b, (const void *const *)&tmp));
        CHECK(sd[1].ops->sync(sd[1].ctx)); /* (the device reads tmp later: before its refill) */
      } else {
        for (int i = 0; i < 2; i++)
          CHECK(boundary1(&sd[i], l, f[i], a, s, (enum bc_kind)k, value));
      }
    }
  return STENCIL_OK;
}

/* Shell slabs one cell deep on every face plus the rest, as the driver splits a block. */
static int split_boxes(const struct layout *l, int ndim, struct box *out, struct box *inner)
{
  struct box in = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  int nb = 0;
  for (int a = 0; a < ndim; a++)
    if (l->n[a] > 2)
      in.lo[a] = 1, in.hi[a] = l->n[a] - 1;
  *inner = in;
  for (int a = ndim - 1; a >= 0; a--) {
    if (in.lo[a] == 0)
      continue;
    struct box lo = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
    for (int b = a + 1; b < 3; b++)
      lo.lo[b] = in.lo[b], lo.hi[b] = in.hi[b];
    struct box hi = lo;
    lo.hi[a] = in.lo[a];
    hi.lo[a] = in.hi[a];
    out[nb++] = lo;
    out[nb++] = hi;
  }
  return nb;
}

static int run_case(const struct gcase *g, int split)
{
  struct layout l;
  const int r = g->radius > 0 ? g->radius : 1;
  const int halo[3] = {r, r, g->ndim == 3 ? r : 0};
  layout_init(&l, g->n, halo, g->elem);
  struct stencil_coef coef;
  memset(&coef, 0, sizeof coef);
  coef.ndim = g->ndim;
  coef.radius = r;
  const double c[3] = {0.11, 0.07, 0.05};
  double sum = 0;
  for (int a = 0; a < g->ndim; a++)
    for (int m = 1; m <= r; m++) /* (weights of alternating sign, as the higher orders have) */
      coef.c[a][m - 1] = c[a] / (m == 1 ? r : -(double)(m * m * r)), sum += coef.c[a][m - 1];
  coef.c0 = 1.0 - 2.0 * sum;
  coef.cf = 0.0625;

  struct side sd[2] = {{&backend_cpu, &step_cpu, NULL, NULL, NULL},
                       {&backend_cuda, &step_cuda, NULL, NULL, NULL}};
  void *src[2] = {NULL, NULL};
  struct backend_options bo = {.tier = g->tier, .pdl = 1};
  memcpy(bo.tile2, forced_tile, sizeof bo.tile2);
  const int64_t cells = l.n[0] * l.n[1] * l.n[2];
  const size_t bytes = (size_t)cells * (size_t)l.elem;
  /* a and b also take packs that reach into the ghost layer: padded size. */
  const size_t padded = (size_t)l.count * (size_t)l.elem;
  for (int i = 0; i < 2; i++) {
    CHECK(sd[i].ops->create(&sd[i].ctx, &bo));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &sd[i].u));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &sd[i].v));
    if (g->source)
      CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &src[i]));
  }
  void *host = malloc(bytes), *a = host_buffer(sd, padded), *b = host_buffer(sd, padded);
  void *tmp = host_buffer(sd, padded);
  if (!host || !a || !b || !tmp)
    FAIL(STENCIL_ERR, "out of host memory");
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(g->n[0] * 131 + g->n[1] * 7 + g->n[2]);
  if (g->source) {
    fill(host, cells, l.elem, &seed);
    for (int i = 0; i < 2; i++)
      CHECK(sd[i].ops->upload(sd[i].ctx, &l, src[i], host));
  }
  fill(host, cells, l.elem, &seed);
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->upload(sd[i].ctx, &l, sd[i].u, host));
  void *f[2] = {sd[0].u, sd[1].u};
  CHECK(ghosts(sd, &l, g, f, &seed, tmp));
  const struct box all = {{0, 0, 0}, {l.n[0], l.n[1], l.n[2]}};
  if (sd[1].step->tune && !split) {
    /* Every candidate tile overwrites v; the last one's result is checked below too. */
    CHECK(sd[1].step->tune(sd[1].ctx, &l, &coef, sd[1].u, sd[1].v, &all));
    if (g->tier == 1 || r > 1) /* nothing to tune: tune leaves v alone */
      CHECK(sd[1].step->update(sd[1].ctx, &l, &coef, sd[1].u, NULL, sd[1].v, &all));
    CHECK(sd[0].step->update(sd[0].ctx, &l, &coef, sd[0].u, NULL, sd[0].v, &all));
    CHECK(sd[0].ops->download(sd[0].ctx, &l, a, sd[0].v));
    CHECK(sd[1].ops->download(sd[1].ctx, &l, b, sd[1].v));
    EXPECT(memcmp(a, b, bytes) == 0, "after tune: %lldx%lldx%lld fp%d tier %d radius %d tile %s",
           (long long)l.n[0], (long long)l.n[1], (long long)l.n[2], 8 * l.elem, g->tier, r,
           tile_name);
  }
  struct box shell[6], inner;
  const int nb = split_boxes(&l, g->ndim, shell, &inner);
  for (int t = 0; t < g->steps; t++) {
    CHECK(sd[0].step->update(sd[0].ctx, &l, &coef, sd[0].u, src[0], sd[0].v, &all));
    if (split) {
      CHECK(sd[1].step->lane_fence(sd[1].ctx));
      CHECK(sd[1].step->lane_select(sd[1].ctx, LANE_HALO));
      for (int i = 0; i < nb; i++)
        CHECK(sd[1].step->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &shell[i]));
      CHECK(sd[1].step->lane_select(sd[1].ctx, LANE_BULK));
      CHECK(sd[1].step->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &inner));
      CHECK(sd[1].step->lane_select(sd[1].ctx, LANE_HALO));
      CHECK(sd[1].step->lane_fence(sd[1].ctx));
    } else {
      CHECK(sd[1].step->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &all));
    }
    void *nf[2] = {sd[0].v, sd[1].v};
    CHECK(ghosts(sd, &l, g, nf, &seed, tmp));
    for (int i = 0; i < 2; i++) {
      void *s = sd[i].u;
      sd[i].u = sd[i].v;
      sd[i].v = s;
    }
  }
  CHECK(sd[1].ops->sync(sd[1].ctx));
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->download(sd[i].ctx, &l, i ? b : a, sd[i].u));
  int64_t first = -1;
  for (int64_t i = 0; i < cells && first < 0; i++)
    if (memcmp((char *)a + i * l.elem, (char *)b + i * l.elem, (size_t)l.elem) != 0)
      first = i;
  EXPECT(first < 0,
         "%lldx%lldx%lld fp%d tier %d radius %d tile '%s' faces %d %s: first difference at cell "
         "%lld (x %lld y %lld z %lld): cpu %.17g cuda %.17g",
         (long long)l.n[0], (long long)l.n[1], (long long)l.n[2], 8 * l.elem, g->tier, r, tile_name,
         g->mode, split ? "split" : "whole", (long long)first, (long long)(first % l.n[0]),
         (long long)(first / l.n[0] % l.n[1]), (long long)(first / l.n[0] / l.n[1]),
         first < 0     ? 0.0
         : l.elem == 8 ? ((double *)a)[first]
                       : ((float *)a)[first],
         first < 0     ? 0.0
         : l.elem == 8 ? ((double *)b)[first]
                       : ((float *)b)[first]);
  /* A pack that reaches into the ghost layer, and the norms. */
  struct box pb = {{-1, 0, 0}, {l.n[0] > 3 ? 3 : l.n[0], l.n[1], l.n[2]}};
  CHECK(sd[0].ops->pack(sd[0].ctx, &l, sd[0].u, 1, &pb, &a));
  CHECK(sd[1].ops->pack(sd[1].ctx, &l, sd[1].u, 1, &pb, &b));
  CHECK(sd[1].ops->sync(sd[1].ctx));
  EXPECT(memcmp(a, b, (size_t)box_count(&pb) * (size_t)l.elem) == 0, "pack differs");
  struct norms na, nb2;
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->norms_begin(sd[i].ctx, &l, sd[i].u));
  CHECK(sd[0].ops->norms_end(sd[0].ctx, &na));
  CHECK(sd[1].ops->norms_end(sd[1].ctx, &nb2));
  EXPECT(fabs(na.sum - nb2.sum) <= 1e-12 * fabs(na.sum) && na.maxabs == nb2.maxabs &&
             fabs(na.sumsq - nb2.sumsq) <= 1e-12 * na.sumsq && na.nonfinite == nb2.nonfinite,
         "norms differ: sum %.17g vs %.17g, max %.17g vs %.17g", na.sum, nb2.sum, na.maxabs,
         nb2.maxabs);
  for (int k = 0; k < 3; k++)
    sd[1].ops->buffer_release(sd[1].ctx, k == 0 ? a : k == 1 ? b : tmp, 0);
  for (int i = 0; i < 2; i++) {
    sd[i].ops->release(sd[i].ctx, sd[i].u);
    sd[i].ops->release(sd[i].ctx, sd[i].v);
    if (src[i])
      sd[i].ops->release(sd[i].ctx, src[i]);
    sd[i].ops->destroy(sd[i].ctx);
  }
  free(host);
  return STENCIL_OK;
}

/* A NaN planted in the field is counted by the norms, as on the CPU. */
static int nonfinite_case(void)
{
  struct layout l;
  const int64_t n[3] = {17, 9, 5};
  const int halo[3] = {1, 1, 1};
  layout_init(&l, n, halo, 8);
  struct backend_options bo = {.pdl = 1};
  void *ctx = NULL, *u = NULL;
  CHECK(backend_cuda.create(&ctx, &bo));
  CHECK(backend_cuda.alloc(ctx, &l, &u));
  double *h = calloc((size_t)(n[0] * n[1] * n[2]), sizeof *h);
  if (!h)
    FAIL(STENCIL_ERR, "out of host memory");
  h[100] = NAN;
  h[101] = INFINITY;
  h[7] = -3.0;
  CHECK(backend_cuda.upload(ctx, &l, u, h));
  struct norms nm;
  CHECK(backend_cuda.norms_begin(ctx, &l, u));
  CHECK(backend_cuda.norms_end(ctx, &nm));
  EXPECT(nm.nonfinite == 2 && nm.maxabs == 3.0 && nm.sum == -3.0, "nonfinite %lld max %g sum %g",
         (long long)nm.nonfinite, nm.maxabs, nm.sum);
  backend_cuda.release(ctx, u);
  backend_cuda.destroy(ctx);
  free(h);
  return STENCIL_OK;
}

/* ---- residual(): the CUDA reduction against the CPU backend ---------------------------------
 *
 * For radius 1 to 4, 2D and 3D, fp64 and fp32, with and without f, ragged sizes (and an empty
 * block): the same field, ghost cells and f go into both backends, and residual() (the sum of
 * w^2 in double, w = v - u in the field's precision, v Jacobi's update of u) must agree to
 * rounding. Bound: both backends evaluate every w from the same stored values in the same
 * order (kernels/backend.h: kernels/cuda/reduce.cu, kernels/cpu/heat_real.h) and square it in
 * double, so the N terms are the same bits and non-negative; only the order of the N - 1
 * additions differs.
 * Any order of adding N non-negative terms gives the exact sum S to within gamma_{N-1} S, gamma_k =
 * k u / (1 - k u), u = 2^-53 (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), so the
 * two results differ by at most about 2 (N - 1) u relative. With N <= 4096 cells per case that is
 * <= 9.1e-13, within the 1e-12 asked of it. The CUDA result must also be the same bits when
 * computed twice, and be ordered after work of the other lane: the second check takes the residual
 * on the halo lane of a field the bulk lane has just written, with no wait. */

/* Jacobi's update (omega 0.8) for the Poisson stencil of order 2 x radius on spacings 1, 0.7,
 * 1.3 (solvers/poisson.h's jacobi_coefficients). */
static void jacobi_coefs(int ndim, int radius, struct stencil_coef *upd)
{
  const double h[3] = {1.0, 0.7, 1.3}, omega = 0.8;
  double w[STENCIL_MAX_RADIUS + 1], s = 0;
  stencil_weights(2 * radius, w);
  for (int a = 0; a < ndim; a++)
    s += 1.0 / (h[a] * h[a]);
  const double d = -w[0] * s;
  memset(upd, 0, sizeof *upd);
  upd->ndim = ndim;
  upd->radius = radius;
  upd->c0 = 1.0 - omega;
  upd->cf = -omega / d;
  for (int a = 0; a < ndim; a++)
    for (int m = 1; m <= radius; m++)
      upd->c[a][m - 1] = omega * w[m] / (h[a] * h[a] * d);
}

/* The same random values in the ghost layers of every face of f on both backends. */
static int residual_ghosts(struct side *sd, const struct layout *l, int ndim, void *const f[2],
                           uint64_t *seed, void *tmp)
{
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++) {
      struct box b = ghost_box(l, a, s);
      fill(tmp, box_count(&b), l->elem, seed);
      for (int i = 0; i < 2; i++)
        CHECK(sd[i].ops->unpack(sd[i].ctx, l, f[i], 1, &b, (const void *const *)&tmp));
      CHECK(sd[1].ops->sync(sd[1].ctx));
    }
  return STENCIL_OK;
}

static int residual_case(struct side *sd, const int64_t n[3], int ndim, int elem, int radius,
                         int source, int extra_halo)
{
  struct layout l;
  const int halo[3] = {radius + extra_halo, radius + extra_halo,
                       ndim == 3 ? radius + extra_halo : 0};
  layout_init(&l, n, halo, elem);
  struct stencil_coef upd;
  jacobi_coefs(ndim, radius, &upd);
  const int64_t cells = l.n[0] * l.n[1] * l.n[2];
  void *tmp = host_buffer(sd, (size_t)l.count * (size_t)l.elem);
  if (!tmp)
    FAIL(STENCIL_ERR, "out of host memory");
  void *u[2] = {NULL, NULL}, *v[2] = {NULL, NULL}, *f[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &u[i]));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &v[i]));
    if (source)
      CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &f[i]));
  }
  uint64_t seed = 0x5851f42d4c957f2dull ^ (uint64_t)(n[0] * 1009 + n[1] * 31 + n[2] * 7 + radius);
  if (source && cells > 0) {
    fill(tmp, cells, l.elem, &seed);
    for (int i = 0; i < 2; i++)
      CHECK(sd[i].ops->upload(sd[i].ctx, &l, f[i], tmp));
  }
  fill(tmp, cells, l.elem, &seed);
  for (int i = 0; i < 2 && cells > 0; i++)
    CHECK(sd[i].ops->upload(sd[i].ctx, &l, u[i], tmp));
  CHECK(residual_ghosts(sd, &l, ndim, u, &seed, tmp));
  char what[160];
  snprintf(what, sizeof what, "residual %lldx%lldx%lld %dD fp%d radius %d halo %d %s",
           (long long)n[0], (long long)n[1], (long long)n[2], ndim, 8 * elem, radius, halo[0],
           source ? "with f" : "without f");
  EXPECT(cells <= 4096, "%s: more cells than the bound above allows", what);

  /* 1. The residual of u; the CUDA one twice (the same bits). */
  double r_cpu = -1, r_gpu = -1, r_gpu2 = -2;
  CHECK(sd[0].ops->residual(sd[0].ctx, &l, &upd, u[0], f[0], &r_cpu));
  CHECK(sd[1].ops->residual(sd[1].ctx, &l, &upd, u[1], f[1], &r_gpu));
  CHECK(sd[1].ops->residual(sd[1].ctx, &l, &upd, u[1], f[1], &r_gpu2));
  EXPECT(fabs(r_cpu - r_gpu) <= 1e-12 * r_cpu && (cells == 0) == (r_cpu == 0),
         "%s: cpu %.17g cuda %.17g (relative %.3g)", what, r_cpu, r_gpu,
         r_cpu > 0 ? fabs(r_cpu - r_gpu) / r_cpu : 0.0);
  EXPECT(memcmp(&r_gpu, &r_gpu2, sizeof r_gpu) == 0, "%s: cuda gave %.17g, then %.17g", what, r_gpu,
         r_gpu2);

  /* 2. v = the Jacobi update of u on the bulk lane, fresh ghosts, then the residual of v on
   * the halo lane: residual() must order itself after the bulk lane's work. */
  const struct box all = {{0, 0, 0}, {l.n[0], l.n[1], l.n[2]}};
  CHECK(sd[0].step->update(sd[0].ctx, &l, &upd, u[0], f[0], v[0], &all));
  CHECK(sd[1].step->lane_select(sd[1].ctx, LANE_BULK));
  CHECK(sd[1].step->update(sd[1].ctx, &l, &upd, u[1], f[1], v[1], &all));
  CHECK(sd[1].step->lane_select(sd[1].ctx, LANE_HALO));
  CHECK(residual_ghosts(sd, &l, ndim, v, &seed, tmp));
  CHECK(sd[0].ops->residual(sd[0].ctx, &l, &upd, v[0], f[0], &r_cpu));
  CHECK(sd[1].ops->residual(sd[1].ctx, &l, &upd, v[1], f[1], &r_gpu));
  EXPECT(fabs(r_cpu - r_gpu) <= 1e-12 * r_cpu && (cells == 0) == (r_cpu == 0),
         "%s, after an update on the other lane: cpu %.17g cuda %.17g (relative %.3g)", what, r_cpu,
         r_gpu, r_cpu > 0 ? fabs(r_cpu - r_gpu) / r_cpu : 0.0);

  for (int i = 0; i < 2; i++) {
    sd[i].ops->release(sd[i].ctx, u[i]);
    sd[i].ops->release(sd[i].ctx, v[i]);
    if (f[i])
      sd[i].ops->release(sd[i].ctx, f[i]);
  }
  sd[1].ops->buffer_release(sd[1].ctx, tmp, 0);
  return STENCIL_OK;
}

static int residual_cases(void)
{
  struct backend_options bo = {.pdl = 1};
  struct side sd[2] = {{&backend_cpu, &step_cpu, NULL, NULL, NULL},
                       {&backend_cuda, &step_cuda, NULL, NULL, NULL}};
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->create(&sd[i].ctx, &bo));
  /* Ragged, each <= 4096 cells; 700 cells per row: two of the CUDA kernel's row chunks. */
  const int64_t sizes3[][3] = {{17, 15, 13}, {5, 3, 2}, {1, 6, 4}, {0, 5, 3}};
  const int64_t sizes2[][3] = {{61, 53, 1}, {700, 5, 1}, {1, 9, 1}, {3, 0, 1}};
  int cases = 0;
  for (int elem = 8; elem >= 4; elem -= 4)
    for (int ndim = 2; ndim <= 3; ndim++)
      for (int radius = 1; radius <= 4; radius++)
        for (int source = 0; source <= 1; source++)
          for (int s = 0; s < 4; s++) {
            const int64_t *n = ndim == 3 ? sizes3[s] : sizes2[s];
            CHECK(residual_case(sd, n, ndim, elem, radius, source, s == 1));
            cases++;
          }
  for (int i = 0; i < 2; i++)
    sd[i].ops->destroy(sd[i].ctx);
  printf("test_gpu_kernels: residual: %d cases compared with the cpu backend\n", cases);
  return STENCIL_OK;
}

/* test_gpu_kernels --residual-large: one 2D fp32 block of 50000 x 45000 cells (2.25e9, more
 * than 2^31 elements: 64-bit indices), radius 1 with f. About 9 GB of device memory and 27 GB
 * of host memory; not part of ctest (tools/gpu-check.sh poisson runs it). The terms are again
 * the same bits; with N = 2.25e9 the bound above is useless, so it uses the depth of the
 * summation trees instead (Higham 4.2: a sum whose additions form a tree of depth L is within
 * gamma_L S): the CPU adds at most n_x terms per row, then at most n_y row sums per thread,
 * then the threads (<= 1024); the GPU adds at most 16 ceil(items / 8192) terms per lane, then
 * 5 + 8 (warp, block) and 4 + 5 + 8 (the total). */
static int residual_large(void)
{
  const int64_t n[3] = {50000, 45000, 1};
  const int halo[3] = {1, 1, 0};
  struct layout l;
  layout_init(&l, n, halo, 4);
  struct stencil_coef upd;
  jacobi_coefs(2, 1, &upd);
  struct backend_options bo = {.pdl = 1};
  struct side sd[2] = {{&backend_cpu, &step_cpu, NULL, NULL, NULL},
                       {&backend_cuda, &step_cuda, NULL, NULL, NULL}};
  void *u[2] = {NULL, NULL}, *f[2] = {NULL, NULL};
  const int64_t cells = n[0] * n[1];
  float *host = malloc((size_t)cells * sizeof *host);
  if (!host)
    FAIL(STENCIL_ERR, "out of host memory (%.1f GB)", 4e-9 * (double)cells);
  for (int i = 0; i < 2; i++) {
    CHECK(sd[i].ops->create(&sd[i].ctx, &bo));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &u[i]));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &f[i]));
  }
  /* Values with no pattern a tile could hide: a cheap hash of the index, in [0.5, 1.5). */
  for (int64_t c = 0; c < cells; c++)
    host[c] = 0.5f + (float)((uint64_t)c * 2654435761u % 1048573u) / 1048573.0f;
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->upload(sd[i].ctx, &l, f[i], host));
  for (int64_t c = 0; c < cells; c++)
    host[c] = 0.5f + (float)(((uint64_t)c * 40503u + 12345u) % 999983u) / 999983.0f;
  for (int i = 0; i < 2; i++) {
    CHECK(sd[i].ops->upload(sd[i].ctx, &l, u[i], host));
    for (int a = 0; a < 2; a++)
      for (int s = 0; s < 2; s++)
        CHECK(boundary1(&sd[i], &l, u[i], a, s, BC_DIRICHLET, 0.25 + 0.5 * a + s));
  }
  double r[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->residual(sd[i].ctx, &l, &upd, u[i], f[i], &r[i]));
  const int64_t items = (n[0] + 511) / 512 * n[1];
  const double depth = (double)(n[0] + n[1] + 1024) + 16.0 * (double)((items + 8191) / 8192) + 30;
  const double tol = 1.01 * depth * 0x1p-53;
  EXPECT(fabs(r[0] - r[1]) <= tol * r[0] && r[0] > 0,
         "residual of %lld x %lld fp32: cpu %.17g cuda %.17g (relative %.3g, bound %.3g)",
         (long long)n[0], (long long)n[1], r[0], r[1], fabs(r[0] - r[1]) / r[0], tol);
  printf("test_gpu_kernels: residual of %lld x %lld fp32 cells: cpu %.17g cuda %.17g, relative "
         "difference %.3g (bound %.3g)\n",
         (long long)n[0], (long long)n[1], r[0], r[1], fabs(r[0] - r[1]) / r[0], tol);
  for (int i = 0; i < 2; i++) {
    sd[i].ops->release(sd[i].ctx, u[i]);
    sd[i].ops->release(sd[i].ctx, f[i]);
    sd[i].ops->destroy(sd[i].ctx);
  }
  free(host);
  return STENCIL_OK;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  log_init(0, 1, 1);
  int count = 0;
  char why[256];
  backend_cuda.devices(&count, why, sizeof why);
  if (count == 0) {
    const char *req = getenv("STENCIL_REQUIRE_GPU");
    const int required = req && strcmp(req, "1") == 0;
    printf("test_gpu_kernels: no CUDA device (%s)%s\n", why,
           required ? "; STENCIL_REQUIRE_GPU=1: failing" : "; skipped");
    MPI_Finalize();
    return required ? 1 : SKIP;
  }
  if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
#ifdef STENCIL_CUDA_EMU
    const char *emu = " (the CPU emulation)";
#else
    const char *emu = "";
#endif
    printf("test_gpu_kernels: %d CUDA device%s%s\n", count, count > 1 ? "s" : "", emu);
    MPI_Finalize();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--residual-large") == 0) {
    CHECK(residual_large() == STENCIL_OK ? 0 : 1);
    const int rc = unit_finish("test_gpu_kernels --residual-large");
    MPI_Finalize();
    return rc;
  }
  if (argc > 1 && strcmp(argv[1], "--residual") == 0) {
    CHECK(residual_cases() == STENCIL_OK ? 0 : 1);
    const int rc = unit_finish("test_gpu_kernels --residual");
    MPI_Finalize();
    return rc;
  }
  const int64_t sizes3[][3] = {{37, 29, 23}, {70, 9, 131}, {5, 3, 2}, {1, 6, 4}};
  const int64_t sizes2[][3] = {{133, 67, 1}, {4, 301, 1}};
  /* Tier 2 tuned over every form, then with each form forced (scalar, vector, vector with the
   * deeper queue; small z chunks so a block streams through several). */
  static const char *const forms[] = {"", "32x4x8x0", "32x2x8x1", "32x4x16x2", "64x1x4x1"};
  static const int shapes[][4] = {
      {0, 0, 0, 0}, {32, 4, 8, 0}, {32, 2, 8, 1}, {32, 4, 16, 2}, {64, 1, 4, 1}};
  const int nforms = (int)(sizeof forms / sizeof forms[0]);
  for (int prec = 0; prec < 2; prec++)
    for (int tier = 1; tier <= 2 + nforms - 1; tier++)
      for (int mode = 0; mode < 4; mode++) {
        const int form = tier > 2 ? tier - 2 : 0;
        memcpy(forced_tile, shapes[form], sizeof forced_tile);
        tile_name = forms[form];
        for (int s = 0; s < 4; s++) {
          struct gcase g = {{sizes3[s][0], sizes3[s][1], sizes3[s][2]},
                            3,
                            prec ? 4 : 8,
                            tier > 2 ? 2 : tier,
                            (enum face_mode)mode,
                            4,
                            mode == FACES_MIXED,
                            1};
          CHECK(run_case(&g, 0) == STENCIL_OK ? 0 : 1);
          CHECK(run_case(&g, 1) == STENCIL_OK ? 0 : 1);
        }
        for (int s = 0; s < 2; s++) {
          struct gcase g = {{sizes2[s][0], sizes2[s][1], 1},
                            2,
                            prec ? 4 : 8,
                            tier > 2 ? 2 : tier,
                            (enum face_mode)mode,
                            4,
                            mode == FACES_MIXED,
                            1};
          CHECK(run_case(&g, 0) == STENCIL_OK ? 0 : 1);
          CHECK(run_case(&g, 1) == STENCIL_OK ? 0 : 1);
        }
      }
  memset(forced_tile, 0, sizeof forced_tile);
  tile_name = "";
  /* Radius 2 to 4 in 3D: tier 1, and tier 2's tiles (several along x and y, a block streamed
   * in chunks, cells of partial vectors in the split's shells). */
  const int64_t sizes_r[][3] = {{150, 37, 19}, {70, 9, 131}, {9, 5, 6}};
  for (int prec = 0; prec < 2; prec++)
    for (int tier = 1; tier <= 2; tier++)
      for (int mode = 0; mode < 4; mode++)
        for (int r = 2; r <= 4; r++)
          for (int s = 0; s < 3; s++) {
            struct gcase g = {{sizes_r[s][0], sizes_r[s][1], sizes_r[s][2]},
                              3,
                              prec ? 4 : 8,
                              tier,
                              (enum face_mode)mode,
                              3,
                              mode == FACES_MIXED,
                              r};
            CHECK(run_case(&g, 0) == STENCIL_OK ? 0 : 1);
            CHECK(run_case(&g, 1) == STENCIL_OK ? 0 : 1);
          }
  CHECK(nonfinite_case() == STENCIL_OK ? 0 : 1);
  CHECK(residual_cases() == STENCIL_OK ? 0 : 1);
  const int rc = unit_finish("test_gpu_kernels");
  MPI_Finalize();
  return rc;
}
