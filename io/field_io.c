#include "io/field_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5util.h"
#include "stencil_version.h"

/* Dataset extents, slowest first: [nz][ny][nx], or [ny][nx] in 2D. Returns the rank. */
static int file_dims(const struct decomp *d, const int64_t v[3], hsize_t out[3])
{
  if (d->ndim == 2) {
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

/* Select this rank's block in the file space and return a matching memory space. */
static int select_block(const struct decomp *d, hid_t fspace, hid_t *mspace)
{
  hsize_t start[3], count[3];
  int r = file_dims(d, d->offset, start);
  file_dims(d, d->n, count);
  if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
    FAIL(STENCIL_ERR, "cannot select this rank's block of the field");
  *mspace = H5Screate_simple(r, count, NULL);
  return *mspace < 0 ? STENCIL_ERR : STENCIL_OK;
}

static hid_t mpio_fapl(MPI_Comm comm)
{
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  return fapl;
}

static hid_t collective_dxpl(void)
{
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

int field_read_initial(const char *path, const struct config *c, const struct decomp *d, void *host)
{
  hid_t fapl = mpio_fapl(d->cart);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  int status = file < 0 ? STENCIL_ERR : STENCIL_OK;
  if (file >= 0) {
    hid_t dset = H5Dopen2(file, "/initial/field", H5P_DEFAULT);
    hid_t fspace = dset >= 0 ? H5Dget_space(dset) : -1;
    hid_t mspace = -1;
    if (fspace < 0 || select_block(d, fspace, &mspace)) {
      status = STENCIL_ERR;
    } else {
      hid_t dxpl = collective_dxpl();
      if (H5Dread(dset, mem_type(c), mspace, fspace, dxpl, host) < 0)
        status = STENCIL_ERR;
      H5Pclose(dxpl);
    }
    if (mspace >= 0)
      H5Sclose(mspace);
    if (fspace >= 0)
      H5Sclose(fspace);
    if (dset >= 0)
      H5Dclose(dset);
    H5Fclose(file);
  }
  if (status)
    log_error("%s: cannot read this rank's block of /initial/field", path);
  return status_agree(d->cart, status);
}

/* Root attributes of an output file; identical on every rank (HDF5 metadata is collective). */
static int write_meta(hid_t file, const struct config *c, const struct decomp *d,
                      const struct field_meta *meta)
{
  const int64_t version = OUTPUT_SCHEMA_VERSION;
  const int64_t ranks = d->size;
  const int64_t dims[3] = {d->dims[0], d->dims[1], d->dims[2]};
  CHECK(h5_write_string(file, "schema", OUTPUT_SCHEMA));
  CHECK(h5_write_int64s(file, "version", &version, 1));
  CHECK(h5_write_int64s(file, "step", &meta->step, 1));
  CHECK(h5_write_doubles(file, "time", &meta->time, 1));
  CHECK(h5_write_string(file, "precision", config_precision_name(c->precision)));
  CHECK(h5_write_string(file, "backend", meta->backend));
  CHECK(h5_write_string(file, "code_version", STENCIL_VERSION));
  CHECK(h5_write_int64s(file, "ranks", &ranks, 1));
  CHECK(h5_write_int64s(file, "rank_dims", dims, 3));
  hid_t g = H5Gcreate2(file, "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0)
    FAIL(STENCIL_ERR, "cannot create group /parameters");
  int status = config_write(g, c);
  H5Gclose(g);
  return status;
}

static int write_file(const char *tmp, const struct config *c, const struct decomp *d,
                      const struct field_meta *meta, const void *host)
{
  hid_t fapl = mpio_fapl(d->cart);
  hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (file < 0)
    FAIL(STENCIL_ERR, "cannot create %s", tmp);
  int status = write_meta(file, c, d, meta);
  hsize_t gdims[3];
  int r = file_dims(d, d->global, gdims);
  hid_t fspace = H5Screate_simple(r, gdims, NULL);
  hid_t dset =
      H5Dcreate2(file, "field", mem_type(c), fspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t mspace = -1;
  if (!status && (dset < 0 || select_block(d, fspace, &mspace)))
    status = STENCIL_ERR;
  if (!status) {
    hid_t dxpl = collective_dxpl();
    if (H5Dwrite(dset, mem_type(c), mspace, fspace, dxpl, host) < 0)
      status = STENCIL_ERR;
    H5Pclose(dxpl);
  }
  if (mspace >= 0)
    H5Sclose(mspace);
  H5Sclose(fspace);
  if (dset >= 0)
    H5Dclose(dset);
  if (H5Fclose(file) < 0)
    status = STENCIL_ERR;
  if (status)
    FAIL(STENCIL_ERR, "cannot write the field to %s", tmp);
  return STENCIL_OK;
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

int field_write(const char *path, const struct config *c, const struct decomp *d,
                const struct field_meta *meta, const void *host)
{
  char tmp[CONFIG_PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.partial", path);
  int status = write_file(tmp, c, d, meta, host);
  status = status_agree(d->cart, status);
  if (status == STENCIL_OK && d->rank == 0) {
    status = sync_path(tmp);
    if (!status && rename(tmp, path) != 0) {
      log_error("cannot rename %s to %s: %s", tmp, path, strerror(errno));
      status = STENCIL_ERR;
    }
  }
  if (status != STENCIL_OK && d->rank == 0)
    unlink(tmp);
  return status_agree(d->cart, status);
}

static int mkdir_p(const char *dir)
{
  char buf[CONFIG_PATH_MAX];
  if (strlen(dir) >= sizeof buf)
    FAIL(STENCIL_ERR, "output directory name too long: %s", dir);
  strcpy(buf, dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        FAIL(STENCIL_ERR, "cannot create output directory %s: %s", buf, strerror(errno));
      *p = '/';
    }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST)
    FAIL(STENCIL_ERR, "cannot create output directory %s: %s", buf, strerror(errno));
  return STENCIL_OK;
}

int output_prepare(MPI_Comm comm, const char *dir, const char *name, int overwrite)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  int status = STENCIL_OK;
  if (rank == 0) {
    struct stat st;
    char path[CONFIG_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    status = mkdir_p(dir);
    if (!status && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
      log_error("output directory %s is not a directory", dir);
      status = STENCIL_ERR;
    }
    if (!status) {
      /* Try it: access() says yes to root even where writing fails. */
      char probe[CONFIG_PATH_MAX + 64];
      snprintf(probe, sizeof probe, "%s/.stencil-probe-%ld", dir, (long)getpid());
      int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (fd < 0) {
        log_error("output directory %s is not writable: %s", dir, strerror(errno));
        status = STENCIL_ERR;
      } else {
        close(fd);
        unlink(probe);
      }
    }
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
