/* stencil-petsc: the heat or Poisson problem of a stencil input solved again with PETSc
 * (DMDA, fp64, assembled operator: explicit steps for heat, KSP CG + GAMG for Poisson), its
 * result written in stencil's output layout, and compared with a stencil result. See --help
 * and docs/design/verification.md. */
#include <errno.h>
#include <float.h>
#include <hdf5.h>
#include <libgen.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <petscsys.h>

#include "common/error_mpi.h"
#include "io/config.h"
#include "io/field_io.h"
#include "io/h5util.h"
#include "solvers/heat.h"
#include "solvers/petsc/petsc_check.h"
#include "solvers/petsc/petsc_field.h"
#include "solvers/petsc/petsc_heat.h"
#include "solvers/petsc/petsc_poisson.h"
#include "solvers/stencils.h"
#include "stencil_version.h"

/* Exit status when the compared field differs by more than the tolerance. */
#define EXIT_MISMATCH 4

struct popts {
  const char *input, *compare, *output, *report_json;
  double rtol;
  int have_rtol;
  int64_t steps; /* -1: from the compared file's /step, else the input */
  int no_output, overwrite, allow_unstable, quiet, help, version;
  int implicit;
  enum implicit_scheme scheme;
  double jacobi_residual; /* Poisson: the compared run's stopping residual (0: from input) */
  double ksp_rtol;        /* Poisson: KSP relative tolerance */
  int64_t refine;         /* implicit dt = dt / refine ... */
  double implicit_dt;     /* ... unless this is > 0 */
  int petsc_argc;         /* arguments after "--", for PETSc */
  char **petsc_argv;
};

static void print_help(void)
{
  printf(
      "Usage: stencil-petsc INPUT.h5 [options] [-- PETSC_OPTIONS]\n"
      "       mpirun -n P stencil-petsc INPUT.h5 [options] [-- PETSC_OPTIONS]\n"
      "\n"
      "Solves the problem of INPUT.h5 (docs/user/input-format.md) again with PETSc: the same\n"
      "cell-centred grid, boundaries, stencil order and source on a DMDA, in fp64. Heat: the\n"
      "explicit step assembled as a matrix (u <- A u + b, MatMultAdd). Poisson: the discrete\n"
      "system L u = f solved with KSP CG + GAMG. Writes the result in stencil's output layout\n"
      "and, with --compare, reports the difference from a stencil result\n"
      "(docs/design/verification.md).\n"
      "\n"
      "Options:\n"
      "  --compare RESULT.h5  a stencil result or checkpoint (a /field of the input's grid):\n"
      "                       print max and L2 differences, absolute and relative, and exit\n"
      "                       with status %d if the relative max difference exceeds --rtol\n"
      "  --rtol X             tolerance on max|stencil - petsc| / max|petsc| (default, heat:\n"
      "                       1e-12 for an fp64 result, for fp32 the worst-case rounding\n"
      "                       bound; Poisson: the bound from the Jacobi stopping residual)\n"
      "  --jacobi-residual R  Poisson: the compared run's final residual ||f - L u|| (default:\n"
      "                       /solver/tolerance x ||b||, the residual a converged run stops at)\n"
      "  --ksp-rtol X         Poisson: relative tolerance of the CG solve (default 1e-13)\n"
      "  --steps N            time steps (default: RESULT's /step, else /time/steps)\n"
      "  --output FILE        where the PETSc result goes (default:\n"
      "                       <output directory>/petsc_<final name> of the input)\n"
      "  --no-output          do not write the PETSc result\n"
      "  --overwrite          replace the output file if it exists\n"
      "  --implicit           also run an implicit reference (CG + GAMG each step) at a smaller\n"
      "                       dt over the same time, and report the explicit run's\n"
      "                       time-discretisation error\n"
      "  --implicit-scheme S  cn (Crank-Nicolson, default) or be (backward Euler)\n"
      "  --implicit-refine R  implicit dt = dt / R (default 10)\n"
      "  --implicit-dt DT     implicit dt (must divide steps x dt); overrides --implicit-refine\n"
      "  --report-json FILE   also write the results as JSON to FILE\n"
      "  --allow-unstable     run even if dt exceeds the explicit stability limit\n"
      "  --quiet              print only errors, warnings and the verdict\n"
      "  --version            print versions and exit\n"
      "  --help               print this help and exit\n"
      "\n"
      "PETSc options go after \"--\" (or in PETSC_OPTIONS), e.g. -- -log_view, or\n"
      "-implicit_ksp_rtol 1e-10 -implicit_ksp_monitor for the implicit solver.\n"
      "\n"
      "Exit status: 0 success, 1 error, 2 bad command line, %d difference above tolerance.\n",
      EXIT_MISMATCH, EXIT_MISMATCH);
}

/* ---- command line ---------------------------------------------------------------------- */

static int parse_double(const char *opt, const char *s, double min, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < min)
    FAIL0(STENCIL_ERR_USAGE, "%s expects a number >= %g, got \"%s\"", opt, min, s);
  *out = v;
  return STENCIL_OK;
}

