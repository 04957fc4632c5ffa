#pragma once
/* The command line of `stencil` (stencil --help documents it; docs/user/options.md). */
#include <stdint.h>

enum backend_choice { BACKEND_AUTO = 0, BACKEND_CPU, BACKEND_CUDA };

#define OPTIONS_MAX_SETS 64
#define OVERLAP_AUTO 4 /* --overlap auto: on, but off where ranks share a GPU */

struct options {
  const char *input;
  const char *sets[OPTIONS_MAX_SETS]; /* --set KEY=VALUE, in order */
  int nsets;
  int64_t steps; /* -1: from the input (poisson: the most iterations) */
  /* Poisson (docs/user/input-format.md, /solver); negative: from the input. */
  double tolerance;
  int64_t residual_every;
  int dims[3];   /* 0: chosen by MPI_Dims_create */
  int dims_axes; /* how many axes --dims named (2 or 3; 0 without --dims) */
  enum backend_choice backend;
  const char *output_dir; /* NULL: from the input */
  const char *report_json;
  int overwrite, quiet, dry_run, allow_unstable;
  int64_t check_every;   /* steps between NaN/Inf checks */
  int check_every_given; /* --check-every was given (else the default may be rounded) */
  double progress_every; /* seconds between progress lines; 0 = none */
  /* Checkpoints, restart, snapshots and shutdown (docs/user/output-format.md). */
  int64_t checkpoint_every;      /* steps between checkpoints; 0 = none */
  double checkpoint_interval;    /* seconds between checkpoints; 0 = none */
  int64_t keep_checkpoints;      /* newest checkpoints kept; 0 = all */
  const char *restart;           /* checkpoint file, "latest", or NULL */
  int64_t output_every;          /* steps between snapshots; 0 = none */
  int64_t output_stride;         /* snapshots keep every s-th cell per axis */
  int64_t history_every;         /* steps between rows of history.csv; 0 = none */
  double walltime;               /* seconds the run may take; 0 = no limit */
  double io_timeout;             /* seconds a collective file write may take; 0 = no limit */
  int64_t agree_every;           /* steps between the ranks' agreements on signals and time */
  int agree_every_given;         /* --agree-every was given (else the default may be rounded) */
  double debug_checkpoint_delay; /* test only: seconds to pause inside each checkpoint write */
  int checkpoint_background;     /* --checkpoint-mode background: write from a thread */
  /* GPU runs (docs/design/architecture.md). */
  int kernel_tier;       /* --kernel: 0 auto, 1, 2, 3 (struct backend_options.tier) */
  int steps_per_launch;  /* fused kernels: steps per launch T; 0 = from the device */
  int cluster_size[2];   /* fused 3D kernel: CTAs per cluster along x, y; 0 = default */
  int chunk;             /* fused kernels: planes (3D) / rows (2D) per CTA; 0 = default */
  int overlap;           /* 0 off, 1 on (shell + exchange overlap the inner update), 2 parts,
                            3 signal (the fused kernels' forms of it), OVERLAP_AUTO */
  int halo_transport;    /* enum halo_transport (domain/halo.h) */
  int allow_gpu_sharing; /* several ranks of a node may share a GPU */
  int pdl;               /* programmatic dependent launch */
  double peak_bandwidth; /* bytes/s for the report's "% of peak"; 0 = not given */
  int measure_bandwidth; /* measure the peak at start-up */
  int help, help_all, help_markdown, version;
};

/* Parse argv. Identical on every rank; rank 0 prints usage errors. Returns
 * STENCIL_ERR_USAGE on a bad command line. Not collective. */
int options_parse(int argc, char **argv, struct options *o);

/* --help (all = 0: the options users set) and --help-all (all = 1); --help-markdown. */
void options_print_help(int all);
void options_print_markdown(void);

/* The backend's options from the command line's (b->device is kept); shared_gpu: ranks share
 * a GPU (devices_choose), which turns --overlap auto off. */
struct backend_options;
void options_backend(const struct options *o, int shared_gpu, struct backend_options *b);
