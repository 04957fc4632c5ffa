/* The run driver: reads like the algorithm in docs/architecture.md.
 *
 *   load input -> decompose -> allocate -> initial field -> exchange halos
 *   -> time loop (shell update, pack + post halos, inner update, wait + unpack + boundaries;
 *      tier 3: one fused launch of up to T steps, then the exchange of a T-deep halo)
 *   -> final write -> report
 */
#include "app/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "app/exchange.h"
#include "app/outputs.h"
#include "app/report.h"
#include "common/error.h"
#include "domain/decomp.h"
#include "domain/halo.h"
#include "io/config.h"
#include "io/field_io.h"
#include "kernels/backend.h"
#include "solvers/heat.h"
#include "solvers/poisson.h"
#include "solvers/stencils.h"
#include "stencil_version.h"

#define MAX_BOXES 6

struct run {
  const struct options *opt; /* = &optv */
  struct options optv;       /* the command line; tier 3 rounds default cadences to T */
  struct config cfg;
  struct decomp dec;
  struct layout lay;
  struct halo halo;
  struct exchange xch; /* how halos travel (app/exchange.h) */
  int device;          /* cuda: this rank's device */
  struct stencil_coef coef;
  const struct backend_ops *ops;
  void *ctx;
  void *u, *v; /* current and next field, backend memory */
  void *f;     /* the source /source (padded like u; only its interior is read), or NULL */
  /* Poisson: the Jacobi iteration (solvers/poisson.h); steps counts its iterations. */
  struct jacobi_spectrum spec;
  struct jacobi_log jlog;
  double rhs_norm;        /* ||b||: the residual of u = 0 */
  int64_t max_iterations; /* cfg.steps as given; cfg.steps moves to the converged iteration */
  void *host;             /* dense interior block on the host: initial and final field */
  struct box inner;
  struct box shell[MAX_BOXES];
  int nshell;
  int64_t step;
  double phase[PHASE_COUNT];
  struct pending_check { /* the NaN/Inf check in flight (check_begin) */
    int active;
    int64_t step;       /* the step it checks */
    int64_t finite;     /* the last step found finite */
    struct norms local; /* this rank's norms, once read */
  } pend;
  char output_path[CONFIG_PATH_MAX + 300];
  struct outputs *out;  /* checkpoints, snapshots, restart, signals (app/outputs.h) */
  int64_t restart_step; /* -1: fresh run */
  /* Tier 3, the fused multi-step update (kernels/backend.h fused_*). */
  struct fused_request freq; /* as asked on the command line */
  int fused_steps;           /* T: the most steps one launch advances; 0 = tier 3 not used */
  int fused_halo_steps;      /* the T the halo was sized for */
  int fused_res_steps;       /* Poisson: most steps of a launch that sums residuals (0: none) */
  int fused_own_faces;       /* the launches read faces and wraps themselves (fused_prepare) */
  int fused_split;           /* plain launches run in a shell and an inner part (fused_split) */
  int64_t res_logged;        /* the last iteration whose residual the log has */
  int64_t v_ready;           /* the step whose update v already holds (residual_now), or -1 */
  char fused_why[256];       /* why tier 3 runs or not (the header) */
  char fused_note[320];      /* T lowered, cadences rounded, options ignored (the header) */
};