static int parse_int(const char *opt, const char *s, int64_t min, int64_t *out)
{
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min)
    FAIL0(STENCIL_ERR_USAGE, "%s expects an integer >= %lld, got \"%s\"", opt, (long long)min, s);
  *out = v;
  return STENCIL_OK;
}

/* One option of the command line, name and value (NULL for a flag) split already. */
static int set_option(struct popts *o, const char *name, const char *val)
{
  if (strcmp(name, "--no-output") == 0)
    o->no_output = 1;
  else if (strcmp(name, "--overwrite") == 0)
    o->overwrite = 1;
  else if (strcmp(name, "--implicit") == 0)
    o->implicit = 1;
  else if (strcmp(name, "--allow-unstable") == 0)
    o->allow_unstable = 1;
  else if (strcmp(name, "--quiet") == 0)
    o->quiet = 1;
  else if (strcmp(name, "--help") == 0)
    o->help = 1;
  else if (strcmp(name, "--version") == 0)
    o->version = 1;
  else if (strcmp(name, "--compare") == 0)
    o->compare = val;
  else if (strcmp(name, "--output") == 0)
    o->output = val;
  else if (strcmp(name, "--report-json") == 0)
    o->report_json = val;
  else if (strcmp(name, "--rtol") == 0) {
    CHECK(parse_double(name, val, 0.0, &o->rtol));
    o->have_rtol = 1;
  } else if (strcmp(name, "--steps") == 0)
    CHECK(parse_int(name, val, 0, &o->steps));
  else if (strcmp(name, "--jacobi-residual") == 0)
    CHECK(parse_double(name, val, DBL_MIN, &o->jacobi_residual));
  else if (strcmp(name, "--ksp-rtol") == 0)
    CHECK(parse_double(name, val, DBL_MIN, &o->ksp_rtol));
  else if (strcmp(name, "--implicit-refine") == 0) {
    CHECK(parse_int(name, val, 1, &o->refine));
    o->implicit = 1;
  } else if (strcmp(name, "--implicit-dt") == 0) {
    CHECK(parse_double(name, val, DBL_MIN, &o->implicit_dt));
    o->implicit = 1;
  } else if (strcmp(name, "--implicit-scheme") == 0) {
    if (strcmp(val, "cn") == 0)
      o->scheme = IMPLICIT_CN;
    else if (strcmp(val, "be") == 0)
      o->scheme = IMPLICIT_BE;
    else
      FAIL0(STENCIL_ERR_USAGE, "--implicit-scheme expects cn or be, got \"%s\"", val);
    o->implicit = 1;
  } else
    FAIL0(STENCIL_ERR_USAGE, "unknown option \"%s\" (see --help)", name);
  return STENCIL_OK;
}

/* Options take their value as the next argument or after "=". */
static int parse_options(int argc, char **argv, struct popts *o)
{
  memset(o, 0, sizeof *o);
  o->steps = -1;
  o->refine = 10;
  o->ksp_rtol = 1e-13;
  o->scheme = IMPLICIT_CN;
  for (int i = 1; i < argc; i++) {
    char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      o->petsc_argc = argc - i - 1;
      o->petsc_argv = argv + i + 1;
      break;
    }
    if (arg[0] != '-' || arg[1] == '\0') {
      if (o->input)
        FAIL0(STENCIL_ERR_USAGE, "one input file expected, got \"%s\" and \"%s\"", o->input, arg);
      o->input = arg;
      continue;
    }
    if (arg[1] != '-')
      FAIL0(STENCIL_ERR_USAGE, "unknown option \"%s\" (PETSc options go after \"--\")", arg);
    char name[64];
    const char *val = NULL, *eq = strchr(arg, '=');
    const size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= sizeof name)
      FAIL0(STENCIL_ERR_USAGE, "unknown option \"%s\"", arg);
    memcpy(name, arg, len);
    name[len] = '\0';
    static const char *const flags[] = {"--no-output",      "--overwrite", "--implicit",
                                        "--allow-unstable", "--quiet",     "--help",
                                        "--version",        NULL};
    static const char *const valued[] = {"--compare",
                                         "--output",
                                         "--report-json",
                                         "--rtol",
                                         "--steps",
                                         "--implicit-refine",
                                         "--implicit-dt",
                                         "--implicit-scheme",
                                         "--jacobi-residual",
                                         "--ksp-rtol",
                                         NULL};
    int is_flag = 0, is_valued = 0;
    for (int f = 0; flags[f]; f++)
      is_flag |= strcmp(name, flags[f]) == 0;
    for (int f = 0; valued[f]; f++)
      is_valued |= strcmp(name, valued[f]) == 0;
    if (!is_flag && !is_valued)
      FAIL0(STENCIL_ERR_USAGE, "unknown option \"%s\" (see --help)", name);
    if (is_flag && eq)
      FAIL0(STENCIL_ERR_USAGE, "%s takes no value", name);
    if (is_valued) {
      if (eq)
        val = eq + 1;
      else if (i + 1 < argc)
        val = argv[++i];
      else
        FAIL0(STENCIL_ERR_USAGE, "%s needs a value", name);
    }
    CHECK(set_option(o, name, val));
  }
  if (!o->input && !o->help && !o->version)
    FAIL0(STENCIL_ERR_USAGE, "no input file given (usage: stencil-petsc INPUT.h5 [options]; "
                             "see --help)");
  if (o->output && o->no_output)
    FAIL0(STENCIL_ERR_USAGE, "--output and --no-output contradict each other");
  return STENCIL_OK;
}

