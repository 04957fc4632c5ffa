/* stencil-input: write a stencil input file (docs/user/input-format.md) from command-line
 * options. Serial; needs no MPI launcher. */
#include <errno.h>
#include <getopt.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "io/config.h"
#include "io/h5util.h"
#include "solvers/heat.h"

static void usage(void)
{
  printf(
      "Usage: stencil-input -o FILE.h5 [options]\n"
      "\n"
      "Writes a stencil input file (schema stencil-input, version %d; docs/user/input-format.md).\n"
      "\n"
      "  -o, --output FILE       file to write (refuses to replace it without --overwrite)\n"
      "  --overwrite             replace FILE if it exists\n"
      "  --equation heat|poisson heat: u_t = alpha lap u [+ f]; poisson: lap u = f    [heat]\n"
      "  --order 2|4|6|8         accuracy order of the Laplacian (radius order/2)    [2]\n"
      "  --shape NXxNYxNZ        global cells (NXxNY or NZ = 1 for 2D)          [64x64x64]\n"
      "  --spacing H[,HY[,HZ]]   cell size per axis; one value for all           [1]\n"
      "  --alpha A               diffusivity                                     [1]\n"
      "  --dt DT                 time step                  [0.9 x the stability limit]\n"
      "  --steps N               number of time steps; poisson: the most Jacobi\n"
      "                          iterations (/solver/max_iterations)             [100]\n"
      "  --precision fp64|fp32                                                   [fp64]\n"
      "  --bc FACE=KIND[:VALUE]  boundary of FACE (all, x, y, z, x_lo, x_hi, y_lo, y_hi,\n"
      "                          z_lo, z_hi): dirichlet[:VALUE], neumann or periodic;\n"
      "                          repeat, later ones win                  [all=dirichlet:0]\n"
      "  --initial SPEC          constant:VALUE\n"
      "                          sine:AMPLITUDE:KX,KY[,KZ][:OFFSET]  (prod sin(k pi x / L))\n"
      "                          gaussian:AMPLITUDE:CX,CY[,CZ]:WIDTH[:OFFSET]\n"
      "                          random:SEED  (a dataset /initial/field, uniform in [0, 1))\n"
      "                                          [sine:1:1,1,1; poisson: constant:0]\n"
      "  --source SPEC           the source f (/source), the same forms as --initial;\n"
      "                          random:SEED writes /source/field (uniform in [-1/2, 1/2)).\n"
      "                          Optional for heat, required for poisson           [none]\n"
      "  --tolerance X           poisson: /solver/tolerance (relative to ||b||)     [1e-8]\n"
      "  --residual-every N      poisson: /solver/residual_every                      [10]\n"
      "  --omega W               poisson: /solver/omega, the Jacobi damping [the best one]\n"
      "  --output-dir DIR        /output/directory                               [output]\n"
      "  --final NAME            /output/final                                   [final.h5]\n"
      "  --help                  this text\n",
      CONFIG_SCHEMA_VERSION);
}

#define USAGE_ERROR(...)                                                                           \
  do {                                                                                             \
    fprintf(stderr, "stencil-input: error: ");                                                     \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    return STENCIL_ERR_USAGE;                                                                      \
  } while (0)

/* Parse up to n numbers separated by sep; returns how many, or -1. */
static int parse_doubles(const char *s, char sep, double *out, int n)
{
  int k = 0;
  const char *p = s;
  while (k < n) {
    char *end;
    errno = 0;
    out[k] = strtod(p, &end);
    if (end == p || errno)
      return -1;
    k++;
    if (*end == '\0')
      return k;
    if (*end != sep)
      return -1;
    p = end + 1;
  }
  return -1;
}

static int parse_bc(const char *arg, struct config *c)
{
  char face[16];
  const char *eq = strchr(arg, '=');
  if (!eq || (size_t)(eq - arg) >= sizeof face)
    USAGE_ERROR("--bc expects FACE=KIND[:VALUE], got \"%s\"", arg);
  memcpy(face, arg, (size_t)(eq - arg));
  face[eq - arg] = '\0';
  const char *kind = eq + 1;
  enum bc_kind k;
  double value = 0;
  if (strncmp(kind, "dirichlet", 9) == 0) {
    k = BC_DIRICHLET;
    if (kind[9] == ':' && parse_doubles(kind + 10, ',', &value, 1) != 1)
      USAGE_ERROR("--bc: bad Dirichlet value in \"%s\"", arg);
    if (kind[9] != ':' && kind[9] != '\0')
      USAGE_ERROR("--bc: unknown boundary kind in \"%s\"", arg);
  } else if (strcmp(kind, "neumann") == 0) {
    k = BC_NEUMANN;
  } else if (strcmp(kind, "periodic") == 0) {
    k = BC_PERIODIC;
  } else {
    USAGE_ERROR("--bc: unknown boundary kind in \"%s\" (dirichlet[:VALUE], neumann, periodic)",
                arg);
  }
  int matched = 0;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      const char axis[2] = {"xyz"[a], '\0'};
      if (strcmp(face, "all") == 0 || strcmp(face, axis) == 0 ||
          strcmp(face, config_face_name(a, s)) == 0) {
        c->bc[a][s] = k;
        c->bc_value[a][s] = value;
        matched = 1;
      }
    }
  if (!matched)
    USAGE_ERROR("--bc: unknown face \"%s\"", face);
  return STENCIL_OK;
}

