#pragma once
/* The compute backends behind one C interface: a table of functions chosen at run time.
 * Buffers are backend memory (host memory for cpu, device memory for cuda); "host"
 * arguments are ordinary host memory. Functions may run asynchronously; sync() waits
 * for everything issued so far. All return 0 on success. No MPI here. */
#include <stdint.h>

#include "kernels/layout.h"

/* Coefficients of the star-stencil update, in double; fp32 backends round each once.
 *
 *   v = c0 * u + sum over axes a = x, y, z (in that order) and m = 1..radius (in order) of
 *       c[a][m-1] * (u[-m e_a] + u[+m e_a])
 *
 * evaluated left to right, without fused multiply-add, so every backend gives the same
 * bits (docs/architecture.md). */
struct stencil_coef {
  int ndim;
  int radius;
  double c0;
  double c[3][4];
};

/* Reductions over the interior. */
struct norms {
  double sum;        /* sum of u */
  double sumsq;      /* sum of u^2 */
  double maxabs;     /* max |u| over finite values */
  int64_t nonfinite; /* number of NaN/Inf cells */
};

struct backend_options {
  int device; /* cuda: device ordinal */
  int verbose;
};

struct backend_ops {
  const char *name;
  int (*create)(void **ctx, const struct backend_options *opt);
  void (*destroy)(void *ctx);
  /* A zero-filled padded array of l->count elements. */
  int (*alloc)(void *ctx, const struct layout *l, void **buf);
  void (*release)(void *ctx, void *buf);
  /* Copy between the interior of buf and a dense host array (n[0] x n[1] x n[2], x fastest). */
  int (*upload)(void *ctx, const struct layout *l, void *buf, const void *host);
  int (*download)(void *ctx, const struct layout *l, void *host, const void *buf);
  /* v = stencil(u) on the cells of box b. */
  int (*update)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                void *v, const struct box *b);
  /* Copy box b of u to/from a dense host buffer (x fastest). */
  int (*pack)(void *ctx, const struct layout *l, const void *u, const struct box *b, void *host);
  int (*unpack)(void *ctx, const struct layout *l, void *u, const struct box *b, const void *host);
  /* Fill the ghost layers beyond face (axis, side) from the interior by reflection:
   * Dirichlet g: u_ghost(m) = 2g - u_in(m-1); Neumann: u_ghost(m) = u_in(m-1), m = 1..halo. */
  int (*boundary)(void *ctx, const struct layout *l, void *u, int axis, int side, enum bc_kind kind,
                  double value);
  int (*norms)(void *ctx, const struct layout *l, const void *u, struct norms *out);
  int (*sync)(void *ctx);
  /* The memory bandwidth this backend reaches, in bytes/s (bytes read + bytes written): a
   * STREAM-like triad on the CPU, a large device-to-device copy on a GPU. May be NULL. */
  int (*measure_bandwidth)(void *ctx, double *bytes_per_second);
};

extern const struct backend_ops backend_cpu;