/* ---- the rounding bound (docs/design/verification.md) -----------------------------------------
 */

/* Worst-case bound on max |stencil - petsc| after n steps:
 *   delta = (K_s eps_s + K_p eps_p) (A M + dt F)    (the rounding of one step, per cell),
 *   K_s = 3 d r + 12 (+ 2 with a source),  K_p = 6 d r + 4 (+ 2 with a source),
 *   B = e0 + n delta                   when A = |c0| + 2 sum_a sum_m |c_am| <= 1,
 *   B = sqrt(N) (e0 + n delta)         otherwise,
 * eps the unit roundoff of stencil's precision (s) and of PETSc (p, fp64), M the largest |u|
 * over the run and the Dirichlet values, F = max |f|, N the number of cells, e0 = eps_s M
 * when stencil rounded the initial field to fp32. A <= 1 (order 2 within the stability
 * limit) makes the step a max-norm contraction, so earlier rounding errors are never
 * amplified. Orders 4 to 8 have negative weights and A > 1, but the step matrix is symmetric
 * with its spectrum in [-1, 1] when the stability number is <= 2: a 2-norm contraction,
 * and max |e| <= ||e||_2 <= sqrt(N) max |e|. */
static double rounding_bound(const struct config *c, int64_t n, int stencil_elem, double M,
                             double F)
{
  const int d = config_ndim(c), r = config_radius(c), src = c->has_source ? 2 : 0;
  const double eps_p = DBL_EPSILON / 2, eps_s = stencil_elem == 4 ? FLT_EPSILON / 2 : eps_p;
  const double k_s = 3.0 * d * r + 12.0 + src, k_p = 6.0 * d * r + 4.0 + src;
  const double e0 = stencil_elem == 4 ? eps_s * M : 0.0;
  struct stencil_coef coef;
  heat_coefficients(c, &coef);
  double A = fabs(coef.c0);
  for (int a = 0; a < d; a++)
    for (int m = 0; m < r; m++)
      A += 2.0 * fabs(coef.c[a][m]);
  const double delta = (k_s * eps_s + k_p * eps_p) * (A * M + c->dt * F);
  const double B = e0 + (double)n * delta;
  return A <= 1.0 + 1e-12 ? B : sqrt((double)config_points(c)) * B;
}

static double largest_boundary_value(const struct config *c)
{
  double g = 0;
  for (int a = 0; a < config_ndim(c); a++)
    for (int s = 0; s < 2; s++)
      if (c->bc[a][s] == BC_DIRICHLET)
        g = fmax(g, fabs(c->bc_value[a][s]));
  return g;
}

/* ---- the run --------------------------------------------------------------------------- */

struct outcome {
  int64_t steps;
  struct petsc_heat_stats expl;
  char output[CONFIG_PATH_MAX + 300];
  int compared;
  struct result_info info;
  struct field_diff diff;
  double bound, bound_rel, rtol;
  int pass;
  int implicit_done;
  struct petsc_heat_stats impl;
  struct field_diff time_err;
  /* Poisson */
  int poisson;
  struct petsc_poisson_stats ps;
  double rhs_norm;        /* ||b||_h */
  double lambda_min;      /* smallest eigenvalue of -L_h (constant mode excluded) */
  double jacobi_residual; /* the compared run's stopping residual, the bound's input */
  const char *jr_from;    /* where it came from */
  double file_residual;   /* ||f - L u||_h of the compared field, recomputed here */
  double bound_l2;        /* bound on the L2 difference */
};

static int resolve_steps(const struct popts *o, const struct config *c,
                         const struct result_info *info, int64_t *steps)
{
  if (o->steps >= 0 && info->step >= 0 && o->steps != info->step)
    FAIL0(STENCIL_ERR_USAGE, "--steps %lld but %s holds step %lld", (long long)o->steps, o->compare,
          (long long)info->step);
  *steps = o->steps >= 0 ? o->steps : info->step >= 0 ? info->step : c->steps;
  if (info->has_params && (info->dt != c->dt || info->alpha != c->alpha))
    FAIL0(STENCIL_ERR,
          "%s was computed with dt = %.17g, alpha = %.17g but %s has dt = %.17g, alpha = %.17g: "
          "not the same problem",
          o->compare, info->dt, info->alpha, o->input, c->dt, c->alpha);
  return STENCIL_OK;
}

