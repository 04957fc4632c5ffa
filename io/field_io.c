/* sync_file_range (Linux): start the write-back of a written range without waiting. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "io/field_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/watchdog.h"
#include "io/h5util.h"
#include "io/outdir.h"
#include "io/xdmf.h"

/* A block of a (possibly subsampled) global array: extent g, this rank's offset and count,
 * and the local cell (in the rank's dense host block) of its first kept cell. */
struct block {
  int ndim;
  int64_t g[3], off[3], n[3], first[3];
  int stride;
};

/* The cells i = 0, s, 2s, ... of the global grid, restricted to this rank. */
static void block_of(const struct decomp *d, int stride, struct block *b)
{
  const int s = stride > 1 ? stride : 1;
  b->ndim = d->ndim;
  b->stride = s;
  for (int a = 0; a < 3; a++) {
    if (a >= d->ndim) {
      b->g[a] = 1, b->off[a] = 0, b->n[a] = 1, b->first[a] = 0;
      continue;
    }
    const int64_t lo = (d->offset[a] + s - 1) / s, hi = (d->offset[a] + d->n[a] + s - 1) / s;
    b->g[a] = (d->global[a] + s - 1) / s;
    b->off[a] = lo;
    b->n[a] = hi - lo;
    b->first[a] = lo * s - d->offset[a];
  }
}

/* Dataset extents, slowest first: [nz][ny][nx], or [ny][nx] in 2D. Returns the rank. */
static int file_dims(int ndim, const int64_t v[3], hsize_t out[3])
{
  if (ndim == 2) {
    out[0] = (hsize_t)v[1];
    out[1] = (hsize_t)v[0];
    return 2;
  }
  out[0] = (hsize_t)v[2];
  out[1] = (hsize_t)v[1];
  out[2] = (hsize_t)v[0];
  return 3;
}

static hid_t mem_type(const struct config *c)
{
  return c->precision == PREC_FP64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
}

/* Select this rank's block in the file space and return a matching memory space (an empty
 * selection on both when the rank holds no cell of a subsampled array). */
static int select_block(const struct block *b, hid_t fspace, hid_t *mspace)
{
  hsize_t start[3], count[3];
  int r = file_dims(b->ndim, b->off, start);
  file_dims(b->ndim, b->n, count);
  if (b->n[0] * b->n[1] * b->n[2] == 0) {
    hsize_t one = 1;
    *mspace = H5Screate_simple(1, &one, NULL);
    if (*mspace < 0 || H5Sselect_none(*mspace) < 0 || H5Sselect_none(fspace) < 0)
      FAIL(STENCIL_ERR, "cannot select an empty block of the field");
    return STENCIL_OK;
  }
  if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
    FAIL(STENCIL_ERR, "cannot select this rank's block of the field");
  *mspace = H5Screate_simple(r, count, NULL);
  return *mspace < 0 ? STENCIL_ERR : STENCIL_OK;
}

/* Objects of 1 MiB and more start on 1 MiB boundaries (file-system stripes and blocks). */
static hid_t mpio_fapl(MPI_Comm comm)
{
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  H5Pset_alignment(fapl, 1 << 20, 1 << 20);
  return fapl;
}

