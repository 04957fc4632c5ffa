/* The run driver: reads like the algorithm in docs/design/architecture.md.
 *
 *   load input -> ask the backend for its halo -> decompose -> allocate -> prepare the
 *   backend's stepping on the block -> initial field and its ghost cells -> time loop
 *   (app/loop.c: advance, exchange, checks, outputs) -> final write -> report
 */
#include "app/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/devices.h"
#include "app/run_priv.h"
#include "common/error_mpi.h"
#include "io/checkpoint.h"
#include "io/field_io.h"
#include "solvers/heat.h"
#include "solvers/stencils.h"
#include "stencil_version.h"

/* ---- set-up ------------------------------------------------------------------------------- */

/* Poisson: the damped Jacobi iteration must contract (rho < 1, with a margin of 64 eps for the
 * rounding of rho: rho = 1 is the undamped iteration on its checkerboard mode). */
static int check_convergence(struct run *r)
{
  const struct jacobi_spectrum *s = &r->spec;
  if (s->rho < 1.0 - 0x1p-47)
    return STENCIL_OK;
  if (r->opt->allow_unstable) {
    log_warn0("/solver/omega = %g does not converge (spectral radius %.9g of the Jacobi "
              "iteration >= 1); running anyway (--allow-unstable)",
              s->omega, s->rho);
    return STENCIL_OK;
  }
  FAIL0(STENCIL_ERR,
        "%s: /solver/omega = %g does not converge: the damped Jacobi iteration matrix I - omega "
        "A (A = -L/D, eigenvalues in [%.6g, %.6g]) has spectral radius %.9g >= 1; use 0 < omega "
        "< %.6g, or leave /solver/omega out for the fastest value %.6g (or pass "
        "--allow-unstable)",
        r->opt->input, s->omega, s->mu_min, s->mu_max, s->rho, 2.0 / s->mu_max,
        2.0 / (s->mu_min + s->mu_max));
}

static int check_stability(struct run *r)
{
  if (r->cfg.equation == EQ_POISSON)
    return check_convergence(r);
  const double s = heat_stability_number(&r->cfg);
  if (s <= 2.0)
    return STENCIL_OK;
  if (r->opt->allow_unstable) {
    log_warn0("dt = %g exceeds the explicit stability limit (dt*alpha*sum(%s/h^2) = %g > 2, "
              "largest stable dt %.6g); running anyway (--allow-unstable)",
              r->cfg.dt, stencil_bound_text(r->cfg.order), s, heat_max_stable_dt(&r->cfg));
    return STENCIL_OK;
  }
  FAIL0(STENCIL_ERR,
        "%s: /time/dt = %g is unstable: dt*alpha*sum(%s/h^2) = %g exceeds the limit 2 of the "
        "explicit scheme%s; use dt <= %.6g or pass --allow-unstable",
        r->opt->input, r->cfg.dt, stencil_bound_text(r->cfg.order), s,
        r->cfg.order == 2 ? "" : " (the spectral bound of the order's stencil over h^2)",
        heat_max_stable_dt(&r->cfg));
}

/* The header's lines of the initial field and the source. */
static void print_fields(const struct config *c)
{
  for (int which = 0; which < 1 + c->has_source; which++) {
    const struct initial_config *in = which ? &c->source : &c->initial;
    const char *name = which ? "source " : "initial";
    switch (in->kind) {
    case INIT_CONSTANT: log_info0("%s      constant %g\n", name, in->value); break;
    case INIT_SINE:
      log_info0("%s      sine, amplitude %g, modes %lld %lld %lld, offset %g\n", name,
                in->amplitude, (long long)in->modes[0], (long long)in->modes[1],
                (long long)in->modes[2], in->offset);
      break;
    case INIT_GAUSSIAN:
      log_info0("%s      gaussian, amplitude %g, center %g %g %g, width %g, offset %g\n", name,
                in->amplitude, in->center[0], in->center[1], in->center[2], in->width, in->offset);
      break;
    case INIT_DATASET:
      log_info0("%s      dataset /%s/field\n", name, which ? "source" : "initial");
      break;
    }
  }
}