/* The output path, and a check that it may be written. Collective. */
static int prepare_output(MPI_Comm comm, const struct popts *o, const struct config *c,
                          struct outcome *r)
{
  if (o->no_output)
    return STENCIL_OK;
  if (o->output) {
    char dir[CONFIG_PATH_MAX], base[CONFIG_PATH_MAX];
    if (strlen(o->output) >= sizeof dir)
      FAIL0(STENCIL_ERR_USAGE, "--output: name too long");
    strcpy(dir, o->output);
    strcpy(base, o->output);
    snprintf(r->output, sizeof r->output, "%s", o->output);
    const char *b = basename(base);
    CHECK(output_prepare(comm, dirname(dir), b, o->overwrite));
  } else {
    char name[300]; /* /output/final has at most 255 characters */
    snprintf(name, sizeof name, "petsc_%s", c->output_final);
    snprintf(r->output, sizeof r->output, "%s/%s", c->output_dir, name);
    CHECK(output_prepare(comm, c->output_dir, name, o->overwrite));
  }
  return STENCIL_OK;
}

static void print_header(const struct popts *o, const struct petsc_heat *h, int64_t steps,
                         const struct result_info *info, enum precision input_precision)
{
  const struct config *c = &h->cfg;
  PetscInt major = 0, minor = 0, sub = 0;
  PetscGetVersionNumber(&major, &minor, &sub, NULL);
  log_info0("stencil-petsc %s: PETSc %d.%d.%d reference for %s\n", STENCIL_VERSION, (int)major,
            (int)minor, (int)sub, o->input);
  log_info0("grid         %lld x %lld x %lld (%dD), spacing %g %g %g, PETSc in fp64 (input "
            "precision %s)\n",
            (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2], h->ndim,
            c->spacing[0], c->spacing[1], c->spacing[2], config_precision_name(input_precision));
  if (c->equation == EQ_HEAT)
    log_info0("equation     heat, order %d, alpha %g, dt %g (stability number %.4g, limit 2)%s\n",
              c->order, c->alpha, c->dt, heat_stability_number(c),
              c->has_source ? ", source f" : "");
  else
    log_info0("equation     poisson, order %d, lap u = f\n", c->order);
  log_info0("boundaries  ");
  for (int a = 0; a < h->ndim; a++)
    for (int s = 0; s < 2; s++) {
      if (c->bc[a][s] == BC_DIRICHLET)
        log_info0(" %s=dirichlet(%g)", config_face_name(a, s), c->bc_value[a][s]);
      else
        log_info0(" %s=%s", config_face_name(a, s), config_bc_name(c->bc[a][s]));
    }
  log_info0("\n");
  if (c->equation == EQ_HEAT)
    log_info0("steps        %lld (%s)\n", (long long)steps,
              o->steps >= 0     ? "--steps"
              : info->step >= 0 ? "the compared file's /step"
                                : "input");
  int size;
  MPI_Comm_size(h->comm, &size);
  log_info0("ranks        %d = %d x %d x %d (DMDA, stencil width %d), %s\n", size, (int)h->procs[0],
            (int)h->procs[1], (int)h->procs[2], h->radius,
            c->equation == EQ_HEAT ? "explicit step: assembled AIJ matrix, MatMultAdd"
                                   : "KSP cg + gamg on the assembled Laplacian");
}

static int compare(const struct popts *o, const struct petsc_heat *h, Vec u, struct outcome *r)
{
  Vec other;
  CHECK_PETSC(VecDuplicate(u, &other));
  CHECK(result_read(h, o->compare, other));
  CHECK(field_diff_compute(h, u, other, &r->diff));
  CHECK_PETSC(VecDestroy(&other));
  const double M = fmax(r->expl.max_norm, largest_boundary_value(&h->cfg));
  PetscReal F = 0;
  if (h->source)
    CHECK_PETSC(VecNorm(h->source, NORM_INFINITY, &F));
  r->bound = rounding_bound(&h->cfg, r->steps, r->info.elem, M, F);
  r->bound_rel = r->diff.ref_max > 0 ? r->bound / r->diff.ref_max : INFINITY;
  r->rtol = o->have_rtol ? o->rtol : r->info.elem == 8 ? 1e-12 : r->bound_rel;
  r->pass = r->diff.max_rel <= r->rtol;
  r->compared = 1;
  const struct field_diff *d = &r->diff;
  log_info0("compare      %s (%s, step %lld, backend %s)\n", o->compare,
            r->info.elem == 8 ? "fp64" : "fp32", (long long)r->info.step,
            r->info.backend[0] ? r->info.backend : "?");
  log_info0("  max |stencil - petsc|  %.6e   relative %.6e   (max |petsc| %.6e)\n", d->max_abs,
            d->max_rel, d->ref_max);
  log_info0("  L2  |stencil - petsc|  %.6e   relative %.6e   (L2 petsc %.6e)\n", d->l2_abs,
            d->l2_rel, d->ref_l2);
  log_info0(
      "  rounding bound         %.6e   relative %.6e   (worst case, docs/design/verification.md)\n",
      r->bound, r->bound_rel);
  log_info0("  tolerance              relative %.6e (%s)\n", r->rtol,
            o->have_rtol        ? "--rtol"
            : r->info.elem == 8 ? "fp64 default"
                                : "fp32: the bound");
  if (r->rtol < r->bound_rel)
    log_info0("  note: the worst-case rounding bound exceeds the tolerance; a failure between "
              "them may still be rounding (rerun with --rtol %.3g to accept it)\n",
              r->bound_rel);
  if (log_rank() == 0) {
    printf("%s: max relative difference %.3e %s tolerance %.3e\n", r->pass ? "PASS" : "FAIL",
           d->max_rel, r->pass ? "<=" : ">", r->rtol);
    fflush(stdout);
  }
  return STENCIL_OK;
}

