#include "io/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/h5util.h"

static const char *const face_names[3][2] = {{"x_lo", "x_hi"}, {"y_lo", "y_hi"}, {"z_lo", "z_hi"}};
static const char *const bc_names[] = {"dirichlet", "neumann", "periodic"};
static const char *const init_names[] = {"constant", "sine", "gaussian", "dataset"};

const char *config_bc_name(enum bc_kind bc)
{
  return bc_names[bc];
}
const char *config_precision_name(enum precision p)
{
  return p == PREC_FP64 ? "fp64" : "fp32";
}
const char *config_init_name(enum init_kind k)
{
  return init_names[k];
}
const char *config_face_name(int axis, int side)
{
  return face_names[axis][side];
}

void config_defaults(struct config *c)
{
  memset(c, 0, sizeof *c);
  c->equation = EQ_HEAT;
  c->order = 2;
  c->alpha = 1.0;
  c->precision = PREC_FP64;
  for (int a = 0; a < 3; a++) {
    c->shape[a] = 1;
    c->spacing[a] = 1.0;
    c->bc[a][0] = c->bc[a][1] = BC_DIRICHLET;
  }
  c->initial.kind = INIT_CONSTANT;
  c->initial.width = 1.0;
  strcpy(c->output_dir, "output");
  strcpy(c->output_final, "final.h5");
}

/* ---- validation ------------------------------------------------------------------------ */

int config_validate(const struct config *c, const char *path)
{
  int bad = 0;
#define BAD(...)                                                                                   \
  (fprintf(stderr, "stencil: error: %s: ", path), fprintf(stderr, __VA_ARGS__),                    \
   fputc('\n', stderr), bad = 1)
  const int64_t max_extent = (int64_t)1 << 31;
  int64_t points = 1;
  int overflow = 0;
  for (int a = 0; a < 3; a++) {
    if (c->shape[a] < 1 || c->shape[a] > max_extent)
      BAD("/grid/shape[%d] = %lld must be between 1 and %lld", a, (long long)c->shape[a],
          (long long)max_extent);
    else if (points > INT64_MAX / 16 / c->shape[a])
      overflow = 1;
    else
      points *= c->shape[a];
    if (!(c->spacing[a] > 0) || !isfinite(c->spacing[a]))
      BAD("/grid/spacing[%d] = %g must be positive and finite", a, c->spacing[a]);
  }
  if (overflow)
    BAD("/grid/shape %lld x %lld x %lld has too many points (the byte count overflows 64 bits)",
        (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2]);
  if (c->shape[0] < 2 || c->shape[1] < 2)
    BAD("/grid/shape: x and y need at least 2 cells (found %lld x %lld)", (long long)c->shape[0],
        (long long)c->shape[1]);
  if (c->order != 2)
    BAD("/problem/order = %d is not supported (supported: 2)", c->order);
  if (!(c->alpha > 0) || !isfinite(c->alpha))
    BAD("/problem/alpha = %g must be positive and finite", c->alpha);
  if (!(c->dt > 0) || !isfinite(c->dt))
    BAD("/time/dt = %g must be positive and finite", c->dt);
  if (c->steps < 0)
    BAD("/time/steps = %lld must not be negative", (long long)c->steps);
  int ndim = config_ndim(c);
  for (int a = 0; a < ndim; a++) {
    if ((c->bc[a][0] == BC_PERIODIC) != (c->bc[a][1] == BC_PERIODIC))
      BAD("/grid/%s and /grid/%s: periodic must be set on both faces of an axis", face_names[a][0],
          face_names[a][1]);
    for (int s = 0; s < 2; s++)
      if (!isfinite(c->bc_value[a][s]))
        BAD("/grid/%s_value must be finite", face_names[a][s]);
  }
  const struct initial_config *in = &c->initial;
  switch (in->kind) {
  case INIT_CONSTANT:
    if (!isfinite(in->value))
      BAD("/initial/value must be finite");
    break;
  case INIT_SINE:
    for (int a = 0; a < 3; a++)
      if (in->modes[a] < 0)
        BAD("/initial/modes[%d] = %lld must not be negative", a, (long long)in->modes[a]);
    if (!isfinite(in->amplitude) || !isfinite(in->offset))
      BAD("/initial/amplitude and /initial/offset must be finite");
    break;
  case INIT_GAUSSIAN:
    if (!(in->width > 0) || !isfinite(in->width))
      BAD("/initial/width = %g must be positive and finite", in->width);
    if (!isfinite(in->amplitude) || !isfinite(in->offset) || !isfinite(in->center[0]) ||
        !isfinite(in->center[1]) || !isfinite(in->center[2]))
      BAD("/initial/amplitude, /initial/offset and /initial/center must be finite");
    break;
  case INIT_DATASET: break;
  }
  if (c->output_dir[0] == '\0')
    BAD("/output/directory must not be empty");
  if (c->output_final[0] == '\0' || strchr(c->output_final, '/'))
    BAD("/output/final = \"%s\" must be a plain file name", c->output_final);
#undef BAD
  return bad ? STENCIL_ERR : STENCIL_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

struct key_check {
  const char *file;
  const char *group;
  const char *const *allowed;
  int bad;
};

static int is_allowed(const char *name, const char *const *allowed)
{
  for (; *allowed; allowed++)
    if (strcmp(name, *allowed) == 0)
      return 1;
  return 0;
}

static herr_t unknown_attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
  (void)loc;
  (void)info;
  struct key_check *k = data;
  if (!is_allowed(name, k->allowed)) {
    log_error("%s: unknown key %s/%s", k->file, k->group, name);
    k->bad = 1;
  }
  return 0;
}

