#pragma once
/* The Poisson equation lap u = f, with the central Laplacian L of order 2, 4, 6 or 8
 * (solvers/stencils.h) on the cell-centred grid and the boundary ghosts of
 * docs/user/input-format.md, solved by damped Jacobi iteration (docs/design/verification.md,
 * "Poisson and higher-order stencils").
 *
 * With S = sum_a 1/h_a^2 and the stencil weights w_m, the discrete operator is
 *
 *   (L u)_i = w_0 S u_i + sum_a sum_{m=1..r} (w_m / h_a^2) (u[i - m e_a] + u[i + m e_a])
 *           = -D u_i + (off-diagonal part),                    D = -w_0 S = |w_0| S > 0,
 *
 * and one damped Jacobi iteration is u <- u + omega (L u - f) / D, i.e. in the update form of
 * kernels/backend.h
 *
 *   c0 = 1 - omega,  c[a][m-1] = omega w_m / (h_a^2 D),  cf = -omega / D.
 *
 * Its fixed point solves L u = f. The error e evolves as e <- (I - omega A) e, A = -L / D. The
 * sine, cosine and Fourier modes of the grid are exact eigenvectors of A for every radius
 * (the ghost reflections extend them exactly), with eigenvalues
 *
 *   mu = sum_a -sigma_p(theta_a) / (h_a^2 D),   theta_a per axis by its boundaries:
 *     Dirichlet-Dirichlet  k pi / n,          k = 1 .. n
 *     Neumann-Neumann      k pi / n,          k = 0 .. n-1
 *     Dirichlet-Neumann    (k + 1/2) pi / n,  k = 0 .. n-1
 *     periodic             2 pi k / n,        k = 0 .. n-1 (theta and 2 pi - theta: same mu)
 *
 * so the iteration matrix has spectral radius rho = max |1 - omega mu| over these modes
 * (without the constant mode when no face is Dirichlet: it is the null space of L, fixed by
 * the mean of u). Undamped Jacobi (omega = 1) does not converge here: mu reaches 2 (radius 1,
 * the checkerboard mode sin(n pi x / L) = +-1 of a Dirichlet axis, or of a periodic axis with
 * n even) and beta_p / |w_0| > 2 for orders 4 to 8 (16/15, 1.11, 1.14 times 2). The default
 * omega = 2 / (mu_min + mu_max) minimises rho, to (mu_max - mu_min) / (mu_max + mu_min). */
#include <mpi.h>
#include <stdint.h>

#include "io/config.h"
#include "kernels/backend.h"

struct jacobi_spectrum {
  double d;      /* D = |w_0| sum_a 1 / h_a^2 */
  double mu_min; /* smallest eigenvalue of A (the constant mode excluded when singular) */
  double mu_max; /* largest eigenvalue of A */
  double omega;  /* the damping in use: /solver/omega, or 2 / (mu_min + mu_max) */
  double rho;    /* spectral radius of I - omega A: the asymptotic residual reduction */
  int singular;  /* no Dirichlet face: u is defined up to a constant, mean(f) must be 0 */
};

/* The spectrum of A for the config's grid, order and boundaries, and omega and rho. Pure. */
void jacobi_spectrum(const struct config *c, struct jacobi_spectrum *s);

/* Iteration coefficients (see above) for damping omega. */
void jacobi_coefficients(const struct config *c, double omega, struct stencil_coef *coef);

/* Coefficients of L u - f in the update form: c0 = w_0 S, c[a][m-1] = w_m / h_a^2, cf = -1
 * (the PETSc comparison's operator). */
void poisson_residual_coefficients(const struct config *c, struct stencil_coef *coef);

/* Sum of the values of a dense host block (count elements of elem = 4 or 8 bytes, all finite),
 * the same to the last bit for every decomposition: each value is rounded to a multiple of
 * 2^(e - 80), 2^e > max |x| over all ranks, and the integers are summed exactly (128 bits).
 * The result is within count 2^(e - 81) of the exact sum, then rounded once to double.
 * Also the ordinary sum of |x| and the count of non-finite values (skipped). Collective. */