static int implicit_reference(const struct popts *o, const struct petsc_heat *h, Vec u0, Vec u,
                              struct outcome *r)
{
  const double t_end = (double)r->steps * h->cfg.dt;
  int64_t isteps = r->steps * o->refine;
  if (o->implicit_dt > 0) {
    const double q = t_end / o->implicit_dt;
    isteps = llround(q);
    if (isteps < 1 || fabs((double)isteps - q) > 1e-9 * q)
      FAIL0(STENCIL_ERR_USAGE,
            "--implicit-dt %g does not divide the simulated time %.17g into whole steps",
            o->implicit_dt, t_end);
  }
  if (r->steps == 0) {
    log_info0("implicit     skipped: zero steps\n");
    return STENCIL_OK;
  }
  CHECK(petsc_heat_implicit(h, o->scheme, t_end, isteps, u0, &r->impl));
  CHECK(field_diff_compute(h, u0, u, &r->time_err));
  r->implicit_done = 1;
  const struct petsc_heat_stats *s = &r->impl;
  log_info0("implicit     %s, %lld steps of dt %.6g to t = %.9g, KSP cg + gamg, %.1f "
            "iterations/step, %.4f s (solves %.4f s)\n",
            o->scheme == IMPLICIT_CN ? "Crank-Nicolson" : "backward Euler", (long long)isteps,
            s->dt, t_end, (double)s->iterations / (double)isteps, s->loop_s, s->matmult_s);
  log_info0("  time-discretisation error of the explicit run (dt %.6g):\n", h->cfg.dt);
  log_info0("  max |explicit - implicit|  %.6e   relative %.6e\n", r->time_err.max_abs,
            r->time_err.max_rel);
  log_info0("  L2  |explicit - implicit|  %.6e   relative %.6e\n", r->time_err.l2_abs,
            r->time_err.l2_rel);
  return STENCIL_OK;
}

static int write_json(const struct popts *o, const struct petsc_heat *h, const struct outcome *r)
{
  FILE *f = fopen(o->report_json, "w");
  if (!f)
    FAIL(STENCIL_ERR, "--report-json: cannot create %s: %s", o->report_json, strerror(errno));
  int size;
  MPI_Comm_size(h->comm, &size);
  const struct config *c = &h->cfg;
  const double pts = (double)config_points(c) * (double)r->steps;
  fprintf(f, "{\n  \"input\": \"%s\",\n  \"ranks\": %d,\n", o->input, size);
  fprintf(f, "  \"equation\": \"%s\",\n  \"order\": %d,\n", config_equation_name(c->equation),
          c->order);
  fprintf(f, "  \"dims\": [%d, %d, %d],\n", (int)h->procs[0], (int)h->procs[1], (int)h->procs[2]);
  fprintf(f, "  \"shape\": [%lld, %lld, %lld],\n", (long long)c->shape[0], (long long)c->shape[1],
          (long long)c->shape[2]);
  fprintf(f, "  \"steps\": %lld,\n  \"dt\": %.17g,\n", (long long)r->steps, c->dt);
  fprintf(f, "  \"loop_seconds\": %.9g,\n  \"matmult_seconds\": %.9g,\n", r->expl.loop_s,
          r->expl.matmult_s);
  fprintf(f, "  \"gpts_per_second\": %.9g,\n",
          r->expl.matmult_s > 0 ? pts / r->expl.matmult_s / 1e9 : 0.0);
  fprintf(f, "  \"output\": \"%s\"", r->output);
  if (r->compared) {
    const struct field_diff *d = &r->diff;
    fprintf(f, ",\n  \"compare\": {\"file\": \"%s\", \"precision\": \"%s\", \"step\": %lld, ",
            o->compare, r->info.elem == 8 ? "fp64" : "fp32", (long long)r->info.step);
    fprintf(f, "\"max_abs\": %.17g, \"max_rel\": %.17g, \"l2_abs\": %.17g, \"l2_rel\": %.17g, ",
            d->max_abs, isfinite(d->max_rel) ? d->max_rel : 1e308, d->l2_abs,
            isfinite(d->l2_rel) ? d->l2_rel : 1e308);
    fprintf(f, "\"ref_max\": %.17g, \"ref_l2\": %.17g, ", d->ref_max, d->ref_l2);
    fprintf(f, "\"bound\": %.17g, \"bound_rel\": %.17g, \"rtol\": %.17g, \"pass\": %s}", r->bound,
            isfinite(r->bound_rel) ? r->bound_rel : 1e308, r->rtol, r->pass ? "true" : "false");
  }
  if (r->poisson) {
    fprintf(f, ",\n  \"poisson\": {\"ksp_iterations\": %lld, \"ksp_rtol\": %.17g, ",
            (long long)r->ps.iterations, r->ps.rtol);
    fprintf(f, "\"solve_seconds\": %.9g, \"residual\": %.17g, \"rhs_norm\": %.17g, ", r->ps.solve_s,
            r->ps.residual, r->rhs_norm);
    fprintf(f, "\"lambda_min\": %.17g, \"jacobi_residual\": %.17g, ", r->lambda_min,
            r->jacobi_residual);
    fprintf(f, "\"file_residual\": %.17g, \"bound_l2\": %.17g, \"mean_shift\": %.17g}",
            r->file_residual, r->bound_l2, r->ps.mean_shift);
  }
  if (r->implicit_done) {
    const struct field_diff *d = &r->time_err;
    fprintf(f, ",\n  \"implicit\": {\"scheme\": \"%s\", \"steps\": %lld, \"dt\": %.17g, ",
            o->scheme == IMPLICIT_CN ? "cn" : "be", (long long)r->impl.steps, r->impl.dt);
    fprintf(f, "\"iterations\": %lld, \"loop_seconds\": %.9g, ", (long long)r->impl.iterations,
            r->impl.loop_s);
    fprintf(f, "\"max_abs\": %.17g, \"max_rel\": %.17g, \"l2_abs\": %.17g, \"l2_rel\": %.17g}",
            d->max_abs, d->max_rel, d->l2_abs, d->l2_rel);
  }
  fprintf(f, "\n}\n");
  if (ferror(f) | (fclose(f) != 0))
    FAIL(STENCIL_ERR, "--report-json: cannot write %s", o->report_json);
  return STENCIL_OK;
}

