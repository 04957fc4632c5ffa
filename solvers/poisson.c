#include "solvers/poisson.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "solvers/stencils.h"

#define PI 3.14159265358979323846

static double inv_h2_sum(const struct config *c)
{
  double s = 0;
  for (int a = 0; a < config_ndim(c); a++)
    s += 1.0 / (c->spacing[a] * c->spacing[a]);
  return s;
}

/* The extreme angles of one axis (stencils.h symbol): theta_lo the smallest, theta_next the
 * smallest non-zero one, theta_hi the largest (poisson.h lists the modes). */
static void axis_angles(const struct config *c, int a, double *lo, double *next, double *hi)
{
  const double n = (double)c->shape[a];
  const enum bc_kind b0 = c->bc[a][0], b1 = c->bc[a][1];
  if (b0 == BC_PERIODIC) {
    *lo = 0;
    *next = 2 * PI / n;
    *hi = c->shape[a] % 2 == 0 ? PI : PI * (n - 1) / n;
  } else if (b0 == BC_DIRICHLET && b1 == BC_DIRICHLET) {
    *lo = *next = PI / n;
    *hi = PI;
  } else if (b0 == BC_NEUMANN && b1 == BC_NEUMANN) {
    *lo = 0;
    *next = PI / n;
    *hi = PI * (n - 1) / n;
  } else { /* one Dirichlet and one Neumann face */
    *lo = *next = 0.5 * PI / n;
    *hi = PI * (n - 0.5) / n;
  }
}

void jacobi_spectrum(const struct config *c, struct jacobi_spectrum *s)
{
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(c->order, w);
  memset(s, 0, sizeof *s);
  s->d = -w[0] * inv_h2_sum(c);
  const int ndim = config_ndim(c);
  double lo = 0, hi = 0, next_min = INFINITY;
  s->singular = 1;
  for (int a = 0; a < ndim; a++) {
    double tlo, tnext, thi;
    axis_angles(c, a, &tlo, &tnext, &thi);
    const double h2 = c->spacing[a] * c->spacing[a];
    lo += -stencil_symbol(c->order, tlo) / h2;
    hi += -stencil_symbol(c->order, thi) / h2;
    const double nx = -stencil_symbol(c->order, tnext) / h2;
    next_min = nx < next_min ? nx : next_min;
    if (tlo > 0)
      s->singular = 0;
  }
  /* Singular: every axis has the theta = 0 mode, and the smallest non-zero eigenvalue has
   * theta = 0 on all axes but one. */
  s->mu_min = (s->singular ? next_min : lo) / s->d;
  s->mu_max = hi / s->d;
  s->omega = c->solver.omega > 0 ? c->solver.omega : 2.0 / (s->mu_min + s->mu_max);
  s->rho = fmax(fabs(1.0 - s->omega * s->mu_min), fabs(1.0 - s->omega * s->mu_max));
}

void jacobi_coefficients(const struct config *c, double omega, struct stencil_coef *coef)
{
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(c->order, w);
  memset(coef, 0, sizeof *coef);
  coef->ndim = config_ndim(c);
  coef->radius = config_radius(c);
  const double d = -w[0] * inv_h2_sum(c);
  coef->c0 = 1.0 - omega;
  for (int a = 0; a < coef->ndim; a++) {
    const double h2 = c->spacing[a] * c->spacing[a];
    for (int m = 1; m <= coef->radius; m++)
      coef->c[a][m - 1] = omega * w[m] / (h2 * d);
  }
  coef->cf = -omega / d;
}

void poisson_residual_coefficients(const struct config *c, struct stencil_coef *coef)
{
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(c->order, w);
  memset(coef, 0, sizeof *coef);
  coef->ndim = config_ndim(c);
  coef->radius = config_radius(c);
  coef->c0 = w[0] * inv_h2_sum(c);
  for (int a = 0; a < coef->ndim; a++)
    for (int m = 1; m <= coef->radius; m++)
      coef->c[a][m - 1] = w[m] / (c->spacing[a] * c->spacing[a]);
  coef->cf = -1.0;
}

/* ---- reproducible sums ----------------------------------------------------------------- */

__extension__ typedef __int128 wide_int;

static double value_at(const void *host, int elem, int64_t i)
{
  return elem == 8 ? ((const double *)host)[i] : (double)((const float *)host)[i];
}

int poisson_exact_sum(MPI_Comm comm, const void *host, int64_t count, int elem, double *sum,
                      double *abssum, int64_t *nonfinite)
{
  double mx = 0, as = 0;
  int64_t bad = 0;
#pragma omp parallel for reduction(max : mx) reduction(+ : as, bad) schedule(static)
  for (int64_t i = 0; i < count; i++) {
    const double x = value_at(host, elem, i);
    if (!isfinite(x)) {
      bad++;
      continue;
    }
    mx = fabs(x) > mx ? fabs(x) : mx;
    as += fabs(x);
  }
  double gmx = 0;
  CHECK_MPI(MPI_Allreduce(&mx, &gmx, 1, MPI_DOUBLE, MPI_MAX, comm));
  CHECK_MPI(MPI_Allreduce(&as, abssum, 1, MPI_DOUBLE, MPI_SUM, comm));
  CHECK_MPI(MPI_Allreduce(&bad, nonfinite, 1, MPI_INT64_T, MPI_SUM, comm));
  *sum = 0;
  if (gmx == 0)
    return STENCIL_OK;
  int e = 0;
  frexp(gmx, &e); /* gmx < 2^e */
  /* |x| 2^(80 - e) < 2^80: integers below 2^80, and 2^47 of them fit in 128 bits. */
  wide_int local = 0;
  for (int64_t i = 0; i < count; i++) {
    const double x = value_at(host, elem, i);
    if (isfinite(x))
      local += (wide_int)nearbyint(ldexp(x, 80 - e));
  }
  int size = 1;
  CHECK_MPI(MPI_Comm_size(comm, &size));
  wide_int *all = malloc(sizeof *all * (size_t)size);
  if (!all)
    FAIL(STENCIL_ERR, "out of host memory");
  const int st =
      MPI_Allgather(&local, (int)sizeof local, MPI_BYTE, all, (int)sizeof local, MPI_BYTE, comm);
  wide_int total = 0;
  for (int r = 0; r < size && st == MPI_SUCCESS; r++)
    total += all[r];
  free(all);
  CHECK_MPI(st);
  *sum = ldexp((double)total, e - 80);
  return STENCIL_OK;
}

