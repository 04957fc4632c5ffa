#include "solvers/petsc/petsc_heat.h"

#include <math.h>
#include <string.h>

#include "io/field_io.h"
#include "kernels/backend.h"
#include "solvers/heat.h"
#include "solvers/petsc/petsc_check.h"
#include "solvers/poisson.h"
#include "solvers/stencils.h"

/* Offset of global cell (i, j, k) in this rank's dense block (x fastest). */
static PetscInt block_index(const struct petsc_heat *h, PetscInt i, PetscInt j, PetscInt k)
{
  return ((k - h->lo[2]) * h->n[1] + (j - h->lo[1])) * h->n[0] + (i - h->lo[0]);
}

/* petsc_heat_assemble (petsc_heat.h). A neighbour q = p_a -+ m beyond a physical face is the
 * ghost of layer m' = -q (low) or q - n + 1 (high), which mirrors interior cell m' - 1 from
 * that face: column -q - 1 or 2n - 1 - q. Periodic neighbours are passed unwrapped (q < 0 or
 * q >= n): the DMDA's ghost points map them. ADD_VALUES sums repeated columns (a mirror that
 * lands on the cell itself, or a short periodic axis). */
int petsc_heat_assemble(const struct petsc_heat *h, double center, const double w[3][4], Mat *M,
                        Vec *g)
{
  const struct config *c = &h->cfg;
  const int r = h->radius;
  CHECK_PETSC(DMCreateMatrix(h->da, M));
  CHECK_PETSC(MatSetOption(*M, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));
  CHECK_PETSC(DMCreateGlobalVector(h->da, g));
  PetscScalar *ga;
  CHECK_PETSC(VecGetArray(*g, &ga));
  for (PetscInt k = h->lo[2]; k < h->lo[2] + h->n[2]; k++)
    for (PetscInt j = h->lo[1]; j < h->lo[1] + h->n[1]; j++)
      for (PetscInt i = h->lo[0]; i < h->lo[0] + h->n[0]; i++) {
        const PetscInt p[3] = {i, j, k};
        MatStencil row = {0}, col[1 + 6 * STENCIL_MAX_RADIUS];
        PetscScalar val[1 + 6 * STENCIL_MAX_RADIUS];
        row.i = i;
        row.j = j;
        row.k = k;
        double affine = 0.0;
        col[0] = row;
        val[0] = center;
        int nc = 1;
        for (int a = 0; a < h->ndim; a++) {
          const PetscInt n = (PetscInt)c->shape[a];
          for (int s = 0; s < 2; s++)
            for (int m = 1; m <= r; m++) {
              PetscInt q = p[a] + (s ? m : -m);
              double v = w[a][m - 1];
              if (c->bc[a][s] != BC_PERIODIC && (q < 0 || q >= n)) {
                q = q < 0 ? -q - 1 : 2 * n - 1 - q;
                if (c->bc[a][s] == BC_DIRICHLET) {
                  affine += 2.0 * c->bc_value[a][s] * v;
                  v = -v;
                }
              }
              col[nc] = row;
              if (a == 0)
                col[nc].i = q;
              else if (a == 1)
                col[nc].j = q;
              else
                col[nc].k = q;
              val[nc++] = v;
            }
        }
        CHECK_PETSC(MatSetValuesStencil(*M, 1, &row, nc, col, val, ADD_VALUES));
        ga[block_index(h, i, j, k)] = affine;
      }
  CHECK_PETSC(VecRestoreArray(*g, &ga));
  CHECK_PETSC(MatAssemblyBegin(*M, MAT_FINAL_ASSEMBLY));
  CHECK_PETSC(MatAssemblyEnd(*M, MAT_FINAL_ASSEMBLY));
  return STENCIL_OK;
}

/* The source f into h->source (fp64): analytic, or /source/field of the input; checked as
 * stencil checks it (finite; mean 0 for a Poisson problem without a Dirichlet face).
 * Collective. */
