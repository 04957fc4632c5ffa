#pragma once
/* The compute backends behind one C interface: a table of functions chosen at run time.
 * Buffers are backend memory (host memory for cpu, device memory for cuda); "host"
 * arguments are ordinary host memory. Functions may run asynchronously; sync() waits
 * for everything issued so far. All return 0 on success. No MPI here. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/layout.h"

/* The fused multiply-add a b + c of the update, rounded once in the type of c (C: fmaf or
 * fma; CUDA: on the host and the device). The C files that use it are built with -mfma on
 * x86-64, so it is one instruction there (CMakeLists.txt). */
#ifdef __cplusplus
#include <math.h>
#ifdef __CUDACC__
#define STENCIL_HD __host__ __device__
#else
#define STENCIL_HD
#endif
extern "C++" { /* (C++ overloads, also where this header is included inside extern "C") */
STENCIL_HD inline float stencil_fma(float a, float b, float c)
{
  return fmaf(a, b, c);
}
STENCIL_HD inline double stencil_fma(double a, double b, double c)
{
  return fma(a, b, c);
}
}
#undef STENCIL_HD
#else
#include <math.h>
#define stencil_fma(a, b, c) _Generic((c), float : fmaf, default : fma)(a, b, c)
#endif

/* Coefficients of the star-stencil update, in double; fp32 backends round each once.
 *
 *   v = c0 * u, then for each axis a = x, y, z (in that order) and m = 1..radius (in order)
 *   v = fma(c[a][m-1], u[-m e_a] + u[+m e_a], v), and with a source field f
 *   v = fma(cf, f, v)
 *
 * in the field's precision: one rounding for the product c0 u, each pair sum and each fused
 * multiply-add (stencil_fma, above), and no other contraction, so every backend gives the
 * same bits (docs/architecture.md). radius is 1 to 4. Heat: c0 = 1 + alpha dt w_0 sum_a 1/h_a^2,
 * c[a][m-1] = alpha dt w_m / h_a^2, cf = dt (solvers/heat.h); Jacobi for lap u = f:
 * solvers/poisson.h. */
struct stencil_coef {
  int ndim;
  int radius;
  double c0;
  double c[3][4];
  double cf; /* weight of the source f; unused when update() gets f = NULL */
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
  int tier;     /* kernel tier: 0 = best for the problem, 1 = reference, 2 = tuned single-step
                   (tier 3, the fused multi-step update, is set up with fused_prepare) */
  int pdl;      /* cuda: programmatic dependent launch between successive kernels (0 = off) */
  int tile2[4]; /* cuda, tests only: a fixed tier-2 launch shape instead of tuning (threads
                   along x and y, cells per block along the streaming axis, form 0 scalar,
                   1 vector, 2 vector with a deeper queue); tile2[2] = 0: tuned */
};

/* Most steps one fused_update may advance (--steps-per-launch 1..BACKEND_FUSED_MAX_STEPS). */
#define BACKEND_FUSED_MAX_STEPS 8

/* Which cells of v a fused_update writes: all of them, or, where fused_split() says so (to
 * overlap the halo exchange with the rest), the shell first (the cells the exchange sends:
 * the 3D warp-row kernel's sent planes), then the inner part (the others). A shell part must
 * be issued before its inner part. (With FUSED_SPLIT_ONE the shell part launches all cells on
 * the other lane and orders the current one after the sent cells; the inner part is empty.) */
enum fused_part { FUSED_ALL = 0, FUSED_SHELL = 1, FUSED_INNER = 2 };
/* fused_split()'s bits: launches run in parts; as one signalled launch. */
enum { FUSED_SPLIT = 1, FUSED_SPLIT_ONE = 4 };
/* The form of launches in parts (struct fused_request.split): the one the model picks, the
 * sent planes first (shells), or one launch signalling when they are stored. */
enum { FUSED_FORM_AUTO = 0, FUSED_FORM_SHELLS = 1, FUSED_FORM_SIGNAL = 2 };

/* What lies beyond each face of a rank's block, for the fused update: ghost cells that the
 * halo exchange fills (a neighbour rank, or the wrap of a periodic axis), or a reflecting
 * boundary that the fused update re-applies after every step it fuses. */
struct block_faces {
  int exchanged[3][2];     /* [axis][side]: 1 = ghost cells from the exchange */
  int wrapped[3][2];       /* ... which are this block's own cells: the periodic wrap of an
                              axis the rank spans alone */
  enum bc_kind kind[3][2]; /* otherwise BC_DIRICHLET or BC_NEUMANN */
  double value[3][2];      /* Dirichlet value g (ghost = 2g - u) */
};

