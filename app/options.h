#pragma once
/* The command line of `stencil` (stencil --help documents it). */
#include <stdint.h>

enum backend_choice { BACKEND_AUTO = 0, BACKEND_CPU, BACKEND_CUDA };

struct options {
  const char *input;
  int64_t steps; /* -1: from the input */
  int dims[3];   /* 0: chosen by MPI_Dims_create */
  enum backend_choice backend;
  const char *output_dir; /* NULL: from the input */
  const char *report_json;
  int overwrite, quiet, dry_run, allow_unstable;
  int64_t check_every;   /* steps between NaN/Inf checks */
  double progress_every; /* seconds between progress lines; 0 = none */
  double peak_bandwidth; /* bytes/s for the report's "% of peak"; 0 = not given */
  int measure_bandwidth; /* measure the peak at start-up */
  int help, version;
};

/* Parse argv. Identical on every rank; rank 0 prints usage errors. Returns
 * STENCIL_ERR_USAGE on a bad command line. Not collective. */
int options_parse(int argc, char **argv, struct options *o);

void options_print_help(void);
