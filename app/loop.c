/* The time loop: the backend advances the field up to the next step where something is due,
 * exchanging halos as it goes; the loop logs the Poisson residuals, checks for NaN/Inf, writes
 * what is due and reports progress. */
#include <stdio.h>
#include <string.h>

#include "app/run_priv.h"
#include "common/error_mpi.h"
#include "solvers/heat.h"

double cell_volume(const struct run *r)
{
  return r->cfg.spacing[0] * r->cfg.spacing[1] * (r->dec.ndim == 3 ? r->cfg.spacing[2] : 1.0);
}

int fill_ghosts(struct run *r, void *f)
{
  return r->ops->fill_ghosts(r->ctx, f, &r->xch.face);
}

int residual_norm(struct run *r, const void *u, double *norm)
{
  return poisson_residual_norm(r->ops, r->ctx, &r->lay, &r->coef, &r->spec, u, r->f, cell_volume(r),
                               r->dec.cart, norm);
}

/* ---- NaN/Inf checks --------------------------------------------------------------------- */

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

int global_norms(struct run *r, struct norms *g)
{
  struct norms l;
  CHECK(r->ops->norms_begin(r->ctx, &r->lay, r->u));
  CHECK(r->ops->norms_end(r->ctx, &l));
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
  CHECK(finite_or_fail(r, &g, r->step, last_checked));
  history_add(r->hist, r->step, &g); /* the start and the end are always in the history */
  return STENCIL_OK;
}

/* The steps of the loop's checks: every --check-every and every --history-every steps. */
static int check_due(const struct run *r, int64_t step)
{
  const struct options *o = r->opt;
  return (o->check_every > 0 && step % o->check_every == 0) ||
         (o->history_every > 0 && step % o->history_every == 0);
}

/* The checks of the loop lag by one: check_begin queues the norms of the field now (behind
 * the work issued so far) and first finishes the check before, whose reduction ran long ago,
 * so the device's queue never runs empty for a check. A non-finite field is reported with
 * its own step, one check later (collective). */
static int check_end(struct run *r)
{
  if (!r->pend.active)
    return STENCIL_OK;
  r->pend.active = 0;
  CHECK(r->ops->norms_end(r->ctx, &r->pend.local));
  struct norms g;
  CHECK(reduce_norms(r, &r->pend.local, &g));
  CHECK(finite_or_fail(r, &g, r->pend.step, r->pend.finite));
  if (r->opt->history_every > 0 && r->pend.step % r->opt->history_every == 0)
    history_add(r->hist, r->pend.step, &g);
  r->pend.finite = r->pend.step;
  return STENCIL_OK;
}

