/* Unit tests of the input description (io/config.h).
 *
 *   - config_validate: a good struct passes; each bad value (zero, negative or overflowing
 *     shape, bad spacing, one-sided periodic axis, bad dt/alpha/steps/order, non-finite
 *     boundary values, bad initial-field parameters, bad output names) is refused with a
 *     message that names the file and the key; several problems are all reported.
 *   - config_write then config_read gives back exactly the same description (doubles
 *     bit for bit), in 2D and 3D, for every initial-field kind and boundary kind.
 *   - config_read refuses an unknown key and a /initial/field of the wrong shape.
 *   - config_read with --set overrides gives the description of a file holding those values,
 *     and refuses bad overrides as it refuses bad keys of a file. */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "io/config.h"
#include "io/h5util.h"
#include "unit.h"

#define FILE_TAG "in.h5"

static void base_config(struct config *c)
{
  config_defaults(c);
  c->shape[0] = 8;
  c->shape[1] = 6;
  c->shape[2] = 4;
  c->dt = 0.01;
  c->steps = 10;
  c->initial.kind = INIT_SINE;
  c->initial.amplitude = 1.0;
  c->initial.modes[0] = c->initial.modes[1] = c->initial.modes[2] = 1;
}

/* Validate c, capturing stderr; returns the status and the message. */
static int validate_quietly(const struct config *c, char *msg, size_t len)
{
  struct unit_capture cap;
  unit_capture_begin(&cap);
  int st = config_validate(c, FILE_TAG);
  unit_capture_end(&cap, msg, len);
  return st;
}

/* A change that makes a good config bad, and what the message must say. */
struct bad_case {
  const char *what;
  void (*spoil)(struct config *c);
  const char *message;
};

static void s_shape_zero(struct config *c)
{
  c->shape[0] = 0;
}
static void s_shape_negative(struct config *c)
{
  c->shape[1] = -3;
}
static void s_shape_huge(struct config *c)
{
  c->shape[2] = ((int64_t)1 << 31) + 1;
}
static void s_shape_overflow(struct config *c)
{
  c->shape[0] = c->shape[1] = c->shape[2] = (int64_t)1 << 31; /* 2^93 points */
}
static void s_shape_thin(struct config *c)
{
  c->shape[0] = 1;
}
static void s_spacing_zero(struct config *c)
{
  c->spacing[1] = 0.0;
}
static void s_spacing_negative(struct config *c)
{
  c->spacing[0] = -0.5;
}
static void s_spacing_nan(struct config *c)
{
  c->spacing[2] = NAN;
}
static void s_spacing_inf(struct config *c)
{
  c->spacing[0] = INFINITY;
}
static void s_order(struct config *c)
{
  c->order = 3;
}
static void s_alpha_zero(struct config *c)
{
  c->alpha = 0.0;
}
static void s_alpha_nan(struct config *c)
{
  c->alpha = NAN;
}
static void s_dt_zero(struct config *c)
{
  c->dt = 0.0;
}
static void s_dt_negative(struct config *c)
{
  c->dt = -1e-3;
}
static void s_dt_inf(struct config *c)
{
  c->dt = INFINITY;
}
static void s_dt_nan(struct config *c)
{
  c->dt = NAN;
}
static void s_steps(struct config *c)
{
  c->steps = -1;
}
static void s_periodic_x(struct config *c)
{
  c->bc[0][0] = BC_PERIODIC;
  c->bc[0][1] = BC_DIRICHLET;
}
static void s_periodic_z(struct config *c)
{
  c->bc[2][0] = BC_NEUMANN;
  c->bc[2][1] = BC_PERIODIC;
}
static void s_bc_value(struct config *c)
{
  c->bc_value[1][1] = INFINITY;
}
static void s_modes(struct config *c)
{
  c->initial.modes[1] = -2;
}
static void s_sine_amplitude(struct config *c)
{
  c->initial.amplitude = NAN;
}
static void s_gauss_width(struct config *c)
{
  c->initial.kind = INIT_GAUSSIAN;
  c->initial.width = 0.0;
}
static void s_gauss_center(struct config *c)
{
  c->initial.kind = INIT_GAUSSIAN;
  c->initial.center[1] = INFINITY;
}
static void s_constant(struct config *c)
{
  c->initial.kind = INIT_CONSTANT;
  c->initial.value = NAN;
}
static void s_outdir(struct config *c)
{
  c->output_dir[0] = '\0';
}
static void s_final_path(struct config *c)
{
  strcpy(c->output_final, "sub/final.h5");
}
static void s_final_empty(struct config *c)
{
  c->output_final[0] = '\0';
}