static herr_t unknown_link_cb(hid_t loc, const char *name, const H5L_info_t *info, void *data)
{
  (void)loc;
  (void)info;
  struct key_check *k = data;
  if (!is_allowed(name, k->allowed)) {
    log_error("%s: unknown key %s/%s", k->file, strcmp(k->group, "/") ? k->group : "", name);
    k->bad = 1;
  }
  return 0;
}

/* Report every attribute and link of loc not in the allowed lists. */
static int check_unknown(hid_t loc, const char *file, const char *group, const char *const *attrs,
                         const char *const *links)
{
  struct key_check ka = {file, strcmp(group, "/") ? group : "", attrs, 0};
  hsize_t idx = 0;
  if (H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, unknown_attr_cb, &ka) < 0)
    FAIL(STENCIL_ERR, "%s: cannot list the keys of %s", file, group);
  struct key_check kl = {file, group, links, 0};
  idx = 0;
  if (H5Literate(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, unknown_link_cb, &kl) < 0)
    FAIL(STENCIL_ERR, "%s: cannot list the members of %s", file, group);
  return ka.bad || kl.bad ? STENCIL_ERR : STENCIL_OK;
}

static int open_group(hid_t file, const char *name, const char *path, hid_t *g)
{
  htri_t e = H5Lexists(file, name, H5P_DEFAULT);
  if (e <= 0)
    FAIL(STENCIL_ERR, "%s: missing group %s", path, name);
  hid_t obj = H5Oopen(file, name, H5P_DEFAULT);
  H5I_type_t type = obj >= 0 ? H5Iget_type(obj) : H5I_BADID;
  if (obj >= 0)
    H5Oclose(obj);
  if (type != H5I_GROUP)
    FAIL(STENCIL_ERR, "%s: %s must be a group", path, name);
  *g = H5Gopen2(file, name, H5P_DEFAULT);
  if (*g < 0)
    FAIL(STENCIL_ERR, "%s: cannot open group %s", path, name);
  return STENCIL_OK;
}

