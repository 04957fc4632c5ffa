#pragma once
/* Whole-field HDF5 files through parallel HDF5: every rank reads or writes its own block
 * of one global dataset with collective MPI-IO, so files do not depend on the
 * decomposition (docs/output-format.md). */
#include <mpi.h>
#include <stdint.h>

#include "domain/decomp.h"
#include "io/config.h"

#define OUTPUT_SCHEMA "stencil-output"
#define OUTPUT_SCHEMA_VERSION 1

struct field_meta {
  int64_t step;
  double time;
  const char *backend;
};

/* Read this rank's block of /initial/field from the input file into a dense host array
 * (x fastest) of the config's precision. Collective over d->cart. */
int field_read_initial(const char *path, const struct config *c, const struct decomp *d,
                       void *host);

/* Write the global field to `path`: first under "<path>.partial", then renamed once
 * complete and synced, so an earlier file of the same name survives a failure.
 * host: this rank's block, dense, x fastest. Collective over d->cart. */
int field_write(const char *path, const struct config *c, const struct decomp *d,
                const struct field_meta *meta, const void *host);

/* Create the output directory if needed (rank 0) and check that `name` inside it may
 * be written: it must not exist unless overwrite is set. Collective over comm; every
 * rank returns the same status. */
int output_prepare(MPI_Comm comm, const char *dir, const char *name, int overwrite);
