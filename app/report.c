#include "app/report.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "stencil_version.h"

static const char *const phase_names[PHASE_COUNT] = {"compute_shell", "halo_pack_post",
                                                     "compute_inner", "halo_wait_unpack", "checks"};

static double l2(const struct report *r)
{
  return sqrt(r->norms.sumsq * r->cell_volume);
}

/* The Jacobi solve: iterations, residuals and the convergence rate against theory. */
static void print_jacobi(const struct report *r, int64_t steps)
{
  const struct jacobi_log *g = r->jacobi;
  const struct jacobi_spectrum *s = r->spectrum;
  printf("iterations     %lld (damped Jacobi, omega %.9g)", (long long)steps, s->omega);
  if (r->first_step > 0)
    printf(" after restarting at %lld", (long long)r->first_step);
  if (g->tolerance <= 0)
    printf(", no tolerance: all %lld run\n", (long long)r->max_iterations);
  else if (g->converged)
    printf(", converged: ||r|| <= %.3g ||b||\n", g->tolerance);
  else
    printf(", NOT converged to %.3g ||b|| within %lld\n", g->tolerance,
           (long long)r->max_iterations);
  printf("residual       ||f - L u|| %.6e at iteration %lld, %.6e at the start; ||b|| %.6e; "
         "relative %.3e\n",
         g->final_norm, (long long)g->final_iter, g->first_norm, g->rhs_norm,
         g->rhs_norm > 0 ? g->final_norm / g->rhs_norm : 0.0);
  printf("rate           %.9f per iteration (mean), %.9f (last %lld iterations); theory rho = "
         "%.9f\n",
         jacobi_rate_mean(g), jacobi_rate_last(g), (long long)(g->last_iter - g->prev_iter),
         s->rho);
  if (s->singular)
    printf("mean           %.6e removed from u (no Dirichlet face: u is fixed up to a "
           "constant; the output has mean 0)\n",
           g->mean_shift);
}

/* max / mean over the ranks (1: balanced); 0 where the mean is 0. */
static double imbalance(const struct rank_stat *s)
{
  return s->mean > 0 ? s->max / s->mean : 0.0;
}

/* Whether the report has the exchanges' overlap: some rank sent messages. */
static int has_overlap(const struct report *r)
{
  return r->messages.max > 0 && r->exchanges > 0;
}

/* The loop's phases over the ranks (as PETSc's -log_view), what the ranks sent, and how much
 * of the exchanges the update of the other cells hid. */
static void print_phases(const struct report *r)
{
  printf("phases         %-20s %11s %11s %11s %9s\n", "seconds, per rank", "min", "mean", "max",
         "max/mean");
  for (int p = 0; p < PHASE_COUNT; p++) {
    const struct rank_stat *s = &r->phase[p];
    char ratio[16] = "-";
    if (s->mean > 0)
      snprintf(ratio, sizeof ratio, "%.3f", imbalance(s));
    printf("  %-33s %11.6f %11.6f %11.6f %9s\n", phase_names[p], s->min, s->mean, s->max, ratio);
  }
  const struct rank_stat *m = &r->messages, *b = &r->bytes;
  printf("halo           %.0f exchanges; per rank %.0f to %.0f messages (mean %.1f), %.3f to %.3f "
         "MB (mean %.3f MB); %.0f messages, %.3f MB in all\n",
         r->exchanges, m->min, m->max, m->mean, b->min / 1e6, b->max / 1e6, b->mean / 1e6,
         m->mean * r->ranks, b->mean * r->ranks / 1e6);
  if (has_overlap(r))
    printf("overlap        %.3f ms per exchange from the sent cells stored to the ghost cells "
           "filled (mean over the ranks, %s clock), %.1f%% of it hidden behind the update of the "
           "other cells (the least on a rank %.1f%%)\n",
           1e3 * r->exchange_s.mean / r->exchanges, r->clock, 100.0 * r->hidden,
           100.0 * r->hidden_least);
}

