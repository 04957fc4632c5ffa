#include "io/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error_mpi.h"
#include "io/h5util.h"

/* One time step of the XDMF collection (known on rank 0). */
struct entry {
  int64_t step;
  double time;
  int64_t stride;
  int rank;        /* 2 or 3 */
  int64_t dims[3]; /* dataset extents, slowest first */
  int precision;   /* bytes per value */
};

struct snapshots {
  MPI_Comm comm;
  int rank;
  char dir[CONFIG_PATH_MAX];
  int stride;
  const struct config *cfg;
  struct entry *list;
  int count, cap;
};

void snapshot_path(char *buf, size_t len, const char *dir, int64_t step)
{
  snprintf(buf, len, "%s/%s%010lld.h5", dir, SNAPSHOT_PREFIX, (long long)step);
}

static int add_entry(struct snapshots *s, const struct entry *e)
{
  if (s->count == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    struct entry *grown = realloc(s->list, sizeof *grown * (size_t)cap);
    if (!grown)
      FAIL(STENCIL_ERR, "out of host memory for the snapshot list");
    s->list = grown;
    s->cap = cap;
  }
  s->list[s->count++] = *e;
  return STENCIL_OK;
}

/* Describe an existing snapshot file (rank 0, serial HDF5). */
static int read_entry(const char *path, struct entry *e)
{
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "cannot open the existing snapshot %s", path);
  char schema[64] = "";
  int status = h5_read_string(file, "schema", schema, sizeof schema, path, "/schema");
  if (!status && strcmp(schema, SNAPSHOT_SCHEMA) != 0) {
    log_error("%s: /schema is \"%s\", not \"%s\"", path, schema, SNAPSHOT_SCHEMA);
    status = STENCIL_ERR;
  }
  if (!status)
    status = h5_read_int64s(file, "step", &e->step, 1, 1, NULL, path, "/step");
  if (!status)
    status = h5_read_doubles(file, "time", &e->time, 1, 1, NULL, path, "/time");
  e->stride = 1;
  if (!status && h5_has_attr(file, "stride") > 0)
    status = h5_read_int64s(file, "stride", &e->stride, 1, 1, NULL, path, "/stride");
  hid_t dset = status ? -1 : H5Dopen2(file, "field", H5P_DEFAULT);
  if (!status && dset < 0) {
    log_error("%s: missing dataset /field", path);
    status = STENCIL_ERR;
  }
  if (dset >= 0) {
    hid_t sp = H5Dget_space(dset), t = H5Dget_type(dset);
    hsize_t dims[3] = {0, 0, 0};
    e->rank = H5Sget_simple_extent_ndims(sp);
    if (e->rank == 2 || e->rank == 3)
      H5Sget_simple_extent_dims(sp, dims, NULL);
    else
      status = STENCIL_ERR;
    for (int i = 0; i < 3; i++)
      e->dims[i] = (int64_t)dims[i];
    e->precision = (int)H5Tget_size(t);
    H5Tclose(t);
    H5Sclose(sp);
    H5Dclose(dset);
  }
  H5Fclose(file);
  if (status)
    FAIL(STENCIL_ERR, "%s is not a readable stencil snapshot", path);
  return STENCIL_OK;
}

/* The XDMF file: points are the (kept) cell centres, so the values are node-centred on a
 * CoRectMesh with origin h/2 and spacing s h. XDMF lists extents, origin and spacing
 * slowest axis first (z y x). */