/* ---- Poisson --------------------------------------------------------------------------- */

/* The comparison with a Jacobi result u_J (docs/design/verification.md, "Poisson"). -L_h is
 * symmetric with smallest eigenvalue lambda_min (constant mode excluded; both fields have mean
 * 0 then), so for any field u, ||u - u*||_h <= ||L_h u - b||_h / lambda_min, u* the exact
 * discrete solution. With R_J the Jacobi run's stopping residual and R_P PETSc's:
 *   ||u_J - u_P||_h <= (R_J + R_P) / lambda_min = B_2,
 *   max |u_J - u_P| <= B_2 / sqrt(dV)    (a single cell's share of the L2 norm),
 * plus the rounding of the stored values (eps_s + 16 eps_p) max |u_P|. The verdict: the L2
 * difference within B_2 and the max difference within --rtol (default: the max bound). */
static int compare_poisson(const struct popts *o, const struct petsc_poisson *p, Vec u,
                           struct outcome *r)
{
  const struct petsc_heat *h = p->h;
  const struct config *c = &h->cfg;
  Vec other;
  CHECK_PETSC(VecDuplicate(u, &other));
  CHECK(result_read(h, o->compare, other));
  CHECK(field_diff_compute(h, u, other, &r->diff));
  CHECK(petsc_poisson_residual(p, other, &r->file_residual));
  CHECK_PETSC(VecDestroy(&other));
  if (o->jacobi_residual > 0) {
    r->jacobi_residual = o->jacobi_residual;
    r->jr_from = "--jacobi-residual";
  } else if (c->solver.tolerance > 0 && r->rhs_norm > 0) {
    r->jacobi_residual = c->solver.tolerance * r->rhs_norm;
    r->jr_from = "/solver/tolerance x ||b||";
  } else {
    r->jacobi_residual = r->file_residual;
    r->jr_from = "the compared field's own residual (no tolerance in the input)";
  }
  const double eps_p = DBL_EPSILON / 2, eps_s = r->info.elem == 4 ? FLT_EPSILON / 2 : eps_p;
  const double round = (eps_s + 16.0 * eps_p) * r->diff.ref_max;
  r->bound_l2 = (r->jacobi_residual + r->ps.residual) / r->lambda_min * (1.0 + 1e-9) +
                round * sqrt((double)config_points(c) * p->dv);
  r->bound =
      (r->jacobi_residual + r->ps.residual) / r->lambda_min / sqrt(p->dv) * (1.0 + 1e-9) + round;
  r->bound_rel = r->diff.ref_max > 0 ? r->bound / r->diff.ref_max : INFINITY;
  r->rtol = o->have_rtol ? o->rtol : r->bound_rel;
  r->pass = r->diff.max_rel <= r->rtol && (o->have_rtol || r->diff.l2_abs <= r->bound_l2);
  r->compared = 1;
  const struct field_diff *d = &r->diff;
  log_info0("compare      %s (%s, iteration %lld, backend %s)\n", o->compare,
            r->info.elem == 8 ? "fp64" : "fp32", (long long)r->info.step,
            r->info.backend[0] ? r->info.backend : "?");
  log_info0("  residual ||f - L u||   Jacobi (bound input) %.6e from %s; of the compared field "
            "%.6e; PETSc %.6e\n",
            r->jacobi_residual, r->jr_from, r->file_residual, r->ps.residual);
  if (r->file_residual > 1.001 * r->jacobi_residual + round * r->lambda_min)
    log_warn0("the compared field's residual %.6e exceeds the stopping residual %.6e: the run "
              "did not converge (pass its final residual with --jacobi-residual) or the field "
              "was changed",
              r->file_residual, r->jacobi_residual);
  log_info0("  max |stencil - petsc|  %.6e   relative %.6e   (max |petsc| %.6e)\n", d->max_abs,
            d->max_rel, d->ref_max);
  log_info0("  L2  |stencil - petsc|  %.6e   relative %.6e   (L2 petsc %.6e)\n", d->l2_abs,
            d->l2_rel, d->ref_l2);
  log_info0("  bound (R_J + R_P) / lambda_min, lambda_min %.6e: L2 %.6e, max %.6e (relative "
            "%.6e)\n",
            r->lambda_min, r->bound_l2, r->bound, r->bound_rel);
  log_info0("  tolerance              relative %.6e (%s)\n", r->rtol,
            o->have_rtol ? "--rtol" : "the max bound, and L2 within its bound");
  if (log_rank() == 0) {
    printf("%s: max relative difference %.3e %s tolerance %.3e\n", r->pass ? "PASS" : "FAIL",
           d->max_rel, d->max_rel <= r->rtol ? "<=" : ">", r->rtol);
    fflush(stdout);
  }
  return STENCIL_OK;
}