static void print_header(const struct run *r)
{
  const struct config *c = &r->cfg;
  const struct decomp *d = &r->dec;
  const int ndim = config_ndim(c);
  log_info0("stencil %s: %s\n", STENCIL_VERSION,
            c->equation == EQ_POISSON ? "Poisson equation, Jacobi iteration"
                                      : "explicit heat equation");
  log_info0("input        %s\n", r->opt->input);
  if (r->opt->nsets > 0) {
    log_info0("overrides   ");
    for (int i = 0; i < r->opt->nsets; i++)
      log_info0(" %s", r->opt->sets[i]);
    log_info0(" (--set)\n");
  }
  log_info0("grid         %lld x %lld x %lld (%dD, %lld points), spacing %g %g %g, %s\n",
            (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2], ndim,
            (long long)config_points(c), c->spacing[0], c->spacing[1], c->spacing[2],
            config_precision_name(c->precision));
  if (c->equation == EQ_POISSON)
    log_info0("equation     poisson lap u = f, order %d (radius %d); damped Jacobi, omega %.9g "
              "(%s), spectral radius %.9f (eigenvalues of -L/D in [%.6g, %.6g]); tolerance %g "
              "x ||b||, residual every %lld\n",
              c->order, config_radius(c), r->spec.omega, c->solver.omega > 0 ? "input" : "best",
              r->spec.rho, r->spec.mu_min, r->spec.mu_max, c->solver.tolerance,
              (long long)c->solver.residual_every);
  else
    log_info0("equation     heat, order %d, alpha %g, dt %g (stability number %.4g, limit 2)%s\n",
              c->order, c->alpha, c->dt, heat_stability_number(c),
              c->has_source ? ", source f" : "");
  log_info0("boundaries  ");
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++) {
      if (c->bc[a][s] == BC_DIRICHLET)
        log_info0(" %s=dirichlet(%g)", config_face_name(a, s), c->bc_value[a][s]);
      else
        log_info0(" %s=%s", config_face_name(a, s), config_bc_name(c->bc[a][s]));
    }
  log_info0("\n");
  print_fields(c);
  log_info0("%s %lld%s\n", c->equation == EQ_POISSON ? "iterations  " : "steps       ",
            (long long)c->steps, r->opt->steps >= 0 ? " (--steps)" : " (input)");
  char halo[48];
  if (d->halo[1] == d->halo[0] && (ndim == 2 || d->halo[2] == d->halo[0]))
    snprintf(halo, sizeof halo, "%d", d->halo[0]);
  else if (ndim == 2)
    snprintf(halo, sizeof halo, "%d x %d", d->halo[0], d->halo[1]);
  else
    snprintf(halo, sizeof halo, "%d x %d x %d", d->halo[0], d->halo[1], d->halo[2]);
  char threads[48];
  if (r->threads[0] == r->threads[1])
    snprintf(threads, sizeof threads, "%d", r->threads[0]);
  else
    snprintf(threads, sizeof threads, "%d to %d", r->threads[0], r->threads[1]);
  log_info0("ranks        %d = %d x %d x %d, halo %s, %s thread%s per rank (%s), backend %s\n",
            d->size, d->dims[0], d->dims[1], d->dims[2], halo, threads,
            r->threads[1] > 1 ? "s" : "", r->threads_why, r->ops->name);
  log_info0("kernel       %s\n", r->plan.why);
  if (r->plan.note[0])
    log_info0("kernel       note: %s\n", r->plan.note);
  if (r->opt->overlap == OVERLAP_AUTO && r->gpu_shared)
    log_info0("overlap      off: ranks share a GPU (--overlap auto; on forces it)\n");
  log_info0("output       %s%s\n", r->output_path, r->opt->output_dir ? " (--output-dir)" : "");
  log_info0("checks       NaN/Inf every %lld steps%s\n", (long long)r->opt->check_every,
            r->optv.check_every_given || r->plan.steps == 1
                ? ""
                : " (the default rounded up to a multiple of the steps per advance; agreements "
                  "likewise)");
}

