#pragma once
/* Whole-field HDF5 files through parallel HDF5: every rank reads or writes its own block
 * of one global dataset with collective MPI-IO, so files do not depend on the
 * decomposition (docs/user/output-format.md). */
#include <mpi.h>
#include <stdint.h>

#include "domain/decomp.h"
#include "io/config.h"
#include "io/provenance.h"

#define OUTPUT_SCHEMA "stencil-output"
#define OUTPUT_SCHEMA_VERSION 1

struct field_meta {
  int64_t step;
  double time;
  const struct provenance *prov;
};

/* How a field file is written beyond the common layout (docs/user/output-format.md). */
struct field_write_options {
  const char *schema;   /* root attribute "schema"; NULL: OUTPUT_SCHEMA */
  int checksum;         /* root attributes "checksum" (field_checksum, 16 hex digits) and
                           "checksum_kind" */
  int stride;           /* write cells 0, s, 2s, ... along each axis; 0 or 1: every cell */
  double debug_delay_s; /* test only: sleep this long after writing the data and before
                           closing and renaming the file, so a test can kill a run mid-write */
  uint64_t *sum;        /* with checksum: where to return it too, on every rank (or NULL) */
};

#define FIELD_CHECKSUM_KIND "splitmix64-sum-v2"

/* Read this rank's block of /initial/field from the input file into a dense host array
 * (x fastest) of the config's precision. Collective over d->cart. */
int field_read_initial(const char *path, const struct config *c, const struct decomp *d,
                       void *host);

/* Write the global field to `path` with its checksum attributes: first under
 * "<path>.partial", then renamed once complete and synced, so an earlier file of the same name
 * survives a failure; then its XDMF file (io/xdmf.h). host: this rank's block, dense, x
 * fastest. The checksum is also returned in *sum unless sum is NULL. Collective over d->cart. */
int field_write(const char *path, const struct config *c, const struct decomp *d,
                const struct field_meta *meta, const void *host, uint64_t *sum);

/* field_write with options: the schema name, a checksum attribute, and subsampling. The file is
 * written under "<path>.partial", synced, renamed to `path`, and the directory is synced, so `path`
 * is either absent, the old file, or complete. Collective over d->cart. */
int field_write_ext(const char *path, const struct config *c, const struct decomp *d,
                    const struct field_meta *meta, const void *host,
                    const struct field_write_options *wo);

/* Read this rank's block of the dataset `name` (global shape, [nz][ny][nx] or [ny][nx]) into
 * a dense host array of the config's precision. With verify set, recompute the checksum of
 * the whole field and compare it with the root attribute "checksum"; a mismatching sum (or a chunk
 * failing HDF5's Fletcher32 filter, for files that use it) fails with a message naming the file.
 * Collective. */
int field_read(const char *path, const char *name, const struct config *c, const struct decomp *d,
               void *host, int verify);

/* Order-independent checksum of a global array of which this rank holds the dense block
 * n[] at offset off[] (x fastest) of a global extent g[] (g[2] = 1 in 2D):
 *   sum over cells (mod 2^64) of mix(bits(u_i) XOR (i * 0x9e3779b97f4a7c15 mod 2^64)),
 * i = x + g0 (y + g1 z) the global linear index, bits() the IEEE bit pattern (fp32 zero-
 * extended), mix() the splitmix64 finaliser. Independent of the decomposition. Collective. */
int field_checksum(MPI_Comm comm, const int64_t g[3], const int64_t off[3], const int64_t n[3],
                   int elem, const void *host, uint64_t *sum);

/* fsync the directory holding `path`, so a rename inside it is durable. */
int field_sync_dir(const char *path);

/* The steps of the files "<prefix><digits>.h5" in dir (not "*.partial"), ascending, in a
 * malloc'ed array (*steps, free it; NULL when none). A missing dir has none. Not collective. */
int output_list_steps(const char *dir, const char *prefix, int64_t **steps, int *count);

/* Create the output directory if needed (rank 0) and check that `name` inside it may
 * be written: it must not exist unless overwrite is set. Collective over comm; every
 * rank returns the same status. */
int output_prepare(MPI_Comm comm, const char *dir, const char *name, int overwrite);
