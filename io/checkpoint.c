#include "io/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error_mpi.h"
#include "io/h5util.h"
#include "io/xdmf.h"

void checkpoint_path(char *buf, size_t len, const char *dir, int64_t step)
{
  snprintf(buf, len, "%s/%s%010lld.h5", dir, CHECKPOINT_PREFIX, (long long)step);
}

int checkpoint_write(const char *dir, const struct config *c, const struct decomp *d,
                     const struct field_meta *meta, const void *host, double delay_s)
{
  char path[CONFIG_PATH_MAX + 64];
  checkpoint_path(path, sizeof path, dir, meta->step);
  const struct field_write_options wo = {CHECKPOINT_SCHEMA, 1, 1, delay_s, NULL};
  return field_write_ext(path, c, d, meta, host, &wo);
}

int checkpoint_index(const char *dir, const struct config *c)
{
  int64_t *steps = NULL;
  int n = 0;
  char path[CONFIG_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, CHECKPOINT_XDMF);
  CHECK(output_list_steps(dir, CHECKPOINT_PREFIX, &steps, &n));
  struct xdmf_grid *g = malloc(sizeof *g * (size_t)(n > 0 ? n : 1));
  int status = g ? STENCIL_OK : STENCIL_ERR;
  if (status)
    log_error("out of host memory for %s", path);
  for (int i = 0; !status && i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s%010lld.h5", CHECKPOINT_PREFIX, (long long)steps[i]);
    xdmf_grid_of(&g[i], name, c, steps[i], 1);
  }
  if (!status && n > 0)
    status = xdmf_write(path, c->spacing, g, n, 1);
  else if (!status && unlink(path) != 0 && errno != ENOENT) {
    log_error("cannot remove %s: %s", path, strerror(errno));
    status = STENCIL_ERR;
  }
  free(g);
  free(steps);
  return status;
}

int checkpoint_prune(MPI_Comm comm, const char *dir, int keep, const struct config *c)
{
  int rank, status = STENCIL_OK;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    int64_t *steps = NULL;
    int n = 0;
    status = keep > 0 ? output_list_steps(dir, CHECKPOINT_PREFIX, &steps, &n) : STENCIL_OK;
    for (int i = 0; !status && i < n - keep; i++) {
      char path[CONFIG_PATH_MAX + 64];
      checkpoint_path(path, sizeof path, dir, steps[i]);
      if (unlink(path) != 0 && errno != ENOENT) {
        log_error("cannot remove the old checkpoint %s: %s", path, strerror(errno));
        status = STENCIL_ERR;
      }
    }
    free(steps);
    if (!status)
      status = checkpoint_index(dir, c);
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  return status;
}

/* ---- checking a checkpoint against the input (rank 0, serial HDF5) ---------------------- */

struct mismatch {
  const char *file, *input;
  int count;
};

static void differs(struct mismatch *m, const char *what, const char *in_ckpt, const char *in_input)
{
  if (m->count++ == 0)
    log_error("checkpoint %s does not match the input %s:", m->file, m->input);
  log_error("  %s is %s in the checkpoint but %s in the input", what, in_ckpt, in_input);
}

