#include "io/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "io/h5util.h"
#include "io/xdmf.h"

struct snapshots {
  MPI_Comm comm;
  int rank;
  char dir[CONFIG_PATH_MAX];
  int stride;
  const struct config *cfg;
  struct xdmf_grid *list; /* the XDMF collection (rank 0) */
  int count, cap;
};

void snapshot_path(char *buf, size_t len, const char *dir, int64_t step)
{
  snprintf(buf, len, "%s/%s%010lld.h5", dir, SNAPSHOT_PREFIX, (long long)step);
}

static int add_entry(struct snapshots *s, const struct xdmf_grid *e)
{
  if (s->count == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    struct xdmf_grid *grown = realloc(s->list, sizeof *grown * (size_t)cap);
    if (!grown)
      FAIL(STENCIL_ERR, "out of host memory for the snapshot list");
    s->list = grown;
    s->cap = cap;
  }
  s->list[s->count++] = *e;
  return STENCIL_OK;
}

/* The XDMF grid of an existing snapshot of step (rank 0, serial HDF5): its stride is its own. */
static int read_entry(const struct snapshots *s, int64_t step, struct xdmf_grid *e)
{
  char path[CONFIG_PATH_MAX + 64], name[64];
  snapshot_path(path, sizeof path, s->dir, step);
  snprintf(name, sizeof name, "%s%010lld.h5", SNAPSHOT_PREFIX, (long long)step);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "cannot open the existing snapshot %s", path);
  char schema[64] = "";
  int64_t stride = 1;
  int status = h5_read_string(file, "schema", schema, sizeof schema, path, "/schema");
  if (!status && strcmp(schema, SNAPSHOT_SCHEMA) != 0) {
    log_error("%s: /schema is \"%s\", not \"%s\"", path, schema, SNAPSHOT_SCHEMA);
    status = STENCIL_ERR;
  }
  if (!status && h5_has_attr(file, "stride") > 0)
    status = h5_read_int64s(file, "stride", &stride, 1, 1, NULL, path, "/stride");
  H5Fclose(file);
  if (status || stride < 1 || stride > 1 << 20)
    FAIL(STENCIL_ERR, "%s is not a readable stencil snapshot", path);
  xdmf_grid_of(e, name, s->cfg, step, (int)stride);
  return STENCIL_OK;
}

static int write_xdmf(const struct snapshots *s)
{
  char path[CONFIG_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", s->dir, SNAPSHOT_XDMF);
  return xdmf_write(path, s->cfg->spacing, s->list, s->count, 1);
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
    struct xdmf_grid e;
    status = read_entry(s, steps[i], &e);
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
  const struct field_write_options wo = {SNAPSHOT_SCHEMA, 0, s->stride, 0.0, NULL};
  CHECK(field_write_ext(path, s->cfg, d, meta, host, &wo));
  int status = STENCIL_OK;
  if (s->rank == 0) {
    char name[64];
    snprintf(name, sizeof name, "%s%010lld.h5", SNAPSHOT_PREFIX, (long long)meta->step);
    struct xdmf_grid e;
    xdmf_grid_of(&e, name, s->cfg, meta->step, s->stride);
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