static int threads(void)
{
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* ---- set-up ---------------------------------------------------------------------------- */

/* Collective over comm (GPU runs choose a device per rank, app/exchange.h). */
static int select_backend(struct run *r, MPI_Comm comm)
{
  return devices_choose(comm, r->opt, &r->ops, &r->device);
}

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

/* Split the block into an inner box and up to six disjoint shell slabs, outermost axis
 * first. The shell holds the cells that neighbouring ranks need (the send boxes: `halo`
 * deep on every side that has a neighbour, none on physical boundaries), so it is updated
 * first and sent while the inner box is updated. */
static void plan_boxes(struct run *r)
{
  const struct layout *l = &r->lay;
  int64_t w[3][2];
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      w[a][s] = r->dec.physical[a][s] ? 0 : l->halo[a];
  struct box in = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  for (int a = 0; a < 3; a++) {
    in.lo[a] = w[a][0] < l->n[a] ? w[a][0] : l->n[a];
    in.hi[a] = l->n[a] - w[a][1] > in.lo[a] ? l->n[a] - w[a][1] : in.lo[a];
  }
  r->inner = in;
  r->nshell = 0;
  for (int a = 2; a >= 0; a--) {
    /* Full range along lower axes, inner range along higher axes. */
    struct box lo = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
    for (int b = a + 1; b < 3; b++) {
      lo.lo[b] = in.lo[b];
      lo.hi[b] = in.hi[b];
    }
    struct box hi = lo;
    lo.lo[a] = 0;
    lo.hi[a] = in.lo[a];
    hi.lo[a] = in.hi[a];
    hi.hi[a] = l->n[a];
    if (box_count(&lo) > 0)
      r->shell[r->nshell++] = lo;
    if (box_count(&hi) > 0)
      r->shell[r->nshell++] = hi;
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
  log_info0("%s %lld%s\n", c->equation == EQ_POISSON ? "iterations  " : "steps       ",
            (long long)c->steps, r->opt->steps >= 0 ? " (--steps)" : " (input)");
  char halo[48];
  if (d->halo[1] == d->halo[0] && (ndim == 2 || d->halo[2] == d->halo[0]))
    snprintf(halo, sizeof halo, "%d", d->halo[0]);
  else if (ndim == 2)
    snprintf(halo, sizeof halo, "%d x %d", d->halo[0], d->halo[1]);
  else
    snprintf(halo, sizeof halo, "%d x %d x %d", d->halo[0], d->halo[1], d->halo[2]);
  log_info0("ranks        %d = %d x %d x %d, halo %s, %d thread%s per rank, backend %s\n", d->size,
            d->dims[0], d->dims[1], d->dims[2], halo, threads(), threads() > 1 ? "s" : "",
            r->ops->name);
  if (r->fused_steps > 0)
    log_info0("kernel       tier 3, fused (%s): up to T = %d steps per launch%s; halos T x radius "
              "deep with edges and corners, exchanged once per launch\n",
              r->fused_why, r->fused_steps,
              r->opt->steps_per_launch > 0 ? " (--steps-per-launch)"
              : r->freq.steps > 0          ? " (residual launches)"
                                           : " (the device plan may lower it)");
  else if (r->ops->fused_query && r->freq.tier == 3)
    log_info0("kernel       tier 3 requested but not used (%s): falling back to the fastest "
              "single-step tier that applies (device line below)\n",
              r->fused_why);
  else if (r->ops->fused_query)
    log_info0("kernel       single-step tiers (%s)\n", r->fused_why);
  if (r->fused_note[0])
    log_info0("kernel       note: %s\n", r->fused_note);
  log_info0("output       %s%s\n", r->output_path, r->opt->output_dir ? " (--output-dir)" : "");
  log_info0("checks       NaN/Inf every %lld steps\n", (long long)r->opt->check_every);
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

static int allocate(struct run *r)
{
  decomp_layout(&r->dec, config_elem_size(&r->cfg), &r->lay);
  /* Tier 3 is set up by fused_prepare; update() then runs the best single-step tier. */
  const int tier = r->opt->kernel_tier == 3 ? 0 : r->opt->kernel_tier;
  struct backend_options bopt = {.device = r->device, .tier = tier, .pdl = r->opt->pdl};
  CHECK(r->ops->create(&r->ctx, &bopt));
  CHECK(r->ops->alloc(r->ctx, &r->lay, &r->u));
  CHECK(r->ops->alloc(r->ctx, &r->lay, &r->v));
  if (r->cfg.has_source)
    CHECK(r->ops->alloc(r->ctx, &r->lay, &r->f));
  size_t host_bytes = (size_t)(r->lay.n[0] * r->lay.n[1] * r->lay.n[2]) * (size_t)r->lay.elem;
  r->host = malloc(host_bytes);
  if (!r->host)
    FAIL(STENCIL_ERR, "out of host memory: %zu bytes for the field block", host_bytes);
  plan_boxes(r);
  return STENCIL_OK;
}

static void release(struct run *r)
{
  exchange_free(&r->xch);
  outputs_destroy(r->out); /* before the backend: the writer's buffer may be the backend's */
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
  if (!r->ops->measure_bandwidth)
    FAIL0(STENCIL_ERR_USAGE,
          "--peak-bandwidth measure: the %s backend cannot measure it; give "
          "a number in GB/s",
          r->ops->name);
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  CHECK(r->ops->measure_bandwidth(r->ctx, &mine));
  CHECK_MPI(MPI_Allreduce(&mine, peak, 1, MPI_DOUBLE, MPI_SUM, r->dec.cart));
  log_info0("peak         %.2f GB/s measured (all ranks together)\n", *peak / 1e9);
  return STENCIL_OK;
}

/* ---- tier 3: the fused multi-step update ----------------------------------------------- */

/* every, or the next multiple of T above it (0 stays 0). */
static int64_t round_to_steps(int64_t every, int T)
{
  return every > 0 ? (every + T - 1) / T * T : every;
}

/* Before the header: whether tier 3 runs (the backend's fused_query) and the steps per launch
 * T the halo is sized for. The block gets T x radius ghost layers on every axis (along x
 * rounded up to a multiple of 16 bytes where the block holds it, so the device rows'
 * interiors start aligned); where the smallest block is thinner, T is lowered. The defaults
 * of --check-every and --agree-every (not values given on the command line) are rounded up
 * to multiples of T: every launch stops at them, and a cadence T does not divide costs short
 * launches. The same on every rank; no device calls. */
static int fused_choose(struct run *r)
{
  const struct options *o = r->opt;
  const int tuned = o->steps_per_launch > 0 || o->cluster_size[0] > 0 || o->chunk > 0;
  r->freq.tier = o->kernel_tier == 0 && tuned ? 3 : o->kernel_tier;
  r->freq.steps = o->steps_per_launch;
  r->freq.cluster[0] = o->cluster_size[0];
  r->freq.cluster[1] = o->cluster_size[1];
  r->freq.chunk = o->chunk;
  r->freq.split = o->overlap == 2 ? FUSED_FORM_SHELLS : o->overlap == 3 ? FUSED_FORM_SIGNAL : 0;
  r->freq.inhomogeneous = 0;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      r->freq.inhomogeneous |= a < r->dec.ndim && r->cfg.bc[a][s] != BC_PERIODIC &&
                               !bc_homogeneous(r->cfg.bc[a][s], r->cfg.bc_value[a][s]);
  r->fused_steps = 0;
  if (!r->ops->fused_query) {
    if (tuned)
      snprintf(
          r->fused_note, sizeof r->fused_note,
          "the tier-3 options (--steps-per-launch, --cluster-size, --chunk) are ignored: the %s "
          "backend has no tier 3",
          r->ops->name);
    return STENCIL_OK;
  }
  const int ndim = r->dec.ndim, radius = config_radius(&r->cfg);
  const int elem = config_elem_size(&r->cfg);
  int T = 0;
  CHECK(r->ops->fused_query(ndim, elem, radius, r->cfg.has_source, &r->freq, &T, r->fused_why,
                            sizeof r->fused_why));
  if (T > 0 && r->cfg.steps > 0 && T > r->cfg.steps && r->freq.steps == 0)
    T = (int)r->cfg.steps; /* no deeper halo than the run can use */
  size_t used = 0;
  /* Poisson with a residual check due in every launch: every launch sums residuals, so it is
   * at most fused_residual_max steps long; T (and the halo) follow, so the cadences below
   * are multiples of the launches' length. */
  const int64_t every = r->cfg.equation == EQ_POISSON ? r->cfg.solver.residual_every : 0;
  const int rmax = r->ops->fused_residual_max ? r->ops->fused_residual_max(ndim, elem) : 0;
  const int res_lowered = every > 0 && every <= T && rmax > 0 && T > rmax;
  if (res_lowered) {
    used += (size_t)snprintf(r->fused_note, sizeof r->fused_note,
                             "T lowered from %d to %d: every launch sums Poisson residuals "
                             "(--residual-every %lld), at most %d steps. ",
                             T, rmax, (long long)every, rmax);
    T = rmax;
  }
  int fit = T, thin = 0;
  for (; fit > 0; fit--) {
    int ok = 1;
    for (int a = 0; a < ndim; a++)
      if ((int64_t)fit * radius > decomp_min_cells(&r->dec, a)) {
        ok = 0;
        thin = a;
      }
    if (ok)
      break;
  }
  if (T > 0 && fit == 0) {
    snprintf(r->fused_why, sizeof r->fused_why,
             "the smallest block has %lld cells along %c, fewer than the stencil radius %d",
             (long long)decomp_min_cells(&r->dec, thin), "xyz"[thin], radius);
    T = 0;
  }
  if (T == 0) {
    if (tuned)
      snprintf(
          r->fused_note, sizeof r->fused_note,
          "the tier-3 options (--steps-per-launch, --cluster-size, --chunk) are ignored without "
          "tier 3");
    return STENCIL_OK;
  }
  if (used >= sizeof r->fused_note)
    used = sizeof r->fused_note - 1;
  if (fit < T) {
    used += (size_t)snprintf(r->fused_note + used, sizeof r->fused_note - used,
                             "T lowered from %d to %d: the smallest block has %lld cells along %c "
                             "(the halo is T x radius deep). ",
                             T, fit, (long long)decomp_min_cells(&r->dec, thin), "xyz"[thin]);
    if (used >= sizeof r->fused_note)
      used = sizeof r->fused_note - 1;
    if (r->freq.steps > 0)
      log_warn0("--steps-per-launch %d lowered to %d: the smallest block has only %lld cells "
                "along %c",
                T, fit, (long long)decomp_min_cells(&r->dec, thin), "xyz"[thin]);
    T = fit;
  }
  int halo[3] = {0, 0, 0};
  for (int a = 0; a < ndim; a++)
    halo[a] = T * radius;
  const int vec = 16 / elem;
  const int hx = (T * radius + vec - 1) / vec * vec;
  if (hx <= decomp_min_cells(&r->dec, 0))
    halo[0] = hx;
  else if (ndim == 3) { /* the 3D fused kernel's rows start on 16-byte boundaries */
    snprintf(r->fused_why, sizeof r->fused_why,
             "the smallest block has %lld cells along x, fewer than the %d-deep halo of 16-byte "
             "vectors the 3D fused kernel needs",
             (long long)decomp_min_cells(&r->dec, 0), hx);
    return STENCIL_OK;
  }
  CHECK(decomp_set_halo(&r->dec, halo));
  r->fused_steps = r->fused_halo_steps = T;
  if (r->freq.steps > 0 || res_lowered) /* the plan's T too (its margins and chunks) */
    r->freq.steps = T;
  struct options *ov = &r->optv;
  const int64_t check =
      ov->check_every_given ? ov->check_every : round_to_steps(ov->check_every, T);
  const int64_t agree =
      ov->agree_every_given ? ov->agree_every : round_to_steps(ov->agree_every, T);
  if (check != ov->check_every || agree != ov->agree_every)
    snprintf(r->fused_note + used, sizeof r->fused_note - used,
             "NaN checks every %lld steps, agreements every %lld (the defaults of "
             "--check-every and --agree-every, rounded up to multiples of T)",
             (long long)check, (long long)agree);
  ov->check_every = check;
  ov->agree_every = agree;
  return STENCIL_OK;
}

/* The faces of this rank's block as the fused update sees them. */
static void fused_faces(const struct run *r, struct block_faces *f)
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

/* After allocation: the backend plans tier 3 on this rank's block (*steps = its T,
 * r->fused_own_faces whether its launches read faces and wraps themselves). */
static int fused_prepare(struct run *r, int *steps)
{
  struct block_faces faces;
  fused_faces(r, &faces);
  return r->ops->fused_prepare(r->ctx, &r->lay, &r->coef, r->cfg.has_source, &faces, &r->freq,
                               steps, &r->fused_own_faces);
}

/* The T of the loop: the smallest plan over the ranks (every launch is followed by an
 * exchange, so all ranks advance alike), at most the halo's. Collective. */
static int fused_agree(struct run *r, int planned)
{
  int T = 0;
  CHECK_MPI(MPI_Allreduce(&planned, &T, 1, MPI_INT, MPI_MIN, r->dec.cart));
  if (T < r->fused_halo_steps)
    log_info0("kernel       tier 3: the device plan runs T = %d steps per launch (the halo "
              "allows %d)\n",
              T, r->fused_halo_steps);
  r->fused_steps = T < r->fused_halo_steps ? T : r->fused_halo_steps;
  return STENCIL_OK;
}

/* ---- time stepping --------------------------------------------------------------------- */

/* v now holds the field k steps after u (k = -1 undoes a step): swap them, count the steps. */
static void advance(struct run *r, int k)
{
  void *t = r->u;
  r->u = r->v;
  r->v = t;
  r->step += k;
}

/* Fill the ghost cells of f: exchange with neighbours (pack -> post -> wait -> unpack),
 * then reflect across physical faces. Split so the inner update can run in between. */
static int halo_start(struct run *r, void *f)
{
  CHECK(exchange_pack(&r->xch, &r->lay, f));
  return exchange_post(&r->xch);
}

static int halo_finish(struct run *r, void *f, int fence)
{
  return exchange_finish(&r->xch, &r->lay, f, &r->cfg, &r->dec, fence);
}

/* One step on a backend with two lanes (GPU): the shell and its packing on the
 * high-priority halo lane, the inner box on the bulk lane while the messages travel, then
 * unpacking and boundaries on the halo lane; events (lane_fence), not host waits, order the
 * lanes. With --overlap off or no messages the block is one update on the halo lane.
 * Phases are host times: shell = issuing the updates and packing, pack+post = waiting for
 * the packed halos (MPI transports) and posting, wait+unpack = the exchange's completion. */
static int step_lanes(struct run *r)
{
  const struct backend_ops *ops = r->ops;
  const int split = r->opt->overlap && r->halo.nmsg > 0;
  double t0 = MPI_Wtime();
  if (split)
    CHECK(ops->lane_fence(r->ctx));
  CHECK(ops->lane_select(r->ctx, LANE_HALO));
  if (split) {
    for (int i = 0; i < r->nshell; i++)
      CHECK(ops->update(r->ctx, &r->lay, &r->coef, r->u, r->f, r->v, &r->shell[i]));
  } else {
    const struct box all = {{0, 0, 0}, {r->lay.n[0], r->lay.n[1], r->lay.n[2]}};
    CHECK(ops->update(r->ctx, &r->lay, &r->coef, r->u, r->f, r->v, &all));
  }
  CHECK(exchange_pack(&r->xch, &r->lay, r->v));
  if (split) {
    CHECK(ops->lane_select(r->ctx, LANE_BULK));
    CHECK(ops->update(r->ctx, &r->lay, &r->coef, r->u, r->f, r->v, &r->inner));
    CHECK(ops->lane_select(r->ctx, LANE_HALO));
  }
  double t1 = MPI_Wtime();
  CHECK(exchange_post(&r->xch));
  double t2 = MPI_Wtime();
  CHECK(halo_finish(r, r->v, split));
  double t3 = MPI_Wtime();
  r->phase[PHASE_SHELL] += t1 - t0;
  r->phase[PHASE_PACK] += t2 - t1;
  r->phase[PHASE_WAIT] += t3 - t2;
  advance(r, 1);
  return STENCIL_OK;
}

/* One step u -> v; then swap. Halos of u are valid on entry, those of v on exit. */
static int step(struct run *r)
{
  if (r->ops->lane_select)
    return step_lanes(r);
  const int ready = r->v_ready == r->step; /* the residual check computed v already */
  double t0 = MPI_Wtime();
  for (int i = 0; i < r->nshell && !ready; i++)
    CHECK(r->ops->update(r->ctx, &r->lay, &r->coef, r->u, r->f, r->v, &r->shell[i]));
  double t1 = MPI_Wtime();
  CHECK(halo_start(r, r->v));
  double t2 = MPI_Wtime();
  if (!ready)
    CHECK(r->ops->update(r->ctx, &r->lay, &r->coef, r->u, r->f, r->v, &r->inner));
  double t3 = MPI_Wtime();
  CHECK(halo_finish(r, r->v, 0));
  double t4 = MPI_Wtime();
  r->phase[PHASE_SHELL] += t1 - t0;
  r->phase[PHASE_PACK] += t2 - t1;
  r->phase[PHASE_INNER] += t3 - t2;
  r->phase[PHASE_WAIT] += t4 - t3;
  advance(r, 1);
  return STENCIL_OK;
}

static double cell_volume(const struct run *r);

/* 1 when the residual of iteration `iter` is due (Poisson, every /solver/residual_every
 * iterations) and not yet in the log. */
static int residual_due(const struct run *r, int64_t iter)
{
  const int64_t every = r->cfg.equation == EQ_POISSON ? r->cfg.solver.residual_every : 0;
  return every > 0 && iter % every == 0 && iter != r->res_logged;
}

/* The residuals of a fused launch of *k Jacobi iterations u -> v (fused_residual, already
 * issued, and v's halo exchange after it) for the fields in mask (bit l: the field after
 * step + l, l < *k; u itself for l = 0): one MPI_Allreduce for all of them, logged in order.
 * When one has converged, the run ends exactly there as with residual(): *k becomes l, and
 * for l > 0 the launch is redone from u (still intact) up to that iteration and v's halos
 * exchanged again (for l = 0, u is the result). *check_s: the time of waiting for the sums,
 * the reduction and the log. Collective. */
static int fused_residual_check(struct run *r, int *k, unsigned mask, double *check_s)
{
  const struct backend_ops *ops = r->ops;
  double local[BACKEND_FUSED_MAX_STEPS], global[BACKEND_FUSED_MAX_STEPS];
  const double t0 = MPI_Wtime();
  CHECK(ops->fused_residual_sums(r->ctx, local));
  CHECK_MPI(MPI_Allreduce(local, global, *k, MPI_DOUBLE, MPI_SUM, r->dec.cart));
  int last = *k;
  for (int l = 0; l < *k; l++) {
    if (!(mask >> l & 1u))
      continue;
    jacobi_log_add(&r->jlog, r->step + l, poisson_norm_of(&r->spec, global[l], cell_volume(r)));
    r->res_logged = r->step + l;
    if (r->jlog.converged) {
      last = l;
      break;
    }
  }
  *check_s = MPI_Wtime() - t0;
  if (last > 0 && last < *k) { /* converged inside the launch: redo it up to there */
    CHECK(ops->fused_update(r->ctx, r->u, r->f, r->v, last, FUSED_ALL));
    CHECK(halo_start(r, r->v));
    CHECK(halo_finish(r, r->v, 0));
  }
  *k = last;
  if (r->jlog.converged)
    r->cfg.steps = r->step + last;
  return STENCIL_OK;
}

/* Tier 3: k fused steps u -> v in one launch (with the residual sums where Poisson checks fall
 * on u or inside the launch), then the exchange of v's halo (T x radius deep, edges and corners;
 * the reflecting faces' ghosts are filled too, which the Poisson residual reads), then swap. A
 * launch the backend splits (fused_split: 3D warp rows sending along z only; never one with
 * residual sums, which are 2D), with --overlap on and messages to send, runs as step_lanes: its
 * shell (the cells the exchange sends) on the halo lane, then packing there while the inner part
 * runs on the bulk lane. 2D launches run whole: without residuals they measured faster so, and with
 * residual sums too since the sixteenth session's kernels (docs/performance.md, "Jacobi"). The
 * residual sums are awaited last, after the exchange is issued. Phases: shell = issuing the
 * launch(es) and packing, pack+post = posting, wait+unpack = the exchange's completion, check = the
 * residuals' wait and reduction. */
static int step_fused(struct run *r, int k)
{
  const struct backend_ops *ops = r->ops;
  const double t0 = MPI_Wtime();
  unsigned mask = 0;
  for (int l = 0; r->fused_res_steps > 0 && l < k; l++)
    if (residual_due(r, r->step + l))
      mask |= 1u << l;
  const int split =
      r->opt->overlap && r->halo.nmsg > 0 && ops->lane_select && r->fused_split && !mask;
  if (split)
    CHECK(ops->lane_fence(r->ctx));
  if (ops->lane_select)
    CHECK(ops->lane_select(r->ctx, LANE_HALO));
  const int first = split ? FUSED_SHELL : FUSED_ALL;
  if (!mask)
    CHECK(ops->fused_update(r->ctx, r->u, r->f, r->v, k, first));
  else
    CHECK(ops->fused_residual(r->ctx, r->u, r->f, r->v, k, mask));
  CHECK(exchange_pack(&r->xch, &r->lay, r->v));
  if (split) {
    CHECK(ops->lane_select(r->ctx, LANE_BULK));
    CHECK(ops->fused_update(r->ctx, r->u, r->f, r->v, k, FUSED_INNER));
    CHECK(ops->lane_select(r->ctx, LANE_HALO));
  }
  const double t1 = MPI_Wtime();
  CHECK(exchange_post(&r->xch));
  const double t2 = MPI_Wtime();
  CHECK(halo_finish(r, r->v, split));
  const double t3 = MPI_Wtime();
  double check_s = 0;
  if (mask)
    CHECK(fused_residual_check(r, &k, mask, &check_s));
  r->phase[PHASE_SHELL] += t1 - t0;
  r->phase[PHASE_CHECK] += check_s;
  r->phase[PHASE_PACK] += t2 - t1;
  r->phase[PHASE_WAIT] += t3 - t2;
  if (k > 0) /* else u converged: v is dropped */
    advance(r, k);
  return STENCIL_OK;
}

/* Steps the next fused launch advances: T, or fewer so that the loop stops exactly at the
 * next step where something is due: the last step, a NaN/Inf check, a Poisson residual, a
 * checkpoint, a snapshot or an agreement of the ranks (outputs_next_due). */
static int fused_count(const struct run *r)
{
  int64_t stop = r->cfg.steps;
  const int64_t due = outputs_next_due(r->out, r->step);
  const int64_t check = next_multiple(r->step, r->opt->check_every);
  stop = due < stop ? due : stop;
  stop = check < stop ? check : stop;
  int64_t k = stop - r->step;
  k = k < r->fused_steps ? k : r->fused_steps;
  if (r->cfg.equation == EQ_POISSON && r->fused_res_steps > 0) {
    /* A residual due for u (left by residual_check) or inside the launch: summed there, in a
     * launch of at most fused_res_steps. */
    const int64_t res =
        residual_due(r, r->step) ? r->step : next_multiple(r->step, r->cfg.solver.residual_every);
    const int64_t d = res - r->step;      /* its field: after d steps of the launch */
    if (d < k && d >= r->fused_res_steps) /* beyond a residual launch: stop there */
      k = d;
    else if (d < k && k > r->fused_res_steps)
      k = r->fused_res_steps;
  } else if (r->cfg.equation == EQ_POISSON) { /* stop there for residual() */
    const int64_t res = next_multiple(r->step, r->cfg.solver.residual_every);
    if (res <= r->step + k)
      k = (int)(res - r->step);
  }
  return (int)k;
}

/* The norms of all ranks from this rank's (collective). */
static int reduce_norms(struct run *r, const struct norms *l, struct norms *g)
{
  double sums[2] = {l->sum, l->sumsq}, gs[2];
  int64_t bad = l->nonfinite;
  CHECK_MPI(MPI_Allreduce(sums, gs, 2, MPI_DOUBLE, MPI_SUM, r->dec.cart));
  CHECK_MPI(MPI_Allreduce(&l->maxabs, &g->maxabs, 1, MPI_DOUBLE, MPI_MAX, r->dec.cart));
  CHECK_MPI(MPI_Allreduce(&bad, &g->nonfinite, 1, MPI_INT64_T, MPI_SUM, r->dec.cart));
  g->sum = gs[0];
  g->sumsq = gs[1];
  return STENCIL_OK;
}

/* Global norms of u. Collective. */
static int global_norms(struct run *r, struct norms *g)
{
  struct norms l;
  CHECK(r->ops->norms(r->ctx, &r->lay, r->u, &l));
  return reduce_norms(r, &l, g);
}

/* Stop with a clear message if the field of `step` held NaN or Inf: g, its norms over all
 * ranks (last_checked < 0: the field at the start of the run). */
static int finite_or_fail(struct run *r, const struct norms *g, int64_t step, int64_t last_checked)
{
  if (g->nonfinite > 0 && last_checked < 0)
    FAIL0(STENCIL_ERR_NUMERIC,
          "%s: the field at the start (step %lld, before any update) has %lld non-finite values "
          "(NaN or Inf); check /initial/field or the restart file. Nothing was run or written",
          r->opt->input, (long long)step, (long long)g->nonfinite);
  if (g->nonfinite > 0)
    FAIL0(STENCIL_ERR_NUMERIC,
          "the field has %lld non-finite values (NaN or Inf) at step %lld (it was finite at step "
          "%lld); the run is unstable or the input is broken. Nothing was written. Check %s "
          "(limit %.6g) or look closer with --check-every 1",
          (long long)g->nonfinite, (long long)step, (long long)last_checked,
          r->cfg.equation == EQ_POISSON ? "/solver/omega" : "dt",
          r->cfg.equation == EQ_POISSON ? 2.0 / r->spec.mu_max : heat_max_stable_dt(&r->cfg));
  return STENCIL_OK;
}

/* The field's NaN/Inf check, now (collective; last_checked < 0: the start of the run). */
static int check_finite(struct run *r, int64_t last_checked)
{
  struct norms g;
  CHECK(global_norms(r, &g));
  return finite_or_fail(r, &g, r->step, last_checked);
}

/* The checks of the loop lag by one: check_begin queues the norms of the field now (behind
 * the launches, where the backend has norms_begin) and first finishes the check before,
 * whose reduction ran long ago. Waiting for the device at every check would empty its queue
 * of launches (0.1-0.8 % of a tier-3 run on 512^3 on one H200, docs/performance.md). A
 * non-finite field is reported with its own step, one check later (collective). */
static int check_end(struct run *r)
{
  if (!r->pend.active)
    return STENCIL_OK;
  r->pend.active = 0;
  if (r->ops->norms_begin)
    CHECK(r->ops->norms_end(r->ctx, &r->pend.local));
  struct norms g;
  CHECK(reduce_norms(r, &r->pend.local, &g));
  CHECK(finite_or_fail(r, &g, r->pend.step, r->pend.finite));
  r->pend.finite = r->pend.step;
  return STENCIL_OK;
}

static int check_begin(struct run *r)
{
  CHECK(check_end(r));
  if (r->ops->norms_begin)
    CHECK(r->ops->norms_begin(r->ctx, &r->lay, r->u));
  else
    CHECK(r->ops->norms(r->ctx, &r->lay, r->u, &r->pend.local));
  r->pend.active = 1;
  r->pend.step = r->step;
  return STENCIL_OK;
}

static void progress(const struct run *r, double t_start, double *t_last)
{
  if (r->opt->progress_every <= 0 || r->dec.rank != 0 || log_quiet())
    return;
  const double now = MPI_Wtime();
  if (now - *t_last < r->opt->progress_every)
    return;
  *t_last = now;
  const double el = now - t_start;
  const double done = (double)r->step / (double)r->cfg.steps;
  printf("step %lld/%lld (%.0f%%)  elapsed %.1f s  remaining ~%.1f s  %.3f Gpts/s\n",
         (long long)r->step, (long long)r->cfg.steps, 100.0 * done, el,
         done > 0 ? el * (1 - done) / done : 0.0,
         (double)config_points(&r->cfg) * (double)r->step / el / 1e9);
  fflush(stdout);
}

/* ---- Poisson: residual checks and the end of the solve ---------------------------------- */

static double cell_volume(const struct run *r)
{
  return r->cfg.spacing[0] * r->cfg.spacing[1] * (r->dec.ndim == 3 ? r->cfg.spacing[2] : 1.0);
}

/* ||f - L u|| of the field u (next: NULL, or where update_residual writes u's update).
 * Collective. */
static int residual_norm(struct run *r, const void *u, void *next, double *norm)
{
  return poisson_residual_norm(r->ops, r->ctx, &r->lay, &r->coef, &r->spec, u, r->f, next,
                               cell_volume(r), r->dec.cart, norm);
}

/* ||b|| = the residual of u = 0 with its boundary ghosts: call while u is still the zero field
 * alloc() made. Collective. */
static int compute_rhs_norm(struct run *r)
{
  const struct config *c = &r->cfg;
  for (int a = 0; a < r->dec.ndim; a++)
    for (int s = 0; s < 2; s++)
      if (r->dec.physical[a][s])
        CHECK(r->ops->boundary(r->ctx, &r->lay, r->u, a, s, c->bc[a][s], c->bc_value[a][s]));
  return residual_norm(r, r->u, NULL, &r->rhs_norm);
}

/* ||f - L u|| of the current field u where another iteration may follow. With the backend's
 * update_residual (CPU) and plain steps, the same pass writes that iteration into v and the
 * next step() only exchanges its halos: the residual of every iteration then costs no extra
 * sweep. Collective. */
static int residual_now(struct run *r, double *norm)
{
  const int ahead = r->ops->update_residual && !r->ops->lane_select && r->fused_steps == 0 &&
                    r->step < r->cfg.steps;
  CHECK(residual_norm(r, r->u, ahead ? r->v : NULL, norm));
  if (ahead)
    r->v_ready = r->step;
  return STENCIL_OK;
}

/* Before the loop: the residual of the first iterate starts the log. Collective. */
static int residual_start(struct run *r)
{
  double r0 = 0;
  CHECK(residual_now(r, &r0));
  jacobi_log_start(&r->jlog, r->cfg.solver.tolerance, r->rhs_norm, r->step, r0);
  r->res_logged = r->step;
  if (r->jlog.converged) /* nothing to do: the loop does not start */
    r->cfg.steps = r->step;
  return STENCIL_OK;
}

/* After iteration r->step: the residual every /solver/residual_every iterations; when it has
 * converged the run ends here (cfg.steps moves to this iteration, so the outputs treat it as
 * the last step). Left to the next launch where one follows that sums it (tier 3: the
 * residual of the field it starts from, fused_residual_check). Collective. */
static int residual_check(struct run *r)
{
  if (!residual_due(r, r->step))
    return STENCIL_OK;
  if (r->fused_res_steps > 0 && r->step < r->cfg.steps) /* the next launch sums it (bit 0) */
    return STENCIL_OK;
  const double t0 = MPI_Wtime();
  double norm = 0;
  CHECK(residual_now(r, &norm));
  jacobi_log_add(&r->jlog, r->step, norm);
  if (r->jlog.converged)
    r->cfg.steps = r->step;
  r->phase[PHASE_CHECK] += MPI_Wtime() - t0;
  return STENCIL_OK;
}

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
    CHECK(halo_start(r, r->u));
    CHECK(halo_finish(r, r->u, 0));
  }
  double norm = 0;
  CHECK(residual_norm(r, r->u, NULL, &norm));
  jacobi_log_final(&r->jlog, r->step, norm);
  if (r->jlog.tolerance > 0 && !r->jlog.converged)
    log_warn0("the Jacobi iteration did not reach the tolerance: ||f - L u|| = %.6e > %.3g x "
              "||b|| = %.6e after %lld iterations (raise --steps or --tolerance)",
              norm, r->jlog.tolerance, r->jlog.target, (long long)r->step);
  return STENCIL_OK;
}

static int time_loop(struct run *r, double *loop_s)
{
  r->pend.active = 0;
  r->pend.finite = r->step;
  CHECK(check_finite(r, -1)); /* the initial (or restart) field, before the clock starts */
  if (r->cfg.equation == EQ_POISSON)
    CHECK(residual_start(r));
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  const double t0 = MPI_Wtime();
  double t_last = t0;
  while (r->step < r->cfg.steps) {
    if (r->fused_steps > 0) {
      const int64_t before = r->step;
      CHECK(step_fused(r, fused_count(r)));
      if (r->step == before) { /* u converged: its outputs ran after the launch that made it */
        CHECK(outputs_end_early(r->out));
        break;
      }
    } else {
      CHECK(step(r));
    }
    if (r->cfg.equation == EQ_POISSON)
      CHECK(residual_check(r));
    if (r->opt->check_every > 0 && r->step % r->opt->check_every == 0) {
      const double tc = MPI_Wtime();
      CHECK(check_begin(r));
      r->phase[PHASE_CHECK] += MPI_Wtime() - tc;
    }
    int stop = 0;
    CHECK(outputs_after_step(r->out, r->step, &stop));
    if (stop)
      return STENCIL_STOPPED;
    progress(r, t0, &t_last);
  }
  CHECK(r->ops->sync(r->ctx));
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  *loop_s = MPI_Wtime() - t0;
  CHECK(check_end(r));
  return check_finite(r, r->pend.finite);
}

/* ---- the run --------------------------------------------------------------------------- */

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

static int initial_field(struct run *r)
{
  CHECK(load_source(r));
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
  CHECK(halo_start(r, r->u));
  CHECK(halo_finish(r, r->u, 0));
  if (r->f && r->fused_steps > 0) { /* tier 3 reads f in the halo cells it recomputes */
    CHECK(halo_start(r, r->f));
    CHECK(halo_finish(r, r->f, 0));
  }
  return STENCIL_OK;
}

static int run_inner(struct run *r, MPI_Comm comm)
{
  const struct options *o = r->opt;
  const double t_setup = MPI_Wtime();
  CHECK(config_load(o->input, &r->cfg, comm));
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
  if (r->cfg.equation == EQ_POISSON) {
    jacobi_spectrum(&r->cfg, &r->spec);
  }
  if (o->output_dir)
    snprintf(r->cfg.output_dir, sizeof r->cfg.output_dir, "%s", o->output_dir);
  snprintf(r->output_path, sizeof r->output_path, "%s/%s", r->cfg.output_dir, r->cfg.output_final);
  CHECK(check_stability(r));
  CHECK(select_backend(r, comm));
  int periodic[3];
  for (int a = 0; a < 3; a++)
    periodic[a] = r->cfg.bc[a][0] == BC_PERIODIC;
  CHECK(decomp_create(comm, r->cfg.shape, periodic, o->dims, config_radius(&r->cfg), &r->dec));
  CHECK(fused_choose(r)); /* tier 3 deepens the halo to T x radius */
  if (r->cfg.equation == EQ_POISSON)
    jacobi_coefficients(&r->cfg, r->spec.omega, &r->coef);
  else
    heat_coefficients(&r->cfg, &r->coef);
  print_header(r);
  if (o->dry_run)
    return dry_run(r);
  CHECK(outputs_create(&r->out, o, &r->cfg, &r->dec, r->ops->name, t_setup));
  CHECK(outputs_prepare(r->out, &r->restart_step));
  /* A restart moves the earlier final output aside (outputs_begin) instead of refusing. */
  CHECK(output_prepare(r->dec.cart, r->cfg.output_dir, r->cfg.output_final,
                       o->overwrite || r->restart_step >= 0));
  CHECK(status_agree(r->dec.cart, allocate(r)));
  if (r->fused_steps > 0) {
    int planned = 0;
    CHECK(status_agree(r->dec.cart, fused_prepare(r, &planned)));
    CHECK(fused_agree(r, planned));
    r->fused_split = r->ops->fused_split ? r->ops->fused_split(r->ctx) : 0;
    int any = 0,
        split[2] = {(r->fused_split & FUSED_SPLIT) != 0, (r->fused_split & FUSED_SPLIT_ONE) != 0},
        ranks[2];
    CHECK_MPI(MPI_Allreduce(&r->fused_split, &any, 1, MPI_INT, MPI_BOR, r->dec.cart));
    CHECK_MPI(MPI_Allreduce(split, ranks, 2, MPI_INT, MPI_SUM, r->dec.cart));
    if (any && o->overlap)
      log_info0("kernel       tier 3 launches split where only z faces send, the exchange "
                "running while the rest is computed (%d of %d ranks): on %d as one launch that "
                "signals when the sent planes are stored, on %d the sent planes first\n",
                ranks[0], r->dec.size, ranks[1], ranks[0] - ranks[1]);
    int res = 0;
    if (r->cfg.equation == EQ_POISSON && r->ops->fused_residual_steps)
      res = r->ops->fused_residual_steps(r->ctx);
    res = res < r->fused_steps ? res : r->fused_steps;
    CHECK_MPI(MPI_Allreduce(&res, &r->fused_res_steps, 1, MPI_INT, MPI_MIN, r->dec.cart));
  }
  CHECK(exchange_create(&r->xch, r->ops, r->ctx, &r->halo, &r->dec, r->lay.elem, r->fused_steps > 0,
                        r->fused_steps > 0 && r->fused_own_faces,
                        (enum halo_transport)o->halo_transport,
                        r->cfg.has_source ? NULL : (void *[2]){r->u, r->v}));
  double peak = o->peak_bandwidth;
  if (o->measure_bandwidth)
    CHECK(status_agree(r->dec.cart, measure_peak(r, &peak)));
  const double t_read = MPI_Wtime();
  CHECK(status_agree(r->dec.cart, initial_field(r)));
  struct report rep = {0};
  const int pinned = r->ops->buffer_alloc != NULL;
  const struct outputs_field field = {download_field,
                                      r,
                                      r->host,
                                      pinned ? host_buffer_alloc : NULL,
                                      pinned ? host_buffer_free : NULL,
                                      drain_field};
  CHECK(outputs_begin(r->out, r->step, &field));
  rep.read_s = MPI_Wtime() - t_read;
  if (r->ops->tune && r->fused_steps == 0) { /* on the box the loop updates most: the inner
                                                 one when split (tier 3 has nothing to tune) */
    const struct box all = {{0, 0, 0}, {r->lay.n[0], r->lay.n[1], r->lay.n[2]}};
    const int split = o->overlap && r->halo.nmsg > 0;
    CHECK(status_agree(r->dec.cart, r->ops->tune(r->ctx, &r->lay, &r->coef, r->u, r->v,
                                                 split ? &r->inner : &all)));
  }
  CHECK(devices_print(r->dec.cart, r->ops, r->ctx));
  rep.setup_s = MPI_Wtime() - t_setup;
  rep.first_step = r->step;

  CHECK(status_agree(r->dec.cart, time_loop(r, &rep.loop_s)));
  if (r->cfg.equation == EQ_POISSON)
    CHECK(status_agree(r->dec.cart, residual_finish(r)));

  const double t_write = MPI_Wtime();
  CHECK(status_agree(r->dec.cart, r->ops->download(r->ctx, &r->lay, r->host, r->u)));
  struct field_meta meta = {r->step, (double)r->step * r->cfg.dt, r->ops->name};
  CHECK(field_write(r->output_path, &r->cfg, &r->dec, &meta, r->host));
  rep.write_s = MPI_Wtime() - t_write;

  CHECK(global_norms(r, &rep.norms));
  CHECK_MPI(MPI_Reduce(r->phase, rep.phase_s, PHASE_COUNT, MPI_DOUBLE, MPI_MAX, 0, r->dec.cart));
  if (r->dec.rank != 0)
    return STENCIL_OK;
  rep.input = o->input;
  rep.backend = r->ops->name;
  rep.precision = config_precision_name(r->cfg.precision);
  rep.output = r->output_path;
  rep.ranks = r->dec.size;
  for (int a = 0; a < 3; a++) {
    rep.dims[a] = r->dec.dims[a];
    rep.shape[a] = r->cfg.shape[a];
  }
  rep.threads = threads();
  rep.steps = r->step;
  rep.sim_time = meta.time;
  rep.gpts = rep.loop_s > 0 ? (double)config_points(&r->cfg) * (double)(r->step - rep.first_step) /
                                  rep.loop_s / 1e9
                            : 0;
  rep.bytes_per_point = (r->f ? 3.0 : 2.0) * r->lay.elem; /* read u (and f), write v */
  rep.steps_per_launch = r->fused_steps;
  rep.peak_bandwidth = peak;
  rep.cell_volume = cell_volume(r);
  rep.equation = config_equation_name(r->cfg.equation);
  rep.order = r->cfg.order;
  if (r->cfg.equation == EQ_POISSON) {
    rep.jacobi = &r->jlog;
    rep.spectrum = &r->spec;
    rep.max_iterations = r->max_iterations;
    rep.residual_every = r->cfg.solver.residual_every;
  }
  if (!o->quiet)
    report_print(&rep);
  if (o->report_json)
    return report_write_json(&rep, o->report_json);
  return STENCIL_OK;
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
  r.v_ready = -1;
  int status = run_inner(&r, comm);
  release(&r);
  return status;
}