/* Bytes this rank needs: two padded fields, the dense host block and the halo buffers. */
static double rank_bytes(const struct run *r, const struct decomp *d)
{
  struct layout l;
  decomp_layout(d, config_elem_size(&r->cfg), &l);
  double fields = (2.0 + (r->cfg.has_source ? 1.0 : 0.0)) * (double)l.count * l.elem;
  double host = (double)(d->n[0] * d->n[1] * d->n[2]) * l.elem;
  double halo = 0;
  for (int a = 0; a < d->ndim; a++)
    halo += 4.0 * (double)(l.count / (l.n[a] + 2 * l.halo[a])) * l.halo[a] * l.elem;
  return fields + host + halo;
}

/* --dry-run: per-rank sizes and memory, gathered to rank 0. Collective. */
static int dry_run(struct run *r)
{
  const struct decomp *d = &r->dec;
  double mine[8] = {d->coords[0],    d->coords[1],    d->coords[2],     (double)d->n[0],
                    (double)d->n[1], (double)d->n[2], rank_bytes(r, d), d->rank};
  double *all = d->rank == 0 ? malloc(sizeof mine * (size_t)d->size) : NULL;
  if (d->rank == 0 && !all)
    FAIL(STENCIL_ERR, "out of host memory");
  CHECK_MPI(MPI_Gather(mine, 8, MPI_DOUBLE, all, 8, MPI_DOUBLE, 0, d->cart));
  if (d->rank == 0) {
    double total = 0;
    printf("dry run: %d rank%s, %d x %d x %d\n", d->size, d->size > 1 ? "s" : "", d->dims[0],
           d->dims[1], d->dims[2]);
    printf("%6s %16s %26s %12s\n", "rank", "coords", "cells (x y z)", "memory MiB");
    for (int i = 0; i < d->size; i++) {
      const double *p = all + 8 * i;
      printf("%6.0f %5.0f %5.0f %5.0f %8.0f %8.0f %8.0f %12.1f\n", p[7], p[0], p[1], p[2], p[3],
             p[4], p[5], p[6] / (1 << 20));
      total += p[6];
    }
    printf("total memory %.1f MiB; nothing was run or written\n", total / (1 << 20));
    fflush(stdout);
    free(all);
  }
  return STENCIL_OK;
}

/* every, or the next multiple of T above it (0 stays 0). */
static int64_t round_to_steps(int64_t every, int T)
{
  return every > 0 ? (every + T - 1) / T * T : every;
}

/* Before the header: the halo the backend's stepping needs (halo_depth, the same on every
 * rank) deepens the decomposition's. The defaults of --check-every and --agree-every (not
 * values given on the command line) are rounded up to multiples of the steps per advance:
 * every advance stops at the checks, and a cadence it does not divide costs short advances
 * (agreements take the first advance that ends at or after theirs). */
static int plan_stepping(struct run *r)
{
  const struct config *c = &r->cfg;
  options_backend(r->opt, r->gpu_shared, &r->bopt);
  struct problem_class p = {.ndim = r->dec.ndim,
                            .elem = config_elem_size(c),
                            .radius = config_radius(c),
                            .has_source = c->has_source,
                            .residual_every =
                                c->equation == EQ_POISSON ? c->solver.residual_every : 0,
                            .steps = c->steps};
  for (int a = 0; a < r->dec.ndim; a++)
    for (int s = 0; s < 2; s++)
      p.inhomogeneous |=
          c->bc[a][s] != BC_PERIODIC && !bc_homogeneous(c->bc[a][s], c->bc_value[a][s]);
  int64_t min_cells[3];
  for (int a = 0; a < 3; a++)
    min_cells[a] = decomp_min_cells(&r->dec, a);
  /* (blocks of min_cells[0] or one more cells along x) */
  p.x_vectors = r->dec.global[0] % r->dec.dims[0] == 0 && min_cells[0] % (16 / p.elem) == 0;
  CHECK(r->ops->halo_depth(&r->bopt, &p, min_cells, &r->plan));
  CHECK(decomp_set_halo(&r->dec, r->plan.halo));
  struct options *ov = &r->optv;
  if (!ov->check_every_given)
    ov->check_every = round_to_steps(ov->check_every, r->plan.steps);
  if (!ov->agree_every_given)
    ov->agree_every = round_to_steps(ov->agree_every, r->plan.steps);
  return STENCIL_OK;
}