static hid_t collective_dxpl(void)
{
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

/* ---- checksum -------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* This rank's part of field_checksum (no communication). */
static uint64_t checksum_local(const int64_t g[3], const int64_t off[3], const int64_t n[3],
                               int elem, const void *host)
{
  uint64_t local = 0; /* a sum modulo 2^64: the same for any split of the cells over ranks */
  for (int64_t k = 0; k < n[2]; k++)
    for (int64_t j = 0; j < n[1]; j++) {
      const int64_t row = (k * n[1] + j) * n[0];
      const uint64_t base = (uint64_t)(off[0] + g[0] * ((off[1] + j) + g[1] * (off[2] + k)));
      for (int64_t i = 0; i < n[0]; i++) {
        uint64_t bits = 0;
        if (elem == 8) {
          memcpy(&bits, (const char *)host + (row + i) * 8, 8);
        } else {
          uint32_t b32;
          memcpy(&b32, (const char *)host + (row + i) * 4, 4);
          bits = b32;
        }
        local += mix64(bits ^ ((base + (uint64_t)i) * 0x9e3779b97f4a7c15ULL));
      }
    }
  return local;
}

int field_checksum(MPI_Comm comm, const int64_t g[3], const int64_t off[3], const int64_t n[3],
                   int elem, const void *host, uint64_t *sum)
{
  const uint64_t local = checksum_local(g, off, n, elem, host);
  CHECK_MPI(MPI_Allreduce(&local, sum, 1, MPI_UINT64_T, MPI_SUM, comm));
  return STENCIL_OK;
}

/* checksum_local on a helper thread, so that it runs while the data is written. */
struct checksum_job {
  const struct block *b;
  int elem;
  const void *host;
  uint64_t local;
  pthread_t thread;
  int started;
};

static void *checksum_main(void *arg)
{
  struct checksum_job *j = arg;
  j->local = checksum_local(j->b->g, j->b->off, j->b->n, j->elem, j->host);
  return NULL;
}

/* The sum of every rank's part (collective); computed here if the thread did not start. */
static int checksum_finish(MPI_Comm comm, struct checksum_job *j, uint64_t *sum)
{
  if (j->started)
    pthread_join(j->thread, NULL);
  else
    checksum_main(j);
  CHECK_MPI(MPI_Allreduce(&j->local, sum, 1, MPI_UINT64_T, MPI_SUM, comm));
  return STENCIL_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

static herr_t find_checksum_error(unsigned n, const H5E_error2_t *e, void *data)
{
  (void)n;
  if (e->desc && (strstr(e->desc, "Fletcher32") || strstr(e->desc, "checksum")))
    *(int *)data = 1;
  return 0;
}

/* Read this rank's block of dataset `name`. Returns STENCIL_OK or an error (not agreed). */
static int read_block(const char *path, const char *name, const struct config *c,
                      const struct decomp *d, void *host)
{
  struct block b;
  block_of(d, 1, &b);
  hid_t fapl = mpio_fapl(d->cart);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (file < 0)
    FAIL(STENCIL_ERR, "%s: cannot open the file", path);
  int status = STENCIL_OK, damaged = 0;
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  hid_t fspace = dset >= 0 ? H5Dget_space(dset) : -1;
  hid_t mspace = -1;
  hsize_t want[3], have[3] = {0, 0, 0};
  /* A 2D grid also accepts a [1][ny][nx] dataset. */
  if (d->ndim == 2 && fspace >= 0 && H5Sget_simple_extent_ndims(fspace) == 3)
    b.ndim = 3;
  const int r = file_dims(b.ndim, b.g, want);
  if (fspace < 0) {
    log_error("%s: cannot open dataset %s", path, name);
    status = STENCIL_ERR;
  } else if (H5Sget_simple_extent_ndims(fspace) != r ||
             H5Sget_simple_extent_dims(fspace, have, NULL) < 0 ||
             memcmp(have, want, sizeof(hsize_t) * (size_t)r) != 0) {
    log_error("%s: dataset %s does not have the grid's shape", path, name);
    status = STENCIL_ERR;
  } else if (select_block(&b, fspace, &mspace)) {
    status = STENCIL_ERR;
  } else {
    hid_t dxpl = collective_dxpl();
    if (H5Dread(dset, mem_type(c), mspace, fspace, dxpl, host) < 0) {
      H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, find_checksum_error, &damaged);
      if (damaged)
        log_error("%s: the data of %s is damaged: HDF5's Fletcher32 checksum of a chunk does "
                  "not match its contents",
                  path, name);
      else
        log_error("%s: cannot read this rank's block of %s", path, name);
      status = STENCIL_ERR;
    }
    H5Pclose(dxpl);
  }
  if (mspace >= 0)
    H5Sclose(mspace);
  if (fspace >= 0)
    H5Sclose(fspace);
  if (dset >= 0)
    H5Dclose(dset);
  H5Fclose(file);
  return status;
}

int field_read_initial(const char *path, const struct config *c, const struct decomp *d, void *host)
{
  return field_read(path, "/initial/field", c, d, host, 0);
}

/* The root attribute "checksum" as a number (rank 0, serial HDF5). */
static int read_checksum_attr(const char *path, uint64_t *sum)
{
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "%s: cannot open the file", path);
  char hex[64] = "", kind[64] = "";
  int status = h5_read_string(file, "checksum_kind", kind, sizeof kind, path, "/checksum_kind");
  if (!status)
    status = h5_read_string(file, "checksum", hex, sizeof hex, path, "/checksum");
  H5Fclose(file);
  CHECK(status);
  if (strcmp(kind, FIELD_CHECKSUM_KIND) != 0)
    FAIL(STENCIL_ERR, "%s: /checksum_kind = \"%s\" is not known (this build has \"%s\")", path,
         kind, FIELD_CHECKSUM_KIND);
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(hex, &end, 16);
  if (errno || !end || *end || strlen(hex) != 16)
    FAIL(STENCIL_ERR, "%s: /checksum = \"%s\" is not 16 hex digits", path, hex);
  *sum = v;
  return STENCIL_OK;
}