/* The fused tier (tier 3) as the driver asked for it. */
struct fused_request {
  int tier;          /* --kernel: 0 auto, 3 forced */
  int steps;         /* steps per launch T; 0 = from the device */
  int cluster[2];    /* CTAs per cluster along x and y; 0 = default */
  int chunk;         /* planes (3D) / rows (2D) each CTA streams through; 0 = default */
  int inhomogeneous; /* some face is Dirichlet with a nonzero value (common/types.h) */
  int split;         /* FUSED_FORM_*: the form of launches in parts */
};

/* Work queues of asynchronous backends (see lane_select below). */
enum backend_lane { LANE_HALO = 0, LANE_BULK = 1 };

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
  /* v = stencil(u) [+ cf f] on the cells of box b. f: NULL (no source term) or a field of
   * the same layout as u (only its interior is read). */
  int (*update)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                const void *f, void *v, const struct box *b);
  /* Copy box b of u to/from a dense host buffer (x fastest). */
  int (*pack)(void *ctx, const struct layout *l, const void *u, const struct box *b, void *host);
  int (*unpack)(void *ctx, const struct layout *l, void *u, const struct box *b, const void *host);
  /* Copy box from[i] of u onto box to[i] of u (the same extents), i < n: the periodic wrap
   * of an axis that one rank spans alone. The to[] boxes are ghost cells, disjoint from each
   * other and from every from[] box. */
  int (*copy_boxes)(void *ctx, const struct layout *l, void *u, int n, const struct box *from,
                    const struct box *to);
  /* Fill the ghost layers beyond face (axis, side) from the interior by reflection:
   * Dirichlet g: u_ghost(m) = 2g - u_in(m-1); Neumann: u_ghost(m) = u_in(m-1), m = 1..halo. */
  int (*boundary)(void *ctx, const struct layout *l, void *u, int axis, int side, enum bc_kind kind,
                  double value);
  int (*norms)(void *ctx, const struct layout *l, const void *u, struct norms *out);
  /* norms() in two halves (optional): begin queues the reduction of u behind the work issued
   * so far and returns, end waits for it and gives the norms. Work issued in between may
   * overwrite u. No other norms() call may come between them. */
  int (*norms_begin)(void *ctx, const struct layout *l, const void *u);
  int (*norms_end)(void *ctx, struct norms *out);
  /* *sumsq = the sum over the interior of (v - u)^2, v = the update of coef applied to u and
   * f (f may be NULL) with update()'s bits, the difference in the field's precision, squared
   * and summed in double (exact squares for fp32). With Jacobi's coefficients this is the
   * squared Poisson residual over (d / omega)^2 (solvers/poisson.h). A reduction: not bitwise
   * the same across decompositions. */
  int (*residual)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                  const void *f, double *sumsq);
  /* update() of the whole interior into v and residual()'s sum in the same pass (optional):
   * with Jacobi's coefficients, the next iteration and the current field's residual. */
  int (*update_residual)(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                         const void *u, const void *f, void *v, double *sumsq);
  int (*sync)(void *ctx);
  /* The memory bandwidth this backend reaches, in bytes/s (bytes read + bytes written): a
   * STREAM-like triad on the CPU, a large device-to-device copy on a GPU. May be NULL. */
  int (*measure_bandwidth)(void *ctx, double *bytes_per_second);

  /* ---- optional: NULL in backends that run everything in order on the host ---- */
  /* Devices this process can use; 0 with a reason in why[] when there are none. Callable
   * before create. */
  int (*devices)(int *count, char *why, size_t len);
  /* One line about the device in use (name, PCI bus id, kernel choice). */
  void (*describe)(void *ctx, char *buf, size_t len);
  /* Choose launch parameters by timing update(u -> v) on box b; overwrites v on b. */
  int (*tune)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
              void *v, const struct box *b);
  /* Two ordered work queues ("lanes"): later calls run on `lane`. lane_fence makes each
   * lane wait for the work issued so far to the other one, without a host wait;
   * lane_sync waits on the host for one lane; lane_queue is its native handle
   * (cudaStream_t) for the halo transports. */
  int (*lane_select)(void *ctx, int lane);
  int (*lane_fence)(void *ctx);
  int (*lane_sync)(void *ctx, int lane);
  void *(*lane_queue)(void *ctx, int lane);
  /* Halo message buffers that pack/unpack reach directly: device memory (device = 1) or
   * page-locked host memory (device = 0). */
  int (*buffer_alloc)(void *ctx, size_t bytes, int device, void **p);
  void (*buffer_release)(void *ctx, void *p, int device);
  /* Where the whole planes [z0, z1) of a field buffer of layout l (interior z coordinates,
   * ghost planes included) lie: one byte range at *offset of *bytes; 0 where that is not in
   * the buffer (NULL: planes are never one range). */
  int (*field_planes)(void *ctx, const struct layout *l, int64_t z0, int64_t z1, size_t *offset,
                      size_t *bytes);
  /* pack() / unpack() of n boxes at once (one launch), buffers from buffer_alloc; unpack
   * only into ghost cells. */
  int (*pack_boxes)(void *ctx, const struct layout *l, const void *u, int n, const struct box *b,
                    void *const *bufs);
  int (*unpack_boxes)(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                      const void *const *bufs);
  /* boundary() for every face with on[a][s] at once (one launch on a GPU). */
  int (*boundaries)(void *ctx, const struct layout *l, void *u, const int on[3][2],
                    const enum bc_kind kind[3][2], const double value[3][2]);

  /* ---- optional: the fused multi-step update (tier 3); NULL where there is none ---- */
  /* Before any layout exists (callable before create, no device calls): whether tier 3
   * runs a problem of this class (ndim, element size, stencil radius, source term) as
   * asked by *req. *steps = the steps per launch T to size the halo with (the block then
   * needs T x radius ghost layers on every axis, and an exchange with edges and corners),
   * or 0 when tier 3 is not used; why[] says why either way (a fallback's reason). */
  int (*fused_query)(int ndim, int elem, int radius, int has_source,
                     const struct fused_request *req, int *steps, char *why, size_t len);
  /* Plan the fused update of the block l (its halo from fused_query's T) for coefficients
   * coef, a source field or not, and faces; req->steps = 0 lets the backend choose T from
   * the device, capped by the halo. *steps = the T planned (the most one fused_update may
   * advance). *own_faces = 1 when the fused launches read the reflecting faces and the
   * periodic wraps of faces->wrapped through the faces themselves: their ghost cells then
   * need no fill or copy between launches (the driver skips both). Later update() calls
   * still run the single-step tiers. */
  int (*fused_prepare)(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                       int has_source, const struct block_faces *faces,
                       const struct fused_request *req, int *steps, int *own_faces);
  /* v = S^k(u) [with the source f] on the interior of v, S = update(), 1 <= k <= the T of
   * fused_prepare, on the current lane. The ghost cells of exchanged faces must be valid
   * T x radius deep, edges and corners included, in u and in f (the redundant halo cells
   * of a fused launch add cf f there too); reflecting faces need their boundary() fill only
   * (neither, with own_faces). Only the interior of v is written, and (where the backend
   * runs homogeneous faces as mirrored halo faces without own_faces) the edge and corner
   * ghosts of u beyond those faces. part (enum fused_part): FUSED_ALL, or where
   * fused_split() says so FUSED_SHELL (the cells the exchange sends) then FUSED_INNER (the
   * rest) on two lanes, ordered by lane_fence() before the next launch. */
  int (*fused_update)(void *ctx, const void *u, const void *f, void *v, int k, int part);
  /* 0, or FUSED_SPLIT when fused_update runs in parts for this block, with
   * FUSED_SPLIT_ONE where it applies (NULL: never). */
  int (*fused_split)(void *ctx);
  /* The most steps fused_residual may advance (0: it cannot; then the driver stops the
   * fused launches at every residual check and calls residual()). */
  int (*fused_residual_steps)(void *ctx);
  /* Before any layout exists (no device calls): the most steps fused_residual_steps() gives
   * for any plan of this class (0: none), so a loop whose every launch sums residuals sizes
   * its halo and T to it. NULL: none. */
  int (*fused_residual_max)(int ndim, int elem);
  /* fused_update that also sums, over the interior, residual()'s (v - u)^2 of the field u
   * after l steps (v: after l + 1), for every l = 0..k - 1 whose bit l is set in mask (l = 0:
   * the input); 1 <= k <= fused_residual_steps(). Does not wait: the sums come
   * from fused_residual_sums(), and work queued on the lane meanwhile (the halo exchange of
   * v) runs while the host waits for them. One launch, never in parts. */
  int (*fused_residual)(void *ctx, const void *u, const void *f, void *v, int k, unsigned mask);
  /* Waits for the last fused_residual's sums: sumsq[l] for the fields in its mask, 0 for
   * the others. A reduction: agrees with residual() to rounding. */
  int (*fused_residual_sums)(void *ctx, double sumsq[BACKEND_FUSED_MAX_STEPS]);
};

extern const struct backend_ops backend_cpu;
#ifdef STENCIL_HAVE_CUDA
extern const struct backend_ops backend_cuda; /* kernels/cuda/heat.cu */
#endif
