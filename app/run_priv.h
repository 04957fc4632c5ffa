#pragma once
/* The state of one run, shared by the driver's two files: app/run.c (set-up, the run from
 * input to report) and app/loop.c (the time loop). */
#include <stdint.h>

#include "app/history.h"
#include "app/options.h"
#include "app/outputs.h"
#include "app/report.h"
#include "domain/decomp.h"
#include "domain/halo.h"
#include "io/config.h"
#include "io/outdir.h"
#include "kernels/backend.h"
#include "solvers/poisson.h"
#include "transport/exchange.h"

struct run {
  const struct options *opt; /* = &optv */
  struct options optv;       /* the command line; default cadences rounded to the advances */
  struct config cfg;
  struct decomp dec;
  struct layout lay;
  struct halo halo;
  struct exchange xch; /* how halos travel; xch.face is what the backend calls */
  const struct backend_ops *ops;
  struct backend_options bopt;
  void *ctx;
  struct halo_plan plan;    /* the backend's halo and steps per advance (halo_depth) */
  struct advance_info info; /* ... on this rank's block (prepare) */
  int steps;                /* the most steps one advance takes, the same on every rank */
  int res_steps;            /* ... where it sums residuals, the same on every rank */
  int gpu_shared;           /* ranks share a GPU (devices_choose) */
  int threads[3];           /* OpenMP threads per rank: fewest, most, this rank's */
  char threads_why[96];     /* where this rank's count came from (devices_threads) */
  struct stencil_coef coef;
  void *u, *v; /* current and next field, backend memory */
  void *f;     /* the source /source (padded like u; only its interior is read), or NULL */
  void *host;  /* dense interior block on the host: initial and final field */
  int64_t step;
  double phase[PHASE_COUNT];
  double overlap[2];     /* the loop's exchanges from start to end, and the part of it that no
                            update of other cells overlapped (seconds, loop_overlap) */
  struct pending_check { /* the NaN/Inf check in flight (check_begin) */
    int active;
    int64_t step;       /* the step it checks */
    int64_t finite;     /* the last step found finite */
    struct norms local; /* this rank's norms, once read */
  } pend;
  /* Poisson: the Jacobi iteration (solvers/poisson.h); step counts its iterations. */
  struct jacobi_spectrum spec;
  struct jacobi_log jlog;
  double rhs_norm;        /* ||b||: the residual of u = 0 */
  int64_t max_iterations; /* cfg.steps as given; cfg.steps moves to the converged iteration */
  int64_t res_logged;     /* the last iteration whose residual the log has */
  char output_path[CONFIG_PATH_MAX + 300];
  struct outdir *outdir;  /* the output directory's lock (rank 0; io/outdir.h) */
  struct outputs *out;    /* checkpoints, snapshots, restart, signals (app/outputs.h) */
  struct provenance prov; /* the files' and the report's record of the run */
  struct history *hist;   /* history.csv (--history-every), or NULL */
  int64_t restart_step;   /* -1: fresh run */
};

/* app/loop.c */
/* The time loop from r->step to r->cfg.steps: *loop_s its wall time. STENCIL_STOPPED when the
 * ranks stopped early with a checkpoint (outputs_after_step). Collective. */
int loop_run(struct run *r, double *loop_s);
/* Every ghost cell of field f (the exchange, then the reflecting faces). Collective. */
int fill_ghosts(struct run *r, void *f);
/* ||f - L u|| of the field u, its ghost cells current. Collective. */
int residual_norm(struct run *r, const void *u, double *norm);
/* Global norms of u. Collective. */
int global_norms(struct run *r, struct norms *g);
double cell_volume(const struct run *r);