static int allocate(struct run *r)
{
  decomp_layout(&r->dec, config_elem_size(&r->cfg), &r->lay);
  CHECK(r->ops->create(&r->ctx, &r->bopt));
  CHECK(r->ops->alloc(r->ctx, &r->lay, &r->u));
  CHECK(r->ops->alloc(r->ctx, &r->lay, &r->v));
  if (r->cfg.has_source)
    CHECK(r->ops->alloc(r->ctx, &r->lay, &r->f));
  size_t host_bytes = (size_t)(r->lay.n[0] * r->lay.n[1] * r->lay.n[2]) * (size_t)r->lay.elem;
  r->host = malloc(host_bytes);
  if (!r->host)
    FAIL(STENCIL_ERR, "out of host memory: %zu bytes for the field block", host_bytes);
  return STENCIL_OK;
}

/* The faces of this rank's block as the backend sees them. */
static void block_faces(const struct run *r, struct block_faces *f)
{
  memset(f, 0, sizeof *f);
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      f->exchanged[a][s] = a >= r->dec.ndim || !r->dec.physical[a][s];
      f->wrapped[a][s] = a < r->dec.ndim && r->dec.periodic[a] && r->dec.dims[a] == 1;
      f->kind[a][s] = r->cfg.bc[a][s];
      f->value[a][s] = r->cfg.bc_value[a][s];
    }
}

/* The backend plans its stepping on this rank's block; the steps of every advance, and of
 * every advance that sums residuals, are the fewest any rank's plan takes (every advance ends
 * with an exchange and the residuals' sum: the ranks advance alike). Collective. */
static int prepare(struct run *r)
{
  struct block_faces faces;
  block_faces(r, &faces);
  CHECK(
      status_agree(r->dec.cart, r->ops->prepare(r->ctx, &r->plan, &r->lay, &r->coef,
                                                r->cfg.has_source, &faces, r->u, r->v, &r->info)));
  const int most[2] = {r->info.steps, r->info.residual_steps};
  int agreed[2];
  CHECK_MPI(MPI_Allreduce(most, agreed, 2, MPI_INT, MPI_MIN, r->dec.cart));
  r->steps = agreed[0];
  r->res_steps = agreed[1];
  if (r->cfg.equation == EQ_POISSON && r->res_steps < 1) /* (a backend's defect) */
    FAIL(STENCIL_ERR, "the %s backend's plan sums no residuals on some rank's block", r->ops->name);
  if (r->steps < r->plan.steps)
    log_info0("kernel       the device plan takes %d steps per advance (the halo allows %d)\n",
              r->steps, r->plan.steps);
  return STENCIL_OK;
}

/* failed: the run ends with an error (the output directory goes again if it was created for
 * the run and is still empty). */
static void release(struct run *r, int failed)
{
  history_close(r->hist);
  exchange_free(&r->xch);
  outputs_destroy(r->out); /* before the backend: the writer's buffer may be the backend's */
  outdir_close(r->outdir, failed);
  if (r->ops && r->ctx) {
    if (r->u)
      r->ops->release(r->ctx, r->u);
    if (r->v)
      r->ops->release(r->ctx, r->v);
    if (r->f)
      r->ops->release(r->ctx, r->f);
    r->ops->destroy(r->ctx);
  }
  halo_free(&r->halo);
  free(r->host);
  decomp_free(&r->dec);
}

/* The memory bandwidth of all ranks together: each rank measures its backend while the
 * others do the same (so ranks sharing a node share its bandwidth), and the sum is the peak.
 * Collective. */
static int measure_peak(struct run *r, double *peak)
{
  double mine = 0;
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  CHECK(r->ops->measure_bandwidth(r->ctx, &mine));
  CHECK_MPI(MPI_Allreduce(&mine, peak, 1, MPI_DOUBLE, MPI_SUM, r->dec.cart));
  log_info0("peak         %.2f GB/s measured (all ranks together)\n", *peak / 1e9);
  return STENCIL_OK;
}

/* ---- the fields ------------------------------------------------------------------------- */

