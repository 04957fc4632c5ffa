#pragma once
/* Snapshots for visualisation: the field (optionally every s-th cell along each axis) in
 * one HDF5 file per output step, and one XDMF file, a temporal collection pointing into
 * them with relative paths, that ParaView and VisIt open. docs/user/output-format.md. */
#include <stddef.h>
#include <stdint.h>

#include "domain/decomp.h"
#include "io/config.h"
#include "io/field_io.h"

#define SNAPSHOT_SCHEMA "stencil-snapshot"
#define SNAPSHOT_PREFIX "snapshot_"
#define SNAPSHOT_XDMF "snapshots.xdmf"

struct snapshots;

/* "<dir>/snapshot_<step, 10 digits>.h5". */
void snapshot_path(char *buf, size_t len, const char *dir, int64_t step);

/* Start the series in dir. Existing snapshot files of dir at steps <= last_step (an earlier
 * run being continued; -1: none) are listed again in the XDMF file; the caller has moved
 * later ones aside. Collective over comm; the XDMF file is written by rank 0. */
int snapshot_open(struct snapshots **out, MPI_Comm comm, const char *dir, int stride,
                  const struct config *c, int64_t last_step);

/* Does the series hold step already? */
int snapshot_has(const struct snapshots *s, int64_t step);

/* Write the snapshot of meta->step from host (this rank's dense block) and rewrite the
 * XDMF file (temporary name, then rename). Collective over d->cart. */
int snapshot_write(struct snapshots *s, const struct decomp *d, const struct field_meta *meta,
                   const void *host);

void snapshot_close(struct snapshots *s);
