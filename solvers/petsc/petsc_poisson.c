#include "solvers/petsc/petsc_poisson.h"

#include <math.h>
#include <string.h>

#include "solvers/petsc/petsc_check.h"
#include "solvers/stencils.h"

int petsc_poisson_create(const struct petsc_heat *h, struct petsc_poisson *p)
{
  memset(p, 0, sizeof *p);
  p->h = h;
  const struct config *c = &h->cfg;
  if (!h->source)
    FAIL0(STENCIL_ERR, "the Poisson equation needs a source /source (f)");
  jacobi_spectrum(c, &p->spec);
  p->dv = 1.0;
  for (int a = 0; a < h->ndim; a++)
    p->dv *= c->spacing[a];
  /* L: centre w_0 S, neighbours w_m / h_a^2 (poisson_residual_coefficients). */
  struct stencil_coef coef;
  poisson_residual_coefficients(c, &coef);
  Vec g;
  CHECK(petsc_heat_assemble(h, coef.c0, coef.c, &p->L, &g));
  CHECK_PETSC(VecDuplicate(g, &p->b));
  CHECK_PETSC(VecWAXPY(p->b, -1.0, g, h->source)); /* b = f - g */
  CHECK_PETSC(VecDestroy(&g));
  PetscReal nb;
  CHECK_PETSC(VecNorm(p->b, NORM_2, &nb));
  p->rhs_norm = nb * sqrt(p->dv);
  return STENCIL_OK;
}

void petsc_poisson_destroy(struct petsc_poisson *p)
{
  MatDestroy(&p->L);
  VecDestroy(&p->b);
}

int petsc_poisson_residual(const struct petsc_poisson *p, Vec u, double *norm)
{
  Vec r;
  PetscReal nr;
  CHECK_PETSC(VecDuplicate(u, &r));
  CHECK_PETSC(MatMult(p->L, u, r));
  CHECK_PETSC(VecAXPY(r, -1.0, p->b));
  CHECK_PETSC(VecNorm(r, NORM_2, &nr));
  CHECK_PETSC(VecDestroy(&r));
  *norm = nr * sqrt(p->dv);
  return STENCIL_OK;
}

/* Subtract the mean of u (stencil's reproducible sum, poisson_exact_sum). Collective. */
static int remove_mean(const struct petsc_poisson *p, Vec u, double *shift)
{
  const struct petsc_heat *h = p->h;
  const int64_t n = (int64_t)h->n[0] * h->n[1] * h->n[2];
  double sum = 0, abssum = 0;
  int64_t bad = 0;
  PetscScalar *ua;
  CHECK_PETSC(VecGetArray(u, &ua));
  int status = poisson_exact_sum(h->comm, ua, n, 8, &sum, &abssum, &bad);
  if (!status) {
    *shift = sum / (double)config_points(&h->cfg);
    poisson_shift(ua, n, 8, *shift);
  }
  CHECK_PETSC(VecRestoreArray(u, &ua));
  return status;
}

int petsc_poisson_solve(const struct petsc_poisson *p, double rtol, Vec u,
                        struct petsc_poisson_stats *s)
{
  const struct petsc_heat *h = p->h;
  memset(s, 0, sizeof *s);
  s->rtol = rtol;
  Mat A;
  Vec rhs;
  MatNullSpace ns = NULL;
  CHECK_PETSC(MatDuplicate(p->L, MAT_COPY_VALUES, &A));
  CHECK_PETSC(MatScale(A, -1.0)); /* -L: symmetric positive (semi-)definite */
  CHECK_PETSC(VecDuplicate(p->b, &rhs));
  CHECK_PETSC(VecAXPBY(rhs, -1.0, 0.0, p->b));
  if (p->spec.singular) {
    CHECK_PETSC(MatNullSpaceCreate(h->comm, PETSC_TRUE, 0, NULL, &ns));
    CHECK_PETSC(MatSetNullSpace(A, ns));
    CHECK_PETSC(MatNullSpaceRemove(ns, rhs)); /* mean(f) = 0 up to rounding (checked) */
  }
  KSP ksp;
  PC pc;
  CHECK_PETSC(KSPCreate(h->comm, &ksp));
  CHECK_PETSC(KSPSetOptionsPrefix(ksp, "poisson_"));
  CHECK_PETSC(KSPSetOperators(ksp, A, A));
  CHECK_PETSC(KSPSetType(ksp, KSPCG));
  CHECK_PETSC(KSPGetPC(ksp, &pc));
  CHECK_PETSC(PCSetType(pc, PCGAMG));
  CHECK_PETSC(KSPSetNormType(ksp, KSP_NORM_UNPRECONDITIONED));
  CHECK_PETSC(KSPSetTolerances(ksp, rtol, 0.0, PETSC_DEFAULT, 100000));
  CHECK_PETSC(KSPSetFromOptions(ksp));
  CHECK_PETSC(VecSet(u, 0.0));
  CHECK_MPI(MPI_Barrier(h->comm));
  const double t0 = MPI_Wtime();
  CHECK_PETSC(KSPSetUp(ksp));
  CHECK_PETSC(KSPSolve(ksp, rhs, u));
  s->solve_s = MPI_Wtime() - t0;
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &s->solve_s, 1, MPI_DOUBLE, MPI_MAX, h->comm));
  KSPConvergedReason reason;
  PetscInt its;
  CHECK_PETSC(KSPGetConvergedReason(ksp, &reason));
  CHECK_PETSC(KSPGetIterationNumber(ksp, &its));
  CHECK_PETSC(KSPGetTolerances(ksp, &s->rtol, NULL, NULL, NULL));
  s->iterations = its;
  snprintf(s->reason, sizeof s->reason, "%s", KSPConvergedReasons[reason]);
  CHECK_PETSC(KSPDestroy(&ksp));
  CHECK_PETSC(MatNullSpaceDestroy(&ns));
  CHECK_PETSC(MatDestroy(&A));
  CHECK_PETSC(VecDestroy(&rhs));
  if (reason < 0)
    FAIL0(STENCIL_ERR,
          "Poisson reference: KSP (cg + gamg) did not converge to rtol %.3g: %s after %d "
          "iterations (try -- -poisson_ksp_rtol with a larger value, or -poisson_ksp_monitor)",
          s->rtol, s->reason, (int)its);
  if (p->spec.singular)
    CHECK(remove_mean(p, u, &s->mean_shift));
  return petsc_poisson_residual(p, u, &s->residual);
}