/* Split "a:b:c" into fields (modifies s). */
static int split(char *s, char **f, int n)
{
  int k = 0;
  char *save = NULL;
  for (char *t = strtok_r(s, ":", &save); t && k < n; t = strtok_r(NULL, ":", &save))
    f[k++] = t;
  return k;
}

/* --initial or --source (opt) into *in. */
static int parse_initial(const char *opt, const char *arg, struct initial_config *in, long *seed)
{
  char buf[512];
  char *f[6] = {0};
  if (strlen(arg) >= sizeof buf)
    USAGE_ERROR("%s: too long", opt);
  strcpy(buf, arg);
  int n = split(buf, f, 6);
  double v[3] = {0, 0, 0};
  if (n == 2 && strcmp(f[0], "constant") == 0) {
    in->kind = INIT_CONSTANT;
    if (parse_doubles(f[1], ',', &in->value, 1) != 1)
      USAGE_ERROR("%s constant:VALUE: bad value \"%s\"", opt, f[1]);
  } else if ((n == 3 || n == 4) && strcmp(f[0], "sine") == 0) {
    in->kind = INIT_SINE;
    int k = parse_doubles(f[2], ',', v, 3);
    if (parse_doubles(f[1], ',', &in->amplitude, 1) != 1 || k < 2 ||
        (n == 4 && parse_doubles(f[3], ',', &in->offset, 1) != 1))
      USAGE_ERROR("%s sine:AMPLITUDE:KX,KY[,KZ][:OFFSET]: cannot parse \"%s\"", opt, arg);
    for (int a = 0; a < 3; a++) {
      in->modes[a] = (int64_t)v[a];
      if ((double)in->modes[a] != v[a])
        USAGE_ERROR("%s sine: modes must be integers, got \"%s\"", opt, f[2]);
    }
  } else if ((n == 4 || n == 5) && strcmp(f[0], "gaussian") == 0) {
    in->kind = INIT_GAUSSIAN;
    if (parse_doubles(f[1], ',', &in->amplitude, 1) != 1 ||
        parse_doubles(f[2], ',', in->center, 3) < 2 ||
        parse_doubles(f[3], ',', &in->width, 1) != 1 ||
        (n == 5 && parse_doubles(f[4], ',', &in->offset, 1) != 1))
      USAGE_ERROR("%s gaussian:AMPLITUDE:CX,CY[,CZ]:WIDTH[:OFFSET]: cannot parse \"%s\"", opt, arg);
  } else if (n == 2 && strcmp(f[0], "random") == 0) {
    in->kind = INIT_DATASET;
    char *end;
    *seed = strtol(f[1], &end, 10);
    if (*end || end == f[1])
      USAGE_ERROR("%s random:SEED: bad seed \"%s\"", opt, f[1]);
  } else {
    USAGE_ERROR("%s: cannot parse \"%s\" (see --help)", opt, arg);
  }
  return STENCIL_OK;
}

/* A uniform [shift, 1 + shift) field from a 64-bit xorshift generator, the same on every
 * machine, as the dataset `name`. */
