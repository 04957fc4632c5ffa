#include "solvers/heat.h"

#include <math.h>
#include <string.h>

#include "solvers/stencils.h"

#define PI 3.14159265358979323846

void heat_coefficients(const struct config *c, struct stencil_coef *coef)
{
  memset(coef, 0, sizeof *coef);
  coef->ndim = config_ndim(c);
  coef->radius = config_radius(c);
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(c->order, w);
  double sum = 0;
  for (int a = 0; a < coef->ndim; a++) {
    const double h2 = c->spacing[a] * c->spacing[a];
    for (int m = 1; m <= coef->radius; m++)
      coef->c[a][m - 1] = c->alpha * c->dt * w[m] / h2;
    sum += c->alpha * c->dt / h2;
  }
  coef->c0 = 1.0 + w[0] * sum;
  coef->cf = c->dt;
}

static double bound_h2_sum(const struct config *c)
{
  const double beta = stencil_spectral_bound(c->order);
  double s = 0;
  for (int a = 0; a < config_ndim(c); a++)
    s += beta / (c->spacing[a] * c->spacing[a]);
  return s;
}

double heat_stability_number(const struct config *c)
{
  return c->dt * c->alpha * bound_h2_sum(c);
}

double heat_max_stable_dt(const struct config *c)
{
  return 2.0 / (c->alpha * bound_h2_sum(c));
}

/* Value of the analytic field `in` at global cell (i, j, k). */
static double analytic_value(const struct config *c, const struct initial_config *in, int64_t i,
                             int64_t j, int64_t k)
{
  const int64_t idx[3] = {i, j, k};
  const int ndim = config_ndim(c);
  switch (in->kind) {
  case INIT_CONSTANT: return in->value;
  case INIT_SINE: {
    double v = in->amplitude;
    for (int a = 0; a < ndim; a++)
      if (in->modes[a] != 0) {
        const double L = (double)c->shape[a] * c->spacing[a];
        v *= sin((double)in->modes[a] * PI * heat_cell_center(c, a, idx[a]) / L);
      }
    return in->offset + v;
  }
  case INIT_GAUSSIAN: {
    double r2 = 0;
    for (int a = 0; a < ndim; a++) {
      const double d = heat_cell_center(c, a, idx[a]) - in->center[a];
      r2 += d * d;
    }
    return in->offset + in->amplitude * exp(-r2 / (2.0 * in->width * in->width));
  }
  case INIT_DATASET: break;
  }
  return 0.0;
}

void heat_initial_fill(const struct config *c, const int64_t offset[3], const int64_t n[3],
                       void *host)
{
  heat_analytic_fill(c, &c->initial, offset, n, host);
}

void heat_analytic_fill(const struct config *c, const struct initial_config *spec,
                        const int64_t offset[3], const int64_t n[3], void *host)
{
  const int fp64 = c->precision == PREC_FP64;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t i = 0; i < n[0]; i++) {
        const double v = analytic_value(c, spec, offset[0] + i, offset[1] + j, offset[2] + k);
        const int64_t at = (k * n[1] + j) * n[0] + i;
        if (fp64)
          ((double *)host)[at] = v;
        else
          ((float *)host)[at] = (float)v;
      }
}
