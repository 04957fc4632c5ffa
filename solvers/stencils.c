#include "solvers/stencils.h"

#include <math.h>

/* Numerators and denominators of w_0 .. w_r (see stencils.h). */
static const double num[4][STENCIL_MAX_RADIUS + 1] = {
    {-2, 1, 0, 0, 0},
    {-5, 4, -1, 0, 0},
    {-49, 3, -3, 1, 0},
    {-205, 8, -1, 8, -1},
};
static const double den[4][STENCIL_MAX_RADIUS + 1] = {
    {1, 1, 1, 1, 1},
    {2, 3, 12, 1, 1},
    {18, 2, 20, 90, 1},
    {72, 5, 5, 315, 560},
};

int stencil_order_supported(int order)
{
  return order == 2 || order == 4 || order == 6 || order == 8;
}

void stencil_weights(int order, double w[STENCIL_MAX_RADIUS + 1])
{
  const int row = order / 2 - 1;
  for (int m = 0; m <= STENCIL_MAX_RADIUS; m++)
    w[m] = num[row][m] / den[row][m];
}

double stencil_symbol(int order, double theta)
{
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(order, w);
  /* w_0 = -2 sum_m w_m, so sigma = 2 sum_m w_m (cos(m theta) - 1) = -4 sum_m w_m sin^2(m theta
   * / 2): no cancellation for small theta (where sigma ~ -theta^2). */
  double s = 0;
  for (int m = 1; m <= order / 2; m++) {
    const double sn = sin(0.5 * (double)m * theta);
    s -= 4.0 * w[m] * sn * sn;
  }
  return s;
}

double stencil_spectral_bound(int order)
{
  double w[STENCIL_MAX_RADIUS + 1];
  stencil_weights(order, w);
  /* At theta = pi, cos(m pi) = (-1)^m and w_m has the sign of (-1)^(m+1): every term adds. */
  double b = fabs(w[0]);
  for (int m = 1; m <= order / 2; m++)
    b += 2.0 * fabs(w[m]);
  return b;
}

const char *stencil_bound_text(int order)
{
  static const char *const text[4] = {"4", "16/3", "272/45", "2048/315"};
  return text[order / 2 - 1];
}