void poisson_shift(void *host, int64_t count, int elem, double m)
{
  if (elem == 8) {
    double *u = host;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++)
      u[i] = u[i] - m;
  } else {
    float *u = host;
    const float mf = (float)m;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++)
      u[i] = u[i] - mf;
  }
}

/* ---- the residual log ------------------------------------------------------------------ */

void jacobi_log_start(struct jacobi_log *g, double tolerance, double rhs_norm, int64_t iter,
                      double norm)
{
  memset(g, 0, sizeof *g);
  g->tolerance = tolerance;
  g->rhs_norm = rhs_norm;
  g->target = tolerance * (rhs_norm > 0 ? rhs_norm : norm);
  g->first_iter = g->last_iter = iter;
  g->first_norm = g->last_norm = norm;
  g->prev_iter = -1;
  g->final_iter = iter;
  g->final_norm = norm;
  g->stride = 1;
  g->iter[0] = iter;
  g->norm[0] = norm;
  g->count = 1;
  g->checks = 1;
  g->converged = tolerance > 0 && norm <= g->target;
}

void jacobi_log_final(struct jacobi_log *g, int64_t iter, double norm)
{
  if (iter != g->last_iter)
    jacobi_log_add(g, iter, norm);
  g->final_iter = iter;
  g->final_norm = norm;
  g->converged = g->tolerance > 0 && norm <= g->target;
}

void jacobi_log_add(struct jacobi_log *g, int64_t iter, double norm)
{
  g->final_iter = iter;
  g->final_norm = norm;
  if (iter == g->last_iter) { /* the same iterate checked again */
    g->last_norm = norm;
  } else {
    g->prev_iter = g->last_iter;
    g->prev_norm = g->last_norm;
    g->last_iter = iter;
    g->last_norm = norm;
    if (g->checks % g->stride == 0) {
      if (g->count == JACOBI_HISTORY_MAX) { /* keep every other entry, double the stride */
        for (int i = 0; i < JACOBI_HISTORY_MAX / 2; i++) {
          g->iter[i] = g->iter[2 * i];
          g->norm[i] = g->norm[2 * i];
        }
        g->count = JACOBI_HISTORY_MAX / 2;
        g->stride *= 2;
      }
      if (g->checks % g->stride == 0) {
        g->iter[g->count] = iter;
        g->norm[g->count] = norm;
        g->count++;
      }
    }
    g->checks++;
  }
  g->converged = g->tolerance > 0 && norm <= g->target;
}

static double rate(double r0, double r1, int64_t k)
{
  if (k <= 0 || !(r0 > 0) || !(r1 >= 0))
    return 0;
  return pow(r1 / r0, 1.0 / (double)k);
}

double jacobi_rate_mean(const struct jacobi_log *g)
{
  return rate(g->first_norm, g->last_norm, g->last_iter - g->first_iter);
}

double jacobi_rate_last(const struct jacobi_log *g)
{
  return g->prev_iter < 0 ? 0 : rate(g->prev_norm, g->last_norm, g->last_iter - g->prev_iter);
}

/* ---- steps of the solve on a backend --------------------------------------------------- */

double poisson_norm_of(const struct jacobi_spectrum *s, double sumsq, double dv)
{
  return s->d / s->omega * sqrt(sumsq * dv);
}

int poisson_residual_norm(const struct backend_ops *ops, void *ctx, const struct layout *l,
                          const struct stencil_coef *coef, const struct jacobi_spectrum *s,
                          const void *u, const void *f, double dv, MPI_Comm comm, double *norm)
{
  double local = 0, global = 0;
  CHECK(ops->residual(ctx, l, coef, u, f, &local));
  CHECK_MPI(MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm));
  *norm = poisson_norm_of(s, global, dv);
  return STENCIL_OK;
}

int poisson_check_source(MPI_Comm comm, const char *what, const void *host, int64_t n, int elem,
                         int singular)
{
  double sum = 0, abssum = 0;
  int64_t bad = 0;
  CHECK(poisson_exact_sum(comm, host, n, elem, &sum, &abssum, &bad));
  if (bad > 0)
    FAIL0(STENCIL_ERR, "%s has %lld non-finite values (NaN or Inf)", what, (long long)bad);
  if (!singular)
    return STENCIL_OK;
  const double eps = elem == 8 ? 0x1p-53 : 0x1p-24;
  int64_t total = 0;
  CHECK_MPI(MPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, comm));
  if (fabs(sum) > 4.0 * eps * abssum)
    FAIL0(STENCIL_ERR,
          "%s: no face is Dirichlet, so lap u = f has a solution only if f has mean 0 (the "
          "integral of lap u is the boundary flux, 0 here); but mean(f) = %.6g (sum f / sum |f| "
          "= %.3g, allowed %.3g: rounding of f). Subtract the mean from f, or make a face "
          "Dirichlet",
          what, sum / (double)total, abssum > 0 ? sum / abssum : 0.0, 4.0 * eps);
  return STENCIL_OK;
}
