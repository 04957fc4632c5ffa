#pragma once
/* Checkpoints: one HDF5 file per checkpoint, written collectively through parallel HDF5
 * (one global /field, so a run can restart on any number of ranks, --dims or backend),
 * atomically (temporary name, fsync, rename, directory fsync), with a checksum verified on
 * read. Layout: docs/user/output-format.md, "Checkpoints". */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/decomp.h"
#include "io/config.h"
#include "io/field_io.h"

#define CHECKPOINT_SCHEMA "stencil-checkpoint"
#define CHECKPOINT_PREFIX "checkpoint_"
#define CHECKPOINT_XDMF "checkpoints.xdmf"

/* "<dir>/checkpoint_<step, 10 digits>.h5". */
void checkpoint_path(char *buf, size_t len, const char *dir, int64_t step);

/* Write the checkpoint of `meta->step` into dir. host: this rank's dense block (x fastest).
 * delay_s: test-only pause inside the write (--debug-checkpoint-delay). Collective. */
int checkpoint_write(const char *dir, const struct config *c, const struct decomp *d,
                     const struct field_meta *meta, const void *host, double delay_s);

/* Remove all but the newest `keep` checkpoints of dir (keep <= 0: keep all), then write the
 * index of those left (checkpoint_index). Call only after a checkpoint of this run is
 * complete. Rank 0 does the work. Collective. */
int checkpoint_prune(MPI_Comm comm, const char *dir, int keep, const struct config *c);

/* dir/checkpoints.xdmf: the checkpoints of dir of problem c as a temporal collection (removed
 * when there are none). Rank 0 only. */
int checkpoint_index(const char *dir, const struct config *c);

/* --restart ARG: ARG is a file name, or "latest" for the newest checkpoint in dir. The
 * file is checked against the input on rank 0 (schema, version, grid, boundaries,
 * equation, precision, dt; step <= end_step) before anything is read or changed; every
 * rank receives the path and the checkpoint's step. Collective. */
int checkpoint_resolve(MPI_Comm comm, const char *arg, const char *dir, const char *input,
                       const struct config *c, int64_t end_step, char *path, size_t len,
                       int64_t *step);

/* Read the field of a resolved checkpoint into host (this rank's dense block) and verify
 * its checksum. Collective over d->cart. */
int checkpoint_read(const char *path, const struct config *c, const struct decomp *d, void *host);