static void test_validate(void)
{
  struct config c;
  char msg[8192];
  base_config(&c);
  int st = validate_quietly(&c, msg, sizeof msg);
  EXPECT(st == STENCIL_OK && msg[0] == '\0', "the base config is refused: %s", msg);

  /* A 2D grid ignores its z boundaries, whatever they are. */
  base_config(&c);
  c.shape[2] = 1;
  c.bc[2][0] = BC_PERIODIC;
  c.bc[2][1] = BC_DIRICHLET;
  st = validate_quietly(&c, msg, sizeof msg);
  EXPECT(st == STENCIL_OK, "2D with one-sided periodic z (unused) is refused: %s", msg);

  /* The largest allowed extent alone is fine. */
  base_config(&c);
  c.shape[0] = (int64_t)1 << 31;
  st = validate_quietly(&c, msg, sizeof msg);
  EXPECT(st == STENCIL_OK, "shape[0] = 2^31 is refused: %s", msg);

  const struct bad_case cases[] = {
      {"zero extent", s_shape_zero, "/grid/shape[0] = 0 must be between 1 and 2147483648"},
      {"negative extent", s_shape_negative, "/grid/shape[1] = -3 must be between 1"},
      {"extent over 2^31", s_shape_huge, "/grid/shape[2] = 2147483649 must be between 1"},
      {"point count overflow", s_shape_overflow, "too many points"},
      {"one cell along x", s_shape_thin, "x and y need at least 2 cells"},
      {"zero spacing", s_spacing_zero, "/grid/spacing[1] = 0 must be positive and finite"},
      {"negative spacing", s_spacing_negative, "/grid/spacing[0] = -0.5 must be positive"},
      {"NaN spacing", s_spacing_nan, "/grid/spacing[2] = nan must be positive"},
      {"infinite spacing", s_spacing_inf, "/grid/spacing[0] = inf must be positive"},
      {"order 3", s_order, "/problem/order = 3 is not supported (supported: 2, 4, 6, 8)"},
      {"zero alpha", s_alpha_zero, "/problem/alpha = 0 must be positive and finite"},
      {"NaN alpha", s_alpha_nan, "/problem/alpha = nan"},
      {"zero dt", s_dt_zero, "/time/dt = 0 must be positive and finite"},
      {"negative dt", s_dt_negative, "/time/dt = -0.001 must be positive"},
      {"infinite dt", s_dt_inf, "/time/dt = inf must be positive"},
      {"NaN dt", s_dt_nan, "/time/dt = nan must be positive"},
      {"negative steps", s_steps, "/time/steps = -1 must not be negative"},
      {"one-sided periodic x", s_periodic_x,
       "/grid/x_lo and /grid/x_hi: periodic must be set on both faces"},
      {"one-sided periodic z", s_periodic_z,
       "/grid/z_lo and /grid/z_hi: periodic must be set on both faces"},
      {"infinite boundary value", s_bc_value, "/grid/y_hi_value must be finite"},
      {"negative mode", s_modes, "/initial/modes[1] = -2 must not be negative"},
      {"NaN amplitude", s_sine_amplitude, "/initial/amplitude and /initial/offset must be finite"},
      {"zero width", s_gauss_width, "/initial/width = 0 must be positive"},
      {"infinite centre", s_gauss_center, "/initial/center must be finite"},
      {"NaN constant", s_constant, "/initial/value must be finite"},
      {"empty output directory", s_outdir, "/output/directory must not be empty"},
      {"final with a slash", s_final_path, "/output/final = \"sub/final.h5\" must be a plain"},
      {"empty final", s_final_empty, "/output/final = \"\" must be a plain file name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    base_config(&c);
    cases[i].spoil(&c);
    st = validate_quietly(&c, msg, sizeof msg);
    EXPECT(st == STENCIL_ERR, "%s: status %d, expected %d", cases[i].what, st, STENCIL_ERR);
    EXPECT(strstr(msg, cases[i].message) != NULL, "%s: message \"%s\" lacks \"%s\"", cases[i].what,
           msg, cases[i].message);
    EXPECT(strstr(msg, "stencil: error: " FILE_TAG ": ") == msg,
           "%s: message \"%s\" does not name "
           "the file first",
           cases[i].what, msg);
  }

  /* Several problems at once: every one is reported. */
  base_config(&c);
  c.dt = -1;
  c.spacing[1] = 0;
  c.steps = -5;
  st = validate_quietly(&c, msg, sizeof msg);
  EXPECT(st == STENCIL_ERR && strstr(msg, "/time/dt") && strstr(msg, "/grid/spacing[1]") &&
             strstr(msg, "/time/steps"),
         "three problems, message: \"%s\"", msg);
}

/* ---- write / read round trip ----------------------------------------------------------- */

static int same_double(double a, double b)
{
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Compare every field; report the first difference. */
static void expect_same_config(const struct config *a, const struct config *b, const char *label)
{
  EXPECT(a->equation == b->equation, "%s: equation", label);
  EXPECT(a->order == b->order, "%s: order %d vs %d", label, a->order, b->order);
  EXPECT(same_double(a->alpha, b->alpha), "%s: alpha %.17g vs %.17g", label, a->alpha, b->alpha);
  EXPECT(a->precision == b->precision, "%s: precision", label);
  for (int ax = 0; ax < 3; ax++) {
    EXPECT(a->shape[ax] == b->shape[ax], "%s: shape[%d] %lld vs %lld", label, ax,
           (long long)a->shape[ax], (long long)b->shape[ax]);
    EXPECT(same_double(a->spacing[ax], b->spacing[ax]), "%s: spacing[%d] %.17g vs %.17g", label, ax,
           a->spacing[ax], b->spacing[ax]);
    for (int s = 0; s < 2; s++) {
      EXPECT(a->bc[ax][s] == b->bc[ax][s], "%s: bc %s %d vs %d", label, config_face_name(ax, s),
             a->bc[ax][s], b->bc[ax][s]);
      EXPECT(same_double(a->bc_value[ax][s], b->bc_value[ax][s]), "%s: %s_value %.17g vs %.17g",
             label, config_face_name(ax, s), a->bc_value[ax][s], b->bc_value[ax][s]);
    }
  }
  EXPECT(same_double(a->dt, b->dt), "%s: dt %.17g vs %.17g", label, a->dt, b->dt);
  EXPECT(a->steps == b->steps, "%s: steps %lld vs %lld", label, (long long)a->steps,
         (long long)b->steps);
  const struct initial_config *p = &a->initial, *q = &b->initial;
  EXPECT(p->kind == q->kind, "%s: initial kind %d vs %d", label, p->kind, q->kind);
  EXPECT(same_double(p->value, q->value), "%s: initial value", label);
  EXPECT(same_double(p->amplitude, q->amplitude), "%s: amplitude %.17g vs %.17g", label,
         p->amplitude, q->amplitude);
  EXPECT(same_double(p->offset, q->offset), "%s: offset %.17g vs %.17g", label, p->offset,
         q->offset);
  EXPECT(same_double(p->width, q->width), "%s: width %.17g vs %.17g", label, p->width, q->width);
  for (int ax = 0; ax < 3; ax++) {
    EXPECT(p->modes[ax] == q->modes[ax], "%s: modes[%d] %lld vs %lld", label, ax,
           (long long)p->modes[ax], (long long)q->modes[ax]);
    EXPECT(same_double(p->center[ax], q->center[ax]), "%s: center[%d] %.17g vs %.17g", label, ax,
           p->center[ax], q->center[ax]);
  }
  EXPECT(strcmp(a->output_dir, b->output_dir) == 0, "%s: output dir \"%s\" vs \"%s\"", label,
         a->output_dir, b->output_dir);
  EXPECT(strcmp(a->output_final, b->output_final) == 0, "%s: final \"%s\" vs \"%s\"", label,
         a->output_final, b->output_final);
}

/* Write c to path with config_write (plus an /initial/field of field_dims when ndims > 0). */
static int write_input(const char *path, const struct config *c, int ndims,
                       const hsize_t *field_dims)
{
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0)
    return STENCIL_ERR;
  int st = config_write(f, c);
  if (!st && ndims > 0) {
    hid_t space = H5Screate_simple(ndims, field_dims, NULL);
    hid_t d = H5Dcreate2(f, "/initial/field", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    st = d < 0 ? STENCIL_ERR : STENCIL_OK;
    if (d >= 0)
      H5Dclose(d);
    H5Sclose(space);
  }
  if (H5Fclose(f) < 0)
    st = STENCIL_ERR;
  return st;
}

static void round_trip(const char *dir, const char *label, const struct config *c, int ndims,
                       const hsize_t *field_dims)
{
  char path[1200];
  snprintf(path, sizeof path, "%s/%s.h5", dir, label);
  EXPECT(config_validate(c, path) == STENCIL_OK, "%s: the test's config is invalid", label);
  int st = write_input(path, c, ndims, field_dims);
  EXPECT(st == STENCIL_OK, "%s: config_write failed", label);
  struct config back;
  memset(&back, 0xA5, sizeof back);
  char msg[8192];
  struct unit_capture cap;
  unit_capture_begin(&cap);
  st = config_read(path, NULL, 0, &back);
  unit_capture_end(&cap, msg, sizeof msg);
  EXPECT(st == STENCIL_OK, "%s: config_read failed: %s", label, msg);
  if (st == STENCIL_OK)
    expect_same_config(c, &back, label);
  unlink(path);
}

static void test_round_trip(const char *dir)
{
  struct config c;
  /* 3D, fp32, sine, every boundary kind, values that are not short decimals. */
  config_defaults(&c);
  c.alpha = 0.7;
  c.precision = PREC_FP32;
  c.shape[0] = 12;
  c.shape[1] = 10;
  c.shape[2] = 8;
  c.spacing[0] = 0.1;
  c.spacing[1] = 1.0 / 3.0;
  c.spacing[2] = 2.5e-3;
  c.bc[0][0] = c.bc[0][1] = BC_PERIODIC;
  c.bc[1][0] = BC_DIRICHLET;
  c.bc_value[1][0] = 1.25;
  c.bc[1][1] = BC_NEUMANN;
  c.bc[2][0] = BC_DIRICHLET;
  c.bc_value[2][0] = -0.3;
  c.bc[2][1] = BC_DIRICHLET;
  c.bc_value[2][1] = 1e-300;
  c.dt = 0.0123456789012345;
  c.steps = 123456789012;
  c.initial.kind = INIT_SINE;
  c.initial.amplitude = 2.5;
  c.initial.modes[0] = 3;
  c.initial.modes[1] = 0;
  c.initial.modes[2] = 7;
  c.initial.offset = 0.1;
  strcpy(c.output_dir, "some/where deep");
  strcpy(c.output_final, "result.h5");
  round_trip(dir, "sine3d_fp32", &c, 0, NULL);

  /* 2D, gaussian: z is unused (read back as periodic, spacing 1, centre 0). */
  config_defaults(&c);
  c.shape[0] = 9;
  c.shape[1] = 7;
  c.shape[2] = 1;
  c.spacing[0] = 0.3;
  c.spacing[1] = 0.7;
  c.bc[0][0] = BC_NEUMANN;
  c.bc[0][1] = BC_DIRICHLET;
  c.bc_value[0][1] = 3.0;
  c.bc[1][0] = c.bc[1][1] = BC_PERIODIC;
  c.bc[2][0] = c.bc[2][1] = BC_PERIODIC;
  c.dt = 1e-3;
  c.steps = 0;
  c.initial.kind = INIT_GAUSSIAN;
  c.initial.amplitude = -4.0;
  c.initial.center[0] = 1.1;
  c.initial.center[1] = 2.2;
  c.initial.width = 0.45;
  c.initial.offset = 1.0 / 7.0;
  round_trip(dir, "gauss2d_fp64", &c, 0, NULL);

  /* 3D constant, all Neumann. */
  config_defaults(&c);
  c.shape[0] = 5;
  c.shape[1] = 4;
  c.shape[2] = 3;
  for (int a = 0; a < 3; a++)
    c.bc[a][0] = c.bc[a][1] = BC_NEUMANN;
  c.dt = 0.05;
  c.steps = 3;
  c.initial.kind = INIT_CONSTANT;
  c.initial.value = -2.75;
  round_trip(dir, "const3d", &c, 0, NULL);

  /* A dataset initial field, 3D [nz][ny][nx] and 2D [ny][nx] (also accepted as [1][ny][nx]). */
  config_defaults(&c);
  c.shape[0] = 6;
  c.shape[1] = 5;
  c.shape[2] = 4;
  c.dt = 0.02;
  c.steps = 2;
  c.initial.kind = INIT_DATASET;
  const hsize_t d3[3] = {4, 5, 6};
  round_trip(dir, "data3d", &c, 3, d3);
  c.shape[2] = 1;
  c.bc[2][0] = c.bc[2][1] = BC_PERIODIC;
  const hsize_t d2[2] = {5, 6}, d21[3] = {1, 5, 6};
  round_trip(dir, "data2d", &c, 2, d2);
  round_trip(dir, "data2d_3dims", &c, 3, d21);
}

/* config_read refuses what config_validate cannot see: unknown keys, a wrong field shape. */
static void test_read_refusals(const char *dir)
{
  struct config c, back;
  char path[1200], msg[8192];
  struct unit_capture cap;
  base_config(&c);
  snprintf(path, sizeof path, "%s/unknown.h5", dir);
  EXPECT(write_input(path, &c, 0, NULL) == STENCIL_OK, "cannot write %s", path);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t g = H5Gopen2(f, "/grid", H5P_DEFAULT);
  const double one = 1.0;
  EXPECT(h5_write_doubles(g, "spcing", &one, 1) == STENCIL_OK, "cannot add a key");
  H5Gclose(g);
  H5Fclose(f);
  unit_capture_begin(&cap);
  int st = config_read(path, NULL, 0, &back);
  unit_capture_end(&cap, msg, sizeof msg);
  EXPECT(st == STENCIL_ERR && strstr(msg, "unknown key /grid/spcing"), "unknown key: %d \"%s\"", st,
         msg);
  unlink(path);

  c.initial.kind = INIT_DATASET;
  snprintf(path, sizeof path, "%s/shape.h5", dir);
  const hsize_t wrong[3] = {4, 8, 6}; /* x and y swapped: [nz][nx][ny] */
  EXPECT(write_input(path, &c, 3, wrong) == STENCIL_OK, "cannot write %s", path);
  unit_capture_begin(&cap);
  st = config_read(path, NULL, 0, &back);
  unit_capture_end(&cap, msg, sizeof msg);
  EXPECT(st == STENCIL_ERR &&
             strstr(msg, "/initial/field has shape [4 x 8 x 6] but the grid needs [nz][ny][nx] = "
                         "[4][6][8]"),
         "wrong dataset shape: %d \"%s\"", st, msg);
  unlink(path);
}

/* --set: config_read with overrides gives what a file holding those values gives. The input
 * has a dataset initial field and a variable-length string key (as h5py writes them); the
 * overrides replace numbers, an array, strings (one that looks like a number: the key is a
 * string in the input) and add a group. */
static void test_overrides(const char *dir)
{
  struct config c, want, back;
  char path[1200], msg[8192];
  struct unit_capture cap;
  base_config(&c);
  c.initial = (struct initial_config){.kind = INIT_DATASET, .width = 1.0}; /* as read back */
  snprintf(path, sizeof path, "%s/overrides.h5", dir);
  const hsize_t dims[3] = {4, 6, 8};
  EXPECT(write_input(path, &c, 3, dims) == STENCIL_OK, "cannot write %s", path);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t g = H5Gopen2(f, "/grid", H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
  H5Tset_size(t, H5T_VARIABLE);
  H5Adelete(g, "x_hi");
  hid_t a = H5Acreate2(g, "x_hi", t, sp, H5P_DEFAULT, H5P_DEFAULT);
  const char *neumann = "neumann";
  EXPECT(a >= 0 && H5Awrite(a, t, &neumann) >= 0, "cannot write a variable-length string");
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
  H5Gclose(g);
  H5Fclose(f);

  want = c;
  want.bc[0][1] = BC_NEUMANN;
  want.dt = 0.0123456789012345;
  want.steps = 77;
  want.bc[0][0] = BC_DIRICHLET;
  want.bc_value[0][0] = -0.3;
  want.spacing[0] = 0.1;
  want.spacing[1] = 0.5;
  want.spacing[2] = 2;
  want.precision = PREC_FP32;
  strcpy(want.output_final, "2024");
  want.has_source = 1;
  want.source.kind = INIT_CONSTANT;
  want.source.value = 2.5;
  const char *sets[] = {"time/dt=1",
                        "/time/dt=0.0123456789012345",
                        "time/steps=77",
                        "grid/x_lo_value=-0.3",
                        "grid/spacing=0.1,0.5,2",
                        "problem/precision=fp32",
                        "output/final=2024",
                        "source/kind=constant",
                        "source/value=2.5"};
  unit_capture_begin(&cap);
  int st = config_read(path, sets, (int)(sizeof sets / sizeof sets[0]), &back);
  unit_capture_end(&cap, msg, sizeof msg);
  EXPECT(st == STENCIL_OK, "config_read with --set failed: %s", msg);
  if (st == STENCIL_OK)
    expect_same_config(&want, &back, "overrides");

  /* Refused like the file's keys, or as what is not a key; the file is unchanged. */
  const struct {
    const char *set, *message;
  } bad[] = {{"time/dt=fast", "overrides.h5 with --set: key /time/dt must be a number (found "
                              "string)"},
             {"time/t_end=1", "overrides.h5 with --set: unknown key /time/t_end"},
             {"grid/shape=8,6,4,2", "key /grid/shape must have 2 to 3 elements (found 4)"},
             {"initial/field=1", "--set initial/field=1: field is a dataset or group"},
             {"grid/x_lo=periodic", "periodic must be set on both faces of an axis"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    unit_capture_begin(&cap);
    st = config_read(path, &bad[i].set, 1, &back);
    unit_capture_end(&cap, msg, sizeof msg);
    EXPECT(st == STENCIL_ERR && strstr(msg, bad[i].message), "--set %s: %d \"%s\"", bad[i].set, st,
           msg);
  }
  unit_capture_begin(&cap);
  st = config_read(path, NULL, 0, &back);
  unit_capture_end(&cap, msg, sizeof msg);
  EXPECT(st == STENCIL_OK && back.dt == c.dt && back.bc[0][1] == BC_NEUMANN,
         "the input changed under --set: %s", msg);
  unlink(path);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  log_init(0, 1, 1);
  h5_quiet();
  char dir[] = "test_config.XXXXXX"; /* in the working directory */
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    MPI_Finalize();
    return 1;
  }
  test_validate();
  test_round_trip(dir);
  test_read_refusals(dir);
  test_overrides(dir);
  rmdir(dir);
  int status = unit_finish("test_config");
  MPI_Finalize();
  return status;
}
