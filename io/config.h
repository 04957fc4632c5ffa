#pragma once
/* The problem description read from an input file (docs/user/input-format.md).
 * A plain fixed-size struct: rank 0 reads and validates it, then broadcasts the bytes. */
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>

#include "common/types.h"

#define CONFIG_SCHEMA "stencil-input"
#define CONFIG_SCHEMA_VERSION 2     /* written; read: 1 and 2 (docs/user/input-format.md) */
#define CONFIG_SCHEMA_VERSION_MIN 1 /* the oldest version still read */
#define CONFIG_PATH_MAX 1024

enum equation { EQ_HEAT = 0, EQ_POISSON = 1 };
enum init_kind { INIT_CONSTANT = 0, INIT_SINE = 1, INIT_GAUSSIAN = 2, INIT_DATASET = 3 };

/* A field given by /initial (the initial field, or the first Jacobi iterate) or /source (f). */
struct initial_config {
  enum init_kind kind;
  double value;     /* constant */
  double amplitude; /* sine, gaussian */
  double offset;    /* sine, gaussian: added everywhere */
  int64_t modes[3]; /* sine: k per axis, factor sin(k pi x / L); k = 0 gives 1 */
  double center[3]; /* gaussian */
  double width;     /* gaussian: standard deviation */
};

/* Jacobi iteration of the Poisson equation (/solver); its iteration count is config.steps. */
struct solver_config {
  double tolerance;       /* stop when ||f - L u|| <= tolerance ||b|| (0: run every iteration) */
  int64_t residual_every; /* iterations between residual checks (0: only the final one) */
  double omega;           /* damping of the Jacobi update; 0: the fastest for the problem */
};

struct config {
  enum equation equation; /* heat: u_t = alpha lap u [+ f]; poisson: lap u = f */
  int order;              /* accuracy order of the Laplacian: 2, 4, 6, 8 (radius order / 2) */
  double alpha;           /* diffusivity (heat only) */
  enum precision precision;
  int64_t shape[3]; /* global cells along x, y, z; shape[2] == 1 is a 2D problem */
  double spacing[3];
  enum bc_kind bc[3][2]; /* [axis][0 = low face, 1 = high face] */
  double bc_value[3][2]; /* Dirichlet value on that face */
  double dt;             /* heat only; 0 for poisson */
  int64_t steps;         /* heat: time steps; poisson: the most Jacobi iterations */
  struct initial_config initial;
  int has_source;               /* /source given (required for poisson) */
  struct initial_config source; /* f */
  struct solver_config solver;  /* poisson only */
  char output_dir[CONFIG_PATH_MAX];
  char output_final[256];
};

/* Names used in files and messages. */
const char *config_bc_name(enum bc_kind bc);
const char *config_equation_name(enum equation e);
const char *config_precision_name(enum precision p);
const char *config_init_name(enum init_kind k);
const char *config_face_name(int axis, int side); /* "x_lo", ... */

static inline int config_ndim(const struct config *c)
{
  return c->shape[2] == 1 ? 2 : 3;
}
static inline int config_radius(const struct config *c)
{
  return c->order / 2;
}
static inline int64_t config_points(const struct config *c)
{
  return c->shape[0] * c->shape[1] * c->shape[2];
}
static inline int config_elem_size(const struct config *c)
{
  return c->precision == PREC_FP64 ? 8 : 4;
}

/* Fill the defaults for everything optional (used by the reader and by stencil-input). */
void config_defaults(struct config *c);

/* Check the values for consistency (sizes, boundaries, parameters). Prints every
 * problem found, naming the file and key, and returns STENCIL_ERR if any. Not collective. */
int config_validate(const struct config *c, const char *path);

/* Read and validate an input file (serial HDF5, call on one rank) with the overrides
 * sets[0..nsets) ("KEY=VALUE" of --set, applied in order; docs/user/input-format.md) as if
 * the file held them. Every key is checked before anything is allocated; unknown keys are
 * errors. Not collective. */
int config_read(const char *path, const char *const *sets, int nsets, struct config *c);

/* Write the description as attributes/groups under loc (a file or group id):
 * the same schema config_read accepts. Does not write /initial/field. */
int config_write(hid_t loc, const struct config *c);

/* Read, validate and broadcast from rank 0 to all ranks of comm. On failure rank 0
 * has printed the message and every rank returns the same non-zero status. Collective. */
int config_load(const char *path, const char *const *sets, int nsets, struct config *c,
                MPI_Comm comm);
