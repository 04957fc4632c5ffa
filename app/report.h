#pragma once
/* The final report of a run: printed by rank 0, optionally written as JSON. */
#include <stdint.h>
#include <stdio.h>

#include "io/provenance.h"
#include "kernels/backend.h"
#include "solvers/poisson.h"

enum phase { PHASE_SHELL, PHASE_PACK, PHASE_INNER, PHASE_WAIT, PHASE_CHECK, PHASE_COUNT };

/* A quantity over the ranks. */
struct rank_stat {
  double min, mean, max;
};

struct report {
  const char *input, *precision;
  const char *output;            /* the final field; NULL after a stop */
  const struct provenance *prov; /* version, backend, kernel, hosts, GPUs, date */
  /* After a stop (exit status 4), else NULL: why, the checkpoint and the marker written. */
  const char *stop_reason, *stop_checkpoint, *stop_marker;
  int ranks, dims[3], threads;
  int64_t shape[3];
  int64_t steps, first_step;
  double sim_time;
  double loop_s;                       /* wall time of the time loop */
  struct rank_stat phase[PHASE_COUNT]; /* seconds per phase */
  struct rank_stat messages, bytes;    /* halo messages and bytes each rank sent in the loop */
  double exchanges;                    /* halo exchanges in the loop, per rank */
  /* The exchanges' time from start to end, and its exposed part (no update of other cells
   * overlapped it), seconds over the ranks; the share hidden of all ranks' together and on
   * the rank with the least; the clock: "device" or "host" (app/loop.c, loop_overlap). */
  struct rank_stat exchange_s, exposed_s;
  double hidden, hidden_least;
  const char *clock;
  double setup_s, read_s, write_s;
  double gpts;            /* grid points updated per second, 1e9 */
  double bytes_per_point; /* minimum memory traffic of one update */
  int steps_per_launch;   /* the most steps of one advance (the field crosses memory once per
                             advance: 1 for single steps) */
  double peak_bandwidth;  /* bytes/s of all ranks together; 0 = unknown */
  struct norms norms;     /* global */
  uint64_t checksum;      /* of the final field (field_checksum); unset while output is NULL */
  double cell_volume;
  const char *equation; /* "heat" or "poisson" */
  int order;
  /* Poisson only (NULL for heat): the Jacobi solve. */
  const struct jacobi_log *jacobi;
  const struct jacobi_spectrum *spectrum;
  int64_t max_iterations;
  int64_t residual_every;
};

void report_print(const struct report *r);
int report_write_json(const struct report *r, const char *path);
