#include "io/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/h5util.h"

static const char *const face_names[3][2] = {{"x_lo", "x_hi"}, {"y_lo", "y_hi"}, {"z_lo", "z_hi"}};
static const char *const bc_names[] = {"dirichlet", "neumann", "periodic"};
static const char *const init_names[] = {"constant", "sine", "gaussian", "dataset"};
static const char *const equation_names[] = {"heat", "poisson"};

const char *config_bc_name(enum bc_kind bc)
{
  return bc_names[bc];
}
const char *config_equation_name(enum equation e)
{
  return equation_names[e];
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
  c->source.kind = INIT_CONSTANT;
  c->source.width = 1.0;
  c->solver.tolerance = 1e-8;
  c->solver.residual_every = 10;
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
  if ((c->shape[0] == 1 || c->shape[1] == 1) && c->shape[0] >= 1 && c->shape[1] >= 1)
    BAD("/grid/shape: x and y need at least 2 cells (found %lld x %lld)", (long long)c->shape[0],
        (long long)c->shape[1]);
  const int heat = c->equation == EQ_HEAT;
  if (c->order != 2 && c->order != 4 && c->order != 6 && c->order != 8)
    BAD("/problem/order = %d is not supported (supported: 2, 4, 6, 8)", c->order);
  if (heat && (!(c->alpha > 0) || !isfinite(c->alpha)))
    BAD("/problem/alpha = %g must be positive and finite", c->alpha);
  if (heat && (!(c->dt > 0) || !isfinite(c->dt)))
    BAD("/time/dt = %g must be positive and finite", c->dt);
  if (c->steps < 0)
    BAD("%s = %lld must not be negative", heat ? "/time/steps" : "/solver/max_iterations",
        (long long)c->steps);
  int ndim = config_ndim(c);
  for (int a = 0; a < ndim; a++)
    if (c->shape[a] >= 1 && c->shape[a] < config_radius(c))
      BAD("/grid/shape[%d] = %lld is smaller than the radius %d of the order-%d stencil (the "
          "ghost layers reflect or wrap that many cells)",
          a, (long long)c->shape[a], config_radius(c), c->order);
  if (!heat) {
    if (!c->has_source)
      BAD("the Poisson equation needs its right-hand side f in /source");
    if (!(c->solver.tolerance >= 0) || !isfinite(c->solver.tolerance))
      BAD("/solver/tolerance = %g must be >= 0 and finite", c->solver.tolerance);
    if (c->solver.residual_every < 0)
      BAD("/solver/residual_every = %lld must not be negative",
          (long long)c->solver.residual_every);
    if (!(c->solver.omega >= 0) || !isfinite(c->solver.omega))
      BAD("/solver/omega = %g must be 0 (automatic) or positive and finite", c->solver.omega);
  }
  for (int a = 0; a < ndim; a++) {
    if ((c->bc[a][0] == BC_PERIODIC) != (c->bc[a][1] == BC_PERIODIC))
      BAD("/grid/%s and /grid/%s: periodic must be set on both faces of an axis", face_names[a][0],
          face_names[a][1]);
    for (int s = 0; s < 2; s++)
      if (!isfinite(c->bc_value[a][s]))
        BAD("/grid/%s_value must be finite", face_names[a][s]);
  }
  for (int which = 0; which < 1 + c->has_source; which++) {
    const struct initial_config *in = which ? &c->source : &c->initial;
    const char *g = which ? "/source" : "/initial";
    switch (in->kind) {
    case INIT_CONSTANT:
      if (!isfinite(in->value))
        BAD("%s/value must be finite", g);
      break;
    case INIT_SINE:
      for (int a = 0; a < 3; a++)
        if (in->modes[a] < 0)
          BAD("%s/modes[%d] = %lld must not be negative", g, a, (long long)in->modes[a]);
      if (!isfinite(in->amplitude) || !isfinite(in->offset))
        BAD("%s/amplitude and %s/offset must be finite", g, g);
      break;
    case INIT_GAUSSIAN:
      if (!(in->width > 0) || !isfinite(in->width))
        BAD("%s/width = %g must be positive and finite", g, in->width);
      if (!isfinite(in->amplitude) || !isfinite(in->offset) || !isfinite(in->center[0]) ||
          !isfinite(in->center[1]) || !isfinite(in->center[2]))
        BAD("%s/amplitude, %s/offset and %s/center must be finite", g, g, g);
      break;
    case INIT_DATASET: break;
    }
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

/* Version 1 knows only the heat equation; version 2 adds poisson. */
static int read_problem(hid_t file, const char *path, int64_t version, struct config *c)
{
  hid_t g;
  CHECK(open_group(file, "/problem", path, &g));
  static const char *const a_heat[] = {"equation", "order", "alpha", "precision", NULL};
  static const char *const a_poisson[] = {"equation", "order", "precision", NULL};
  static const char *const links[] = {NULL};
  static const char *const precisions[] = {"fp64", "fp32"};
  int v = 0;
  int status = read_choice(g, "equation", equation_names, version >= 2 ? 2 : 1, &v, path,
                           "/problem/equation");
  c->equation = (enum equation)v;
  if (!status)
    status = check_unknown(g, path, "/problem", c->equation == EQ_HEAT ? a_heat : a_poisson, links);
  if (!status && c->equation == EQ_HEAT)
    status = read_double(g, "alpha", &c->alpha, path, "/problem/alpha");
  if (!status && h5_has_attr(g, "order") > 0) {
    int64_t order;
    status = h5_read_int64s(g, "order", &order, 1, 1, NULL, path, "/problem/order");
    if (!status && order != 2 && order != 4 && order != 6 && order != 8) {
      log_error("%s: /problem/order = %lld is not supported (supported: 2, 4, 6, 8)", path,
                (long long)order);
      status = STENCIL_ERR;
    }
    c->order = (int)order;
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
  if (c->equation != EQ_HEAT) {
    if (H5Lexists(file, "/time", H5P_DEFAULT) > 0)
      FAIL(STENCIL_ERR,
           "%s: /time applies to the heat equation only; the Poisson equation iterates "
           "/solver/max_iterations times",
           path);
    c->dt = 0;
    return STENCIL_OK;
  }
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

/* /solver (Poisson only): max_iterations required; tolerance, residual_every, omega optional. */
static int read_solver(hid_t file, const char *path, struct config *c)
{
  const int exists = H5Lexists(file, "/solver", H5P_DEFAULT) > 0;
  if (c->equation != EQ_POISSON) {
    if (exists)
      FAIL(STENCIL_ERR, "%s: /solver applies to the Poisson equation only", path);
    return STENCIL_OK;
  }
  hid_t g;
  CHECK(open_group(file, "/solver", path, &g));
  static const char *const attrs[] = {"max_iterations", "tolerance", "residual_every", "omega",
                                      NULL};
  static const char *const links[] = {NULL};
  int status = check_unknown(g, path, "/solver", attrs, links);
  if (!status)
    status =
        h5_read_int64s(g, "max_iterations", &c->steps, 1, 1, NULL, path, "/solver/max_iterations");
  if (!status)
    status = read_optional_double(g, "tolerance", &c->solver.tolerance, path, "/solver/tolerance");
  if (!status && h5_has_attr(g, "residual_every") > 0)
    status = h5_read_int64s(g, "residual_every", &c->solver.residual_every, 1, 1, NULL, path,
                            "/solver/residual_every");
  if (!status)
    status = read_optional_double(g, "omega", &c->solver.omega, path, "/solver/omega");
  H5Gclose(g);
  return status;
}

/* A field's dataset (group/field) must be a number array of the global shape,
 * [nz][ny][nx] or, in 2D, [ny][nx]. */
static int check_field_dataset(hid_t g, const char *group, const char *path, const struct config *c)
{
  if (H5Lexists(g, "field", H5P_DEFAULT) <= 0)
    FAIL(STENCIL_ERR, "%s: %s/kind is \"dataset\" but %s/field is missing", path, group, group);
  hid_t d = H5Dopen2(g, "field", H5P_DEFAULT);
  if (d < 0)
    FAIL(STENCIL_ERR, "%s: %s/field is not a dataset", path, group);
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
    FAIL(STENCIL_ERR, "%s: %s/field must hold numbers (found class %d)", path, group, (int)cls);
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
         "%s: %s/field has shape [%s] but the grid needs [nz][ny][nx] = [%lld][%lld][%lld]%s", path,
         group, found, (long long)c->shape[2], (long long)c->shape[1], (long long)c->shape[0],
         ndim == 2 ? " (or [ny][nx] in 2D)" : "");
  }
  return STENCIL_OK;
}

/* /initial or /source: kind and the keys of that kind. */
static int read_field_spec(hid_t file, const char *path, const char *group,
                           struct initial_config *in, const struct config *c)
{
  hid_t g;
  CHECK(open_group(file, group, path, &g));
  char key[64];
  int v = 0;
  snprintf(key, sizeof key, "%s/kind", group);
  int status = read_choice(g, "kind", init_names, 4, &v, path, key);
  in->kind = (enum init_kind)v;
  static const char *const no_links[] = {NULL};
  static const char *const field_link[] = {"field", NULL};
  static const char *const a_const[] = {"kind", "value", NULL};
  static const char *const a_sine[] = {"kind", "amplitude", "modes", "offset", NULL};
  static const char *const a_gauss[] = {"kind", "amplitude", "center", "width", "offset", NULL};
  static const char *const a_data[] = {"kind", NULL};
  static const char *const *const attrs[] = {a_const, a_sine, a_gauss, a_data};
  if (!status)
    status = check_unknown(g, path, group, attrs[in->kind],
                           in->kind == INIT_DATASET ? field_link : no_links);
  int ndim = config_ndim(c);
#define KEY(name) (snprintf(key, sizeof key, "%s/" name, group), key)
  if (!status) {
    switch (in->kind) {
    case INIT_CONSTANT: status = read_double(g, "value", &in->value, path, KEY("value")); break;
    case INIT_SINE:
      status = read_double(g, "amplitude", &in->amplitude, path, KEY("amplitude"));
      if (!status)
        status = h5_read_int64s(g, "modes", in->modes, ndim, 3, NULL, path, KEY("modes"));
      if (!status)
        status = read_optional_double(g, "offset", &in->offset, path, KEY("offset"));
      break;
    case INIT_GAUSSIAN:
      status = read_double(g, "amplitude", &in->amplitude, path, KEY("amplitude"));
      if (!status)
        status = h5_read_doubles(g, "center", in->center, ndim, 3, NULL, path, KEY("center"));
      if (!status)
        status = read_double(g, "width", &in->width, path, KEY("width"));
      if (!status)
        status = read_optional_double(g, "offset", &in->offset, path, KEY("offset"));
      break;
    case INIT_DATASET: status = check_field_dataset(g, group, path, c); break;
    }
  }
#undef KEY
  H5Gclose(g);
  return status;
}

/* /initial: required for heat; for poisson the first iterate, 0 when absent. /source:
 * optional for heat, required for poisson. */
static int read_fields(hid_t file, const char *path, struct config *c)
{
  const int poisson = c->equation == EQ_POISSON;
  int status = STENCIL_OK;
  if (!poisson || H5Lexists(file, "/initial", H5P_DEFAULT) > 0)
    status = read_field_spec(file, path, "/initial", &c->initial, c);
  if (H5Lexists(file, "/source", H5P_DEFAULT) > 0) {
    c->has_source = 1;
    status |= read_field_spec(file, path, "/source", &c->source, c);
  } else if (poisson) {
    log_error("%s: missing group /source: the Poisson equation lap u = f needs f", path);
    status = STENCIL_ERR;
  }
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
  static const char *const links_v1[] = {"problem", "grid", "time", "initial", "output", NULL};
  static const char *const links_v2[] = {"problem", "grid",   "time",   "initial",
                                         "output",  "source", "solver", NULL};
  hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  int status = STENCIL_OK;
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
  if (!status && (version < CONFIG_SCHEMA_VERSION_MIN || version > CONFIG_SCHEMA_VERSION)) {
    log_error("%s: /version = %lld is not supported (this build reads versions %d to %d)", path,
              (long long)version, CONFIG_SCHEMA_VERSION_MIN, CONFIG_SCHEMA_VERSION);
    status = STENCIL_ERR;
  }
  if (!status)
    status = check_unknown(root, path, "/", attrs, version >= 2 ? links_v2 : links_v1);
  H5Gclose(root);
  CHECK(status);
  /* Report problems of every group, not just the first. */
  int bad = read_problem(file, path, version, c);
  bad |= read_grid(file, path, c);
  if (!bad) { /* which groups apply depends on the equation */
    bad |= read_time(file, path, c);
    bad |= read_solver(file, path, c);
  }
  bad |= read_output(file, path, c);
  if (bad)
    return STENCIL_ERR;
  CHECK(read_fields(file, path, c));
  return STENCIL_OK;
}

/* ---- overrides (--set KEY=VALUE) ------------------------------------------------------------
 *
 * The overrides go into an image of the input in memory (HDF5's core driver, never written
 * back): its groups and attributes, and its datasets as datasets of the same type and shape
 * without data. The reader then reads the image as it reads a file, so an overridden key is
 * checked exactly like a key of the file. */

static void reclaim(hid_t type, hid_t space, void *buf)
{
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(type, space, H5P_DEFAULT, buf);
#else
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
#endif
}

/* H5Aiterate2 callback: copy attribute `name` of loc onto the object *to. */
static herr_t mirror_attr(hid_t loc, const char *name, const H5A_info_t *info, void *to)
{
  (void)info;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  hid_t t = a >= 0 ? H5Aget_type(a) : -1, s = a >= 0 ? H5Aget_space(a) : -1;
  const hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
  const size_t bytes = t >= 0 && n > 0 ? (size_t)n * H5Tget_size(t) : 1;
  void *buf = n >= 0 ? calloc(bytes, 1) : NULL;
  herr_t e = buf && H5Aread(a, t, buf) >= 0 ? 0 : -1;
  if (!e) {
    hid_t b = H5Acreate2(*(hid_t *)to, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    e = b >= 0 && H5Awrite(b, t, buf) >= 0 ? 0 : -1;
    if (b >= 0)
      H5Aclose(b);
    if (H5Tis_variable_str(t) > 0 || H5Tdetect_class(t, H5T_VLEN) > 0)
      reclaim(t, s, buf);
  }
  free(buf);
  if (s >= 0)
    H5Sclose(s);
  if (t >= 0)
    H5Tclose(t);
  if (a >= 0)
    H5Aclose(a);
  return e;
}

static int mirror_group(hid_t from, hid_t to);

/* A dataset of d's type and extent, no storage. */
static hid_t mirror_dataset(hid_t d, hid_t to, const char *name)
{
  hid_t t = H5Dget_type(d), s = H5Dget_space(d), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t dims[H5S_MAX_RANK];
  const int nd = H5Sget_simple_extent_ndims(s);
  if (nd > 0 && H5Sget_simple_extent_dims(s, dims, NULL) == nd)
    H5Sset_extent_simple(s, nd, dims, NULL); /* contiguous: no unlimited extents */
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  hid_t out = H5Dcreate2(to, name, t, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Sclose(s);
  H5Tclose(t);
  return out;
}

/* H5Literate callback: mirror member `name` of group loc into the group *to. */
static herr_t mirror_link(hid_t loc, const char *name, const H5L_info_t *info, void *to_)
{
  (void)info;
  const hid_t to = *(hid_t *)to_;
  hid_t obj = H5Oopen(loc, name, H5P_DEFAULT);
  if (obj < 0)
    return -1;
  hid_t copy = -1;
  herr_t e = -1;
  switch (H5Iget_type(obj)) {
  case H5I_GROUP:
    copy = H5Gcreate2(to, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    e = copy >= 0 && mirror_group(obj, copy) == STENCIL_OK ? 0 : -1;
    break;
  case H5I_DATASET:
    copy = mirror_dataset(obj, to, name);
    e = copy >= 0 ? 0 : -1;
    break;
  default: e = H5Ocopy(loc, name, to, name, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0; break;
  }
  if (copy >= 0)
    H5Oclose(copy);
  H5Oclose(obj);
  return e;
}

static int mirror_group(hid_t from, hid_t to)
{
  hsize_t idx = 0;
  if (H5Aiterate2(from, H5_INDEX_NAME, H5_ITER_INC, &idx, mirror_attr, &to) < 0)
    return STENCIL_ERR;
  idx = 0;
  return H5Literate(from, H5_INDEX_NAME, H5_ITER_INC, &idx, mirror_link, &to) < 0 ? STENCIL_ERR
                                                                                  : STENCIL_OK;
}

/* Up to 16 comma-separated numbers of the same kind: int64 (integer = 1) or double. */
static int parse_numbers(const char *text, int integer, int64_t *iv, double *dv, int *n)
{
  *n = 0;
  for (const char *p = text; *n < 16;) {
    char *end = NULL;
    errno = 0;
    if (integer)
      iv[*n] = strtoll(p, &end, 10);
    else
      dv[*n] = strtod(p, &end);
    if (errno || end == p || (*end && *end != ','))
      return 0;
    (*n)++;
    if (!*end)
      return 1;
    p = end + 1;
  }
  return 0;
}

/* One KEY=VALUE onto the image (its syntax checked by the option parser): the groups of KEY
 * are created where missing; VALUE is written as 64-bit integers when every comma-separated
 * item is one, else as doubles when every item is a number, else (and whenever the key is a
 * string in the input) as a string. */
static int apply_set(hid_t image, const char *set)
{
  const char *eq = strchr(set, '=');
  char key[256];
  const char *k = set[0] == '/' ? set + 1 : set;
  snprintf(key, sizeof key, "%.*s", (int)(eq - k), k);
  const char *value = eq + 1;
  char *name = strrchr(key, '/');
  hid_t g = H5Gopen2(image, "/", H5P_DEFAULT);
  int status = STENCIL_OK;
  if (name) { /* descend, creating the groups the input lacks */
    *name++ = 0;
    for (char *save = NULL, *part = strtok_r(key, "/", &save); part && !status;
         part = strtok_r(NULL, "/", &save)) {
      hid_t next = -1;
      if (H5Lexists(g, part, H5P_DEFAULT) > 0) {
        next = H5Oopen(g, part, H5P_DEFAULT);
        if (next >= 0 && H5Iget_type(next) != H5I_GROUP) {
          log_error("--set %s: %s of the input is not a group", set, part);
          status = STENCIL_ERR;
        }
      } else {
        next = H5Gcreate2(g, part, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      }
      H5Oclose(g);
      g = next;
      if (g < 0 && !status) {
        log_error("--set %s: cannot make the group %s", set, part);
        status = STENCIL_ERR;
      }
    }
  } else {
    name = key;
  }
  if (!status && H5Lexists(g, name, H5P_DEFAULT) > 0) {
    log_error("--set %s: %s is a dataset or group of the input, not a key: only attributes "
              "can be set",
              set, name);
    status = STENCIL_ERR;
  }
  if (!status) {
    int is_string = 0, n = 0;
    int64_t iv[16];
    double dv[16];
    if (H5Aexists(g, name) > 0) {
      hid_t a = H5Aopen(g, name, H5P_DEFAULT), t = H5Aget_type(a);
      is_string = H5Tget_class(t) == H5T_STRING;
      H5Tclose(t);
      H5Aclose(a);
    }
    if (!is_string && parse_numbers(value, 1, iv, dv, &n))
      status = h5_write_int64s(g, name, iv, n);
    else if (!is_string && parse_numbers(value, 0, iv, dv, &n))
      status = h5_write_doubles(g, name, dv, n);
    else
      status = h5_write_string(g, name, value);
    if (status)
      log_error("--set %s: cannot set the key", set);
  }
  if (g >= 0)
    H5Oclose(g);
  return status;
}

/* The input's image in memory with the overrides applied (*image: close it). */
static int overridden_image(hid_t file, const char *path, const char *const *sets, int nsets,
                            hid_t *image)
{
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 0); /* no backing store: nothing reaches a disk */
  *image = H5Fcreate("stencil-input-image", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (*image < 0)
    FAIL(STENCIL_ERR, "%s: cannot make an image of the input in memory for --set", path);
  hid_t from = H5Gopen2(file, "/", H5P_DEFAULT), to = H5Gopen2(*image, "/", H5P_DEFAULT);
  int status = mirror_group(from, to);
  H5Gclose(from);
  H5Gclose(to);
  if (status)
    FAIL(STENCIL_ERR, "%s: cannot copy the input's keys into memory for --set", path);
  for (int i = 0; i < nsets; i++)
    status |= apply_set(*image, sets[i]);
  return status;
}

int config_read(const char *path, const char *const *sets, int nsets, struct config *c)
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
  char label[CONFIG_PATH_MAX + 16];
  snprintf(label, sizeof label, "%s%s", path, nsets > 0 ? " with --set" : "");
  hid_t image = -1;
  int status = nsets > 0 ? overridden_image(file, path, sets, nsets, &image) : STENCIL_OK;
  if (!status)
    status = read_file(nsets > 0 ? image : file, label, c);
  if (image >= 0)
    H5Fclose(image);
  H5Fclose(file);
  CHECK(status);
  CHECK(config_validate(c, label));
  return STENCIL_OK;
}

int config_load(const char *path, const char *const *sets, int nsets, struct config *c,
                MPI_Comm comm)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  int status = STENCIL_OK;
  if (rank == 0) {
    log_set_shared(1); /* every rank reads this input: no rank number in messages */
    status = config_read(path, sets, nsets, c);
    log_set_shared(0);
  }
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

/* /initial or /source without the dataset (n: entries per axis array). */
static int write_field_spec(hid_t loc, const char *name, const struct initial_config *in, int n)
{
  hid_t g;
  CHECK(make_group(loc, name, &g));
  int status = h5_write_string(g, "kind", init_names[in->kind]);
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
  return status;
}

int config_write(hid_t loc, const struct config *c)
{
  const int64_t version = CONFIG_SCHEMA_VERSION;
  int ndim = config_ndim(c);
  int n = ndim; /* arrays have one entry per axis in use */
  hid_t g;
  CHECK(h5_write_string(loc, "schema", CONFIG_SCHEMA));
  CHECK(h5_write_int64s(loc, "version", &version, 1));

  const int heat = c->equation == EQ_HEAT;
  CHECK(make_group(loc, "problem", &g));
  const int64_t order = c->order;
  int status = h5_write_string(g, "equation", config_equation_name(c->equation));
  status = status ? status : h5_write_int64s(g, "order", &order, 1);
  if (heat)
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

  if (heat) {
    CHECK(make_group(loc, "time", &g));
    status = h5_write_doubles(g, "dt", &c->dt, 1);
    status = status ? status : h5_write_int64s(g, "steps", &c->steps, 1);
  } else {
    CHECK(make_group(loc, "solver", &g));
    const struct solver_config *sv = &c->solver;
    status = h5_write_int64s(g, "max_iterations", &c->steps, 1);
    status = status ? status : h5_write_doubles(g, "tolerance", &sv->tolerance, 1);
    status = status ? status : h5_write_int64s(g, "residual_every", &sv->residual_every, 1);
    if (sv->omega > 0)
      status = status ? status : h5_write_doubles(g, "omega", &sv->omega, 1);
  }
  H5Gclose(g);
  CHECK(status);

  CHECK(write_field_spec(loc, "initial", &c->initial, n));
  if (c->has_source)
    CHECK(write_field_spec(loc, "source", &c->source, n));

  CHECK(make_group(loc, "output", &g));
  status = h5_write_string(g, "directory", c->output_dir);
  status = status ? status : h5_write_string(g, "final", c->output_final);
  H5Gclose(g);
  return status;
}