/* The shortest %g form that reads back as the same double. */
static void format_exact(char *buf, size_t len, double v)
{
  for (int digits = 6; digits <= 17; digits++) {
    snprintf(buf, len, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

static void compare_doubles(struct mismatch *m, const char *what, const double *a, const double *b,
                            int n)
{
  if (memcmp(a, b, sizeof(double) * (size_t)n) == 0)
    return;
  char sa[160] = "", sb[160] = "";
  for (int i = 0; i < n; i++) {
    char x[32], y[32];
    format_exact(x, sizeof x, a[i]);
    format_exact(y, sizeof y, b[i]);
    snprintf(sa + strlen(sa), sizeof sa - strlen(sa), "%s%s", i ? " " : "", x);
    snprintf(sb + strlen(sb), sizeof sb - strlen(sb), "%s%s", i ? " " : "", y);
  }
  differs(m, what, sa, sb);
}

static void compare_string(struct mismatch *m, const char *what, const char *a, const char *b)
{
  if (strcmp(a, b) != 0)
    differs(m, what, a, b);
}

static int open_group(hid_t file, const char *name, const char *path, hid_t *g)
{
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0 || (*g = H5Gopen2(file, name, H5P_DEFAULT)) < 0)
    FAIL(STENCIL_ERR, "%s: missing group %s: not a complete stencil checkpoint", path, name);
  return STENCIL_OK;
}

static void compare_int64(struct mismatch *m, const char *what, int64_t a, int64_t b)
{
  if (a == b)
    return;
  char sa[32], sb[32];
  snprintf(sa, sizeof sa, "%lld", (long long)a);
  snprintf(sb, sizeof sb, "%lld", (long long)b);
  differs(m, what, sa, sb);
}

/* The /source group (heat: u_t = alpha lap u + f; poisson: lap u = f) against the input's.
 * A dataset source is compared by kind only: its values are in the input file. */
static int check_source(hid_t file, const char *path, const struct config *c, struct mismatch *m)
{
  const int has = H5Lexists(file, "/parameters/source", H5P_DEFAULT) > 0;
  if (has != (c->has_source != 0)) {
    differs(m, "the source term f", has ? "given" : "absent", c->has_source ? "given" : "absent");
    return STENCIL_OK;
  }
  if (!has)
    return STENCIL_OK;
  hid_t g;
  CHECK(open_group(file, "/parameters/source", path, &g));
  const struct initial_config *f = &c->source;
  const int n = config_ndim(c);
  char kind[32];
  double v[3];
  int64_t modes[3];
  int status = h5_read_string(g, "kind", kind, sizeof kind, path, "/parameters/source/kind");
  if (!status && strcmp(kind, config_init_name(f->kind)) != 0) {
    differs(m, "the kind of the source term f", kind, config_init_name(f->kind));
    H5Gclose(g);
    return STENCIL_OK;
  }
  switch (status ? INIT_DATASET : f->kind) {
  case INIT_CONSTANT:
    status = h5_read_doubles(g, "value", v, 1, 1, NULL, path, "/parameters/source/value");
    if (!status)
      compare_doubles(m, "the source value", v, &f->value, 1);
    break;
  case INIT_SINE:
    status = h5_read_doubles(g, "amplitude", v, 1, 1, NULL, path, "/parameters/source/amplitude");
    if (!status)
      compare_doubles(m, "the source amplitude", v, &f->amplitude, 1);
    if (!status)
      status = h5_read_int64s(g, "modes", modes, n, n, NULL, path, "/parameters/source/modes");
    for (int a = 0; !status && a < n; a++)
      compare_int64(m, "a source mode", modes[a], f->modes[a]);
    if (!status)
      status = h5_read_doubles(g, "offset", v, 1, 1, NULL, path, "/parameters/source/offset");
    if (!status)
      compare_doubles(m, "the source offset", v, &f->offset, 1);
    break;
  case INIT_GAUSSIAN:
    status = h5_read_doubles(g, "amplitude", v, 1, 1, NULL, path, "/parameters/source/amplitude");
    if (!status)
      compare_doubles(m, "the source amplitude", v, &f->amplitude, 1);
    if (!status)
      status = h5_read_doubles(g, "center", v, n, n, NULL, path, "/parameters/source/center");
    if (!status)
      compare_doubles(m, "the source center", v, f->center, n);
    if (!status)
      status = h5_read_doubles(g, "width", v, 1, 1, NULL, path, "/parameters/source/width");
    if (!status)
      compare_doubles(m, "the source width", v, &f->width, 1);
    if (!status)
      status = h5_read_doubles(g, "offset", v, 1, 1, NULL, path, "/parameters/source/offset");
    if (!status)
      compare_doubles(m, "the source offset", v, &f->offset, 1);
    break;
  case INIT_DATASET: break;
  }
  H5Gclose(g);
  return status;
}

/* Parameters that decide the field's evolution must be equal, bit for bit: the equation,
 * order, alpha and dt (heat), omega (poisson), precision, grid, boundaries, source term.
 * The initial field, the step count and the output settings may differ. */
static int check_parameters(hid_t file, const char *path, const struct config *c,
                            struct mismatch *m)
{
  const int heat = c->equation == EQ_HEAT;
  hid_t gp, gg;
  CHECK(open_group(file, "/parameters/problem", path, &gp));
  char s[64];
  int64_t order = 0, shape[3] = {1, 1, 1};
  double alpha = 0, spacing[3] = {1, 1, 1}, dt = 0;
  int ns = 0;
  int status = h5_read_string(gp, "equation", s, sizeof s, path, "/parameters/problem/equation");
  if (!status && strcmp(s, config_equation_name(c->equation)) != 0) {
    differs(m, "the equation", s, config_equation_name(c->equation));
    H5Gclose(gp);
    return STENCIL_OK; /* the other keys differ by schema */
  }
  if (!status)
    status = h5_read_int64s(gp, "order", &order, 1, 1, NULL, path, "/parameters/problem/order");
  if (!status)
    compare_int64(m, "the order", order, c->order);
  if (!status && heat)
    status = h5_read_doubles(gp, "alpha", &alpha, 1, 1, NULL, path, "/parameters/problem/alpha");
  if (!status && heat)
    compare_doubles(m, "alpha", &alpha, &c->alpha, 1);
  H5Gclose(gp);
  CHECK(status);

  CHECK(open_group(file, "/parameters/grid", path, &gg));
  status = h5_read_int64s(gg, "shape", shape, 2, 3, &ns, path, "/parameters/grid/shape");
  if (!status && memcmp(shape, c->shape, sizeof shape) != 0) {
    char a[96], b[96];
    snprintf(a, sizeof a, "%lld x %lld x %lld", (long long)shape[0], (long long)shape[1],
             (long long)shape[2]);
    snprintf(b, sizeof b, "%lld x %lld x %lld", (long long)c->shape[0], (long long)c->shape[1],
             (long long)c->shape[2]);
    differs(m, "the grid shape", a, b);
  }
  const int ndim = config_ndim(c);
  if (!status && ns == ndim) {
    status =
        h5_read_doubles(gg, "spacing", spacing, ndim, ndim, NULL, path, "/parameters/grid/spacing");
    if (!status)
      compare_doubles(m, "the grid spacing", spacing, c->spacing, ndim);
  }
  for (int a = 0; a < ndim && !status && ns == ndim; a++)
    for (int side = 0; side < 2 && !status; side++) {
      const char *face = config_face_name(a, side);
      char key[96], what[64], vname[32];
      snprintf(key, sizeof key, "/parameters/grid/%s", face);
      status = h5_read_string(gg, face, s, sizeof s, path, key);
      if (status)
        break;
      snprintf(what, sizeof what, "boundary %s", face);
      compare_string(m, what, s, config_bc_name(c->bc[a][side]));
      snprintf(vname, sizeof vname, "%s_value", face);
      if (c->bc[a][side] == BC_DIRICHLET && strcmp(s, "dirichlet") == 0) {
        double v = 0;
        snprintf(key, sizeof key, "/parameters/grid/%s", vname);
        status = h5_read_doubles(gg, vname, &v, 1, 1, NULL, path, key);
        snprintf(what, sizeof what, "the value on boundary %s", face);
        if (!status)
          compare_doubles(m, what, &v, &c->bc_value[a][side], 1);
      }
    }
  H5Gclose(gg);
  CHECK(status);

  hid_t gt;
  if (heat) {
    CHECK(open_group(file, "/parameters/time", path, &gt));
    status = h5_read_doubles(gt, "dt", &dt, 1, 1, NULL, path, "/parameters/time/dt");
    if (!status)
      compare_doubles(m, "dt", &dt, &c->dt, 1);
    H5Gclose(gt);
  } else {
    CHECK(open_group(file, "/parameters/solver", path, &gt));
    double omega = 0;
    if (h5_has_attr(gt, "omega") > 0)
      status = h5_read_doubles(gt, "omega", &omega, 1, 1, NULL, path, "/parameters/solver/omega");
    if (!status)
      compare_doubles(m, "the Jacobi damping omega", &omega, &c->solver.omega, 1);
    H5Gclose(gt);
  }
  CHECK(status);
  return check_source(file, path, c, m);
}

/* /field must be a float array of the grid's shape and the run's precision. */
static int check_field(hid_t file, const char *path, const struct config *c, struct mismatch *m)
{
  if (H5Lexists(file, "field", H5P_DEFAULT) <= 0)
    FAIL(STENCIL_ERR, "%s: missing dataset /field: not a complete stencil checkpoint", path);
  hid_t dset = H5Dopen2(file, "field", H5P_DEFAULT);
  if (dset < 0)
    FAIL(STENCIL_ERR, "%s: /field is not a dataset", path);
  hid_t t = H5Dget_type(dset), sp = H5Dget_space(dset);
  const H5T_class_t cls = H5Tget_class(t);
  const size_t size = H5Tget_size(t);
  hsize_t dims[3] = {0, 0, 0};
  const int nd = H5Sget_simple_extent_ndims(sp);
  if (nd > 0 && nd <= 3)
    H5Sget_simple_extent_dims(sp, dims, NULL);
  H5Tclose(t);
  H5Sclose(sp);
  H5Dclose(dset);
  const int ndim = config_ndim(c);
  int ok = nd == ndim;
  for (int i = 0; ok && i < ndim; i++)
    ok = (int64_t)dims[i] == c->shape[ndim - 1 - i];
  if (!ok)
    FAIL(STENCIL_ERR, "%s: /field does not have the checkpoint's grid shape: the file is damaged",
         path);
  if (cls != H5T_FLOAT || (int)size != config_elem_size(c))
    differs(m, "the precision of /field",
            cls != H5T_FLOAT ? "not floating point"
            : size == 8      ? "fp64"
                             : "fp32",
            config_precision_name(c->precision));
  return STENCIL_OK;
}

static int check_file(const char *path, const char *input, const struct config *c, int64_t end_step,
                      int64_t *step)
{
  if (access(path, R_OK) != 0)
    FAIL(STENCIL_ERR, "cannot read the checkpoint %s: %s", path, strerror(errno));
  if (H5Fis_hdf5(path) <= 0)
    FAIL(STENCIL_ERR, "%s is not an HDF5 file, so not a stencil checkpoint", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "cannot open the HDF5 file %s", path);
  char schema[64] = "", prec[16] = "";
  int64_t version = 0;
  int status = STENCIL_OK;
  if (h5_has_attr(file, "schema") <= 0) {
    log_error("%s is not a stencil checkpoint: it has no /schema attribute", path);
    status = STENCIL_ERR;
  }
  if (!status)
    status = h5_read_string(file, "schema", schema, sizeof schema, path, "/schema");
  if (!status && strcmp(schema, CHECKPOINT_SCHEMA) != 0) {
    log_error("%s is not a stencil checkpoint: /schema is \"%s\", a checkpoint has \"%s\"%s", path,
              schema, CHECKPOINT_SCHEMA,
              strcmp(schema, OUTPUT_SCHEMA) == 0   ? " (this is a final output file)"
              : strcmp(schema, CONFIG_SCHEMA) == 0 ? " (this is an input file)"
                                                   : "");
    status = STENCIL_ERR;
  }
  if (!status)
    status = h5_read_int64s(file, "version", &version, 1, 1, NULL, path, "/version");
  if (!status && version != OUTPUT_SCHEMA_VERSION) {
    log_error("%s: checkpoint version %lld is not supported (this build reads version %d)", path,
              (long long)version, OUTPUT_SCHEMA_VERSION);
    status = STENCIL_ERR;
  }
  if (!status)
    status = h5_read_int64s(file, "step", step, 1, 1, NULL, path, "/step");
  if (!status)
    status = h5_read_string(file, "precision", prec, sizeof prec, path, "/precision");
  struct mismatch m = {path, input, 0};
  if (!status)
    compare_string(&m, "the precision", prec, config_precision_name(c->precision));
  if (!status)
    status = check_parameters(file, path, c, &m);
  if (!status)
    status = check_field(file, path, c, &m);
  if (!status && (h5_has_attr(file, "checksum") <= 0 || h5_has_attr(file, "checksum_kind") <= 0)) {
    log_error("%s: the checkpoint has no checksum attribute, so it cannot be verified", path);
    status = STENCIL_ERR;
  }
  H5Fclose(file);
  CHECK(status);
  if (m.count)
    FAIL(STENCIL_ERR, "refusing to restart from %s: it belongs to another problem", path);
  if (*step < 0 || *step > end_step)
    FAIL(STENCIL_ERR,
         "the checkpoint %s is at step %lld, past the end step %lld (--steps is the total number "
         "of steps, not the number of steps to add)",
         path, (long long)*step, (long long)end_step);
  return STENCIL_OK;
}

int checkpoint_resolve(MPI_Comm comm, const char *arg, const char *dir, const char *input,
                       const struct config *c, int64_t end_step, char *path, size_t len,
                       int64_t *step)
{
  int rank, status = STENCIL_OK;
  MPI_Comm_rank(comm, &rank);
  long long info[2] = {0, -1};
  if (rank == 0) {
    if (strcmp(arg, "latest") == 0) {
      int64_t *steps = NULL;
      int n = 0;
      status = output_list_steps(dir, CHECKPOINT_PREFIX, &steps, &n);
      if (!status && n == 0) {
        log_error("--restart latest: there is no checkpoint (%s*.h5) in %s", CHECKPOINT_PREFIX,
                  dir);
        status = STENCIL_ERR;
      }
      if (!status)
        checkpoint_path(path, len, dir, steps[n - 1]);
      free(steps);
    } else if (strlen(arg) >= len) {
      log_error("--restart: file name too long");
      status = STENCIL_ERR;
    } else {
      snprintf(path, len, "%s", arg);
    }
    int64_t s = -1;
    if (!status)
      status = check_file(path, input, c, end_step, &s);
    info[0] = status;
    info[1] = s;
  }
  CHECK_MPI(MPI_Bcast(info, 2, MPI_LONG_LONG, 0, comm));
  if (info[0])
    return (int)info[0];
  CHECK_MPI(MPI_Bcast(path, (int)len, MPI_CHAR, 0, comm));
  *step = info[1];
  return STENCIL_OK;
}

int checkpoint_read(const char *path, const struct config *c, const struct decomp *d, void *host)
{
  return field_read(path, "/field", c, d, host, 1);
}