static int poisson_body(MPI_Comm comm, const struct popts *o, const struct config *cfg,
                        struct outcome *r)
{
  r->poisson = 1;
  CHECK(prepare_output(comm, o, cfg, r));
  struct petsc_heat h;
  CHECK(petsc_heat_create(comm, cfg, o->input, &h));
  print_header(o, &h, r->steps, &r->info, cfg->precision);
  struct petsc_poisson p;
  CHECK(petsc_poisson_create(&h, &p));
  r->rhs_norm = p.rhs_norm;
  r->lambda_min = petsc_poisson_lambda_min(&p);
  Vec u;
  CHECK_PETSC(DMCreateGlobalVector(h.da, &u));
  CHECK(petsc_poisson_solve(&p, o->ksp_rtol, u, &r->ps));
  log_info0("solve        KSP cg + gamg: %lld iterations, %s, rtol %.3g, %.4f s; ||f - L u|| = "
            "%.6e (||b|| = %.6e)%s\n",
            (long long)r->ps.iterations, r->ps.reason, r->ps.rtol, r->ps.solve_s, r->ps.residual,
            r->rhs_norm, p.spec.singular ? ", mean fixed to 0" : "");
  if (!o->no_output) {
    CHECK(result_write(&h, r->output, r->info.step >= 0 ? r->info.step : 0, u));
    log_info0("output       %s\n", r->output);
  }
  if (o->compare)
    CHECK(compare_poisson(o, &p, u, r));
  if (o->report_json && log_rank() == 0)
    CHECK(write_json(o, &h, r));
  VecDestroy(&u);
  petsc_poisson_destroy(&p);
  petsc_heat_destroy(&h);
  return STENCIL_OK;
}

static int run_body(MPI_Comm comm, const struct popts *o, const struct config *cfg,
                    struct outcome *r)
{
  struct result_info info;
  memset(&info, 0, sizeof info);
  info.step = -1;
  if (o->compare)
    CHECK(result_inspect(comm, o->compare, cfg, &info));
  r->info = info;
  CHECK(resolve_steps(o, cfg, &info, &r->steps));
  if (cfg->equation == EQ_POISSON)
    return poisson_body(comm, o, cfg, r);
  const double s = heat_stability_number(cfg);
  if (s > 2.0 && !o->allow_unstable)
    FAIL0(STENCIL_ERR,
          "%s: /time/dt = %g is unstable: dt*alpha*beta*sum(1/h^2) = %g (beta = %s, order %d) "
          "exceeds the limit 2 of the explicit scheme; use dt <= %.6g or pass --allow-unstable",
          o->input, cfg->dt, s, stencil_bound_text(cfg->order), cfg->order,
          heat_max_stable_dt(cfg));
  CHECK(prepare_output(comm, o, cfg, r));

  struct petsc_heat h;
  CHECK(petsc_heat_create(comm, cfg, o->input, &h));
  print_header(o, &h, r->steps, &info, cfg->precision);
  Vec u, u0 = NULL;
  CHECK_PETSC(DMCreateGlobalVector(h.da, &u));
  CHECK(petsc_heat_initial(&h, o->input, u));
  if (o->implicit) {
    CHECK_PETSC(VecDuplicate(u, &u0));
    CHECK_PETSC(VecCopy(u, u0));
  }

