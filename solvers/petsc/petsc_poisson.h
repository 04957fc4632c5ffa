#pragma once
/* The Poisson problem lap u = f of an input file, rebuilt with PETSc (fp64) on the DMDA of
 * struct petsc_heat and solved with a Krylov method: the independent reference for stencil's
 * Jacobi answer (docs/design/verification.md, "Poisson").
 *
 * The discrete system is stencil's: the central Laplacian of the input's order,
 *   (L u)_p = w_0 S u_p + sum_a sum_m (w_m / h_a^2) (u_{p - m e_a} + u_{p + m e_a}),
 * S = sum_a 1 / h_a^2, with the boundary ghosts folded in (petsc_heat.h): the stencil with
 * ghosts is L u + g, g the Dirichlet data, and the system L u = b, b = f - g. -L is symmetric
 * positive definite (semi-definite, null space the constants, when no face is Dirichlet), so
 * KSP CG with PCGAMG solves -L u = -b (options prefix "poisson_"). Without a Dirichlet face
 * the constant null space is attached to the operator and removed from b, and the solution is
 * shifted to mean 0 with the same reproducible sum as stencil (solvers/poisson.c).
 *
 * Norms are stencil's: ||v||_h = sqrt(dV sum_p v_p^2), dV the cell volume. */
#include <petscksp.h>

#include "solvers/petsc/petsc_heat.h"
#include "solvers/poisson.h"

struct petsc_poisson {
  const struct petsc_heat *h;
  Mat L;                       /* the Laplacian with the boundary folded in */
  Vec b;                       /* f - g */
  struct jacobi_spectrum spec; /* mu_min, d: lambda_min(-L) = mu_min d (poisson.h) */
  double dv;                   /* cell volume */
  double rhs_norm;             /* ||b||_h: stencil's ||b|| (the residual of u = 0) */
};

/* The result of a solve. */
struct petsc_poisson_stats {
  int64_t iterations; /* KSP iterations */
  double solve_s;     /* KSPSetUp + KSPSolve, max over ranks */
  double rtol;        /* the KSP relative tolerance in use */
  double residual;    /* ||f - L u||_h of the solution (after the mean shift) */
  double mean_shift;  /* singular problems: the mean removed */
  char reason[64];    /* KSP's converged reason */
};

/* Assemble L and b (h must have its source). Collective. */
int petsc_poisson_create(const struct petsc_heat *h, struct petsc_poisson *p);
void petsc_poisson_destroy(struct petsc_poisson *p);

/* ||L u - b||_h. Collective. */
int petsc_poisson_residual(const struct petsc_poisson *p, Vec u, double *norm);

/* Solve L u = b from u = 0 to the relative tolerance rtol (unpreconditioned residual, relative
 * to ||b||), then fix the mean when singular. Fails when KSP does not converge. Collective. */
int petsc_poisson_solve(const struct petsc_poisson *p, double rtol, Vec u,
                        struct petsc_poisson_stats *s);

/* The smallest eigenvalue of -L (without the constant mode when singular): ||L^-1||_2 is its
 * inverse, so ||u - u*||_h <= ||L u - b||_h / lambda_min for any u (with mean 0 when
 * singular), u* the exact discrete solution. */
static inline double petsc_poisson_lambda_min(const struct petsc_poisson *p)
{
  return p->spec.mu_min * p->spec.d;
}
