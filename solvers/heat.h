#pragma once
/* The explicit heat equation u_t = alpha * lap(u) [+ f], forward Euler in time, the central
 * Laplacian of order 2, 4, 6 or 8 in space (solvers/stencils.h), on the cell-centred grid of
 * docs/user/input-format.md: cell i of axis a sits at x = (i + 1/2) h_a, the domain is
 * [0, n_a h_a], and boundary values act on the faces x = 0 and x = n_a h_a. f is an optional
 * time-independent source (/source). */
#include "io/config.h"
#include "kernels/backend.h"

/* Update coefficients, with w_m the stencil weights of the order:
 *   c[a][m-1] = alpha dt w_m / h_a^2,  c0 = 1 + w_0 sum_a alpha dt / h_a^2,  cf = dt.
 * For order 2 (w_0 = -2, w_1 = 1) that is c_a = alpha dt / h_a^2, c0 = 1 - 2 sum_a c_a. */
void heat_coefficients(const struct config *c, struct stencil_coef *coef);

/* The explicit stability number s = dt alpha beta_p sum_a 1 / h_a^2, beta_p the spectral bound
 * of the order's 1D stencil (4, 16/3, 272/45, 2048/315): forward Euler is stable when s <= 2.
 * Also the largest stable dt. */
double heat_stability_number(const struct config *c);
double heat_max_stable_dt(const struct config *c);

/* An analytic field (constant, sine or gaussian; docs/user/input-format.md) on a block of cells:
 * dense host array of n[0] x n[1] x n[2] cells (x fastest) starting at global cell offset[],
 * of elements of the config's precision, values computed in double and rounded once. */
void heat_analytic_fill(const struct config *c, const struct initial_config *spec,
                        const int64_t offset[3], const int64_t n[3], void *host);

/* heat_analytic_fill of /initial. Not for INIT_DATASET. */
void heat_initial_fill(const struct config *c, const int64_t offset[3], const int64_t n[3],
                       void *host);

/* Cell-centre coordinate of global cell i along axis a. */
static inline double heat_cell_center(const struct config *c, int a, int64_t i)
{
  return ((double)i + 0.5) * c->spacing[a];
}