static int write_random_field(hid_t file, const char *name, const struct config *c, long seed,
                              double shift)
{
  const int64_t count = config_points(c);
  double *data = malloc((size_t)count * sizeof *data);
  if (!data)
    FAIL(STENCIL_ERR, "out of memory for a %lld-cell field", (long long)count);
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed;
  for (int64_t i = 0; i < count; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    data[i] = (double)(x >> 11) * (1.0 / 9007199254740992.0) + shift;
  }
  hsize_t dims[3] = {(hsize_t)c->shape[2], (hsize_t)c->shape[1], (hsize_t)c->shape[0]};
  const int nd = config_ndim(c);
  hid_t space = nd == 3 ? H5Screate_simple(3, dims, NULL) : H5Screate_simple(2, dims + 1, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(dcpl, 0);
  hid_t ftype = c->precision == PREC_FP64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  hid_t d = H5Dcreate2(file, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  herr_t e = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  if (d >= 0)
    H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  free(data);
  if (e < 0)
    FAIL(STENCIL_ERR, "cannot write %s", name);
  return STENCIL_OK;
}

struct extra {
  long seed, source_seed;
  int dt_set, initial_set;
};

static int parse(int argc, char **argv, struct config *c, const char **out, int *overwrite,
                 struct extra *x)
{
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"overwrite", no_argument, NULL, 'W'},
                                           {"shape", required_argument, NULL, 's'},
                                           {"spacing", required_argument, NULL, 'h'},
                                           {"alpha", required_argument, NULL, 'a'},
                                           {"dt", required_argument, NULL, 't'},
                                           {"steps", required_argument, NULL, 'n'},
                                           {"precision", required_argument, NULL, 'p'},
                                           {"bc", required_argument, NULL, 'b'},
                                           {"initial", required_argument, NULL, 'i'},
                                           {"output-dir", required_argument, NULL, 'd'},
                                           {"final", required_argument, NULL, 'f'},
                                           {"help", no_argument, NULL, 'H'},
                                           {"equation", required_argument, NULL, 'E'},
                                           {"order", required_argument, NULL, 'O'},
                                           {"source", required_argument, NULL, 'S'},
                                           {"tolerance", required_argument, NULL, 'T'},
                                           {"residual-every", required_argument, NULL, 'R'},
                                           {"omega", required_argument, NULL, 'w'},
                                           {NULL, 0, NULL, 0}};
  int ch;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, ":o:", longopts, NULL)) != -1) {
    double v[3];
    int k;
    char *end;
    switch (ch) {
    case 'o': *out = optarg; break;
    case 'W': *overwrite = 1; break;
    case 's': {
      k = 0;
      char buf[128];
      snprintf(buf, sizeof buf, "%s", optarg);
      char *save = NULL;
      for (char *t = strtok_r(buf, "x", &save); t; t = strtok_r(NULL, "x", &save)) {
        long long x = strtoll(t, &end, 10);
        if (*end || end == t || k >= 3)
          USAGE_ERROR("--shape expects NXxNYxNZ or NXxNY, got \"%s\"", optarg);
        c->shape[k++] = x;
      }
      if (k < 2)
        USAGE_ERROR("--shape expects NXxNYxNZ or NXxNY, got \"%s\"", optarg);
      if (k == 2)
        c->shape[2] = 1;
      break;
    }
    case 'h':
      k = parse_doubles(optarg, ',', v, 3);
      if (k < 1)
        USAGE_ERROR("--spacing expects H or HX,HY[,HZ], got \"%s\"", optarg);
      for (int a = 0; a < 3; a++)
        c->spacing[a] = k == 1 ? v[0] : a < k ? v[a] : 1.0;
      break;
    case 'a':
      if (parse_doubles(optarg, ',', &c->alpha, 1) != 1)
        USAGE_ERROR("--alpha expects a number, got \"%s\"", optarg);
      break;
    case 't':
      if (parse_doubles(optarg, ',', &c->dt, 1) != 1)
        USAGE_ERROR("--dt expects a number, got \"%s\"", optarg);
      x->dt_set = 1;
      break;
    case 'n':
      c->steps = strtoll(optarg, &end, 10);
      if (*end || end == optarg)
        USAGE_ERROR("--steps expects an integer, got \"%s\"", optarg);
      break;
    case 'p':
      if (strcmp(optarg, "fp64") == 0)
        c->precision = PREC_FP64;
      else if (strcmp(optarg, "fp32") == 0)
        c->precision = PREC_FP32;
      else
        USAGE_ERROR("--precision expects fp64 or fp32, got \"%s\"", optarg);
      break;
    case 'b': CHECK(parse_bc(optarg, c)); break;
    case 'i':
      CHECK(parse_initial("--initial", optarg, &c->initial, &x->seed));
      x->initial_set = 1;
      break;
    case 'S':
      CHECK(parse_initial("--source", optarg, &c->source, &x->source_seed));
      c->has_source = 1;
      break;
    case 'E':
      if (strcmp(optarg, "heat") == 0)
        c->equation = EQ_HEAT;
      else if (strcmp(optarg, "poisson") == 0)
        c->equation = EQ_POISSON;
      else
        USAGE_ERROR("--equation expects heat or poisson, got \"%s\"", optarg);
      break;
    case 'O':
      c->order = (int)strtol(optarg, &end, 10);
      if (*end || end == optarg)
        USAGE_ERROR("--order expects 2, 4, 6 or 8, got \"%s\"", optarg);
      break;
    case 'T':
      if (parse_doubles(optarg, ',', &c->solver.tolerance, 1) != 1)
        USAGE_ERROR("--tolerance expects a number, got \"%s\"", optarg);
      break;
    case 'R':
      c->solver.residual_every = strtoll(optarg, &end, 10);
      if (*end || end == optarg)
        USAGE_ERROR("--residual-every expects an integer, got \"%s\"", optarg);
      break;
    case 'w':
      if (parse_doubles(optarg, ',', &c->solver.omega, 1) != 1)
        USAGE_ERROR("--omega expects a number, got \"%s\"", optarg);
      break;
    case 'd': snprintf(c->output_dir, sizeof c->output_dir, "%s", optarg); break;
    case 'f': snprintf(c->output_final, sizeof c->output_final, "%s", optarg); break;
    case 'H': usage(); exit(0);
    case ':': USAGE_ERROR("option %s needs a value", argv[optind - 1]);
    default: USAGE_ERROR("unknown option %s (see --help)", argv[optind - 1]);
    }
  }
  if (optind != argc)
    USAGE_ERROR("unexpected argument \"%s\"", argv[optind]);
  if (!*out)
    USAGE_ERROR("no output file given (-o FILE.h5)");
  return STENCIL_OK;
}