int field_read(const char *path, const char *name, const struct config *c, const struct decomp *d,
               void *host, int verify)
{
  CHECK(status_agree(d->cart, read_block(path, name, c, d, host)));
  if (!verify)
    return STENCIL_OK;
  uint64_t want = 0, have = 0;
  int status = d->rank == 0 ? read_checksum_attr(path, &want) : STENCIL_OK;
  CHECK(status_agree(d->cart, status));
  CHECK_MPI(MPI_Bcast(&want, 1, MPI_UINT64_T, 0, d->cart));
  struct block b;
  block_of(d, 1, &b);
  CHECK(field_checksum(d->cart, b.g, b.off, b.n, config_elem_size(c), host, &have));
  if (have != want)
    FAIL0(STENCIL_ERR,
          "%s: the field fails its checksum (stored %016llx, computed %016llx): the file is "
          "damaged or was changed after it was written",
          path, (unsigned long long)want, (unsigned long long)have);
  return STENCIL_OK;
}

/* ---- writing --------------------------------------------------------------------------- */

/* Root attributes of an output file; identical on every rank (HDF5 metadata is collective). */
static int write_meta(hid_t file, const struct config *c, const struct decomp *d,
                      const struct field_meta *meta, const char *schema)
{
  const int64_t version = OUTPUT_SCHEMA_VERSION;
  const int64_t ranks = d->size;
  const int64_t dims[3] = {d->dims[0], d->dims[1], d->dims[2]};
  CHECK(h5_write_string(file, "schema", schema));
  CHECK(h5_write_int64s(file, "version", &version, 1));
  CHECK(h5_write_int64s(file, "step", &meta->step, 1));
  CHECK(h5_write_doubles(file, "time", &meta->time, 1));
  CHECK(h5_write_string(file, "precision", config_precision_name(c->precision)));
  CHECK(provenance_write(file, meta->prov));
  CHECK(h5_write_int64s(file, "ranks", &ranks, 1));
  CHECK(h5_write_int64s(file, "rank_dims", dims, 3));
  hid_t g = H5Gcreate2(file, "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0)
    FAIL(STENCIL_ERR, "cannot create group /parameters");
  int status = config_write(g, c);
  H5Gclose(g);
  return status;
}

/* /field is one contiguous dataset without fill values, so the collective write is one pass
 * over the file. (Chunking with HDF5's Fletcher32 filter was measured: parallel HDF5 1.10
 * allocates filtered chunks early and writes them twice, which halved the write bandwidth;
 * the order-independent checksum attribute protects the data instead.) */
static int create_dataset(hid_t file, const struct config *c, hid_t fspace, hid_t *dset)
{
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  *dset = H5Dcreate2(file, "field", mem_type(c), fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  if (*dset < 0)
    FAIL(STENCIL_ERR, "cannot create dataset /field");
  return STENCIL_OK;
}

/* The kept cells of this rank's dense block, densely (x fastest). */
static void *subsample(const struct block *b, const struct decomp *d, int elem, const void *host)
{
  if (b->stride == 1)
    return (void *)host;
  size_t count = (size_t)(b->n[0] * b->n[1] * b->n[2]);
  char *out = malloc(count ? count * (size_t)elem : 1);
  if (!out)
    return NULL;
  const int s = b->stride;
  const int sz = b->ndim == 3 ? s : 1;
  size_t o = 0;
  for (int64_t k = 0; k < b->n[2]; k++)
    for (int64_t j = 0; j < b->n[1]; j++)
      for (int64_t i = 0; i < b->n[0]; i++, o++) {
        const int64_t src = ((b->first[2] + k * sz) * d->n[1] + (b->first[1] + j * s)) * d->n[0] +
                            (b->first[0] + i * s);
        memcpy(out + o * (size_t)elem, (const char *)host + src * elem, (size_t)elem);
      }
  return out;
}

/* ---- I/O layout: slabs ------------------------------------------------------------------ */

/* Rank q's slab of a global array: the slowest axis in use (z, or y in 2D) split evenly over
 * the ranks, the other axes whole. A slab is one contiguous piece of /field in the file. */
static void slab_of(const struct block *b, int size, int q, struct block *s)
{
  *s = *b;
  const int a = b->ndim - 1;
  for (int k = 0; k < 3; k++) {
    s->off[k] = 0;
    s->n[k] = b->g[k];
    s->first[k] = 0;
  }
  decomp_split(b->g[a], size, q, &s->n[a], &s->off[a]);
}

/* The cells that boxes (xo, xn) and (yo, yn) share, global coordinates; returns their count. */
static int64_t intersect(const int64_t xo[3], const int64_t xn[3], const int64_t yo[3],
                         const int64_t yn[3], int64_t lo[3], int64_t n[3])
{
  int64_t count = 1;
  for (int k = 0; k < 3; k++) {
    lo[k] = xo[k] > yo[k] ? xo[k] : yo[k];
    const int64_t hx = xo[k] + xn[k], hy = yo[k] + yn[k];
    n[k] = (hx < hy ? hx : hy) - lo[k];
    if (n[k] < 0)
      n[k] = 0;
    count *= n[k];
  }
  return count;
}

/* A subarray of a dense array of extent full[] (x fastest) of elements `elem`. */
static int subarray_type(const int64_t full[3], const int64_t start[3], const int64_t count[3],
                         MPI_Datatype elem, MPI_Datatype *t)
{
  int sizes[3], subs[3], starts[3];
  for (int k = 0; k < 3; k++) {
    sizes[2 - k] = (int)full[k];
    subs[2 - k] = (int)count[k];
    starts[2 - k] = (int)start[k];
  }
  CHECK_MPI(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, elem, t));
  CHECK_MPI(MPI_Type_commit(t));
  return STENCIL_OK;
}

/* Move the field from the ranks' blocks into slabs (MPI_Alltoallw with subarray types), so
 * that every rank writes one contiguous piece of the file whatever --dims is: collective
 * MPI-IO on many small interleaved rows was measured 2-3 times slower here than on
 * contiguous pieces. *out is this rank's slab (malloc'ed), or data itself when the blocks
 * already are the slabs. Collective over comm. */
static int to_slabs(MPI_Comm comm, int elem, const struct block *b, const void *data,
                    struct block *slab, void **out)
{
  int size, rank;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  slab_of(b, size, rank, slab);
  *out = (void *)data;
  int64_t mine[6] = {b->off[0], b->off[1], b->off[2], b->n[0], b->n[1], b->n[2]};
  int64_t *all = malloc(sizeof mine * (size_t)size);
  int status = all ? STENCIL_OK : STENCIL_ERR;
  CHECK(status_agree(comm, status));
  CHECK_MPI(MPI_Allgather(mine, 6, MPI_INT64_T, all, 6, MPI_INT64_T, comm));
  int identity = 1, fits = 1;
  for (int q = 0; q < size; q++) {
    struct block sq;
    slab_of(b, size, q, &sq);
    for (int k = 0; k < 3; k++)
      identity &= all[6 * q + k] == sq.off[k] && all[6 * q + 3 + k] == sq.n[k];
  }
  for (int k = 0; k < 3; k++)
    fits &= b->g[k] <= 0x7fffffff;
  if (identity || !fits) {
    free(all);
    if (!identity)
      *slab = *b; /* extents beyond MPI's int: write the blocks as they are */
    return STENCIL_OK;
  }
  const size_t cells = (size_t)(slab->n[0] * slab->n[1] * slab->n[2]);
  char *buf = malloc(cells ? cells * (size_t)elem : 1);
  int *counts = calloc((size_t)size * 4, sizeof *counts);
  MPI_Datatype *types = calloc((size_t)size * 2, sizeof *types);
  status = buf && counts && types ? STENCIL_OK : STENCIL_ERR;
  if (status)
    log_error("out of host memory for the I/O slab");
  status = status_agree(comm, status);
  MPI_Datatype e = MPI_DATATYPE_NULL;
  if (!status && MPI_Type_contiguous(elem, MPI_BYTE, &e) == MPI_SUCCESS)
    MPI_Type_commit(&e);
  for (int q = 0; q < size && !status; q++) {
    struct block sq;
    slab_of(b, size, q, &sq);
    int64_t lo[3], n[3], rel[3];
    types[q] = types[size + q] = e;
    /* What this rank sends to q: its block's part inside q's slab. */
    if (intersect(b->off, b->n, sq.off, sq.n, lo, n) > 0) {
      for (int k = 0; k < 3; k++)
        rel[k] = lo[k] - b->off[k];
      status = subarray_type(b->n, rel, n, e, &types[q]);
      counts[q] = !status;
    }
    /* What this rank receives from q: q's block's part inside this rank's slab. */
    if (!status && intersect(all + 6 * q, all + 6 * q + 3, slab->off, slab->n, lo, n) > 0) {
      for (int k = 0; k < 3; k++)
        rel[k] = lo[k] - slab->off[k];
      status = subarray_type(slab->n, rel, n, e, &types[size + q]);
      counts[2 * size + q] = !status;
    }
  }
  if (!status) {
    /* counts: [0, size) send counts, [size, 2 size) send displacements (0), [2 size, 3 size)
     * receive counts, [3 size, 4 size) receive displacements (0). */
    int e2 = MPI_Alltoallw(data, counts, counts + size, types, buf, counts + 2 * size,
                           counts + 3 * size, types + size, comm);
    if (e2 != MPI_SUCCESS) {
      log_error("MPI_Alltoallw into I/O slabs failed");
      status = STENCIL_ERR;
    }
  }
  for (int q = 0; types && q < 2 * size; q++)
    if (types[q] != e && types[q] != MPI_DATATYPE_NULL)
      MPI_Type_free(&types[q]);
  if (e != MPI_DATATYPE_NULL)
    MPI_Type_free(&e);
  free(types);
  free(counts);
  free(all);
  if (status) {
    free(buf);
    return status;
  }
  *out = buf;
  return STENCIL_OK;
}

static void sleep_seconds(double s)
{
  if (s <= 0)
    return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Write this rank's part wb of /field (from to_slabs). When every rank's part is a range of
 * whole planes (rows in 2D), one contiguous range of the file, each rank writes its own in
 * collective transfers of about 64 MiB and asks the kernel to start writing each to the disk at
 * once (sync_file_range), so the disk works while the next piece is copied and the final fsync
 * finds little left: a checkpoint then costs about the larger of the copy and the disk time,
 * not their sum. Otherwise: one collective write. Collective. */
/* Write block pb of the file from data (its first cell) with the transfer list dxpl; a
 * failure's reason goes to why (h5_error_reason) if it holds none yet. */
static int write_block(hid_t dset, hid_t type, const struct block *pb, hid_t fspace, hid_t dxpl,
                       const void *data, char *why, size_t len)
{
  hid_t mspace = -1;
  int status = select_block(pb, fspace, &mspace);
  if (!status && H5Dwrite(dset, type, mspace, fspace, dxpl, data) < 0) {
    if (!why[0])
      h5_error_reason(why, len);
    status = STENCIL_ERR;
  }
  if (mspace >= 0)
    H5Sclose(mspace);
  return status;
}

static int write_data(MPI_Comm comm, const char *path, hid_t dset, hid_t type, int elem,
                      const struct block *wb, hid_t fspace, const void *data, char *why, size_t len)
{
  const int a = wb->ndim - 1; /* the slowest axis */
  int whole = 1, all = 0;
  for (int k = 0; k < a; k++)
    whole &= wb->off[k] == 0 && wb->n[k] == wb->g[k];
  CHECK_MPI(MPI_Allreduce(&whole, &all, 1, MPI_INT, MPI_MIN, comm));
  hid_t dxpl = collective_dxpl();
  int status = STENCIL_OK;
  if (!all) {
    status = write_block(dset, type, wb, fspace, dxpl, data, why, len);
    H5Pclose(dxpl);
    return status;
  }
  const int64_t plane = wb->g[0] * (a == 2 ? wb->g[1] : 1); /* cells of one plane (row) */
  const int64_t per = plane * elem >= (64 << 20) ? 1 : (64 << 20) / (plane * elem);
  /* Collective transfers: every rank makes as many as the rank with the most pieces, the
   * extra ones with nothing selected. */
  int64_t pieces = (wb->n[a] + per - 1) / per, most = 0;
  CHECK_MPI(MPI_Allreduce(&pieces, &most, 1, MPI_INT64_T, MPI_MAX, comm));
  const haddr_t base = H5Dget_offset(dset);
  int fd = -1;
#ifdef SYNC_FILE_RANGE_WRITE
  if (base != HADDR_UNDEF && wb->n[a] > 0)
    fd = open(path, O_WRONLY);
#else
  (void)path;
#endif
  for (int64_t i = 0; i < most; i++) { /* on after a failure: the transfers are collective */
    const int64_t p = i * per < wb->n[a] ? i * per : wb->n[a];
    struct block piece = *wb;
    piece.off[a] += p;
    piece.n[a] = wb->n[a] - p < per ? wb->n[a] - p : per;
    if (write_block(dset, type, &piece, fspace, dxpl,
                    (const char *)data + (size_t)(p * plane) * (size_t)elem, why,
                    len) != STENCIL_OK)
      status = STENCIL_ERR;
#ifdef SYNC_FILE_RANGE_WRITE
    if (!status && fd >= 0 && piece.n[a] > 0) /* a hint: the fsync after the close makes it
                                                  durable */
      sync_file_range(fd, (off64_t)(base + (haddr_t)(piece.off[a] * plane * elem)),
                      (off64_t)(piece.n[a] * plane * elem), SYNC_FILE_RANGE_WRITE);
#endif
  }
  if (fd >= 0)
    close(fd);
  H5Pclose(dxpl);
  return status;
}

/* Write the file tmp. A failure of the file's creation, data or close is not printed: its
 * reason (h5_error_reason) goes to why for field_write_ext, which prints one message. */
static int write_file(const char *tmp, const struct config *c, const struct decomp *d,
                      const struct field_meta *meta, const void *host,
                      const struct field_write_options *wo, char *why, size_t len)
{
  struct block b;
  block_of(d, wo->stride, &b);
  const int elem = config_elem_size(c);
  void *data = subsample(&b, d, elem, host);
  int status = data ? STENCIL_OK : STENCIL_ERR;
  if (status)
    log_error("out of host memory for a subsampled field");
  status = status_agree(d->cart, status);
  if (status)
    return status;
  /* The checksum runs beside the collective write (it only reads the data); the attributes
   * that hold it are written after the dataset. */
  struct checksum_job sum_job = {.b = &b, .elem = elem, .host = data};
  if (wo->checksum)
    sum_job.started = pthread_create(&sum_job.thread, NULL, checksum_main, &sum_job) == 0;

  hid_t fapl = mpio_fapl(d->cart);
  hid_t file = status ? -1 : H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (file < 0) {
    h5_error_reason(why, len);
    if (sum_job.started)
      pthread_join(sum_job.thread, NULL);
    if (data != host)
      free(data);
    return STENCIL_ERR;
  }
  status = write_meta(file, c, d, meta, wo->schema ? wo->schema : OUTPUT_SCHEMA);
  if (!status && b.stride > 1) {
    const int64_t st = b.stride;
    status = h5_write_int64s(file, "stride", &st, 1);
  }
  struct block wb = b;
  void *wdata = data;
  if (!status)
    status = to_slabs(d->cart, elem, &b, data, &wb, &wdata);
  hsize_t gdims[3];
  int r = file_dims(d->ndim, b.g, gdims);
  hid_t fspace = H5Screate_simple(r, gdims, NULL);
  hid_t dset = -1;
  if (!status)
    status = create_dataset(file, c, fspace, &dset);
  if (!status)
    status = write_data(d->cart, tmp, dset, mem_type(c), elem, &wb, fspace, wdata, why, len);
  if (wdata != data)
    free(wdata);
  if (wo->checksum) {
    uint64_t sum = 0;
    const int st = checksum_finish(d->cart, &sum_job, &sum);
    status = status ? status : st;
    if (wo->sum)
      *wo->sum = sum;
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
    if (!status)
      status = h5_write_string(file, "checksum", hex);
    if (!status)
      status = h5_write_string(file, "checksum_kind", FIELD_CHECKSUM_KIND);
  }
  sleep_seconds(wo->debug_delay_s);
  H5Sclose(fspace);
  if (dset >= 0)
    H5Dclose(dset);
  if (h5_close_file(file) != STENCIL_OK) {
    if (!why[0])
      h5_error_reason(why, len);
    status = STENCIL_ERR;
  }
  if (data != host)
    free(data);
  return status;
}

/* fsync a file by name (rank 0, after the collective close). */
static int sync_path(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    FAIL(STENCIL_ERR, "cannot sync %s: %s", path, strerror(e));
  }
  close(fd);
  return STENCIL_OK;
}

int field_sync_dir(const char *path)
{
  char dir[CONFIG_PATH_MAX + 300];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    strcpy(dir, ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    FAIL(STENCIL_ERR, "cannot sync directory %s: %s", dir, strerror(e));
  }
  close(fd);
  return STENCIL_OK;
}

/* An upper bound of the file's size: the dataset, which starts on a 1 MiB boundary when it
 * is 1 MiB or more (mpio_fapl), and room for the metadata before and after it. */
static int64_t file_bytes(const struct config *c, const struct decomp *d, int stride)
{
  struct block b;
  block_of(d, stride, &b);
  int64_t data = config_elem_size(c);
  for (int a = 0; a < b.ndim; a++)
    data *= b.g[a];
  return (data >= (1 << 20) ? data + (1 << 20) : data) + (256 << 10);
}

/* Rank 0, before any collective call of the write: check that the disk has room for the file
 * by allocating `bytes` to `tmp` (H5Fcreate then truncates it and the write fills the room
 * found). A full disk or quota then fails here, where every rank can still agree, and not
 * inside parallel HDF5, where the ranks would end up in different collectives. File systems
 * without fallocate are asked for their free space instead. */
static int reserve(const char *path, const char *tmp, int64_t bytes)
{
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  int e = posix_fallocate(fd, 0, (off_t)bytes);
  if (e == EOPNOTSUPP || e == EINVAL) {
    struct statvfs fs;
    e = fstatvfs(fd, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < (double)bytes ? ENOSPC
                                                                                            : 0;
  }
  close(fd);
  if (e) {
    unlink(tmp);
    FAIL(STENCIL_ERR, "cannot write %s: %s (it needs up to %.1f MiB)", path, strerror(e),
         (double)bytes / (1 << 20));
  }
  return STENCIL_OK;
}

int field_write_ext(const char *path, const struct config *c, const struct decomp *d,
                    const struct field_meta *meta, const void *host,
                    const struct field_write_options *wo)
{
  char tmp[CONFIG_PATH_MAX + 316];
  snprintf(tmp, sizeof tmp, "%s.partial", path);
  int status = STENCIL_OK;
  if (d->rank == 0) {
    log_set_shared(1); /* the file of every rank */
    status = reserve(path, tmp, file_bytes(c, d, wo->stride));
    log_set_shared(0);
  }
  CHECK(status_agree(d->cart, status));
  char what[CONFIG_PATH_MAX + 340];
  snprintf(what, sizeof what, "the write of %s", tmp);
  const int armed = watchdog_arm(what);
  char why[256] = "";
  status = write_file(tmp, c, d, meta, host, wo, why, sizeof why);
  /* One message, from the lowest rank that failed. */
  int mine = status ? d->rank : d->size, first = d->size;
  const int agreed = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, d->cart) == MPI_SUCCESS;
  if (status && (!agreed || first == d->rank))
    log_error("cannot write %s%s%s", path, why[0] ? ": " : "", why);
  status = !agreed || first < d->size ? STENCIL_ERR : STENCIL_OK;
  if (status == STENCIL_OK && d->rank == 0) {
    status = sync_path(tmp);
    if (!status && rename(tmp, path) != 0) {
      log_error("cannot rename %s to %s: %s", tmp, path, strerror(errno));
      status = STENCIL_ERR;
    }
    if (!status)
      status = field_sync_dir(path);
  }
  if (status != STENCIL_OK && d->rank == 0)
    unlink(tmp);
  status = status_agree(d->cart, status);
  watchdog_disarm(armed);
  return status;
}

int field_write(const char *path, const struct config *c, const struct decomp *d,
                const struct field_meta *meta, const void *host, uint64_t *sum)
{
  const struct field_write_options wo = {OUTPUT_SCHEMA, 1, 1, 0.0, sum};
  CHECK(field_write_ext(path, c, d, meta, host, &wo));
  int status = STENCIL_OK;
  if (d->rank == 0) {
    char xdmf[CONFIG_PATH_MAX + 340];
    const char *slash = strrchr(path, '/');
    struct xdmf_grid g;
    xdmf_path_for(xdmf, sizeof xdmf, path);
    xdmf_grid_of(&g, slash ? slash + 1 : path, c, meta->step, 1);
    status = xdmf_write(xdmf, c->spacing, &g, 1, 0);
  }
  return status_agree(d->cart, status);
}

static int compare_steps(const void *a, const void *b)
{
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int output_list_steps(const char *dir, const char *prefix, int64_t **steps, int *count)
{
  *steps = NULL;
  *count = 0;
  DIR *dp = opendir(dir);
  if (!dp) {
    if (errno == ENOENT)
      return STENCIL_OK;
    FAIL(STENCIL_ERR, "cannot list output directory %s: %s", dir, strerror(errno));
  }
  const size_t plen = strlen(prefix);
  int cap = 0, n = 0;
  int64_t *list = NULL;
  struct dirent *e;
  while ((e = readdir(dp)) != NULL) {
    const char *name = e->d_name;
    if (strncmp(name, prefix, plen) != 0)
      continue;
    const char *p = name + plen;
    int64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
      v = 10 * v + (*p - '0');
    if (digits == 0 || strcmp(p, ".h5") != 0)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *grown = realloc(list, sizeof *list * (size_t)cap);
      if (!grown) {
        free(list);
        closedir(dp);
        FAIL(STENCIL_ERR, "out of host memory listing %s", dir);
      }
      list = grown;
    }
    list[n++] = v;
  }
  closedir(dp);
  if (n > 1)
    qsort(list, (size_t)n, sizeof *list, compare_steps);
  *steps = list;
  *count = n;
  return STENCIL_OK;
}

int output_prepare(MPI_Comm comm, const char *dir, const char *name, int overwrite)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  int status = STENCIL_OK;
  if (rank == 0) {
    char path[CONFIG_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    status = outdir_make(dir, NULL);
    if (!status && !overwrite && access(path, F_OK) == 0) {
      log_error("%s already exists; pass --overwrite to replace it, or choose another "
                "--output-dir",
                path);
      status = STENCIL_ERR;
    }
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  return status;
}
