/* Unit tests of the higher-order stencils, the source term and the Poisson pieces
 * (solvers/stencils.h, solvers/poisson.h, the CPU backend's update with f and residual).
 *
 *   - weights: the stencil of order p differentiates x^q exactly for q <= p + 1 (moments:
 *     w_0 + 2 sum w_m = 0, 2 sum w_m m^2 = 2, sum w_m m^q = 0 for even 4 <= q <= p).
 *   - symbol: sigma_p(pi) = -beta_p (the spectral bound: 4, 16/3, 272/45, 2048/315), sigma_p
 *     decreasing on [0, pi], sigma_p(theta) = -theta^2 (1 + O(theta^p)).
 *   - heat_coefficients for every order: c[a][m-1] = alpha dt w_m / h^2, c0 = 1 + w_0 sum
 *     alpha dt / h^2, cf = dt; stability number 2 at the largest stable dt.
 *   - update with and without f, radius 1 to 4, fp64 and fp32, 2D and 3D, on the interior and
 *     sub-boxes: bit for bit the documented operation order (naive reference here).
 *   - residual(): the sum in double of the squares of v - u, v the update evaluated in the
 *     field's precision (the update's operations) and the difference too, against a reference
 *     to the rounding of the sum.
 *   - Jacobi: with f = L u (u random), one iteration leaves u unchanged to rounding, and
 *     residual() with Jacobi's coefficients is that iteration's sum of (u' - u)^2; the weights
 *     c0 + 2 sum c sum to 1.
 *   - poisson_exact_sum: exact where naive sums lose everything, and the same bits for any
 *     order of the values.
 *   - jacobi_log: thinning keeps every stride-th check, at most JACOBI_HISTORY_MAX. */
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
#include "solvers/poisson.h"
#include "solvers/stencils.h"
#include "unit.h"

#define PI 3.14159265358979323846