void report_print(const struct report *r)
{
  const int64_t steps = r->steps - r->first_step;
  printf("\n== report ==\n");
  if (r->jacobi)
    print_jacobi(r, steps);
  else
    printf("steps          %lld (t = %.9g)\n", (long long)steps, r->sim_time);
  printf("loop time      %.6f s (%.3f ms/step)\n", r->loop_s,
         steps > 0 ? 1e3 * r->loop_s / (double)steps : 0.0);
  printf("throughput     %.3f Gpts/s, %.2f GB/s at %.0f B/point", r->gpts,
         r->gpts * r->bytes_per_point, r->bytes_per_point);
  if (r->peak_bandwidth > 0)
    printf(" = %.1f%% of %.2f GB/s peak",
           100.0 * r->gpts * 1e9 * r->bytes_per_point / r->peak_bandwidth, r->peak_bandwidth / 1e9);
  if (r->steps_per_launch > 1)
    printf(" (counted per step; the fused kernel reads and writes the field once per launch of "
           "up to %d steps, so this may exceed the peak)",
           r->steps_per_launch);
  printf("\n");
  print_phases(r);
  printf("outside loop   set-up %.3f s (initial field %.3f s), final write %.3f s\n", r->setup_s,
         r->read_s, r->write_s);
  printf("field          L2 %.12e  max|u| %.12e  integral %.12e\n", l2(r), r->norms.maxabs,
         r->norms.sum * r->cell_volume);
  if (r->output)
    printf("output         %s (checksum %016llx)\n", r->output, (unsigned long long)r->checksum);
  if (r->stop_reason)
    printf("stopped        on %s at step %lld: checkpoint %s, marker %s; continue with --restart "
           "latest\n",
           r->stop_reason, (long long)r->steps, r->stop_checkpoint, r->stop_marker);
  fflush(stdout);
}