  CHECK(petsc_heat_explicit(&h, r->steps, o->compare != NULL, u, &r->expl));
  const double pts = (double)config_points(cfg) * (double)r->steps;
  log_info0("explicit     %lld steps in %.6f s (MatMultAdd %.6f s, %.3f Gpts/s)%s\n",
            (long long)r->steps, r->expl.loop_s, r->expl.matmult_s,
            r->expl.matmult_s > 0 ? pts / r->expl.matmult_s / 1e9 : 0.0,
            o->compare ? " [loop includes a max-norm per step for the rounding bound]" : "");
  if (!o->no_output) {
    CHECK(result_write(&h, r->output, r->steps, u));
    log_info0("output       %s\n", r->output);
  }
  if (o->compare)
    CHECK(compare(o, &h, u, r));
  if (o->implicit)
    CHECK(implicit_reference(o, &h, u0, u, r));
  if (o->report_json && log_rank() == 0)
    CHECK(write_json(o, &h, r));
  VecDestroy(&u);
  VecDestroy(&u0);
  petsc_heat_destroy(&h);
  return STENCIL_OK;
}

static int run(MPI_Comm comm, const struct popts *o, int *mismatch)
{
  struct config cfg;
  CHECK(config_load(o->input, NULL, 0, &cfg, comm));
  if (cfg.equation == EQ_POISSON && o->implicit)
    FAIL0(STENCIL_ERR_USAGE, "%s: --implicit applies to the heat equation; this is Poisson",
          o->input);
  struct outcome r;
  memset(&r, 0, sizeof r);
  CHECK(status_agree(comm, run_body(comm, o, &cfg, &r)));
  *mismatch = r.compared && !r.pass;
  return STENCIL_OK;
}

/* ---- main ------------------------------------------------------------------------------ */

static void print_version(void)
{
  PetscInt major = 0, minor = 0, sub = 0;
  PetscGetVersionNumber(&major, &minor, &sub, NULL);
  unsigned hmaj = 0, hmin = 0, hrel = 0;
  H5get_libversion(&hmaj, &hmin, &hrel);
  printf("stencil-petsc %s\n  PETSc:      %d.%d.%d (configured with %s), fp64\n"
         "  HDF5:       %u.%u.%u\n",
         STENCIL_VERSION, (int)major, (int)minor, (int)sub, STENCIL_PETSC_CONFIG, hmaj, hmin, hrel);
}

/* PETSc errors in the project's style: one message from each rank that meets the error,
 * the PETSc traceback only with STENCIL_TRACEBACK=1, and the error code returned. (PETSc's
 * default handler makes ranks other than 0 abort() after a collective error, which
 * would bypass the final agreement below.) */
static PetscErrorCode petsc_error_handler(MPI_Comm comm, int line, const char *func,
                                          const char *file, PetscErrorCode n, PetscErrorType p,
                                          const char *mess, void *ctx)
{
  (void)comm;
  (void)ctx;
  if (p == PETSC_ERROR_INITIAL) {
    const char *text = NULL;
    PetscErrorMessage(n, &text, NULL);
    log_error("PETSc: %s%s%s (in %s)", text ? text : "error", mess && mess[0] ? ": " : "",
              mess ? mess : "", func);
  }
  error_trace(file, line, func);
  return n;
}

int main(int argc, char **argv)
{
  int rank = 0, size = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm agree;
  MPI_Comm_dup(MPI_COMM_WORLD, &agree);
  log_init(rank, size, 0);
  h5_quiet();

  struct popts o;
  int status = parse_options(argc, argv, &o);
  int mismatch = 0;
  /* PETSc sees the program name and the arguments after "--" only. */
  char **pargv = calloc((size_t)o.petsc_argc + 2, sizeof *pargv);
  int pargc = 1;
  if (!pargv) {
    status = STENCIL_ERR;
  } else {
    pargv[0] = argv[0];
    for (int i = 0; i < o.petsc_argc; i++)
      pargv[pargc++] = o.petsc_argv[i];
  }
  int petsc_up = 0;
  if (status == STENCIL_OK) {
    char **pa = pargv;
    if (PetscInitialize(&pargc, &pa, NULL, NULL) != 0)
      status = STENCIL_ERR;
    else
      petsc_up = 1;
    if (petsc_up && PetscPushErrorHandler(petsc_error_handler, NULL) != 0)
      status = STENCIL_ERR;
  }
  if (status == STENCIL_OK && (o.help || o.version)) {
    if (rank == 0)
      o.help ? print_help() : print_version();
  } else if (status == STENCIL_OK) {
    log_init(rank, size, o.quiet);
    MPI_Comm work;
    MPI_Comm_dup(PETSC_COMM_WORLD, &work);
    status = run(work, &o, &mismatch);
    MPI_Comm_free(&work);
  }
  int agreed = 0;
  status = status_agree_within(agree, status, &agreed);
  if (!agreed) {
    fprintf(stderr, "stencil-petsc: [rank %d] error: other ranks did not finish; aborting\n", rank);
    MPI_Abort(MPI_COMM_WORLD, status ? status : STENCIL_ERR);
  }
  if (petsc_up)
    PetscFinalize();
  free(pargv);
  MPI_Comm_free(&agree);
  MPI_Finalize();
  if (status == STENCIL_OK && mismatch)
    return EXIT_MISMATCH;
  return status;
}