static int write_xdmf(const struct snapshots *s)
{
  char path[CONFIG_PATH_MAX + 64], tmp[CONFIG_PATH_MAX + 80];
  snprintf(path, sizeof path, "%s/%s", s->dir, SNAPSHOT_XDMF);
  snprintf(tmp, sizeof tmp, "%s.partial", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  const struct config *c = s->cfg;
  fprintf(f, "<?xml version=\"1.0\" ?>\n<!DOCTYPE Xdmf SYSTEM \"Xdmf.dtd\" []>\n"
             "<Xdmf Version=\"2.0\">\n <Domain>\n"
             "  <Grid Name=\"stencil\" GridType=\"Collection\" CollectionType=\"Temporal\">\n");
  for (int i = 0; i < s->count; i++) {
    const struct entry *e = &s->list[i];
    const int r = e->rank;
    char dims[96] = "", origin[128] = "", spacing[128] = "";
    for (int k = 0; k < r; k++) {
      const int axis = r - 1 - k; /* slowest first */
      const double h = c->spacing[axis];
      snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", k ? " " : "",
               (long long)e->dims[k]);
      snprintf(origin + strlen(origin), sizeof origin - strlen(origin), "%s%.17g", k ? " " : "",
               0.5 * h);
      snprintf(spacing + strlen(spacing), sizeof spacing - strlen(spacing), "%s%.17g", k ? " " : "",
               (double)e->stride * h);
    }
    char name[64];
    snprintf(name, sizeof name, "%s%010lld.h5", SNAPSHOT_PREFIX, (long long)e->step);
    fprintf(f,
            "   <Grid Name=\"step %lld\" GridType=\"Uniform\">\n"
            "    <Time Value=\"%.17g\"/>\n"
            "    <Topology TopologyType=\"%s\" Dimensions=\"%s\"/>\n"
            "    <Geometry GeometryType=\"%s\">\n"
            "     <DataItem Name=\"Origin\" Dimensions=\"%d\" NumberType=\"Float\" "
            "Precision=\"8\" Format=\"XML\">%s</DataItem>\n"
            "     <DataItem Name=\"Spacing\" Dimensions=\"%d\" NumberType=\"Float\" "
            "Precision=\"8\" Format=\"XML\">%s</DataItem>\n"
            "    </Geometry>\n"
            "    <Attribute Name=\"u\" AttributeType=\"Scalar\" Center=\"Node\">\n"
            "     <DataItem Dimensions=\"%s\" NumberType=\"Float\" Precision=\"%d\" "
            "Format=\"HDF\">%s:/field</DataItem>\n"
            "    </Attribute>\n"
            "   </Grid>\n",
            (long long)e->step, e->time, r == 3 ? "3DCoRectMesh" : "2DCoRectMesh", dims,
            r == 3 ? "ORIGIN_DXDYDZ" : "ORIGIN_DXDY", r, origin, r, spacing, dims, e->precision,
            name);
  }
  fprintf(f, "  </Grid>\n </Domain>\n</Xdmf>\n");
  int bad = ferror(f);
  bad |= fflush(f) != 0;
  bad |= fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad) {
    unlink(tmp);
    FAIL(STENCIL_ERR, "cannot write %s: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path) != 0)
    FAIL(STENCIL_ERR, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  return STENCIL_OK;
}

static int scan_existing(struct snapshots *s, int64_t last_step)
{
  int64_t *steps = NULL;
  int n = 0;
  CHECK(output_list_steps(s->dir, SNAPSHOT_PREFIX, &steps, &n));
  int status = STENCIL_OK;
  for (int i = 0; i < n && !status; i++) {
    if (steps[i] > last_step)
      continue;
    char path[CONFIG_PATH_MAX + 64];
    snapshot_path(path, sizeof path, s->dir, steps[i]);
    struct entry e;
    status = read_entry(path, &e);
    if (!status)
      status = add_entry(s, &e);
  }
  free(steps);
  return status;
}

int snapshot_open(struct snapshots **out, MPI_Comm comm, const char *dir, int stride,
                  const struct config *c, int64_t last_step)
{
  struct snapshots *s = calloc(1, sizeof *s);
  if (!s)
    FAIL(STENCIL_ERR, "out of host memory");
  *out = s;
  s->comm = comm;
  MPI_Comm_rank(comm, &s->rank);
  snprintf(s->dir, sizeof s->dir, "%s", dir);
  s->stride = stride > 1 ? stride : 1;
  s->cfg = c;
  int status = STENCIL_OK;
  if (s->rank == 0 && last_step >= 0) {
    status = scan_existing(s, last_step);
    if (!status && s->count > 0)
      status = write_xdmf(s);
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  return status;
}

int snapshot_has(const struct snapshots *s, int64_t step)
{
  /* Rank 0 holds the list; the others ask it. Collective. */
  int has = 0;
  for (int i = 0; s->rank == 0 && i < s->count; i++)
    has |= s->list[i].step == step;
  MPI_Bcast(&has, 1, MPI_INT, 0, s->comm);
  return has;
}

int snapshot_write(struct snapshots *s, const struct decomp *d, const struct field_meta *meta,
                   const void *host)
{
  char path[CONFIG_PATH_MAX + 64];
  snapshot_path(path, sizeof path, s->dir, meta->step);
  const struct field_write_options wo = {SNAPSHOT_SCHEMA, 0, s->stride, 0.0};
  CHECK(field_write_ext(path, s->cfg, d, meta, host, &wo));
  int status = STENCIL_OK;
  if (s->rank == 0) {
    struct entry e = {meta->step, meta->time, s->stride,
                      d->ndim,    {0, 0, 0},  config_elem_size(s->cfg)};
    for (int k = 0; k < d->ndim; k++) {
      const int axis = d->ndim - 1 - k;
      e.dims[k] = (d->global[axis] + s->stride - 1) / s->stride;
    }
    /* Replace an entry of the same step (a snapshot written again), else append. */
    int i = 0;
    while (i < s->count && s->list[i].step != e.step)
      i++;
    if (i < s->count)
      s->list[i] = e;
    else
      status = add_entry(s, &e);
    if (!status)
      status = write_xdmf(s);
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, s->comm));
  return status;
}

void snapshot_close(struct snapshots *s)
{
  if (!s)
    return;
  free(s->list);
  free(s);
}