int poisson_exact_sum(MPI_Comm comm, const void *host, int64_t count, int elem, double *sum,
                      double *abssum, int64_t *nonfinite);

/* Subtract m from every value of the dense host block (in the block's precision). */
void poisson_shift(void *host, int64_t count, int elem, double m);

/* The record of a Jacobi solve: residual norms ||r|| = sqrt(sum r^2 dV) at the checks. */
#define JACOBI_HISTORY_MAX 2048
struct jacobi_log {
  double tolerance;   /* relative to rhs_norm (0: never converged, run all iterations) */
  double rhs_norm;    /* ||b|| = ||r|| of u = 0 (boundary data included); see jacobi_target */
  double target;      /* stop when ||r|| <= target */
  int64_t first_iter; /* iteration of the first check (0, or the restart step) */
  double first_norm;  /* its residual */
  int64_t last_iter;  /* the latest check */
  double last_norm;   /* its residual */
  int64_t prev_iter;  /* the check before it (-1: none) */
  double prev_norm;   /* its residual */
  int64_t final_iter; /* the output field (after the mean shift of singular problems) */
  double final_norm;  /* its residual */
  int converged;      /* the latest residual <= target */
  double mean_shift;  /* singular problems: the mean removed from u at the end */
  /* Every check, thinned when full: entry i is check number i * stride. */
  int64_t iter[JACOBI_HISTORY_MAX];
  double norm[JACOBI_HISTORY_MAX];
  int count;
  int64_t stride, checks;
};

/* Start a log: the target is tolerance * rhs_norm, or tolerance * first_norm when
 * rhs_norm = 0 (f = 0 and zero Dirichlet data: the solution is u = 0). */
void jacobi_log_start(struct jacobi_log *g, double tolerance, double rhs_norm, int64_t iter,
                      double norm);
/* Record a check; sets converged. */
void jacobi_log_add(struct jacobi_log *g, int64_t iter, double norm);
/* The residual of the output field: a new check if the loop's last check was at another
 * iteration; else it only replaces the final value (the rates keep the loop's checks: the mean
 * shift of a singular problem changes the residual by rounding). Sets converged. */
void jacobi_log_final(struct jacobi_log *g, int64_t iter, double norm);
/* Mean reduction factor per iteration from the first check to the last, and over the last
 * interval between checks (0 when undefined). */
double jacobi_rate_mean(const struct jacobi_log *g);
double jacobi_rate_last(const struct jacobi_log *g);

/* ---- steps of the solve on a backend (collective over comm) ------------------------------ */

/* ||f - L u|| = sqrt(dv * sum over the interior of r^2), from the Jacobi update u' of u
 * (coef: jacobi_coefficients for s->omega): u' - u = (omega / d) (f - L u) exactly, so
 * r = (d / omega) (u' - u), with u' - u evaluated by the backend's residual() in the field's
 * precision, which the backends' advance() also sums on the way without another pass over
 * memory. Its rounding is that of evaluating f - L u directly (about eps d |u|). The ghost
 * cells of u must be current. */
int poisson_residual_norm(const struct backend_ops *ops, void *ctx, const struct layout *l,
                          const struct stencil_coef *coef, const struct jacobi_spectrum *s,
                          const void *u, const void *f, double dv, MPI_Comm comm, double *norm);
/* The same norm from a sum of (u' - u)^2 over all ranks (residual() or the fused sums). */
double poisson_norm_of(const struct jacobi_spectrum *s, double sumsq, double dv);

/* Checks of f on this rank's dense host block (n cells, elem bytes each) before it is used:
 * every value finite; and when `singular` (no Dirichlet face) the compatibility condition of
 * lap u = f: sum f = 0 to within 4 eps |f| summed (eps the unit roundoff of the field
 * precision: the rounding of f's values alone), with the reproducible sum above. `what`
 * names f in messages. Every rank returns the same status. */
int poisson_check_source(MPI_Comm comm, const char *what, const void *host, int64_t n, int elem,
                         int singular);
