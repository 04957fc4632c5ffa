#pragma once
/* The compute backends behind one C interface: a table of functions chosen at run time.
 *
 * A backend owns its fields (host memory for cpu, device memory for cuda) and how it advances
 * them: the driver asks it for the halo its stepping needs (halo_depth), prepares it for the
 * rank's block (prepare), then calls advance() in a loop, handing it the halo exchange as an
 * MPI-free object of callbacks (struct exchanger). Buffers are backend memory; "host"
 * arguments are ordinary host memory. Functions may run asynchronously; sync() waits for
 * everything issued so far. All return 0 on success. No MPI here. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/layout.h"
#include "kernels/point.h"

/* Reductions over the interior. */
struct norms {
  double sum;        /* sum of u */
  double sumsq;      /* sum of u^2 */
  double maxabs;     /* max |u| over finite values */
  int64_t nonfinite; /* number of NaN/Inf cells */
};

/* Most steps one advance() may take (--steps-per-launch 1..BACKEND_MAX_STEPS). */
#define BACKEND_MAX_STEPS 8

/* How the backend is asked to run: the kernel options of the command line (0 = the backend's
 * choice in every field) and the device. */
struct backend_options {
  int device;     /* cuda: device ordinal */
  int tier;       /* --kernel: 0 auto, 1 reference, 2 tuned single step, 3 fused multi-step */
  int steps;      /* --steps-per-launch: fused steps per advance; 0 = from the device */
  int cluster[2]; /* --cluster-size: CTAs per thread-block cluster along x and y */
  int chunk;      /* --chunk: planes (3D) or rows (2D) each CTA streams through */
  int overlap;    /* --overlap: 0 off, 1 on, 2 parts, 3 signal (the fused form of it) */
  int pdl;        /* cuda: programmatic dependent launch between successive kernels */
  int tile2[4];   /* cuda, tests only: a fixed single-step launch shape instead of tuning
                     (threads along x and y, cells per block along the streaming axis, form 0
                     scalar, 1 vector, 2 vector with a deeper queue); tile2[2] = 0: tuned */
};

/* The problem as halo_depth() needs it, before any layout exists. */
struct problem_class {
  int ndim, elem, radius;
  int has_source;         /* a source field f */
  int inhomogeneous;      /* some face is Dirichlet with a nonzero value */
  int x_vectors;          /* every block's cells along x fill whole 16-byte vectors */
  int64_t residual_every; /* Poisson: iterations between residual checks (0: none, or heat) */
  int64_t steps;          /* steps of the run (no deeper halo than it can use) */
};

/* halo_depth()'s answer: the ghost layers the decomposition must give every block, and what
 * one advance() can then take. The same on every rank (no device calls). */
struct halo_plan {
  int halo[3];    /* ghost layers per side, per axis */
  int corners;    /* the exchange must fill edges and corners too (deep halos) */
  int steps;      /* the most steps one advance() may take (1: single steps) */
  int form;       /* the backend's own: which stepping the halo is for (prepare takes it back) */
  char why[256];  /* which kernel runs and why, for the run's header */
  char note[320]; /* what was lowered or ignored, or "" */
};

/* What lies beyond each face of a rank's block: ghost cells that the halo exchange fills (a
 * neighbour rank, or the wrap of a periodic axis), or a reflecting boundary. */
struct block_faces {
  int exchanged[3][2];     /* [axis][side]: 1 = ghost cells from the exchange */
  int wrapped[3][2];       /* ... which are this block's own cells: the periodic wrap of an
                              axis the rank spans alone */
  enum bc_kind kind[3][2]; /* otherwise BC_DIRICHLET or BC_NEUMANN */
  double value[3][2];      /* Dirichlet value g (ghost = 2g - u) */
};

/* prepare()'s answer for this rank's block. */
struct advance_info {
  int steps;          /* the most steps one advance() takes here (<= the halo plan's) */
  int residual_steps; /* ... where it sums residuals (mask not 0; 0: it sums none) */
  int reads_faces;    /* advance() reads the ghost cells beyond reflecting faces and those of
                         periodic wraps through the faces themselves (0 where it reads a wrap from
                         memory): the exchange need not copy the wraps, and only the messages'
                         ghost cells must be valid */
};

/* The halo exchange of a field, supplied by the driver: pack the cells other ranks need (and
 * copy the periodic wraps within the block), post the messages, finish them (unpack the
 * received ghost cells). pack and finish run on the backend's current queue (queue()); the
 * backend fills the reflecting faces' ghost cells itself after finish. */
struct exchanger {
  void *arg;
  int messages; /* this rank sends messages: overlapping them with compute pays */
  int (*pack)(void *arg, void *field);
  int (*post)(void *arg);
  int (*finish)(void *arg, void *field);
};

/* What the driver and the exchange may use beyond the required functions. */
struct backend_caps {
  int device_memory; /* fields live in device memory: halo buffers may too (buffer_alloc's
                        device), the GPU transports apply, devices() counts GPUs */
};

struct backend_ops {
  const char *name;
  struct backend_caps caps;
  /* Devices this process can use; 0 with a reason in why[] when there are none. Callable
   * before create (cpu: one). */
  int (*devices)(int *count, char *why, size_t len);
  /* Before any layout exists (no device calls): the halo and steps per advance for a problem
   * of this class on blocks of at least min_cells cells per axis. */
  int (*halo_depth)(const struct backend_options *opt, const struct problem_class *p,
                    const int64_t min_cells[3], struct halo_plan *out);
  int (*create)(void **ctx, const struct backend_options *opt);
  void (*destroy)(void *ctx);
  /* One line about the device and the kernels in use. */
  void (*describe)(void *ctx, char *buf, size_t len);
  /* The device's model name (cuda: "NVIDIA H200"); NULL for host backends. */
  void (*device_name)(void *ctx, char *buf, size_t len);