/* outputs_field.download: the current field into a dense host block. */
static int download_field(void *arg, void *host)
{
  struct run *r = arg;
  CHECK(r->ops->download(r->ctx, &r->lay, host, r->u));
  return r->ops->sync(r->ctx);
}

static int drain_field(void *arg)
{
  struct run *r = arg;
  return r->ops->sync(r->ctx);
}

/* outputs_field.host_alloc / host_free: page-locked memory where the backend has it. */
static int host_buffer_alloc(void *arg, size_t bytes, void **p)
{
  struct run *r = arg;
  return r->ops->buffer_alloc(r->ctx, bytes, 0, p);
}

static void host_buffer_free(void *arg, void *p)
{
  struct run *r = arg;
  r->ops->buffer_release(r->ctx, p, 0);
}

/* The source f (/source) into r->f, through the host block: checked for non-finite values
 * and, for Poisson without a Dirichlet face, for mean 0. Collective. */
static int load_source(struct run *r)
{
  if (!r->cfg.has_source)
    return STENCIL_OK;
  if (r->cfg.source.kind == INIT_DATASET)
    CHECK(field_read(r->opt->input, "/source/field", &r->cfg, &r->dec, r->host, 0));
  else
    heat_analytic_fill(&r->cfg, &r->cfg.source, r->dec.offset, r->dec.n, r->host);
  const int64_t n = r->lay.n[0] * r->lay.n[1] * r->lay.n[2];
  CHECK(poisson_check_source(r->dec.cart, "/source (f)", r->host, n, r->lay.elem,
                             r->cfg.equation == EQ_POISSON && r->spec.singular));
  return r->ops->upload(r->ctx, &r->lay, r->f, r->host);
}

/* ||b|| = the residual of u = 0 with its ghost cells: call while u is still the zero field
 * alloc() made (the reflecting faces' ghosts then hold the boundary data alone). Collective. */
static int compute_rhs_norm(struct run *r)
{
  CHECK(fill_ghosts(r, r->u));
  return residual_norm(r, r->u, &r->rhs_norm);
}

static int initial_field(struct run *r)
{
  CHECK(load_source(r));
  if (r->f)
    CHECK(fill_ghosts(r, r->f));
  if (r->cfg.equation == EQ_POISSON)
    CHECK(compute_rhs_norm(r));
  if (r->restart_step >= 0) {
    CHECK(outputs_read_restart(r->out, r->host));
    r->step = r->restart_step;
  } else if (r->cfg.initial.kind == INIT_DATASET)
    CHECK(field_read_initial(r->opt->input, &r->cfg, &r->dec, r->host));
  else
    heat_initial_fill(&r->cfg, r->dec.offset, r->dec.n, r->host);
  CHECK(r->ops->upload(r->ctx, &r->lay, r->u, r->host));
  return fill_ghosts(r, r->u);
}

/* ---- Poisson: the end of the solve -------------------------------------------- */

/* After the loop: without a Dirichlet face, shift u to mean 0 (a reproducible sum, so every
 * decomposition gives the same bits); then the final residual. Collective. */
