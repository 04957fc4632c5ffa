#include "solvers/heat.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846

void heat_coefficients(const struct config *c, struct stencil_coef *coef)
{
  memset(coef, 0, sizeof *coef);
  coef->ndim = config_ndim(c);
  coef->radius = config_radius(c);
  double sum = 0;
  for (int a = 0; a < coef->ndim; a++) {
    coef->c[a][0] = c->alpha * c->dt / (c->spacing[a] * c->spacing[a]);
    sum += coef->c[a][0];
  }
  coef->c0 = 1.0 - 2.0 * sum;
}

static double inv_h2_sum(const struct config *c)
{
  double s = 0;
  for (int a = 0; a < config_ndim(c); a++)
    s += 4.0 / (c->spacing[a] * c->spacing[a]);
  return s;
}

double heat_stability_number(const struct config *c)
{
  return c->dt * c->alpha * inv_h2_sum(c);
}

double heat_max_stable_dt(const struct config *c)
{
  return 2.0 / (c->alpha * inv_h2_sum(c));
}

/* Value of the analytic field at global cell (i, j, k). */
static double initial_value(const struct config *c, int64_t i, int64_t j, int64_t k)
{
  const struct initial_config *in = &c->initial;
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
  const int fp64 = c->precision == PREC_FP64;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t i = 0; i < n[0]; i++) {
        const double v = initial_value(c, offset[0] + i, offset[1] + j, offset[2] + k);
        const int64_t at = (k * n[1] + j) * n[0] + i;
        if (fp64)
          ((double *)host)[at] = v;
        else
          ((float *)host)[at] = (float)v;
      }
}
