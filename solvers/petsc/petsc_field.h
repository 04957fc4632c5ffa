#pragma once
/* Field files for stencil-petsc: read a stencil result (final field or checkpoint: any file
 * with a /field dataset of the global shape, docs/user/output-format.md) into a DMDA vector,
 * write the PETSc result in the same layout, and measure differences. */
#include <petscvec.h>
#include <stdint.h>

#include "solvers/petsc/petsc_heat.h"

/* What a result file says about itself (attributes it lacks are left at the defaults). */
struct result_info {
  int64_t step;     /* /step, or -1 */
  int elem;         /* bytes per element of /field: 8 (fp64) or 4 (fp32) */
  char backend[32]; /* /backend, or "" */
  int has_params;   /* /parameters/time/dt and /parameters/problem/alpha were read */
  double dt, alpha; /* from /parameters */
};

/* Check that path holds a /field of the grid of c and read its attributes. Rank 0 reads,
 * every rank returns the same status and info. Collective over comm. */
int result_inspect(MPI_Comm comm, const char *path, const struct config *c,
                   struct result_info *info);

/* Read this rank's block of /field (converted to fp64, exactly) into v. Collective. */
int result_read(const struct petsc_heat *h, const char *path, Vec v);

/* Write v as a stencil output file (fp64) with the given step and backend name "petsc".
 * Collective. */
int result_write(const struct petsc_heat *h, const char *path, int64_t step, Vec v);

/* Differences between a field and the reference: maximum and L2 (sqrt(sum d^2 dV)) norms,
 * absolute and relative to the same norm of the reference. */
struct field_diff {
  double max_abs, max_rel;
  double l2_abs, l2_rel;
  double ref_max, ref_l2;
};

/* d = other - ref, its norms. Collective. */
int field_diff_compute(const struct petsc_heat *h, Vec ref, Vec other, struct field_diff *d);