static int load_source(struct petsc_heat *h, const char *input_path)
{
  CHECK_PETSC(DMCreateGlobalVector(h->da, &h->source));
  PetscScalar *fa;
  CHECK_PETSC(VecGetArray(h->source, &fa));
  const int64_t lo[3] = {h->lo[0], h->lo[1], h->lo[2]}, n[3] = {h->n[0], h->n[1], h->n[2]};
  int status = STENCIL_OK;
  if (h->cfg.source.kind == INIT_DATASET) {
    struct decomp d;
    petsc_heat_decomp(h, &d);
    status = field_read(input_path, "/source/field", &h->cfg, &d, fa, 0);
  } else {
    heat_analytic_fill(&h->cfg, &h->cfg.source, lo, n, fa);
  }
  if (!status) {
    struct jacobi_spectrum sp;
    jacobi_spectrum(&h->cfg, &sp);
    status = poisson_check_source(h->comm, "/source (f)", fa, n[0] * n[1] * n[2], 8,
                                  h->cfg.equation == EQ_POISSON && sp.singular);
  }
  CHECK_PETSC(VecRestoreArray(h->source, &fa));
  return status;
}

int petsc_heat_create(MPI_Comm comm, const struct config *c, const char *input_path,
                      struct petsc_heat *h)
{
  memset(h, 0, sizeof *h);
  h->cfg = *c;
  h->cfg.precision = PREC_FP64;
  h->comm = comm;
  h->ndim = config_ndim(c);
  h->radius = config_radius(c);
  for (int a = 0; a < h->ndim; a++)
    if (c->bc[a][0] != BC_PERIODIC && c->shape[a] < h->radius)
      FAIL0(STENCIL_ERR,
            "axis %c has %lld cells, fewer than the stencil radius %d: the ghost reflection "
            "needs at least r cells",
            "xyz"[a], (long long)c -> shape[a], h -> radius);
  if (config_points(c) > (int64_t)PETSC_MAX_INT)
    FAIL0(STENCIL_ERR,
          "the grid has %lld points, more than this PETSc build's PetscInt can index (%lld)",
          (long long)config_points(c), (long long)PETSC_MAX_INT);
  DMBoundaryType bt[3];
  for (int a = 0; a < 3; a++)
    bt[a] = c->bc[a][0] == BC_PERIODIC ? DM_BOUNDARY_PERIODIC : DM_BOUNDARY_GHOSTED;
  const PetscInt nx = (PetscInt)c->shape[0], ny = (PetscInt)c->shape[1];
  if (h->ndim == 2)
    CHECK_PETSC(DMDACreate2d(comm, bt[0], bt[1], DMDA_STENCIL_STAR, nx, ny, PETSC_DECIDE,
                             PETSC_DECIDE, 1, h->radius, NULL, NULL, &h->da));
  else
    CHECK_PETSC(DMDACreate3d(comm, bt[0], bt[1], bt[2], DMDA_STENCIL_STAR, nx, ny,
                             (PetscInt)c->shape[2], PETSC_DECIDE, PETSC_DECIDE, PETSC_DECIDE, 1,
                             h->radius, NULL, NULL, NULL, &h->da));
  CHECK_PETSC(DMSetFromOptions(h->da));
  CHECK_PETSC(DMSetUp(h->da));
  CHECK_PETSC(DMDAGetCorners(h->da, &h->lo[0], &h->lo[1], &h->lo[2], &h->n[0], &h->n[1], &h->n[2]));
  CHECK_PETSC(DMDAGetInfo(h->da, NULL, NULL, NULL, NULL, &h->procs[0], &h->procs[1], &h->procs[2],
                          NULL, NULL, NULL, NULL, NULL, NULL));
  if (h->ndim == 2) {
    h->lo[2] = 0;
    h->n[2] = 1;
    h->procs[2] = 1;
  }

  if (c->has_source)
    CHECK(load_source(h, input_path));
  if (c->equation != EQ_HEAT)
    return STENCIL_OK;
  /* The explicit step with the stencil backends' coefficients (solvers/heat.c):
   * u^{m+1} = c0 u + sum_a sum_m c[a][m-1] (u[-m e_a] + u[+m e_a]) + cf f, cf = dt. */
  struct stencil_coef coef;
  heat_coefficients(&h->cfg, &coef);
  CHECK(petsc_heat_assemble(h, coef.c0, coef.c, &h->step, &h->affine));
  if (h->source)
    CHECK_PETSC(VecAXPY(h->affine, coef.cf, h->source));
  return STENCIL_OK;
}

