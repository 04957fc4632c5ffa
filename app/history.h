#pragma once
/* The run's history (--history-every N): a CSV file in the output directory with one row of
 * global norms every N steps, at the start and at the end (docs/user/output-format.md,
 * "History"). Rank 0 writes it; rows come from the loop's NaN/Inf checks, which compute the
 * norms anyway. */
#include <mpi.h>
#include <stdint.h>

#include "kernels/backend.h"

#define HISTORY_FILE "history.csv"

struct history;

/* Does dir/history.csv hold rows after `step`? (A restart at step moves it aside then.) */
int history_past(const char *dir, int64_t step);

/* Start dir/history.csv. A restart (restart_step >= 0) first copies the rows before
 * restart_step of the earlier run's history: aside/history.csv where the restart moved it
 * (outputs_superseded), else dir/history.csv. dt: the time step (0: Poisson); cell_volume for the
 * norms. Collective; every rank returns the same status. */
int history_open(struct history **h, MPI_Comm comm, const char *dir, const char *aside,
                 int64_t restart_step, double dt, double cell_volume);

/* One row: the global norms g of the field of `step` (rank 0 writes; rows of steps at or
 * before the last one written are skipped). A failed write is reported by history_close. */
void history_add(struct history *h, int64_t step, const struct norms *g);

/* Close the file; rank 0 returns an error naming the file if a write failed. Not collective
 * (agree on the status after it). Safe on NULL. */
int history_close(struct history *h);