static double next_value(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (double)(*s >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static void *alloc_filled(const struct layout *l, uint64_t seed)
{
  void *p = NULL;
  if (backend_cpu.alloc(NULL, l, &p) != STENCIL_OK || !p) {
    fprintf(stderr, "test_stencils: cannot allocate\n");
    exit(1);
  }
  uint64_t s = 0x9E3779B97F4A7C15ull ^ seed;
  for (int64_t i = 0; i < l->count; i++) {
    const double x = next_value(&s);
    if (l->elem == 8)
      ((double *)p)[i] = x;
    else
      ((float *)p)[i] = (float)x;
  }
  return p;
}

static double at(const struct layout *l, const void *p, int64_t i)
{
  return l->elem == 8 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static const int orders[4] = {2, 4, 6, 8};

/* ---- weights and symbol ------------------------------------------------------------------ */

static void test_weights(void)
{
  for (int o = 0; o < 4; o++) {
    const int p = orders[o], r = p / 2;
    double w[STENCIL_MAX_RADIUS + 1];
    stencil_weights(p, w);
    EXPECT(stencil_order_supported(p), "order %d supported", p);
    double m0 = w[0], m2 = 0;
    for (int m = 1; m <= r; m++) {
      m0 += 2 * w[m];
      m2 += 2 * w[m] * m * m;
    }
    EXPECT(fabs(m0) < 1e-14, "order %d: w_0 + 2 sum w_m = %g", p, m0);
    EXPECT(fabs(m2 - 2) < 1e-14, "order %d: 2 sum w_m m^2 = %.17g", p, m2);
    for (int q = 4; q <= p; q += 2) {
      double mq = 0, scale = 0;
      for (int m = 1; m <= r; m++) {
        mq += w[m] * pow(m, q);
        scale += fabs(w[m]) * pow(m, q);
      }
      EXPECT(fabs(mq) < 1e-14 * scale, "order %d: sum w_m m^%d = %g", p, q, mq);
    }
    /* ... and not one more: x^(p+2) is not differentiated exactly. */
    double mnext = 0;
    for (int m = 1; m <= r; m++)
      mnext += w[m] * pow(m, p + 2);
    EXPECT(fabs(mnext) > 0.1, "order %d: sum w_m m^%d = %g should not vanish", p, p + 2, mnext);
    for (int m = r + 1; m <= STENCIL_MAX_RADIUS; m++)
      EXPECT(w[m] == 0, "order %d: w_%d = %g beyond the radius", p, m, w[m]);
  }
  EXPECT(!stencil_order_supported(3) && !stencil_order_supported(10), "orders 3, 10 refused");
}

static void test_symbol(void)
{
  static const double beta[4] = {4.0, 16.0 / 3.0, 272.0 / 45.0, 2048.0 / 315.0};
  static const char *const text[4] = {"4", "16/3", "272/45", "2048/315"};
  for (int o = 0; o < 4; o++) {
    const int p = orders[o];
    const double b = stencil_spectral_bound(p);
    EXPECT(fabs(b - beta[o]) <= 4e-16 * beta[o], "order %d: bound %.17g, want %.17g", p, b,
           beta[o]);
    EXPECT(fabs(stencil_symbol(p, PI) + beta[o]) <= 4e-15, "order %d: sigma(pi) = %.17g", p,
           stencil_symbol(p, PI));
    EXPECT(strcmp(stencil_bound_text(p), text[o]) == 0, "order %d: text %s", p,
           stencil_bound_text(p));
    double prev = 1;
    int monotone = 1;
    for (int i = 0; i <= 10000; i++) {
      const double s = stencil_symbol(p, PI * i / 10000);
      monotone &= s <= prev && s <= 0;
      prev = s;
    }
    EXPECT(monotone, "order %d: sigma is not decreasing and <= 0 on [0, pi]", p);
    /* sigma(theta) + theta^2 = c theta^(p+2) + ...: halving theta divides it by 2^(p+2). */
    const double t = 0.2, e1 = stencil_symbol(p, t) + t * t,
                 e2 = stencil_symbol(p, t / 2) + t * t / 4;
    const double ord = log2(e1 / e2);
    EXPECT(fabs(ord - (p + 2)) < 0.05, "order %d: sigma + theta^2 falls at order %.3f", p, ord);
    /* Small angles keep their relative accuracy (no cancellation). */
    const double tiny = 1e-9;
    EXPECT(fabs(stencil_symbol(p, tiny) / (tiny * tiny) + 1) < 1e-12, "order %d: sigma(1e-9)", p);
  }
}

static void test_heat_coefficients(void)
{
  struct config c;
  config_defaults(&c);
  c.alpha = 0.37;
  c.dt = 0.011;
  c.shape[0] = c.shape[1] = c.shape[2] = 12;
  c.spacing[0] = 0.5, c.spacing[1] = 0.3, c.spacing[2] = 0.7;
  for (int o = 0; o < 4; o++) {
    c.order = orders[o];
    double w[STENCIL_MAX_RADIUS + 1];
    stencil_weights(c.order, w);
    struct stencil_coef k;
    heat_coefficients(&c, &k);
    double sum = 0;
    EXPECT(k.radius == c.order / 2 && k.ndim == 3, "order %d: radius %d", c.order, k.radius);
    for (int a = 0; a < 3; a++) {
      const double h2 = c.spacing[a] * c.spacing[a];
      for (int m = 1; m <= 4; m++) {
        const double want = m <= k.radius ? c.alpha * c.dt * w[m] / h2 : 0.0;
        EXPECT(k.c[a][m - 1] == want, "order %d: c[%d][%d] = %.17g, want %.17g", c.order, a, m - 1,
               k.c[a][m - 1], want);
      }
      sum += c.alpha * c.dt / h2;
    }
    EXPECT(k.c0 == 1.0 + w[0] * sum, "order %d: c0 %.17g", c.order, k.c0);
    EXPECT(k.cf == c.dt, "order %d: cf %.17g", c.order, k.cf);
    struct config s = c;
    s.dt = heat_max_stable_dt(&c);
    EXPECT(fabs(heat_stability_number(&s) - 2.0) < 1e-15, "order %d: stability number %.17g",
           c.order, heat_stability_number(&s));
    const double want =
        c.dt * c.alpha * stencil_spectral_bound(c.order) * (1 / 0.25 + 1 / 0.09 + 1 / 0.49);
    EXPECT(fabs(heat_stability_number(&c) / want - 1) < 1e-15, "order %d: stability number %.17g",
           c.order, heat_stability_number(&c));
  }
}

/* ---- update with a source, and residual -------------------------------------------------- */

#define DEFINE_REF(T, NAME)                                                                        \
  static void NAME(const struct layout *l, const struct stencil_coef *k, const T *u, const T *f,   \
                   T *v, const struct box *b)                                                      \
  {                                                                                                \
    for (int64_t z = b->lo[2]; z < b->hi[2]; z++)                                                  \
      for (int64_t y = b->lo[1]; y < b->hi[1]; y++)                                                \
        for (int64_t x = b->lo[0]; x < b->hi[0]; x++) {                                            \
          const int64_t i = layout_index(l, x, y, z);                                              \
          T acc = (T)k->c0 * u[i];                                                                 \
          for (int a = 0; a < k->ndim; a++)                                                        \
            for (int m = 1; m <= k->radius; m++)                                                   \
              acc = stencil_fma((T)k->c[a][m - 1],                                                 \
                                u[i - m * l->stride[a]] + u[i + m * l->stride[a]], acc);           \
          if (f)                                                                                   \
            acc = stencil_fma((T)k->cf, f[i], acc);                                                \
          v[i] = acc;                                                                              \
        }                                                                                          \
  }
DEFINE_REF(double, ref_f64)
DEFINE_REF(float, ref_f32)

static void make_coef(int ndim, int radius, struct stencil_coef *k)
{
  memset(k, 0, sizeof *k);
  k->ndim = ndim;
  k->radius = radius;
  uint64_t s = 77 + (uint64_t)radius;
  k->c0 = 0.3 + 0.1 * next_value(&s);
  for (int a = 0; a < ndim; a++)
    for (int m = 0; m < radius; m++)
      k->c[a][m] = 0.1 * next_value(&s);
  k->cf = 0.05 + 0.01 * next_value(&s);
}

static void test_update_source(int elem, int ndim, int radius, int with_f)
{
  const int64_t n[3] = {9, 7, ndim == 3 ? 6 : 1};
  const int halo[3] = {radius, radius, ndim == 3 ? radius : 0};
  struct layout l;
  layout_init(&l, n, halo, elem);
  struct stencil_coef k;
  make_coef(ndim, radius, &k);
  void *u = alloc_filled(&l, 1), *f = alloc_filled(&l, 2), *v = alloc_filled(&l, 3),
       *w = alloc_filled(&l, 3);
  const struct box boxes[] = {
      {{0, 0, 0}, {n[0], n[1], n[2]}},
      {{0, 0, 0}, {n[0], radius, n[2]}},
      {{radius, radius, 0}, {n[0] - radius, n[1] - radius, n[2]}},
      {{n[0] - 1, 0, 0}, {n[0], n[1], n[2]}},
  };
  const void *src = with_f ? f : NULL;
  for (size_t b = 0; b < sizeof boxes / sizeof boxes[0]; b++) {
    EXPECT(step_cpu.update(NULL, &l, &k, u, src, v, &boxes[b]) == STENCIL_OK, "status");
    if (elem == 8)
      ref_f64(&l, &k, u, src, w, &boxes[b]);
    else
      ref_f32(&l, &k, u, src, w, &boxes[b]);
    int64_t bad = -1;
    for (int64_t i = 0; i < l.count && bad < 0; i++)
      if (memcmp((char *)v + i * elem, (char *)w + i * elem, (size_t)elem) != 0)
        bad = i;
    EXPECT(bad < 0, "update fp%d %dD radius %d %s, box %zu: element %lld %.17g vs %.17g", elem * 8,
           ndim, radius, with_f ? "with f" : "without f", b, (long long)bad,
           bad < 0 ? 0 : at(&l, v, bad), bad < 0 ? 0 : at(&l, w, bad));
  }
  /* residual(): sum over the interior of the squares, in double, of v - u in the field's
   * precision, v the update (the reference's values: the same operations). */
  if (elem == 8)
    ref_f64(&l, &k, u, src, w, &boxes[0]);
  else
    ref_f32(&l, &k, u, src, w, &boxes[0]);
  double want = 0;
  for (int64_t z = 0; z < n[2]; z++)
    for (int64_t y = 0; y < n[1]; y++) {
      double row = 0;
      for (int64_t x = 0; x < n[0]; x++) {
        const int64_t i = layout_index(&l, x, y, z);
        const double s = elem == 8 ? ((double *)w)[i] - ((double *)u)[i]
                                   : (double)(((float *)w)[i] - ((float *)u)[i]);
        row += s * s;
      }
      want += row;
    }
  double got = -1;
  EXPECT(backend_cpu.residual(NULL, &l, &k, u, src, &got) == STENCIL_OK, "residual status");
  /* The threads' partial sums are added in another order: to rounding of the sum. */
  EXPECT(fabs(got - want) <= 1e-14 * want, "residual fp%d %dD radius %d: %.17g vs %.17g", elem * 8,
         ndim, radius, got, want);
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, f);
  backend_cpu.release(NULL, v);
  backend_cpu.release(NULL, w);
}

/* ---- Jacobi ------------------------------------------------------------------------------ */

static void test_jacobi_fixed_point(int order, int ndim)
{
  struct config c;
  config_defaults(&c);
  c.equation = EQ_POISSON;
  c.order = order;
  c.shape[0] = 10, c.shape[1] = 9, c.shape[2] = ndim == 3 ? 8 : 1;
  c.spacing[0] = 0.1, c.spacing[1] = 0.13, c.spacing[2] = 0.08;
  struct jacobi_spectrum sp;
  jacobi_spectrum(&c, &sp);
  struct stencil_coef jac, res;
  jacobi_coefficients(&c, sp.omega, &jac);
  poisson_residual_coefficients(&c, &res);
  double total = jac.c0;
  for (int a = 0; a < ndim; a++)
    for (int m = 0; m < jac.radius; m++)
      total += 2 * jac.c[a][m];
  EXPECT(fabs(total - 1) < 1e-14, "order %d %dD: Jacobi weights sum to %.17g", order, ndim, total);
  EXPECT(sp.rho < 1 && sp.omega > 0 && sp.omega < 2 / sp.mu_max, "order %d: rho %g omega %g", order,
         sp.rho, sp.omega);
  const int r = order / 2;
  const int64_t n[3] = {c.shape[0], c.shape[1], c.shape[2]};
  const int halo[3] = {r, r, ndim == 3 ? r : 0};
  struct layout l;
  layout_init(&l, n, halo, 8);
  double *u = alloc_filled(&l, 11), *f = alloc_filled(&l, 12), *v = alloc_filled(&l, 13);
  /* f = L u, in double, so that u solves L u = f on this block with these ghost values. */
  const struct box all = {{0, 0, 0}, {n[0], n[1], n[2]}};
  struct stencil_coef lap = res;
  lap.cf = 0;
  step_cpu.update(NULL, &l, &lap, u, NULL, f, &all);
  step_cpu.update(NULL, &l, &jac, u, f, v, &all);
  double worst = 0, umax = 0, moved = 0;
  for (int64_t z = 0; z < n[2]; z++)
    for (int64_t y = 0; y < n[1]; y++)
      for (int64_t x = 0; x < n[0]; x++) {
        const int64_t i = layout_index(&l, x, y, z);
        worst = fmax(worst, fabs(v[i] - u[i]));
        umax = fmax(umax, fabs(u[i]));
        moved += (v[i] - u[i]) * (v[i] - u[i]);
      }
  /* residual() is the sum of (u' - u)^2 of that update (solvers/poisson.h): the same terms. */
  double sumsq = -1;
  backend_cpu.residual(NULL, &l, &jac, u, f, &sumsq);
  EXPECT(fabs(sumsq - moved) <= 1e-12 * moved,
         "order %d %dD: residual() %.17g, the update's sum of (u' - u)^2 %.17g", order, ndim, sumsq,
         moved);
  /* f carries the rounding of L u (terms up to beta S |u|), divided by D in the update. */
  EXPECT(worst <= 64 * 0x1p-53 * umax * stencil_spectral_bound(order),
         "order %d %dD: one Jacobi iteration moved the solution by %g", order, ndim, worst);
  backend_cpu.release(NULL, u);
  backend_cpu.release(NULL, f);
  backend_cpu.release(NULL, v);
}

/* ---- reproducible sum and the log --------------------------------------------------------- */

static void test_exact_sum(void)
{
  double a[6] = {1e16, 1.0, -1e16, 3.0, 0.25, -0.125};
  double s = 0, as = 0;
  int64_t bad = -1;
  EXPECT(poisson_exact_sum(MPI_COMM_WORLD, a, 6, 8, &s, &as, &bad) == STENCIL_OK, "status");
  /* 2^-26 quanta (2^e = 2^54 > 1e16, e - 80 = -26): all these values are multiples. */
  EXPECT(s == 4.125 && bad == 0, "exact sum %.17g (naive sums give 3.125 or 0)", s);
  uint64_t st = 5;
  enum { N = 4099 };
  static double x[N], y[N];
  for (int i = 0; i < N; i++)
    x[i] = next_value(&st) * pow(10.0, (double)(i % 7) - 3);
  double s1 = 0, s2 = 0;
  poisson_exact_sum(MPI_COMM_WORLD, x, N, 8, &s1, &as, &bad);
  for (int i = 0; i < N; i++) /* reversed, and rotated */
    y[i] = x[(N - 1 - i + 17) % N];
  poisson_exact_sum(MPI_COMM_WORLD, y, N, 8, &s2, &as, &bad);
  EXPECT(memcmp(&s1, &s2, sizeof s1) == 0, "exact sum depends on the order: %.17g vs %.17g", s1,
         s2);
  long double ref = 0;
  for (int i = 0; i < N; i++)
    ref += x[i];
  EXPECT(fabs(s1 - (double)ref) <= 1e-15 * fabs((double)ref) + 1e-18, "sum %.17g vs %.17Lg", s1,
         ref);
  float xf[3] = {1.5f, NAN, -0.25f};
  poisson_exact_sum(MPI_COMM_WORLD, xf, 3, 4, &s1, &as, &bad);
  EXPECT(s1 == 1.25 && bad == 1 && as == 1.75, "fp32 sum %g, non-finite %lld, |sum| %g", s1,
         (long long)bad, as);
  double z[2] = {0, 0};
  poisson_exact_sum(MPI_COMM_WORLD, z, 2, 8, &s1, &as, &bad);
  EXPECT(s1 == 0, "zero sum %g", s1);
}

static void test_log(void)
{
  static struct jacobi_log g;
  jacobi_log_start(&g, 1e-6, 2.0, 0, 1.0);
  EXPECT(g.target == 2e-6 && !g.converged, "target %g", g.target);
  const int64_t checks = 5 * JACOBI_HISTORY_MAX + 3;
  for (int64_t k = 1; k <= checks; k++)
    jacobi_log_add(&g, 10 * k, pow(0.5, (double)k / 1000));
  EXPECT(g.count <= JACOBI_HISTORY_MAX && g.count >= JACOBI_HISTORY_MAX / 2, "count %d", g.count);
  int ok = 1;
  for (int i = 0; i < g.count; i++)
    ok &= g.iter[i] == 10 * (int64_t)i * g.stride;
  EXPECT(ok, "thinned history: entry i must be check i * stride (stride %lld)",
         (long long)g.stride);
  EXPECT(fabs(jacobi_rate_mean(&g) - pow(0.5, 1.0 / 10000)) < 1e-12, "mean rate %.15f",
         jacobi_rate_mean(&g));
  EXPECT(fabs(jacobi_rate_last(&g) - pow(0.5, 1.0 / 10000)) < 1e-12, "last rate %.15f",
         jacobi_rate_last(&g));
  jacobi_log_final(&g, 10 * checks, 1e-7);
  EXPECT(g.converged && g.last_iter == 10 * checks && g.final_norm == 1e-7,
         "final check at the last iteration: converged %d", g.converged);
  jacobi_log_start(&g, 1e-3, 0.0, 5, 4.0); /* ||b|| = 0: relative to the first residual */
  EXPECT(g.target == 4e-3, "target %g with ||b|| = 0", g.target);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  log_init(0, 1, 1);
  test_weights();
  test_symbol();
  test_heat_coefficients();
  for (int elem = 8; elem >= 4; elem -= 4)
    for (int ndim = 2; ndim <= 3; ndim++)
      for (int r = 1; r <= 4; r++)
        for (int with_f = 0; with_f <= 1; with_f++)
          test_update_source(elem, ndim, r, with_f);
  for (int o = 0; o < 4; o++)
    for (int ndim = 2; ndim <= 3; ndim++)
      test_jacobi_fixed_point(orders[o], ndim);
  test_exact_sum();
  test_log();
  int status = unit_finish("test_stencils");
  MPI_Finalize();
  return status;
}