int main(int argc, char **argv)
{
  struct config c;
  config_defaults(&c);
  c.shape[0] = c.shape[1] = c.shape[2] = 64;
  c.steps = 100;
  c.initial.kind = INIT_SINE;
  c.initial.amplitude = 1.0;
  c.initial.modes[0] = c.initial.modes[1] = c.initial.modes[2] = 1;
  const char *out = NULL;
  int overwrite = 0;
  struct extra x = {0, 0, 0, 0};
  int status = parse(argc, argv, &c, &out, &overwrite, &x);
  if (status)
    return status;
  if (c.shape[2] == 1)
    for (int s = 0; s < 2; s++)
      c.bc[2][s] = BC_PERIODIC; /* unused in 2D; keeps validation quiet */
  if (c.equation == EQ_POISSON) {
    c.dt = 0;
    if (!x.initial_set) { /* the first Jacobi iterate */
      memset(&c.initial, 0, sizeof c.initial);
      c.initial.kind = INIT_CONSTANT;
      c.initial.width = 1.0;
    }
  } else if (!x.dt_set && c.alpha > 0 &&
             (c.order == 2 || c.order == 4 || c.order == 6 || c.order == 8)) {
    c.dt = 0.9 * heat_max_stable_dt(&c);
  }
  h5_quiet();
  if (config_validate(&c, out))
    return STENCIL_ERR;
  if (!overwrite && access(out, F_OK) == 0) {
    fprintf(stderr, "stencil-input: error: %s exists; pass --overwrite to replace it\n", out);
    return STENCIL_ERR;
  }
  /* No timestamps, so the same options always give the same bytes. */
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  hid_t file = H5Fcreate(out, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  if (file < 0) {
    fprintf(stderr, "stencil-input: error: cannot create %s\n", out);
    return STENCIL_ERR;
  }
  status = config_write(file, &c);
  if (!status && c.initial.kind == INIT_DATASET)
    status = write_random_field(file, "/initial/field", &c, x.seed, 0.0);
  if (!status && c.has_source && c.source.kind == INIT_DATASET)
    status = write_random_field(file, "/source/field", &c, x.source_seed, -0.5);
  if (H5Fclose(file) < 0)
    status = STENCIL_ERR;
  if (status) {
    fprintf(stderr, "stencil-input: error: writing %s failed\n", out);
    unlink(out);
    return STENCIL_ERR;
  }
  if (c.equation == EQ_POISSON)
    printf("wrote %s: poisson, order %d, %lld x %lld x %lld %s, at most %lld iterations\n", out,
           c.order, (long long)c.shape[0], (long long)c.shape[1], (long long)c.shape[2],
           config_precision_name(c.precision), (long long)c.steps);
  else
    printf("wrote %s: %lld x %lld x %lld %s, dt %.9g, %lld steps\n", out, (long long)c.shape[0],
           (long long)c.shape[1], (long long)c.shape[2], config_precision_name(c.precision), c.dt,
           (long long)c.steps);
  return 0;
}