static int residual_finish(struct run *r)
{
  const int64_t n = r->lay.n[0] * r->lay.n[1] * r->lay.n[2];
  r->cfg.steps = r->max_iterations;
  if (r->spec.singular) {
    double sum = 0, abssum = 0;
    int64_t bad = 0;
    CHECK(r->ops->download(r->ctx, &r->lay, r->host, r->u));
    CHECK(r->ops->sync(r->ctx));
    CHECK(poisson_exact_sum(r->dec.cart, r->host, n, r->lay.elem, &sum, &abssum, &bad));
    r->jlog.mean_shift = sum / (double)config_points(&r->cfg);
    poisson_shift(r->host, n, r->lay.elem, r->jlog.mean_shift);
    CHECK(r->ops->upload(r->ctx, &r->lay, r->u, r->host));
    CHECK(fill_ghosts(r, r->u));
  }
  double norm = 0;
  CHECK(residual_norm(r, r->u, &norm));
  jacobi_log_final(&r->jlog, r->step, norm);
  if (r->jlog.tolerance > 0 && !r->jlog.converged)
    log_warn0("the Jacobi iteration did not reach the tolerance: ||f - L u|| = %.6e > %.3g x "
              "||b|| = %.6e after %lld iterations (raise --steps or --tolerance)",
              norm, r->jlog.tolerance, r->jlog.target, (long long)r->step);
  return STENCIL_OK;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* Input, overrides, stability, backend, decomposition and the backend's halo, then the
 * header. Collective. */
static int setup(struct run *r, MPI_Comm comm)
{
  const struct options *o = r->opt;
  CHECK(config_load(o->input, o->sets, o->nsets, &r->cfg, comm));
  if (o->steps >= 0)
    r->cfg.steps = o->steps;
  if ((o->tolerance >= 0 || o->residual_every >= 0) && r->cfg.equation != EQ_POISSON)
    FAIL0(STENCIL_ERR_USAGE,
          "--tolerance and --residual-every apply to the Poisson equation; "
          "%s solves the heat equation",
          o->input);
  if (o->tolerance >= 0)
    r->cfg.solver.tolerance = o->tolerance;
  if (o->residual_every >= 0)
    r->cfg.solver.residual_every = o->residual_every;
  r->max_iterations = r->cfg.steps;
  if (r->cfg.equation == EQ_POISSON)
    jacobi_spectrum(&r->cfg, &r->spec);
  if (o->output_dir)
    snprintf(r->cfg.output_dir, sizeof r->cfg.output_dir, "%s", o->output_dir);
  snprintf(r->output_path, sizeof r->output_path, "%s/%s", r->cfg.output_dir, r->cfg.output_final);
  CHECK(check_stability(r));
  CHECK(devices_choose(comm, o, &r->ops, &r->bopt.device, &r->gpu_shared));
  int periodic[3];
  for (int a = 0; a < 3; a++)
    periodic[a] = r->cfg.bc[a][0] == BC_PERIODIC;
  if (o->dims_axes == 2 && r->cfg.shape[2] > 1)
    FAIL0(STENCIL_ERR_USAGE,
          "--dims names 2 axes but %s has a 3D grid (nz = %lld): give PxQxR (0 lets MPI "
          "choose an axis)",
          o->input, (long long)r->cfg.shape[2]);
  CHECK(decomp_create(comm, r->cfg.shape, periodic, o->dims, config_radius(&r->cfg), &r->dec));
  CHECK(status_agree(r->dec.cart, devices_threads(r->dec.cart, &r->threads[2], r->threads_why,
                                                  sizeof r->threads_why)));
  const int mine[2] = {-r->threads[2], r->threads[2]};
  int most[2];
  CHECK_MPI(MPI_Allreduce(mine, most, 2, MPI_INT, MPI_MAX, r->dec.cart));
  r->threads[0] = -most[0];
  r->threads[1] = most[1];
  CHECK(plan_stepping(r));
  if (r->cfg.equation == EQ_POISSON)
    jacobi_coefficients(&r->cfg, r->spec.omega, &r->coef);
  else
    heat_coefficients(&r->cfg, &r->coef);
  print_header(r);
  return STENCIL_OK;
}

/* Outputs, fields, the backend's plan on the block, the exchange, the initial field. *peak:
 * the memory bandwidth for the report. Collective. */
static int start(struct run *r, double t_setup, double *peak, double *read_s)
{
  const struct options *o = r->opt;
  CHECK(outdir_open(r->dec.cart, r->cfg.output_dir, &r->outdir));
  CHECK(outputs_create(&r->out, o, &r->cfg, &r->dec, &r->prov, t_setup));
  CHECK(outputs_prepare(r->out, &r->restart_step));
  /* A restart moves the earlier final output (and a history with later rows) aside
   * (outputs_begin) instead of refusing. */
  CHECK(output_prepare(r->dec.cart, r->cfg.output_dir, r->cfg.output_final,
                       o->overwrite || r->restart_step >= 0));
  if (o->history_every > 0)
    CHECK(output_prepare(r->dec.cart, r->cfg.output_dir, HISTORY_FILE,
                         o->overwrite || r->restart_step >= 0));
  CHECK(status_agree(r->dec.cart, allocate(r)));
  CHECK(prepare(r));
  char gpu[128] = "";
  if (r->ops->device_name)
    r->ops->device_name(r->ctx, gpu, sizeof gpu);
  CHECK(provenance_init(&r->prov, r->dec.cart, r->ops->name, r->plan.why, gpu, o->sets, o->nsets));
  /* ipc may copy between the two fields directly where they are all the exchange moves */
  CHECK(exchange_create(&r->xch, r->ops, r->ctx, &r->halo, &r->dec, r->lay.elem, r->plan.corners,
                        &r->info, (enum halo_transport)o->halo_transport,
                        r->f ? NULL : (void *[2]){r->u, r->v}));
  *peak = o->peak_bandwidth;
  if (o->measure_bandwidth)
    CHECK(status_agree(r->dec.cart, measure_peak(r, peak)));
  const double t_read = MPI_Wtime();
  CHECK(status_agree(r->dec.cart, initial_field(r)));
  const struct outputs_field field = {download_field,   r,          r->host, host_buffer_alloc,
                                      host_buffer_free, drain_field};
  CHECK(outputs_begin(r->out, r->step, &field));
  if (o->history_every > 0)
    CHECK(history_open(&r->hist, r->dec.cart, r->cfg.output_dir, outputs_superseded(r->out),
                       r->restart_step, r->cfg.dt, cell_volume(r)));
  *read_s = MPI_Wtime() - t_read;
  return devices_print(r->dec.cart, r->ops, r->ctx);
}

/* The report of rank 0 (phases and norms reduced over the ranks). Collective. */
static int report(struct run *r, struct report *rep, double sim_time)
{
  const struct options *o = r->opt;
  CHECK(global_norms(r, &rep->norms));
  /* Per phase, then the messages and bytes sent, the exchanges' time, its exposed part and
   * the share hidden: min, sum and max over the ranks. */
  enum { N = PHASE_COUNT + 5 };
  double mine[N], lo[N], sum[N], hi[N];
  memcpy(mine, r->phase, sizeof r->phase);
  mine[PHASE_COUNT] = r->xch.times.messages;
  mine[PHASE_COUNT + 1] = r->xch.times.bytes;
  mine[PHASE_COUNT + 2] = r->overlap[0];
  mine[PHASE_COUNT + 3] = r->overlap[1];
  mine[PHASE_COUNT + 4] = r->overlap[0] > 0 ? 1.0 - r->overlap[1] / r->overlap[0] : 1.0;
  CHECK_MPI(MPI_Reduce(mine, lo, N, MPI_DOUBLE, MPI_MIN, 0, r->dec.cart));
  CHECK_MPI(MPI_Reduce(mine, sum, N, MPI_DOUBLE, MPI_SUM, 0, r->dec.cart));
  CHECK_MPI(MPI_Reduce(mine, hi, N, MPI_DOUBLE, MPI_MAX, 0, r->dec.cart));
  if (r->dec.rank != 0)
    return STENCIL_OK;
  struct rank_stat *stat[N];
  for (int p = 0; p < PHASE_COUNT; p++)
    stat[p] = &rep->phase[p];
  stat[PHASE_COUNT] = &rep->messages;
  stat[PHASE_COUNT + 1] = &rep->bytes;
  stat[PHASE_COUNT + 2] = &rep->exchange_s;
  stat[PHASE_COUNT + 3] = &rep->exposed_s;
  for (int i = 0; i < N - 1; i++)
    *stat[i] = (struct rank_stat){lo[i], sum[i] / r->dec.size, hi[i]};
  rep->hidden = sum[N - 3] > 0 ? 1.0 - sum[N - 2] / sum[N - 3] : 1.0;
  rep->hidden_least = lo[N - 1];
  rep->clock = r->ops->exchange_clock ? "device" : "host";
  rep->exchanges = r->xch.times.exchanges;
  rep->input = o->input;
  rep->prov = &r->prov;
  rep->precision = config_precision_name(r->cfg.precision);
  if (!rep->stop_reason)
    rep->output = r->output_path;
  rep->ranks = r->dec.size;
  for (int a = 0; a < 3; a++) {
    rep->dims[a] = r->dec.dims[a];
    rep->shape[a] = r->cfg.shape[a];
  }
  rep->threads = r->threads[2];
  rep->steps = r->step;
  rep->sim_time = sim_time;
  rep->gpts = rep->loop_s > 0 ? (double)config_points(&r->cfg) *
                                    (double)(r->step - rep->first_step) / rep->loop_s / 1e9
                              : 0;
  rep->bytes_per_point = (r->f ? 3.0 : 2.0) * r->lay.elem; /* read u (and f), write v */
  rep->steps_per_launch = r->steps;
  rep->cell_volume = cell_volume(r);
  rep->equation = config_equation_name(r->cfg.equation);
  rep->order = r->cfg.order;
  if (r->cfg.equation == EQ_POISSON) {
    rep->jacobi = &r->jlog;
    rep->spectrum = &r->spec;
    rep->max_iterations = r->max_iterations;
    rep->residual_every = r->cfg.solver.residual_every;
  }
  if (!o->quiet)
    report_print(rep);
  if (o->report_json)
    return report_write_json(rep, o->report_json);
  return STENCIL_OK;
}

/* The report of a run that stopped early with a checkpoint; returns STENCIL_STOPPED.
 * Collective. */
static int report_stopped(struct run *r, struct report *rep)
{
  char checkpoint[CONFIG_PATH_MAX + 64], marker[CONFIG_PATH_MAX + 32];
  int64_t step = 0;
  rep->stop_reason = outputs_stop_reason(r->out, &step);
  checkpoint_path(checkpoint, sizeof checkpoint, r->cfg.output_dir, step);
  snprintf(marker, sizeof marker, "%s/%s", r->cfg.output_dir, OUTDIR_STOPPED);
  rep->stop_checkpoint = checkpoint;
  rep->stop_marker = marker;
  if (r->cfg.equation == EQ_POISSON) { /* the residual of the checkpointed iterate */
    double norm = 0;
    CHECK(residual_norm(r, r->u, &norm));
    jacobi_log_final(&r->jlog, r->step, norm);
  }
  CHECK(report(r, rep, (double)r->step * r->cfg.dt));
  return STENCIL_STOPPED;
}

static int run_inner(struct run *r, MPI_Comm comm)
{
  const double t_setup = MPI_Wtime();
  CHECK(setup(r, comm));
  if (r->opt->dry_run)
    return dry_run(r);
  struct report rep = {0};
  CHECK(start(r, t_setup, &rep.peak_bandwidth, &rep.read_s));
  rep.setup_s = MPI_Wtime() - t_setup;
  rep.first_step = r->step;
  const int loop_status = status_agree(r->dec.cart, loop_run(r, &rep.loop_s));
  if (loop_status != STENCIL_STOPPED)
    CHECK(loop_status);
  const int history = history_close(r->hist);
  r->hist = NULL;
  CHECK(status_agree(r->dec.cart, history));
  if (loop_status == STENCIL_STOPPED) /* the report says where the run stopped */
    return report_stopped(r, &rep);
  if (r->cfg.equation == EQ_POISSON)
    CHECK(status_agree(r->dec.cart, residual_finish(r)));
  const double t_write = MPI_Wtime();
  CHECK(status_agree(r->dec.cart, r->ops->download(r->ctx, &r->lay, r->host, r->u)));
  struct field_meta meta = {r->step, (double)r->step * r->cfg.dt, &r->prov};
  CHECK(field_write(r->output_path, &r->cfg, &r->dec, &meta, r->host, &rep.checksum));
  rep.write_s = MPI_Wtime() - t_write;
  return report(r, &rep, meta.time);
}

int run(MPI_Comm comm, const struct options *o)
{
  struct run r;
  memset(&r, 0, sizeof r);
  r.optv = *o;
  r.opt = &r.optv;
  r.dec.cart = MPI_COMM_NULL;
  r.restart_step = -1;
  r.res_logged = -1;
  int status = run_inner(&r, comm);
  release(&r, status != STENCIL_OK && status != STENCIL_STOPPED);
  return status;
}
