#pragma once
/* What the time loop writes and when it stops early: checkpoints (every N steps and every T
 * seconds), snapshots + XDMF, restart from a checkpoint, and a clean stop on SIGUSR1,
 * SIGTERM, SIGINT or --walltime (checkpoint, then STENCIL_STOPPED).
 *
 * The ranks agree on signals, --checkpoint-interval and --walltime without a round trip per
 * step: at the end of the first advance at or after every multiple of --agree-every K (every
 * rank takes the same advances) each rank waits for the non-blocking MAX-reduction it started
 * at the one before (long complete by then), acts on it, and starts the next one. So every
 * rank acts at the same step, within 2K steps and an advance of the event; agreements never
 * shorten an advance. Only rank 0's clock decides the time-based flags.
 *
 * The driver hands over a function that copies the current field into a dense host block
 * (backend download + sync): that is all this module knows of the backends. */
#include <mpi.h>
#include <stdint.h>

#include "app/options.h"
#include "domain/decomp.h"
#include "io/config.h"
#include "io/provenance.h"

struct outputs;

struct outputs_field {
  int (*download)(void *arg, void *host); /* current field -> host block; 0 on success */
  void *arg;
  void *host; /* dense block of this rank, n[0] x n[1] x n[2], x fastest */
  /* Optional (NULL: malloc/free): host memory that download fills fastest (page-locked on a
   * GPU), for the background writer's buffer; released before the backend is. */
  int (*host_alloc)(void *arg, size_t bytes, void **p);
  void (*host_free)(void *arg, void *p);
  /* Optional: wait until the steps already queued on the device have run. A checkpoint calls
   * it before its clock starts: that wait is the device computing, not a stall. */
  int (*drain)(void *arg);
};

/* Collective over d->cart. t_start: MPI_Wtime() at the start of the run (for --walltime).
 * Installs the signal handlers. c, d and prov must outlive the object. */
int outputs_create(struct outputs **out, const struct options *o, const struct config *c,
                   const struct decomp *d, const struct provenance *prov, double t_start);

/* Before the output directory is prepared: check the --restart checkpoint against the input
 * (nothing is changed if it does not match), and refuse a fresh run into a directory that
 * holds checkpoints or snapshots of an earlier run unless --overwrite (which deletes them).
 * *restart_step: the checkpoint's step, or -1 for a fresh run. Collective. */
int outputs_prepare(struct outputs *out, int64_t *restart_step);

/* Read the restart checkpoint's field into host and verify its checksum. Collective. */
int outputs_read_restart(struct outputs *out, void *host);

/* Before the loop, with the initial (or restarted) field at `step` in place: remove the
 * .partial files of a killed run and an earlier start's stop marker; on restart, move the
 * earlier run's files past `step` (checkpoints and snapshots with their series' XDMF index, the
 * final output and its XDMF file, a history with later rows) into
 * <dir>/superseded-<step>-<time>/; start the snapshot series and write the snapshot of `step` if
 * it is due and missing; start the first agreement. Collective. */
int outputs_begin(struct outputs *out, int64_t step, const struct outputs_field *f);

/* After outputs_begin of a restart: the folder the earlier run's later files were moved to,
 * or NULL when nothing was moved. */
const char *outputs_superseded(const struct outputs *out);

/* After every step: write what is due. *stop = 1 when the ranks agreed to stop (a
 * checkpoint of `step` and then the stop marker <dir>/STOPPED have been written). Collective. */
int outputs_after_step(struct outputs *out, int64_t step, int *stop);

/* After outputs_after_step set *stop: why ("SIGUSR1", "SIGTERM", "SIGINT" or "--walltime"),
 * and *step, the step of the checkpoint written. */
const char *outputs_stop_reason(const struct outputs *out, int64_t *step);

/* The loop ends at the step of the last outputs_after_step call, which did not know it was
 * the last (a Poisson residual found later that the field had converged): what that call
 * does at the end (the background checkpoint completes), without writing anything again. */
int outputs_end_early(struct outputs *out);

/* The first step after `step` at which outputs_after_step has something to do at a fixed
 * step: a checkpoint (--checkpoint-every) or a snapshot (--output-every); INT64_MAX if
 * none. A loop that advances several steps per call must stop there; outputs_after_step may
 * still be called at any step. */
int64_t outputs_next_due(const struct outputs *out, int64_t step);

/* The first multiple of every after step; INT64_MAX when every <= 0 (never due). */
static inline int64_t next_multiple(int64_t step, int64_t every)
{
  return every > 0 ? (step / every + 1) * every : INT64_MAX;
}

/* Print the checkpoint statistics (rank 0), finish the pending agreement, restore the
 * signal handlers, free. Safe on NULL. */
void outputs_destroy(struct outputs *out);