/* Read a string attribute and map it onto one of names[0..n). */
static int read_choice(hid_t g, const char *name, const char *const *names, int n, int *out,
                       const char *path, const char *key)
{
  char buf[64];
  CHECK(h5_read_string(g, name, buf, sizeof buf, path, key));
  for (int i = 0; i < n; i++)
    if (strcmp(buf, names[i]) == 0) {
      *out = i;
      return STENCIL_OK;
    }
  char list[256] = "";
  for (int i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
  FAIL(STENCIL_ERR, "%s: key %s = \"%s\" is not one of: %s", path, key, buf, list);
}

static int read_double(hid_t g, const char *name, double *out, const char *path, const char *key)
{
  return h5_read_doubles(g, name, out, 1, 1, NULL, path, key);
}

static int read_optional_double(hid_t g, const char *name, double *out, const char *path,
                                const char *key)
{
  if (h5_has_attr(g, name) <= 0)
    return STENCIL_OK;
  return read_double(g, name, out, path, key);
}

static int read_problem(hid_t file, const char *path, struct config *c)
{
  hid_t g;
  CHECK(open_group(file, "/problem", path, &g));
  static const char *const attrs[] = {"equation", "order", "alpha", "precision", NULL};
  static const char *const links[] = {NULL};
  static const char *const equations[] = {"heat"};
  static const char *const precisions[] = {"fp64", "fp32"};
  int status = check_unknown(g, path, "/problem", attrs, links);
  int v = 0;
  if (!status)
    status = read_choice(g, "equation", equations, 1, &v, path, "/problem/equation");
  c->equation = (enum equation)v;
  if (!status)
    status = read_double(g, "alpha", &c->alpha, path, "/problem/alpha");
  if (!status && h5_has_attr(g, "order") > 0) {
    int64_t order;
    status = h5_read_int64s(g, "order", &order, 1, 1, NULL, path, "/problem/order");
    c->order = (int)(order > 0 && order < 100 ? order : -1);
  }
  if (!status && h5_has_attr(g, "precision") > 0) {
    status = read_choice(g, "precision", precisions, 2, &v, path, "/problem/precision");
    c->precision = (enum precision)v;
  }
  H5Gclose(g);
  return status;
}

static int read_grid(hid_t file, const char *path, struct config *c)
{
  hid_t g;
  CHECK(open_group(file, "/grid", path, &g));
  static const char *const attrs[] = {"shape",      "spacing",    "x_lo",       "x_hi",
                                      "y_lo",       "y_hi",       "z_lo",       "z_hi",
                                      "x_lo_value", "x_hi_value", "y_lo_value", "y_hi_value",
                                      "z_lo_value", "z_hi_value", NULL};
  static const char *const links[] = {NULL};
  int status = check_unknown(g, path, "/grid", attrs, links);
  int n = 0, ns = 0;
  if (!status)
    status = h5_read_int64s(g, "shape", c->shape, 2, 3, &n, path, "/grid/shape");
  if (!status) {
    if (n == 2)
      c->shape[2] = 1;
    status = h5_read_doubles(g, "spacing", c->spacing, n, 3, &ns, path, "/grid/spacing");
  }
  int ndim = c->shape[2] == 1 ? 2 : 3;
  for (int a = 0; a < 3 && !status; a++)
    for (int s = 0; s < 2 && !status; s++) {
      char key[64], vname[32];
      snprintf(key, sizeof key, "/grid/%s", face_names[a][s]);
      if (a == 2 && ndim == 2 && h5_has_attr(g, face_names[a][s]) <= 0) {
        c->bc[a][s] = BC_PERIODIC; /* unused in 2D */
        continue;
      }
      int v = 0;
      status = read_choice(g, face_names[a][s], bc_names, 3, &v, path, key);
      c->bc[a][s] = (enum bc_kind)v;
      snprintf(vname, sizeof vname, "%s_value", face_names[a][s]);
      snprintf(key, sizeof key, "/grid/%s", vname);
      if (!status)
        status = read_optional_double(g, vname, &c->bc_value[a][s], path, key);
    }
  H5Gclose(g);
  return status;
}

static int read_time(hid_t file, const char *path, struct config *c)
{
  hid_t g;
  CHECK(open_group(file, "/time", path, &g));
  static const char *const attrs[] = {"dt", "steps", NULL};
  static const char *const links[] = {NULL};
  int status = check_unknown(g, path, "/time", attrs, links);
  if (!status)
    status = read_double(g, "dt", &c->dt, path, "/time/dt");
  if (!status)
    status = h5_read_int64s(g, "steps", &c->steps, 1, 1, NULL, path, "/time/steps");
  H5Gclose(g);
  return status;
}

/* The initial dataset must be a number array of the global shape, [nz][ny][nx] or, in 2D,
 * [ny][nx]. */
static int check_initial_dataset(hid_t g, const char *path, const struct config *c)
{
  if (H5Lexists(g, "field", H5P_DEFAULT) <= 0)
    FAIL(STENCIL_ERR, "%s: /initial/kind is \"dataset\" but /initial/field is missing", path);
  hid_t d = H5Dopen2(g, "field", H5P_DEFAULT);
  if (d < 0)
    FAIL(STENCIL_ERR, "%s: /initial/field is not a dataset", path);
  hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  H5T_class_t cls = H5Tget_class(t);
  hsize_t dims[8] = {0};
  int nd = H5Sget_simple_extent_ndims(s);
  if (nd > 0 && nd <= 8)
    H5Sget_simple_extent_dims(s, dims, NULL);
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    FAIL(STENCIL_ERR, "%s: /initial/field must hold numbers (found class %d)", path, (int)cls);
  int ndim = config_ndim(c);
  int ok = 0;
  if (nd == 3)
    ok = (int64_t)dims[0] == c->shape[2] && (int64_t)dims[1] == c->shape[1] &&
         (int64_t)dims[2] == c->shape[0];
  else if (nd == 2 && ndim == 2)
    ok = (int64_t)dims[0] == c->shape[1] && (int64_t)dims[1] == c->shape[0];
  if (!ok) {
    char found[128] = "";
    for (int i = 0; i < nd && i < 8; i++)
      snprintf(found + strlen(found), sizeof found - strlen(found), "%s%llu", i ? " x " : "",
               (unsigned long long)dims[i]);
    FAIL(STENCIL_ERR,
         "%s: /initial/field has shape [%s] but the grid needs [nz][ny][nx] = [%lld][%lld][%lld]%s",
         path, found, (long long)c->shape[2], (long long)c->shape[1], (long long)c->shape[0],
         ndim == 2 ? " (or [ny][nx] in 2D)" : "");
  }
  return STENCIL_OK;
}

static int read_initial(hid_t file, const char *path, struct config *c)
{
  hid_t g;
  CHECK(open_group(file, "/initial", path, &g));
  struct initial_config *in = &c->initial;
  int v = 0;
  int status = read_choice(g, "kind", init_names, 4, &v, path, "/initial/kind");
  in->kind = (enum init_kind)v;
  static const char *const no_links[] = {NULL};
  static const char *const field_link[] = {"field", NULL};
  static const char *const a_const[] = {"kind", "value", NULL};
  static const char *const a_sine[] = {"kind", "amplitude", "modes", "offset", NULL};
  static const char *const a_gauss[] = {"kind", "amplitude", "center", "width", "offset", NULL};
  static const char *const a_data[] = {"kind", NULL};
  static const char *const *const attrs[] = {a_const, a_sine, a_gauss, a_data};
  if (!status)
    status = check_unknown(g, path, "/initial", attrs[in->kind],
                           in->kind == INIT_DATASET ? field_link : no_links);
  int ndim = config_ndim(c);
  if (!status) {
    switch (in->kind) {
    case INIT_CONSTANT: status = read_double(g, "value", &in->value, path, "/initial/value"); break;
    case INIT_SINE:
      status = read_double(g, "amplitude", &in->amplitude, path, "/initial/amplitude");
      if (!status)
        status = h5_read_int64s(g, "modes", in->modes, ndim, 3, NULL, path, "/initial/modes");
      if (!status)
        status = read_optional_double(g, "offset", &in->offset, path, "/initial/offset");
      break;
    case INIT_GAUSSIAN:
      status = read_double(g, "amplitude", &in->amplitude, path, "/initial/amplitude");
      if (!status)
        status = h5_read_doubles(g, "center", in->center, ndim, 3, NULL, path, "/initial/center");
      if (!status)
        status = read_double(g, "width", &in->width, path, "/initial/width");
      if (!status)
        status = read_optional_double(g, "offset", &in->offset, path, "/initial/offset");
      break;
    case INIT_DATASET: status = check_initial_dataset(g, path, c); break;
    }
  }
  H5Gclose(g);
  return status;
}

static int read_output(hid_t file, const char *path, struct config *c)
{
  if (H5Lexists(file, "/output", H5P_DEFAULT) <= 0)
    return STENCIL_OK; /* optional group */
  hid_t g;
  CHECK(open_group(file, "/output", path, &g));
  static const char *const attrs[] = {"directory", "final", NULL};
  static const char *const links[] = {NULL};
  int status = check_unknown(g, path, "/output", attrs, links);
  if (!status && h5_has_attr(g, "directory") > 0)
    status = h5_read_string(g, "directory", c->output_dir, sizeof c->output_dir, path,
                            "/output/directory");
  if (!status && h5_has_attr(g, "final") > 0)
    status =
        h5_read_string(g, "final", c->output_final, sizeof c->output_final, path, "/output/final");
  H5Gclose(g);
  return status;
}

static int read_file(hid_t file, const char *path, struct config *c)
{
  static const char *const attrs[] = {"schema", "version", NULL};
  static const char *const links[] = {"problem", "grid", "time", "initial", "output", NULL};
  hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  int status = check_unknown(root, path, "/", attrs, links);
  char schema[64];
  if (!status)
    status = h5_read_string(root, "schema", schema, sizeof schema, path, "/schema");
  if (!status && strcmp(schema, CONFIG_SCHEMA) != 0) {
    log_error("%s: /schema = \"%s\" but a stencil input has \"%s\"", path, schema, CONFIG_SCHEMA);
    status = STENCIL_ERR;
  }
  int64_t version = 0;
  if (!status)
    status = h5_read_int64s(root, "version", &version, 1, 1, NULL, path, "/version");
  if (!status && version != CONFIG_SCHEMA_VERSION) {
    log_error("%s: /version = %lld is not supported (this build reads version %d)", path,
              (long long)version, CONFIG_SCHEMA_VERSION);
    status = STENCIL_ERR;
  }
  H5Gclose(root);
  CHECK(status);
  /* Report problems of every group, not just the first. */
  int bad = 0;
  bad |= read_problem(file, path, c);
  bad |= read_grid(file, path, c);
  bad |= read_time(file, path, c);
  bad |= read_output(file, path, c);
  if (bad)
    return STENCIL_ERR;
  CHECK(read_initial(file, path, c));
  return STENCIL_OK;
}

int config_read(const char *path, struct config *c)
{
  config_defaults(c);
  if (access(path, R_OK) != 0)
    FAIL(STENCIL_ERR, "cannot read input file %s: %s", path, strerror(errno));
  htri_t is = H5Fis_hdf5(path);
  if (is <= 0)
    FAIL(STENCIL_ERR, "%s is not an HDF5 file", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "cannot open HDF5 file %s", path);
  int status = read_file(file, path, c);
  H5Fclose(file);
  CHECK(status);
  CHECK(config_validate(c, path));
  return STENCIL_OK;
}

int config_load(const char *path, struct config *c, MPI_Comm comm)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  int status = rank == 0 ? config_read(path, c) : STENCIL_OK;
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  if (status)
    return status;
  CHECK_MPI(MPI_Bcast(c, (int)sizeof *c, MPI_BYTE, 0, comm));
  return STENCIL_OK;
}