void petsc_heat_destroy(struct petsc_heat *h)
{
  MatDestroy(&h->step);
  VecDestroy(&h->affine);
  VecDestroy(&h->source);
  DMDestroy(&h->da);
}

void petsc_heat_decomp(const struct petsc_heat *h, struct decomp *d)
{
  memset(d, 0, sizeof *d);
  d->cart = h->comm;
  MPI_Comm_rank(h->comm, &d->rank);
  MPI_Comm_size(h->comm, &d->size);
  d->ndim = h->ndim;
  for (int a = 0; a < 3; a++) {
    d->dims[a] = (int)h->procs[a];
    d->periodic[a] = a < h->ndim && h->cfg.bc[a][0] == BC_PERIODIC;
    d->global[a] = h->cfg.shape[a];
    d->n[a] = h->n[a];
    d->offset[a] = h->lo[a];
    d->halo[a] = a < h->ndim ? h->radius : 0;
  }
}

int petsc_heat_initial(const struct petsc_heat *h, const char *input_path, Vec u)
{
  PetscScalar *ua;
  CHECK_PETSC(VecGetArray(u, &ua));
  int status = STENCIL_OK;
  if (h->cfg.initial.kind == INIT_DATASET) {
    struct decomp d;
    petsc_heat_decomp(h, &d);
    status = field_read_initial(input_path, &h->cfg, &d, ua); /* fp64: exact for any file type */
  } else {
    const int64_t lo[3] = {h->lo[0], h->lo[1], h->lo[2]}, n[3] = {h->n[0], h->n[1], h->n[2]};
    heat_initial_fill(&h->cfg, lo, n, ua);
  }
  CHECK_PETSC(VecRestoreArray(u, &ua));
  return status;
}

static int max_over_ranks(MPI_Comm comm, double *v)
{
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, comm));
  return STENCIL_OK;
}

int petsc_heat_explicit(const struct petsc_heat *h, int64_t steps, int track_max, Vec u,
                        struct petsc_heat_stats *s)
{
  memset(s, 0, sizeof *s);
  s->steps = steps;
  s->dt = h->cfg.dt;
  Vec cur = u, next;
  CHECK_PETSC(VecDuplicate(u, &next));
  PetscReal norm = 0;
  if (track_max)
    CHECK_PETSC(VecNorm(cur, NORM_INFINITY, &norm));
  s->max_norm = norm;
  CHECK_MPI(MPI_Barrier(h->comm));
  const double t0 = MPI_Wtime();
  for (int64_t m = 0; m < steps; m++) {
    const double tm = MPI_Wtime();
    CHECK_PETSC(MatMultAdd(h->step, cur, h->affine, next)); /* next = affine + step cur */
    s->matmult_s += MPI_Wtime() - tm;
    Vec t = cur;
    cur = next;
    next = t;
    if (track_max) {
      CHECK_PETSC(VecNorm(cur, NORM_INFINITY, &norm));
      s->max_norm = norm > s->max_norm ? norm : s->max_norm;
    }
  }
  CHECK_MPI(MPI_Barrier(h->comm));
  s->loop_s = MPI_Wtime() - t0;
  if (cur != u) {
    CHECK_PETSC(VecCopy(cur, u));
    next = cur;
  }
  CHECK_PETSC(VecDestroy(&next));
  CHECK(max_over_ranks(h->comm, &s->loop_s));
  CHECK(max_over_ranks(h->comm, &s->matmult_s));
  return STENCIL_OK;
}