  /* ---- fields ---- */
  /* A zero-filled padded array of l->count elements. */
  int (*alloc)(void *ctx, const struct layout *l, void **buf);
  void (*release)(void *ctx, void *buf);
  /* Copy between the interior of buf and a dense host array (n[0] x n[1] x n[2], x fastest). */
  int (*upload)(void *ctx, const struct layout *l, void *buf, const void *host);
  int (*download)(void *ctx, const struct layout *l, void *host, const void *buf);

  /* ---- stepping ---- */
  /* Plan the stepping of the block l (its halo from halo_depth's plan hp) for coefficients
   * coef, a source field or not, and faces; u and v are the run's two fields (zero-filled: a
   * backend may time its kernels on them, overwriting v). */
  int (*prepare)(void *ctx, const struct halo_plan *hp, const struct layout *l,
                 const struct stencil_coef *coef, int has_source, const struct block_faces *faces,
                 void *u, void *v, struct advance_info *info);
  /* k steps u -> v (1 <= k <= info.steps; where mask is not 0, k <= info.residual_steps),
   * then the exchange x of v's halo and the fill of its reflecting faces. f: the source field
   * or NULL. mask bit l (l < k): also sums[l] = residual()'s sum for the field after l steps
   * (l = 0: u itself). On entry u's ghost cells are valid (fill_ghosts or the last advance);
   * u is left intact. */
  int (*advance)(void *ctx, const void *u, const void *f, void *v, int k, unsigned mask,
                 const struct exchanger *x, double sums[BACKEND_MAX_STEPS]);
  /* Every ghost cell of u: the exchange x, then the reflecting faces. */
  int (*fill_ghosts)(void *ctx, void *u, const struct exchanger *x);

  /* ---- reductions ---- */
  /* The norms of u in two halves: begin queues the reduction behind the work issued so far,
   * end waits for it. Work issued in between may overwrite u; no other begin in between. */
  int (*norms_begin)(void *ctx, const struct layout *l, const void *u);
  int (*norms_end)(void *ctx, struct norms *out);
  /* *sumsq = the sum over the interior of (v - u)^2, v = the update of coef applied to u and
   * f (f may be NULL) with the bits of every other update, the difference in the field's
   * precision, squared and summed in double (exact squares for fp32). With Jacobi's
   * coefficients this is the squared Poisson residual over (d / omega)^2 (solvers/poisson.h).
   * A reduction: not bitwise the same across decompositions. */
  int (*residual)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                  const void *f, double *sumsq);
  int (*sync)(void *ctx);
  /* The memory bandwidth this backend reaches, in bytes/s (bytes read + bytes written): a
   * STREAM-like triad on the CPU, a large device-to-device copy on a GPU. */
  int (*measure_bandwidth)(void *ctx, double *bytes_per_second);

  /* ---- for the halo exchange ---- */
  /* Message buffers pack and unpack reach directly: device memory (device = 1, with
   * caps.device_memory) or host memory (page-locked where the backend has it). */
  int (*buffer_alloc)(void *ctx, size_t bytes, int device, void **p);
  void (*buffer_release)(void *ctx, void *p, int device);
  /* Copy the n boxes b[i] of u to / from dense buffers bufs[i] (x fastest), on the current
   * queue; unpack only into ghost cells. */
  int (*pack)(void *ctx, const struct layout *l, const void *u, int n, const struct box *b,
              void *const *bufs);
  int (*unpack)(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                const void *const *bufs);
  /* Copy box from[i] of u onto box to[i] of u (the same extents), i < n: the periodic wrap
   * of an axis that one rank spans alone. The to[] boxes are ghost cells, disjoint from each
   * other and from every from[] box. */
  int (*copy_boxes)(void *ctx, const struct layout *l, void *u, int n, const struct box *from,
                    const struct box *to);
  /* The native queue the exchange's work is ordered on (a cudaStream_t), NULL where work runs
   * in order on the host; queue_sync waits on the host for it. */
  void *(*queue)(void *ctx);
  int (*queue_sync)(void *ctx);
  /* Where box b (ghost cells included) of a field buffer of layout l lies (*s); 0 where the
   * backend's buffers are not for copies between them (host memory) or b is not in l. */
  int (*field_box)(void *ctx, const struct layout *l, const struct box *b, struct field_span *s);
  /* The exchange's clock on the queues (NULL where work runs in order on the host: the host's
   * times are the exchange's). The exchange marks its start (mark 0, the sent cells stored:
   * before the packing) and its end (mark 1, the ghost cells unpacked) on the current queue;
   * exchange_clock returns, for the exchanges marked since its last call, the seconds from
   * start to end summed, and the part of them that no update of other cells overlapped
   * (the work of the other queue, issued between the two marks). It waits for the marks. */
  int (*exchange_mark)(void *ctx, int mark);
  int (*exchange_clock)(void *ctx, double *exchange_s, double *exposed_s);
};

extern const struct backend_ops backend_cpu;
#ifdef STENCIL_HAVE_CUDA
extern const struct backend_ops backend_cuda;
#endif
