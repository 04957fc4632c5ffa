#pragma once
/* The explicit heat equation u_t = alpha * lap(u), forward Euler in time, the
 * 2nd-order central Laplacian in space, on the cell-centred grid of
 * docs/input-format.md: cell i of axis a sits at x = (i + 1/2) h_a, the domain is
 * [0, n_a h_a], and boundary values act on the faces x = 0 and x = n_a h_a. */
#include "io/config.h"
#include "kernels/backend.h"

/* Update coefficients: c_a = alpha dt / h_a^2, c0 = 1 - 2 sum_a c_a. */
void heat_coefficients(const struct config *c, struct stencil_coef *coef);

/* The explicit stability number s = dt alpha sum_a 4 / h_a^2 (stable when s <= 2) and the
 * largest stable dt. */
double heat_stability_number(const struct config *c);
double heat_max_stable_dt(const struct config *c);

/* The analytic initial field on a block of cells: dense host array of n[0] x n[1] x n[2]
 * cells (x fastest) starting at global cell offset[], of elements of the config's
 * precision. Not for INIT_DATASET. */
void heat_initial_fill(const struct config *c, const int64_t offset[3], const int64_t n[3],
                       void *host);

/* Cell-centre coordinate of global cell i along axis a. */
static inline double heat_cell_center(const struct config *c, int a, int64_t i)
{
  return ((double)i + 0.5) * c->spacing[a];
}