/* ---- writing --------------------------------------------------------------------------- */

static int make_group(hid_t loc, const char *name, hid_t *g)
{
  *g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (*g < 0)
    FAIL(STENCIL_ERR, "cannot create HDF5 group %s", name);
  return STENCIL_OK;
}

int config_write(hid_t loc, const struct config *c)
{
  const int64_t version = CONFIG_SCHEMA_VERSION;
  int ndim = config_ndim(c);
  int n = ndim; /* arrays have one entry per axis in use */
  hid_t g;
  CHECK(h5_write_string(loc, "schema", CONFIG_SCHEMA));
  CHECK(h5_write_int64s(loc, "version", &version, 1));

  CHECK(make_group(loc, "problem", &g));
  const int64_t order = c->order;
  int status = h5_write_string(g, "equation", "heat");
  status = status ? status : h5_write_int64s(g, "order", &order, 1);
  status = status ? status : h5_write_doubles(g, "alpha", &c->alpha, 1);
  status = status ? status : h5_write_string(g, "precision", config_precision_name(c->precision));
  H5Gclose(g);
  CHECK(status);

  CHECK(make_group(loc, "grid", &g));
  status = h5_write_int64s(g, "shape", c->shape, n);
  status = status ? status : h5_write_doubles(g, "spacing", c->spacing, n);
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++) {
      char vname[32];
      snprintf(vname, sizeof vname, "%s_value", face_names[a][s]);
      status = status ? status : h5_write_string(g, face_names[a][s], bc_names[c->bc[a][s]]);
      if (c->bc[a][s] == BC_DIRICHLET)
        status = status ? status : h5_write_doubles(g, vname, &c->bc_value[a][s], 1);
    }
  H5Gclose(g);
  CHECK(status);

  CHECK(make_group(loc, "time", &g));
  status = h5_write_doubles(g, "dt", &c->dt, 1);
  status = status ? status : h5_write_int64s(g, "steps", &c->steps, 1);
  H5Gclose(g);
  CHECK(status);

  CHECK(make_group(loc, "initial", &g));
  const struct initial_config *in = &c->initial;
  status = h5_write_string(g, "kind", init_names[in->kind]);
  switch (in->kind) {
  case INIT_CONSTANT: status = status ? status : h5_write_doubles(g, "value", &in->value, 1); break;
  case INIT_SINE:
    status = status ? status : h5_write_doubles(g, "amplitude", &in->amplitude, 1);
    status = status ? status : h5_write_int64s(g, "modes", in->modes, n);
    status = status ? status : h5_write_doubles(g, "offset", &in->offset, 1);
    break;
  case INIT_GAUSSIAN:
    status = status ? status : h5_write_doubles(g, "amplitude", &in->amplitude, 1);
    status = status ? status : h5_write_doubles(g, "center", in->center, n);
    status = status ? status : h5_write_doubles(g, "width", &in->width, 1);
    status = status ? status : h5_write_doubles(g, "offset", &in->offset, 1);
    break;
  case INIT_DATASET: break;
  }
  H5Gclose(g);
  CHECK(status);

  CHECK(make_group(loc, "output", &g));
  status = h5_write_string(g, "directory", c->output_dir);
  status = status ? status : h5_write_string(g, "final", c->output_final);
  H5Gclose(g);
  return status;
}
