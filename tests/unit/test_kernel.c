/* Unit tests of the CPU backend's kernels (kernels/backend.h, backend_cpu) on small arrays,
 * in fp64 and fp32, 2D and 3D.
 *
 *   - update: against a naive reference written here with the documented operation order
 *     (v = c0 u, then + c_a (u[-m e_a] + u[+m e_a]) for a = x, y, z and m = 1..radius),
 *     bit for bit, on the whole interior and on sub-boxes, radius 1 and 2; cells outside
 *     the box are untouched. Independently of any reference: on u = i^2 + 2 j^2 + 3 k^2 with
 *     dyadic coefficients the update is exact, v = u + sum_a 2 c_a a_a.
 *   - boundary: Dirichlet g (non-zero) fills ghost(m) = 2g - u(m-1), Neumann ghost(m) = u(m-1),
 *     for m = 1..halo, only in the face's slab; everything else untouched.
 *   - fused x ghosts (with a context from create): once boundary() has taught the x-face
 *     rules, update() over boxes covering every row leaves the same x ghosts as an explicit
 *     fill, and boundary(axis 0) then skips the fill leaving the same bits; after a partial
 *     cover or with a different rule, boundary() fills the whole face as before.
 *   - pack / unpack / upload / download: dense x-fastest copies of boxes (ghosts included).
 *   - norms: sum, sum of squares, max |u| over finite interior cells, count of NaN/Inf.
 *   - heat_coefficients: c_a = alpha dt / h_a^2, c0 = 1 - 2 sum c_a. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "kernels/layout.h"
#include "kernels/step.h"
#include "solvers/heat.h"
#include "unit.h"

/* One reflecting face of u, through the cpu backend's boundaries(). */
static int boundary1(void *ctx, const struct layout *l, void *u, int axis, int side,
                     enum bc_kind kind, double value)
{
  int on[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  enum bc_kind k[3][2] = {{kind, kind}, {kind, kind}, {kind, kind}};
  double v[3][2] = {{value, value}, {value, value}, {value, value}};
  on[axis][side] = 1;
  return step_cpu.boundaries(ctx, l, u, on, k, v);
}

/* Deterministic values in [-1, 1) (xorshift64). */
static double next_value(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (double)(*s >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static void fill_random(const struct layout *l, void *buf, uint64_t seed)
{
  uint64_t s = 0x2545F4914F6CDD1Dull ^ seed;
  for (int64_t i = 0; i < l->count; i++) {
    const double x = next_value(&s);
    if (l->elem == 8)
      ((double *)buf)[i] = x;
    else
      ((float *)buf)[i] = (float)x;
  }
}

static void *alloc_or_die(const struct layout *l)
{
  void *p = NULL;
  if (backend_cpu.alloc(NULL, l, &p) != STENCIL_OK || !p) {
    fprintf(stderr, "test_kernel: cannot allocate\n");
    exit(1);
  }
  return p;
}

/* The index of the first differing element, or -1. */
static int64_t first_difference(const struct layout *l, const void *a, const void *b)
{
  const unsigned char *p = a, *q = b;
  for (int64_t i = 0; i < l->count; i++)
    if (memcmp(p + i * l->elem, q + i * l->elem, (size_t)l->elem) != 0)
      return i;
  return -1;
}

static double value_at(const struct layout *l, const void *buf, int64_t i)
{
  return l->elem == 8 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

/* ---- naive reference update, one per precision ----------------------------------------- */

#define DEFINE_REF_UPDATE(T, NAME)                                                                 \
  static void NAME(const struct layout *l, const struct stencil_coef *coef, const T *u, T *v,      \
                   const struct box *b)                                                            \
  {                                                                                                \
    for (int64_t k = b->lo[2]; k < b->hi[2]; k++)                                                  \
      for (int64_t j = b->lo[1]; j < b->hi[1]; j++)                                                \
        for (int64_t i = b->lo[0]; i < b->hi[0]; i++) {                                            \
          const int64_t at = layout_index(l, i, j, k);                                             \
          T acc = (T)coef->c0 * u[at];                                                             \
          for (int a = 0; a < coef->ndim; a++)                                                     \
            for (int m = 1; m <= coef->radius; m++) {                                              \
              const int64_t s = m * l->stride[a];                                                  \
              acc = stencil_fma((T)coef->c[a][m - 1], u[at - s] + u[at + s], acc);                 \
            }                                                                                      \
          v[at] = acc;                                                                             \
        }                                                                                          \
  }
DEFINE_REF_UPDATE(double, ref_update_f64)
DEFINE_REF_UPDATE(float, ref_update_f32)

static void ref_update(const struct layout *l, const struct stencil_coef *coef, const void *u,
                       void *v, const struct box *b)
{
  if (l->elem == 8)
    ref_update_f64(l, coef, u, v, b);
  else
    ref_update_f32(l, coef, u, v, b);
}

/* Coefficients of a stable anisotropic heat step (radius 1) or a made-up radius-2 stencil. */
static void make_coef(int ndim, int radius, struct stencil_coef *coef)
{
  struct config c;
  config_defaults(&c);
  c.alpha = 0.9;
  c.shape[0] = 8;
  c.shape[1] = 8;
  c.shape[2] = ndim == 3 ? 8 : 1;
  c.spacing[0] = 1.0;
  c.spacing[1] = 0.7;
  c.spacing[2] = 1.3;
  c.dt = 0.9 * heat_max_stable_dt(&c);
  heat_coefficients(&c, coef);
  if (radius == 2) {
    coef->radius = 2;
    for (int a = 0; a < ndim; a++) {
      coef->c[a][0] *= 4.0 / 3.0;
      coef->c[a][1] = -coef->c[a][0] / 16.0 * 1.1;
    }
  }
}

static void test_update_case(int elem, int ndim, int radius)
{
  const int64_t n[3] = {7, 5, ndim == 3 ? 4 : 1};
  const int halo[3] = {radius, radius, ndim == 3 ? radius : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  struct stencil_coef coef;
  make_coef(ndim, radius, &coef);
  void *u = alloc_or_die(&l), *v = alloc_or_die(&l), *w = alloc_or_die(&l);
  fill_random(&l, u, 1);
  fill_random(&l, v, 2);
  memcpy(w, v, (size_t)(l.count * elem));
  const struct box boxes[] = {
      {{0, 0, 0}, {n[0], n[1], n[2]}},         /* whole interior */
      {{0, 0, 0}, {n[0], n[1], 1}},            /* bottom slab */
      {{0, n[1] - 1, 0}, {n[0], n[1], n[2]}},  /* top row(s) */
      {{1, 1, 0}, {n[0] - 1, n[1] - 1, n[2]}}, /* inner part */
      {{n[0] - 1, 0, 0}, {n[0], n[1], n[2]}},  /* one column */
      {{2, 2, 0}, {2, 4, n[2]}},               /* empty */
  };
  char label[64];
  snprintf(label, sizeof label, "update fp%d %dD radius %d", elem * 8, ndim, radius);
  for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++) {
    int st = step_cpu.update(NULL, &l, &coef, u, NULL, v, &boxes[i]);
    EXPECT(st == STENCIL_OK, "%s: status %d", label, st);
    ref_update(&l, &coef, u, w, &boxes[i]);
    const int64_t d = first_difference(&l, v, w);
    EXPECT(d < 0, "%s, box %zu: element %lld is %.17g, reference %.17g", label, i, (long long)d,
           d < 0 ? 0.0 : value_at(&l, v, d), d < 0 ? 0.0 : value_at(&l, w, d));
  }
  /* The update really changed the interior (the test would pass on a no-op otherwise). */
  void *fresh = alloc_or_die(&l);
  fill_random(&l, fresh, 2);
  EXPECT(first_difference(&l, v, fresh) >= 0, "%s: the update changed nothing", label);
  backend_cpu.release(NULL, fresh);
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, v);
  backend_cpu.release(NULL, w);
}

/* u = i^2 + 2 j^2 + 3 k^2 on every cell, ghosts included; with dyadic coefficients every
 * operation is exact, and the discrete Laplacian of i^2 along x is exactly 2. */
static void test_update_exact(int elem, int ndim)
{
  const int64_t n[3] = {6, 5, ndim == 3 ? 4 : 1};
  const int halo[3] = {1, 1, ndim == 3 ? 1 : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  struct stencil_coef coef = {ndim, 1, 0.0, {{0.125}, {0.0625}, {0.03125}}, 0.0};
  if (ndim == 2)
    coef.c[2][0] = 0.0;
  coef.c0 = 1.0 - 2.0 * (coef.c[0][0] + coef.c[1][0] + coef.c[2][0]);
  const double w[3] = {1.0, 2.0, 3.0};
  void *u = alloc_or_die(&l), *v = alloc_or_die(&l);
  for (int64_t k = -halo[2]; k < n[2] + halo[2]; k++)
    for (int64_t j = -1; j <= n[1]; j++)
      for (int64_t i = -1; i <= n[0]; i++) {
        const double x = w[0] * i * i + w[1] * j * j + (ndim == 3 ? w[2] * k * k : 0.0);
        if (elem == 8)
          ((double *)u)[layout_index(&l, i, j, k)] = x;
        else
          ((float *)u)[layout_index(&l, i, j, k)] = (float)x;
      }
  const struct box all = {{0, 0, 0}, {n[0], n[1], n[2]}};
  step_cpu.update(NULL, &l, &coef, u, NULL, v, &all);
  double shift = 0; /* sum_a c_a (u[-1] + u[+1] - 2 u) = sum_a 2 c_a w_a */
  for (int a = 0; a < ndim; a++)
    shift += 2.0 * coef.c[a][0] * w[a];
  int bad = 0;
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t i = 0; i < n[0]; i++) {
        const int64_t at = layout_index(&l, i, j, k);
        const double want = value_at(&l, u, at) + shift;
        if (value_at(&l, v, at) != want && bad++ < 3)
          EXPECT(0, "exact fp%d %dD: v(%lld,%lld,%lld) = %.17g, expected %.17g", elem * 8, ndim,
                 (long long)i, (long long)j, (long long)k, value_at(&l, v, at), want);
      }
  EXPECT(bad == 0, "exact fp%d %dD: %d cells differ", elem * 8, ndim, bad);
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, v);
}

/* ---- boundary ghost fill --------------------------------------------------------------- */

static void test_boundary_case(int elem, int ndim, int axis, int side, enum bc_kind kind, double g)
{
  const int64_t n[3] = {5, 4, ndim == 3 ? 3 : 1};
  const int h = 2;
  const int halo[3] = {h, h, ndim == 3 ? h : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  void *u = alloc_or_die(&l), *want = alloc_or_die(&l);
  fill_random(&l, u, 7 + (uint64_t)(axis * 2 + side));
  memcpy(want, u, (size_t)(l.count * elem));
  /* Expected: for every cell of the face (interior extents along the other axes), the
   * ghost m cells outside equals 2g - (or +) the interior cell m - 1 inside. */
  const double two_g = 2.0 * g;
  int64_t lo[3] = {0, 0, 0}, hi[3] = {n[0], n[1], n[2]};
  lo[axis] = 0;
  hi[axis] = 1;
  for (int64_t k = lo[2]; k < hi[2]; k++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int m = 1; m <= h; m++) {
          int64_t gc[3] = {i, j, k}, ic[3] = {i, j, k};
          gc[axis] = side ? n[axis] - 1 + m : -m;
          ic[axis] = side ? n[axis] - m : m - 1;
          const int64_t gi = layout_index(&l, gc[0], gc[1], gc[2]);
          const int64_t ii = layout_index(&l, ic[0], ic[1], ic[2]);
          if (elem == 8) {
            const double in = ((double *)u)[ii];
            ((double *)want)[gi] = kind == BC_DIRICHLET ? two_g - in : in;
          } else {
            const float in = ((float *)u)[ii];
            ((float *)want)[gi] = kind == BC_DIRICHLET ? (float)two_g - in : in;
          }
        }
  int st = boundary1(NULL, &l, u, axis, side, kind, g);
  EXPECT(st == STENCIL_OK, "boundary: status %d", st);
  const int64_t d = first_difference(&l, u, want);
  EXPECT(d < 0, "boundary fp%d %dD %s %s g=%g: element %lld is %.17g, expected %.17g", elem * 8,
         ndim, config_face_name(axis, side), config_bc_name(kind), g, (long long)d,
         d < 0 ? 0.0 : value_at(&l, u, d), d < 0 ? 0.0 : value_at(&l, want, d));
  /* Dirichlet: the value on the face, (ghost(1) + u(0)) / 2, is g to rounding. */
  if (kind == BC_DIRICHLET) {
    int64_t gc[3] = {1, 1, ndim == 3 ? 1 : 0}, ic[3] = {1, 1, ndim == 3 ? 1 : 0};
    gc[axis] = side ? n[axis] : -1;
    ic[axis] = side ? n[axis] - 1 : 0;
    const double face = 0.5 * (value_at(&l, u, layout_index(&l, gc[0], gc[1], gc[2])) +
                               value_at(&l, u, layout_index(&l, ic[0], ic[1], ic[2])));
    const double tol = elem == 8 ? 1e-15 : 5e-7;
    EXPECT(fabs(face - g) <= tol * (1 + fabs(g)), "boundary fp%d %s: face value %.17g, g %.17g",
           elem * 8, config_face_name(axis, side), face, g);
  }
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, want);
}

static void test_boundary(void)
{
  for (int elem = 8; elem >= 4; elem -= 4)
    for (int ndim = 2; ndim <= 3; ndim++)
      for (int axis = 0; axis < ndim; axis++)
        for (int side = 0; side < 2; side++) {
          test_boundary_case(elem, ndim, axis, side, BC_DIRICHLET, 0.3);
          test_boundary_case(elem, ndim, axis, side, BC_DIRICHLET, -1.7);
          test_boundary_case(elem, ndim, axis, side, BC_NEUMANN, 0.0);
        }
}

/* ---- fused x-face ghosts --------------------------------------------------------------- */

/* want = v with both x faces filled explicitly (no context), then compare with v. */
static void expect_x_filled(const struct layout *l, const void *v, void *want, enum bc_kind k0,
                            double g0, enum bc_kind k1, double g1, const char *what)
{
  memcpy(want, v, (size_t)(l->count * l->elem));
  boundary1(NULL, l, want, 0, 0, k0, g0);
  boundary1(NULL, l, want, 0, 1, k1, g1);
  const int64_t d = first_difference(l, v, want);
  EXPECT(d < 0, "%s: element %lld is %.17g, explicit fill %.17g", what, (long long)d,
         d < 0 ? 0.0 : value_at(l, v, d), d < 0 ? 0.0 : value_at(l, want, d));
}

static void test_fused_ghosts(int elem, int ndim, int radius, int h)
{
  const int64_t n[3] = {7, 5, ndim == 3 ? 4 : 1};
  const int halo[3] = {h, h, ndim == 3 ? h : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  struct stencil_coef coef;
  make_coef(ndim, radius, &coef);
  void *ctx = NULL;
  EXPECT(backend_cpu.create(&ctx, &(struct backend_options){0}) == STENCIL_OK, "create");
  void *u = NULL, *v = NULL, *want = alloc_or_die(&l);
  EXPECT(backend_cpu.alloc(ctx, &l, &u) == STENCIL_OK && backend_cpu.alloc(ctx, &l, &v) == 0,
         "alloc");
  char what[128];
  const enum bc_kind k0 = BC_DIRICHLET, k1 = BC_NEUMANN;
  const double g0 = 0.3, g1 = 0.0;
  fill_random(&l, u, 11);
  fill_random(&l, v, 12);
  /* The driver's order: the faces' rules reach the context through boundary(). */
  boundary1(ctx, &l, v, 0, 0, k0, g0);
  boundary1(ctx, &l, v, 0, 1, k1, g1);
  /* Every row covered, the x extent split between two boxes on some rows. */
  const int64_t ny = n[1], nz = n[2], xs = h + 1;
  const struct box cover[] = {
      {{0, 0, 0}, {n[0], 2, nz}},
      {{0, 2, 0}, {xs, ny, nz}},
      {{xs, 2, 0}, {n[0], ny, nz}},
  };
  for (size_t i = 0; i < sizeof cover / sizeof cover[0]; i++)
    EXPECT(step_cpu.update(ctx, &l, &coef, u, NULL, v, &cover[i]) == STENCIL_OK, "update");
  snprintf(what, sizeof what, "fused fp%d %dD radius %d halo %d, after the updates", elem * 8, ndim,
           radius, h);
  expect_x_filled(&l, v, want, k0, g0, k1, g1, what); /* written by update() itself */
  boundary1(ctx, &l, v, 0, 0, k0, g0);
  boundary1(ctx, &l, v, 0, 1, k1, g1);
  snprintf(what, sizeof what, "fused fp%d %dD radius %d halo %d, after boundary()", elem * 8, ndim,
           radius, h);
  expect_x_filled(&l, v, want, k0, g0, k1, g1, what);

  /* Partial cover: the rows left out keep stale ghosts until boundary() fills the face. */
  fill_random(&l, v, 13);
  for (size_t i = 0; i < 2; i++)
    EXPECT(step_cpu.update(ctx, &l, &coef, u, NULL, v, &cover[i]) == STENCIL_OK, "update");
  memcpy(want, v, (size_t)(l.count * elem));
  boundary1(NULL, &l, want, 0, 1, k1, g1);
  EXPECT(first_difference(&l, v, want) >= 0, "partial cover: the stale ghosts are gone already");
  boundary1(ctx, &l, v, 0, 0, k0, g0);
  boundary1(ctx, &l, v, 0, 1, k1, g1);
  snprintf(what, sizeof what, "fused fp%d %dD radius %d halo %d, partial cover", elem * 8, ndim,
           radius, h);
  expect_x_filled(&l, v, want, k0, g0, k1, g1, what);

  /* A full cover, then boundary() with another rule than the updates used: a full fill. */
  for (size_t i = 0; i < sizeof cover / sizeof cover[0]; i++)
    EXPECT(step_cpu.update(ctx, &l, &coef, u, NULL, v, &cover[i]) == STENCIL_OK, "update");
  boundary1(ctx, &l, v, 0, 0, BC_DIRICHLET, -1.7);
  boundary1(ctx, &l, v, 0, 1, BC_DIRICHLET, 0.5);
  snprintf(what, sizeof what, "fused fp%d %dD radius %d halo %d, rule changed", elem * 8, ndim,
           radius, h);
  expect_x_filled(&l, v, want, BC_DIRICHLET, -1.7, BC_DIRICHLET, 0.5, what);
  backend_cpu.release(ctx, u);
  backend_cpu.release(ctx, v);
  backend_cpu.release(NULL, want);
  backend_cpu.destroy(ctx);
}

/* ---- dense copies ---------------------------------------------------------------------- */

static void test_copies(int elem, int ndim)
{
  const int64_t n[3] = {6, 5, ndim == 3 ? 4 : 1};
  const int halo[3] = {1, 1, ndim == 3 ? 1 : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  char label[32];
  snprintf(label, sizeof label, "fp%d %dD", elem * 8, ndim);
  void *u = alloc_or_die(&l), *zero = alloc_or_die(&l), *want = alloc_or_die(&l);
  memset(want, 0, (size_t)(l.count * elem));
  EXPECT(first_difference(&l, u, want) < 0, "%s: alloc is not zero-filled", label);

  /* upload: the interior gets the dense block (x fastest); ghosts stay zero. */
  const int64_t cells = n[0] * n[1] * n[2];
  unsigned char *dense = malloc((size_t)(cells * elem)), *back = malloc((size_t)(cells * elem));
  struct layout dl; /* the dense block as a layout without halo, to reuse fill_random */
  const int nohalo[3] = {0, 0, 0};
  layout_init(&dl, n, nohalo, elem);
  fill_random(&dl, dense, 11);
  EXPECT(backend_cpu.upload(NULL, &l, u, dense) == STENCIL_OK, "%s: upload", label);
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t i = 0; i < n[0]; i++)
        memcpy((unsigned char *)want + layout_index(&l, i, j, k) * elem,
               dense + ((k * n[1] + j) * n[0] + i) * elem, (size_t)elem);
  int64_t d = first_difference(&l, u, want);
  EXPECT(d < 0, "%s: upload differs at element %lld", label, (long long)d);
  EXPECT(backend_cpu.download(NULL, &l, back, u) == STENCIL_OK, "%s: download", label);
  EXPECT(memcmp(back, dense, (size_t)(cells * elem)) == 0, "%s: download != upload", label);

  /* pack a box reaching into the ghosts: dense[(k - lo) ny + (j - lo)) nx + i - lo]. */
  fill_random(&l, u, 12);
  const struct box b = {{-1, 1, ndim == 3 ? -1 : 0}, {n[0] + 1, 3, ndim == 3 ? 2 : 1}};
  const int64_t bx = b.hi[0] - b.lo[0], by = b.hi[1] - b.lo[1];
  unsigned char *buf = malloc((size_t)(box_count(&b) * elem));
  EXPECT(backend_cpu.pack(NULL, &l, u, 1, &b, (void *const *)&buf) == STENCIL_OK, "%s: pack",
         label);
  int bad = 0;
  for (int64_t k = b.lo[2]; k < b.hi[2]; k++)
    for (int64_t j = b.lo[1]; j < b.hi[1]; j++)
      for (int64_t i = b.lo[0]; i < b.hi[0]; i++) {
        const int64_t at = ((k - b.lo[2]) * by + (j - b.lo[1])) * bx + (i - b.lo[0]);
        bad += memcmp(buf + at * elem, (unsigned char *)u + layout_index(&l, i, j, k) * elem,
                      (size_t)elem) != 0;
      }
  EXPECT(bad == 0, "%s: pack: %d cells differ", label, bad);

  /* unpack new values into the same box of u: exactly those cells change. */
  memcpy(want, u, (size_t)(l.count * elem));
  struct layout bl;
  const int64_t bn[3] = {bx, by, b.hi[2] - b.lo[2]};
  layout_init(&bl, bn, nohalo, elem);
  fill_random(&bl, buf, 13);
  for (int64_t k = b.lo[2]; k < b.hi[2]; k++)
    for (int64_t j = b.lo[1]; j < b.hi[1]; j++)
      for (int64_t i = b.lo[0]; i < b.hi[0]; i++) {
        const int64_t at = ((k - b.lo[2]) * by + (j - b.lo[1])) * bx + (i - b.lo[0]);
        memcpy((unsigned char *)want + layout_index(&l, i, j, k) * elem, buf + at * elem,
               (size_t)elem);
      }
  EXPECT(backend_cpu.unpack(NULL, &l, u, 1, &b, (const void *const *)&buf) == STENCIL_OK,
         "%s: unpack", label);
  d = first_difference(&l, u, want);
  EXPECT(d < 0, "%s: unpack differs at element %lld", label, (long long)d);
  free(buf);
  free(dense);
  free(back);
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, zero);
  backend_cpu.release(NULL, want);
}

/* ---- norms ----------------------------------------------------------------------------- */

static void test_norms(int elem, int ndim)
{
  const int64_t n[3] = {7, 6, ndim == 3 ? 5 : 1};
  const int halo[3] = {1, 1, ndim == 3 ? 1 : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  void *u = alloc_or_die(&l);
  fill_random(&l, u, 21);
  /* Non-finite values: two in the interior (counted, excluded from the sums), one large
   * and one NaN in the ghosts (ignored). */
  const int64_t nan_at = layout_index(&l, 2, 3, 0), inf_at = layout_index(&l, 6, 0, n[2] - 1);
  const int64_t ghost_big = layout_index(&l, -1, 2, 0), ghost_nan = layout_index(&l, 3, n[1], 0);
  if (elem == 8) {
    double *p = u;
    p[nan_at] = NAN;
    p[inf_at] = -INFINITY;
    p[ghost_big] = 1e30;
    p[ghost_nan] = NAN;
  } else {
    float *p = u;
    p[nan_at] = NAN;
    p[inf_at] = -INFINITY;
    p[ghost_big] = 1e30f;
    p[ghost_nan] = NAN;
  }
  double sum = 0, sumsq = 0, sumabs = 0, maxabs = 0;
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t i = 0; i < n[0]; i++) {
        const double x = value_at(&l, u, layout_index(&l, i, j, k));
        if (!isfinite(x))
          continue;
        sum += x;
        sumsq += x * x;
        sumabs += fabs(x);
        maxabs = fmax(maxabs, fabs(x));
      }
  struct norms got;
  void *ctx_norms = NULL;
  EXPECT(backend_cpu.create(&ctx_norms, &(struct backend_options){0}) == STENCIL_OK, "create");
  EXPECT(backend_cpu.norms_begin(ctx_norms, &l, u) == STENCIL_OK &&
             backend_cpu.norms_end(ctx_norms, &got) == STENCIL_OK,
         "norms: status");
  /* Sums in double; the order may differ with threads: allow n eps of the sum of |x|. */
  const double tol = (double)(n[0] * n[1] * n[2]) * 2.3e-16;
  EXPECT(fabs(got.sum - sum) <= tol * sumabs, "norms fp%d %dD: sum %.17g, expected %.17g", elem * 8,
         ndim, got.sum, sum);
  EXPECT(fabs(got.sumsq - sumsq) <= tol * sumsq, "norms fp%d %dD: sumsq %.17g, expected %.17g",
         elem * 8, ndim, got.sumsq, sumsq);
  EXPECT(got.maxabs == maxabs, "norms fp%d %dD: maxabs %.17g, expected %.17g", elem * 8, ndim,
         got.maxabs, maxabs);
  EXPECT(got.nonfinite == 2, "norms fp%d %dD: %lld non-finite, expected 2", elem * 8, ndim,
         (long long)got.nonfinite);
  backend_cpu.release(NULL, u);
  backend_cpu.destroy(ctx_norms);
}

/* ---- coefficients ---------------------------------------------------------------------- */

static void test_coefficients(void)
{
  struct config c;
  config_defaults(&c);
  c.alpha = 0.37;
  c.dt = 0.011;
  c.spacing[0] = 0.5;
  c.spacing[1] = 0.3;
  c.spacing[2] = 0.7;
  c.shape[0] = c.shape[1] = c.shape[2] = 8;
  struct stencil_coef coef;
  for (int ndim = 3; ndim >= 2; ndim--) {
    if (ndim == 2)
      c.shape[2] = 1;
    heat_coefficients(&c, &coef);
    EXPECT(coef.ndim == ndim && coef.radius == 1, "coefficients: ndim %d radius %d", coef.ndim,
           coef.radius);
    double sum = 0;
    for (int a = 0; a < 3; a++) {
      const double want = a < ndim ? c.alpha * c.dt / (c.spacing[a] * c.spacing[a]) : 0.0;
      EXPECT(coef.c[a][0] == want, "%dD: c[%d] = %.17g, expected %.17g", ndim, a, coef.c[a][0],
             want);
      for (int m = 1; m < 4; m++)
        EXPECT(coef.c[a][m] == 0.0, "%dD: c[%d][%d] = %g", ndim, a, m, coef.c[a][m]);
      sum += want;
    }
    EXPECT(coef.c0 == 1.0 - 2.0 * sum, "%dD: c0 = %.17g, expected %.17g", ndim, coef.c0,
           1.0 - 2.0 * sum);
    /* The stability number at the largest stable dt is the limit 2. */
    struct config s = c;
    s.dt = heat_max_stable_dt(&c);
    EXPECT(fabs(heat_stability_number(&s) - 2.0) < 1e-15,
           "%dD: stability number %.17g at the "
           "largest stable dt",
           ndim, heat_stability_number(&s));
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  log_init(0, 1, 1);
  for (int elem = 8; elem >= 4; elem -= 4)
    for (int ndim = 2; ndim <= 3; ndim++) {
      test_update_case(elem, ndim, 1);
      test_update_case(elem, ndim, 2);
      test_update_exact(elem, ndim);
      test_copies(elem, ndim);
      test_norms(elem, ndim);
    }
  test_boundary();
  for (int elem = 8; elem >= 4; elem -= 4)
    for (int ndim = 2; ndim <= 3; ndim++) {
      test_fused_ghosts(elem, ndim, 1, 1);
      test_fused_ghosts(elem, ndim, 1, 2);
      test_fused_ghosts(elem, ndim, 2, 2);
    }
  test_coefficients();
  int status = unit_finish("test_kernel");
  MPI_Finalize();
  return status;
}
