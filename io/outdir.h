#pragma once
/* The output directory of a run: created when missing, checked writable, and held by one run
 * at a time through the lock file <dir>/.stencil.lock (docs/user/output-format.md, "One run
 * per output directory"). The lock names the host, process, Slurm job and start time of its
 * run; rank 0 keeps it open with a flock (released by the kernel however the process ends)
 * and refreshes its modification time every OUTDIR_HEARTBEAT_S seconds. Another run takes it
 * over only from a run that has ended: one of the same host that holds no flock on it, one
 * that has not refreshed it for OUTDIR_STALE_S seconds, or an earlier start of the same Slurm
 * job (a requeue, SLURM_RESTART_COUNT higher). A file of that name that does not start with
 * the lock's first line is not taken over (it may be anything, even the run's input); an
 * empty one is a lock whose text was lost. */
#include <mpi.h>

#define OUTDIR_LOCK ".stencil.lock"
#define OUTDIR_STOPPED "STOPPED" /* the stop marker (docs/user/output-format.md) */
#define OUTDIR_HEARTBEAT_S 10
#define OUTDIR_STALE_S 60

struct outdir;

/* Create dir (and its missing parents) if needed, check that files can be created in it and
 * take its lock. Collective over comm; every rank returns the same status; *od is NULL on
 * ranks other than 0 and on failure. */
int outdir_open(MPI_Comm comm, const char *dir, struct outdir **od);

/* Release the lock. With `failed` set, also remove the directories outdir_open created if
 * they are still empty (a run that failed before writing leaves nothing behind). Not
 * collective; safe on NULL. */
void outdir_close(struct outdir *od, int failed);

/* Rank 0's part of outdir_open without the lock: create dir if needed and check that it is a
 * writable directory. *created (may be NULL) receives how many levels it created, innermost
 * last. Not collective. */
int outdir_make(const char *dir, int *created);

/* Write <dir>/STOPPED holding `text`: beside it, fsync'ed, renamed, the directory fsync'ed
 * (rank 0, after the stop's checkpoint is complete). */
int outdir_mark_stopped(const char *dir, const char *text);

/* Remove <dir>/STOPPED, an earlier start's marker (rank 0, when a run starts its outputs). */
int outdir_clear_stopped(const char *dir);