/* The implicit time loop once the operators exist. */
static int implicit_loop(const struct petsc_heat *h, Mat lhs, Mat rhs_op, Vec forcing,
                         int64_t isteps, Vec u, struct petsc_heat_stats *s)
{
  KSP ksp;
  PC pc;
  Vec rhs;
  CHECK_PETSC(KSPCreate(h->comm, &ksp));
  CHECK_PETSC(KSPSetOptionsPrefix(ksp, "implicit_"));
  CHECK_PETSC(KSPSetOperators(ksp, lhs, lhs));
  CHECK_PETSC(KSPSetType(ksp, KSPCG));
  CHECK_PETSC(KSPGetPC(ksp, &pc));
  CHECK_PETSC(PCSetType(pc, PCGAMG));
  CHECK_PETSC(KSPSetNormType(ksp, KSP_NORM_UNPRECONDITIONED));
  CHECK_PETSC(KSPSetTolerances(ksp, 1e-12, 0.0, PETSC_DEFAULT, 10000));
  CHECK_PETSC(KSPSetInitialGuessNonzero(ksp, PETSC_TRUE));
  CHECK_PETSC(KSPSetFromOptions(ksp));
  CHECK_PETSC(KSPSetUp(ksp));
  CHECK_PETSC(VecDuplicate(u, &rhs));
  CHECK_MPI(MPI_Barrier(h->comm));
  const double t0 = MPI_Wtime();
  int status = STENCIL_OK;
  for (int64_t m = 0; m < isteps && !status; m++) {
    if (rhs_op)
      CHECK_PETSC(MatMultAdd(rhs_op, u, forcing, rhs)); /* (I + (1-theta) dt J) u + dt f */
    else
      CHECK_PETSC(VecWAXPY(rhs, 1.0, forcing, u)); /* u + dt f */
    const double ts = MPI_Wtime();
    CHECK_PETSC(KSPSolve(ksp, rhs, u));
    s->matmult_s += MPI_Wtime() - ts;
    KSPConvergedReason reason;
    PetscInt its;
    CHECK_PETSC(KSPGetConvergedReason(ksp, &reason));
    CHECK_PETSC(KSPGetIterationNumber(ksp, &its));
    s->iterations += its;
    if (reason < 0) {
      log_error0("implicit reference: KSP did not converge at step %lld: %s after %d iterations",
                 (long long)m + 1, KSPConvergedReasons[reason], (int)its);
      status = STENCIL_ERR;
    }
  }
  CHECK_MPI(MPI_Barrier(h->comm));
  s->loop_s = MPI_Wtime() - t0;
  CHECK_PETSC(VecDestroy(&rhs));
  CHECK_PETSC(KSPDestroy(&ksp));
  CHECK(status);
  CHECK(max_over_ranks(h->comm, &s->loop_s));
  CHECK(max_over_ranks(h->comm, &s->matmult_s));
  return STENCIL_OK;
}

int petsc_heat_implicit(const struct petsc_heat *h, enum implicit_scheme scheme, double t_end,
                        int64_t isteps, Vec u, struct petsc_heat_stats *s)
{
  memset(s, 0, sizeof *s);
  if (isteps < 1)
    FAIL0(STENCIL_ERR, "implicit reference: needs at least one step (got %lld)", (long long)isteps);
  const double theta = scheme == IMPLICIT_CN ? 0.5 : 1.0;
  const double dt = t_end / (double)isteps;
  s->steps = isteps;
  s->dt = dt;
  /* J = alpha L_h: neighbours alpha w_m / h_a^2, centre alpha w_0 sum_a 1 / h_a^2. */
  double sw[STENCIL_MAX_RADIUS + 1], w[3][4] = {{0}}, center = 0;
  stencil_weights(h->cfg.order, sw);
  for (int a = 0; a < h->ndim; a++) {
    const double s2 = h->cfg.alpha / (h->cfg.spacing[a] * h->cfg.spacing[a]);
    for (int m = 1; m <= h->radius; m++)
      w[a][m - 1] = s2 * sw[m];
    center += sw[0] * s2;
  }
  Mat J, lhs, rhs_op = NULL;
  Vec forcing;
  CHECK(petsc_heat_assemble(h, center, w, &J, &forcing));
  if (h->source)
    CHECK_PETSC(VecAXPY(forcing, 1.0, h->source));
  CHECK_PETSC(MatDuplicate(J, MAT_COPY_VALUES, &lhs));
  CHECK_PETSC(MatScale(lhs, -theta * dt));
  CHECK_PETSC(MatShift(lhs, 1.0));
  if (theta < 1.0) {
    CHECK_PETSC(MatDuplicate(J, MAT_COPY_VALUES, &rhs_op));
    CHECK_PETSC(MatScale(rhs_op, (1.0 - theta) * dt));
    CHECK_PETSC(MatShift(rhs_op, 1.0));
  }
  CHECK_PETSC(VecScale(forcing, dt));
  int status = implicit_loop(h, lhs, rhs_op, forcing, isteps, u, s);
  MatDestroy(&J);
  MatDestroy(&lhs);
  MatDestroy(&rhs_op);
  VecDestroy(&forcing);
  return status;
}