static int check_begin(struct run *r)
{
  const double t0 = MPI_Wtime();
  CHECK(check_end(r));
  CHECK(r->ops->norms_begin(r->ctx, &r->lay, r->u));
  r->pend.active = 1;
  r->pend.step = r->step;
  r->phase[PHASE_CHECK] += MPI_Wtime() - t0;
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

/* ---- Poisson: the residual checks --------------------------------------------------------- */

/* 1 when the residual of iteration `iter` is due (every /solver/residual_every iterations)
 * and not yet in the log. */
static int residual_due(const struct run *r, int64_t iter)
{
  const int64_t every = r->cfg.equation == EQ_POISSON ? r->cfg.solver.residual_every : 0;
  return every > 0 && iter % every == 0 && iter != r->res_logged;
}

/* The fields of the next *k steps whose residual is due: bit l for the field after l steps
 * (the advance sums them on the way). An advance that sums residuals takes at most res_steps:
 * a field due at l >= res_steps ends a plain advance there (the next one sums it as its
 * input); otherwise *k becomes at most res_steps. */
static unsigned residuals_due(const struct run *r, int *k)
{
  int first = -1;
  for (int l = 0; l < *k && first < 0; l++)
    if (residual_due(r, r->step + l))
      first = l;
  if (first < 0)
    return 0;
  if (first >= r->res_steps) {
    *k = first;
    return 0;
  }
  if (*k > r->res_steps)
    *k = r->res_steps;
  unsigned mask = 0;
  for (int l = first; l < *k; l++)
    if (residual_due(r, r->step + l))
      mask |= 1u << l;
  return mask;
}

/* The residual sums of an advance of *done steps for the fields in mask: one MPI_Allreduce for
 * all of them, logged in order. When one has converged, the run ends exactly there: *done
 * becomes l, and for l > 0 the advance is redone from u (still intact) up to that iteration
 * (for l = 0, u is the result). Collective. */
static int residuals_log(struct run *r, unsigned mask, int *done, const double *sums)
{
  if (!mask)
    return STENCIL_OK;
  const double t0 = MPI_Wtime();
  double global[BACKEND_MAX_STEPS];
  CHECK_MPI(MPI_Allreduce(sums, global, *done, MPI_DOUBLE, MPI_SUM, r->dec.cart));
  int last = *done;
  for (int l = 0; l < *done && last == *done; l++) {
    if (!(mask >> l & 1u))
      continue;
    jacobi_log_add(&r->jlog, r->step + l, poisson_norm_of(&r->spec, global[l], cell_volume(r)));
    r->res_logged = r->step + l;
    if (r->jlog.converged)
      last = l;
  }
  r->phase[PHASE_CHECK] += MPI_Wtime() - t0;
  if (last > 0 && last < *done) { /* converged inside the advance: redo it up to there */
    double none[BACKEND_MAX_STEPS];
    CHECK(r->ops->advance(r->ctx, r->u, r->f, r->v, last, 0, &r->xch.face, none));
  }
  *done = last;
  if (r->jlog.converged)
    r->cfg.steps = r->step + last;
  return STENCIL_OK;
}

/* Before the loop: the residual of the first iterate starts the log. Collective. */
static int residual_start(struct run *r)
{
  double r0 = 0;
  CHECK(residual_norm(r, r->u, &r0));
  jacobi_log_start(&r->jlog, r->cfg.solver.tolerance, r->rhs_norm, r->step, r0);
  r->res_logged = r->step;
  if (r->jlog.converged) /* nothing to do: the loop does not start */
    r->cfg.steps = r->step;
  return STENCIL_OK;
}

/* At the end of the loop: the residual of the last field where it is due (elsewhere the next
 * advance sums it). Collective. */
static int residual_last(struct run *r)
{
  if (r->step < r->cfg.steps || !residual_due(r, r->step))
    return STENCIL_OK;
  const double t0 = MPI_Wtime();
  double norm = 0;
  CHECK(residual_norm(r, r->u, &norm));
  jacobi_log_add(&r->jlog, r->step, norm);
  r->res_logged = r->step;
  r->phase[PHASE_CHECK] += MPI_Wtime() - t0;
  return STENCIL_OK;
}

/* ---- the loop ------------------------------------------------------------------------------- */

/* Steps the next advance takes at most: the backend's, or fewer so that the loop stops
 * exactly at the next step where something is due: the last step, a NaN/Inf check, a row of
 * the history, a checkpoint, a snapshot or an agreement of the ranks (outputs_next_due). */
static int steps_to_next(const struct run *r)
{
  int64_t stop = r->cfg.steps;
  const int64_t due = outputs_next_due(r->out, r->step);
  const int64_t check = next_multiple(r->step, r->opt->check_every);
  const int64_t history = next_multiple(r->step, r->opt->history_every);
  stop = due < stop ? due : stop;
  stop = check < stop ? check : stop;
  stop = history < stop ? history : stop;
  const int64_t k = stop - r->step;
  return (int)(k < r->steps ? k : r->steps);
}

/* The phases of the report from the exchange's times and the advances': compute before the
 * messages are posted (shell), while they travel (inner), and the exchange's own. */
static void loop_phases(struct run *r, double advance_s)
{
  const struct exchange_times *t = &r->xch.times;
  r->phase[PHASE_PACK] = t->pack + t->post;
  r->phase[PHASE_INNER] = t->between;
  r->phase[PHASE_WAIT] = t->finish;
  r->phase[PHASE_SHELL] = advance_s - (t->pack + t->post + t->between + t->finish);
}

/* The exchanges' time and its exposed part (r->overlap): on the device's clock where the
 * backend queues its work (from the sent cells stored to the ghost cells unpacked, exposed
 * where no other update ran), else on the host's: from the packing to the end of the wait,
 * exposed but for the update between the post and the wait. */
static int loop_overlap(struct run *r)
{
  const struct exchange_times *t = &r->xch.times;
  if (r->ops->exchange_clock)
    return r->ops->exchange_clock(r->ctx, &r->overlap[0], &r->overlap[1]);
  r->overlap[0] = t->pack + t->post + t->between + t->finish;
  r->overlap[1] = t->pack + t->post + t->finish;
  return STENCIL_OK;
}

int loop_run(struct run *r, double *loop_s)
{
  r->pend.active = 0;
  r->pend.finite = r->step;
  CHECK(check_finite(r, -1)); /* the initial (or restart) field, before the clock starts */
  if (r->cfg.equation == EQ_POISSON)
    CHECK(residual_start(r));
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  memset(&r->xch.times, 0, sizeof r->xch.times);
  CHECK(loop_overlap(r)); /* (the device's clock from here) */
  const double t0 = MPI_Wtime();
  double t_last = t0, advance_s = 0;
  int stopped = 0;
  while (r->step < r->cfg.steps) {
    int k = steps_to_next(r);
    const unsigned mask = residuals_due(r, &k);
    double sums[BACKEND_MAX_STEPS];
    int done = k;
    const double ta = MPI_Wtime();
    CHECK(r->ops->advance(r->ctx, r->u, r->f, r->v, k, mask, &r->xch.face, sums));
    advance_s += MPI_Wtime() - ta;
    CHECK(residuals_log(r, mask, &done, sums));
    if (done == 0) { /* u converged: its outputs ran after the advance that made it */
      CHECK(outputs_end_early(r->out));
      break;
    }
    void *t = r->u;
    r->u = r->v;
    r->v = t;
    r->step += done;
    CHECK(residual_last(r));
    if (check_due(r, r->step))
      CHECK(check_begin(r));
    CHECK(outputs_after_step(r->out, r->step, &stopped));
    if (stopped)
      break;
    progress(r, t0, &t_last);
  }
  CHECK(r->ops->sync(r->ctx));
  CHECK_MPI(MPI_Barrier(r->dec.cart));
  *loop_s = MPI_Wtime() - t0;
  loop_phases(r, advance_s);
  CHECK(loop_overlap(r));
  CHECK(check_end(r));
  /* A stop's field was checked before its checkpoint; this check puts it in the history. */
  CHECK(check_finite(r, r->pend.finite));
  return stopped ? STENCIL_STOPPED : STENCIL_OK;
}
