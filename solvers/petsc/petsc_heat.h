#pragma once
/* The heat problem of an input file, rebuilt with PETSc (fp64) on a DMDA: the independent
 * reference of stencil-petsc (docs/design/verification.md).
 *
 * Grid: the cell-centred grid of docs/user/input-format.md, one DMDA point per cell, star
 * stencil of width r = order / 2 (the radius of the Laplacian, solvers/stencils.h);
 * DM_BOUNDARY_PERIODIC along periodic axes, DM_BOUNDARY_GHOSTED along the others. A global Vec
 * holds this rank's block [xs, xs + xm) x [ys, ys + ym) x [zs, zs + zm), dense, x fastest (zm = 1
 * in 2D): the layout of the project's host blocks.
 *
 * Boundaries act through r ghost layers reflected across the face (as in every stencil
 * backend, kernels/cpu/heat_real.h): ghost layer m (m = 1..r outward) mirrors interior cell
 * m - 1 inward: Dirichlet g gives ghost = 2g - u_mirror, Neumann ghost = u_mirror. Folded into
 * an operator, the neighbour at distance m of coefficient w_m beyond a face becomes -w_m
 * (Dirichlet) or +w_m (Neumann) on the mirrored cell's column (the diagonal itself when
 * m = 1 and the cell is the edge cell), and 2 g w_m (Dirichlet) on an affine vector. The
 * operator stays symmetric (the mirror of a mirror is the same pair of cells). */
#include <petscdmda.h>
#include <petscksp.h>
#include <stdint.h>

#include "domain/decomp.h"
#include "common/error_mpi.h"
#include "io/config.h"

struct petsc_heat {
  struct config cfg; /* the problem, precision forced to fp64 */
  MPI_Comm comm;
  int ndim;
  DM da;
  PetscInt lo[3], n[3]; /* this rank's block: first global cell and cells per axis */
  PetscInt procs[3];    /* ranks along x, y, z chosen by the DMDA */
  int radius;           /* r = order / 2: the DMDA stencil width */
  Mat step;             /* heat: explicit step u^{m+1} = step u^m + affine; NULL for poisson */
  Vec affine;           /* heat: Dirichlet folding + cf f (cf = dt, as the stencil update) */
  Vec source;           /* f of /source (fp64), or NULL */
};

/* The assembled operator
 *   (M u)_p = center u_p + sum_a sum_{m=1..r} w[a][m-1] (u_{p - m e_a} + u_{p + m e_a})
 * with the boundary ghosts folded in as above, so that the stencil with ghosts is M u + g.
 * Collective. */
int petsc_heat_assemble(const struct petsc_heat *h, double center, const double w[3][4], Mat *M,
                        Vec *g);

enum implicit_scheme { IMPLICIT_CN = 0, IMPLICIT_BE = 1 };

/* Statistics of one run. */
struct petsc_heat_stats {
  int64_t steps;
  double loop_s;      /* the whole time loop, max over ranks */
  double matmult_s;   /* the MatMultAdd calls alone (explicit) or KSPSolve (implicit) */
  double max_norm;    /* max over steps 0..n of max |u| (explicit, when tracked) */
  int64_t iterations; /* implicit: KSP iterations over all steps */
  double dt;          /* the step used */
};

/* Build the DMDA, read the source f (if any: checked finite, and for a singular Poisson
 * problem for mean 0, as stencil does) and, for heat, the explicit operator. Collective. */
int petsc_heat_create(MPI_Comm comm, const struct config *c, const char *input_path,
                      struct petsc_heat *h);
void petsc_heat_destroy(struct petsc_heat *h);

/* A struct decomp describing the DMDA's blocks (for the project's HDF5 field I/O). Its
 * cart is h->comm, not owned. */
void petsc_heat_decomp(const struct petsc_heat *h, struct decomp *d);

/* The initial field of the input (analytic, or /initial/field of input_path) into u, in
 * fp64. Collective. */
int petsc_heat_initial(const struct petsc_heat *h, const char *input_path, Vec u);

/* steps explicit steps u <- step u + affine, the same discrete scheme as stencil. With
 * track_max, s->max_norm = max over m of max |u^m| (one extra reduction per step).
 * Collective. */
int petsc_heat_explicit(const struct petsc_heat *h, int64_t steps, int track_max, Vec u,
                        struct petsc_heat_stats *s);

/* The implicit reference over the same time T = steps * dt_explicit: `isteps` steps of
 * dt = T / isteps of backward Euler or Crank-Nicolson,
 *   (I - theta dt J) u^{m+1} = (I + (1 - theta) dt J) u^m + dt f,
 * J = alpha L_h (the same boundary folding and order), f the Dirichlet affine term of
 * alpha L_h plus the source /source,
 * solved with KSP CG + PCGAMG (options prefix "implicit_", relative tolerance 1e-12).
 * Collective. */
int petsc_heat_implicit(const struct petsc_heat *h, enum implicit_scheme scheme, double t_end,
                        int64_t isteps, Vec u, struct petsc_heat_stats *s);