/* A JSON string literal: quotes, backslashes and control characters escaped; NULL: null. */
static void json_string(FILE *f, const char *s)
{
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (; s && *s; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void write_json_jacobi(FILE *f, const struct report *r)
{
  const struct jacobi_log *g = r->jacobi;
  const struct jacobi_spectrum *s = r->spectrum;
  fprintf(f, "  \"solver\": {\n");
  fprintf(f,
          "    \"method\": \"jacobi\", \"omega\": %.17g, \"rho\": %.17g, \"mu_min\": %.17g, "
          "\"mu_max\": %.17g, \"singular\": %s,\n",
          s->omega, s->rho, s->mu_min, s->mu_max, s->singular ? "true" : "false");
  fprintf(f, "    \"iterations\": %lld, \"max_iterations\": %lld, \"residual_every\": %lld,\n",
          (long long)(r->steps - r->first_step), (long long)r->max_iterations,
          (long long)r->residual_every);
  fprintf(f, "    \"tolerance\": %.17g, \"converged\": %s, \"rhs_norm\": %.17g,\n", g->tolerance,
          g->converged ? "true" : "false", g->rhs_norm);
  fprintf(f,
          "    \"initial_residual\": %.17g, \"final_residual\": %.17g, \"final_iteration\": "
          "%lld,\n",
          g->first_norm, g->final_norm, (long long)g->final_iter);
  fprintf(f, "    \"rate_mean\": %.17g, \"rate_last\": %.17g, \"mean_removed\": %.17g,\n",
          jacobi_rate_mean(g), jacobi_rate_last(g), g->mean_shift);
  fprintf(f, "    \"history\": [");
  for (int i = 0; i < g->count; i++)
    fprintf(f, "%s[%lld, %.17g]", i ? ", " : "", (long long)g->iter[i], g->norm[i]);
  fprintf(f, "]\n  },\n");
}

int report_write_json(const struct report *r, const char *path)
{
  FILE *f = fopen(path, "w");
  if (!f)
    FAIL(STENCIL_ERR, "--report-json: cannot create %s: %s", path, strerror(errno));
  fprintf(f, "{\n");
  fprintf(f, "  \"input\": ");
  json_string(f, r->input);
  fprintf(f, ",\n");
  const struct provenance *p = r->prov;
  const char *const keys[] = {"version", "date", "hosts", "backend", "gpus", "kernel", "overrides"};
  const char *const values[] = {STENCIL_VERSION, p->date,   p->hosts,    p->backend,
                                p->gpus,         p->kernel, p->overrides};
  for (int i = 0; i < 7; i++) {
    fprintf(f, "  \"%s\": ", keys[i]);
    json_string(f, values[i]);
    fprintf(f, ",\n");
  }
  fprintf(f, "  \"precision\": \"%s\",\n", r->precision);
  fprintf(f, "  \"ranks\": %d,\n  \"dims\": [%d, %d, %d],\n  \"threads_per_rank\": %d,\n", r->ranks,
          r->dims[0], r->dims[1], r->dims[2], r->threads);
  fprintf(f, "  \"shape\": [%lld, %lld, %lld],\n", (long long)r->shape[0], (long long)r->shape[1],
          (long long)r->shape[2]);
  fprintf(f, "  \"first_step\": %lld,\n  \"steps\": %lld,\n  \"time\": %.17g,\n",
          (long long)r->first_step, (long long)r->steps, r->sim_time);
  fprintf(f, "  \"loop_seconds\": %.9g,\n  \"gpts_per_second\": %.9g,\n", r->loop_s, r->gpts);
  fprintf(f, "  \"bytes_per_point\": %g,\n  \"bandwidth_gb_per_second\": %.9g,\n",
          r->bytes_per_point, r->gpts * r->bytes_per_point);
  fprintf(f, "  \"peak_bandwidth_gb_per_second\": %.9g,\n", r->peak_bandwidth / 1e9);
  fprintf(f, "  \"steps_per_launch\": %d,\n", r->steps_per_launch);
  fprintf(f, "  \"phases_seconds\": {");
  for (int p = 0; p < PHASE_COUNT; p++)
    fprintf(f, "%s\"%s\": %.9g", p ? ", " : "", phase_names[p], r->phase[p].max);
  fprintf(f, "},\n  \"phases\": {\n");
  for (int p = 0; p < PHASE_COUNT; p++) {
    const struct rank_stat *s = &r->phase[p];
    fprintf(f, "    \"%s\": {\"min\": %.9g, \"mean\": %.9g, \"max\": %.9g, \"imbalance\": ",
            phase_names[p], s->min, s->mean, s->max);
    if (s->mean > 0)
      fprintf(f, "%.9g}%s\n", imbalance(s), p + 1 < PHASE_COUNT ? "," : "");
    else
      fprintf(f, "null}%s\n", p + 1 < PHASE_COUNT ? "," : "");
  }
  fprintf(f, "  },\n");
  fprintf(f, "  \"halo\": {\"exchanges\": %.0f", r->exchanges);
  const char *const what[2] = {"messages", "bytes"};
  const struct rank_stat *sent[2] = {&r->messages, &r->bytes};
  for (int i = 0; i < 2; i++)
    fprintf(f, ", \"%s\": {\"min\": %.17g, \"mean\": %.17g, \"max\": %.17g, \"total\": %.17g}",
            what[i], sent[i]->min, sent[i]->mean, sent[i]->max, sent[i]->mean * r->ranks);
  fprintf(f, "},\n  \"overlap\": ");
  if (has_overlap(r)) {
    fprintf(f, "{\"clock\": \"%s\"", r->clock);
    const char *const part[2] = {"exchange_seconds", "exposed_seconds"};
    const struct rank_stat *t[2] = {&r->exchange_s, &r->exposed_s};
    for (int i = 0; i < 2; i++)
      fprintf(f, ", \"%s\": {\"min\": %.9g, \"mean\": %.9g, \"max\": %.9g}", part[i], t[i]->min,
              t[i]->mean, t[i]->max);
    fprintf(f, ", \"hidden\": %.9g, \"hidden_least_rank\": %.9g}", r->hidden, r->hidden_least);
  } else {
    fprintf(f, "null");
  }
  fprintf(f, ",\n");
  fprintf(f, "  \"setup_seconds\": %.9g,\n  \"initial_field_seconds\": %.9g,\n", r->setup_s,
          r->read_s);
  fprintf(f, "  \"write_seconds\": %.9g,\n", r->write_s);
  fprintf(f,
          "  \"norms\": {\"l2\": %.17g, \"max_abs\": %.17g, \"integral\": %.17g, "
          "\"nonfinite\": %lld},\n",
          l2(r), r->norms.maxabs, r->norms.sum * r->cell_volume, (long long)r->norms.nonfinite);
  if (r->jacobi)
    write_json_jacobi(f, r);
  fprintf(f, "  \"equation\": \"%s\",\n  \"order\": %d,\n", r->equation ? r->equation : "heat",
          r->order);
  fprintf(f, "  \"output\": ");
  json_string(f, r->output);
  if (r->output)
    fprintf(f, ",\n  \"checksum\": \"%016llx\"", (unsigned long long)r->checksum);
  else
    fprintf(f, ",\n  \"checksum\": null");
  fprintf(f, ",\n  \"stopped\": ");
  if (r->stop_reason) {
    fprintf(f, "{\"reason\": ");
    json_string(f, r->stop_reason);
    fprintf(f, ", \"step\": %lld, \"checkpoint\": ", (long long)r->steps);
    json_string(f, r->stop_checkpoint);
    fprintf(f, ", \"marker\": ");
    json_string(f, r->stop_marker);
    fprintf(f, "}");
  } else {
    fprintf(f, "null");
  }
  fprintf(f, "\n}\n");
  if (ferror(f) | (fclose(f) != 0))
    FAIL(STENCIL_ERR, "--report-json: cannot write %s", path);
  return STENCIL_OK;
}
