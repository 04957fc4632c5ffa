#pragma once
/* The CUDA backend's context and the helpers its files share (internal; CUDA C++).
 *
 * One GPU per rank, the fields in device memory, two streams ("lanes"). Files:
 *   backend.cu    the backend_ops table: device, context, lanes, halo_depth, prepare, advance
 *   memory.cu     fields, halo buffers, pack / unpack / wrap copies, reflecting-face fills
 *   reduce.cu     norms and the Poisson residual, reduced on the device
 *   step.cu       the single-step kernels (tier 1 reference, tier 2 streaming) and their tuner
 *   fused_run.cu  the fused multi-step path of advance() (the plan of fused_plan.cu on this
 *                 block, launches in parts, residual launches)
 *
 * Layout: the padded block of kernels/layout.h in device memory, x fastest, with each x row
 * padded further to a multiple of 32 elements (dev_layout):
 *   u: lead + (n[2] + 2 h[2]) x (n[1] + 2 h[1]) x sy elements of 4 or 8 bytes,
 *   sy = roundup(n[0] + 2 h[0] + 2 (16 / elem), 32); ghost x = -h[0] of each row at offset
 *   lead + row sy, with lead chosen so that interior x = 0 lies on a 128-byte boundary.
 *
 * Lanes: LANE_HALO is a high-priority stream (shell, pack, exchange, unpack, boundaries),
 * LANE_BULK a normal one (inner update); events order them (lane_fence), never a device
 * synchronisation. Kernels of the same lane may use programmatic dependent launch (PDL):
 * each kernel waits in cudaGridDependencySynchronize() before touching memory. Every kernel
 * gives the CPU backend's bits (the point update of kernels/point.h, compiled with
 * -fmad=false). */
#include <cuda.h> /* (types of cuStreamWaitValue32, reached through the runtime: no libcuda link) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_check.h"
extern "C" {
#include "kernels/backend.h"
#include "kernels/step.h"
}
#include "kernels/cuda/fused.h"
#include "kernels/face_track.h"

static_assert(FUSED_MAX_STEPS == BACKEND_MAX_STEPS,
              "kernels/backend.h and kernels/cuda/fused.h disagree on the most fused steps");

/* ---- kernel arguments (plain structs passed by value) ---------------------------------- */

/* Padded layout: element of interior cell (i, j, k) is origin + i + j s[1] + k s[2]. */
struct klay {
  int64_t origin;
  int64_t s[3];
  int64_t n[3];
  int halo[3];
};

struct kbox {
  int64_t lo[3], hi[3];
};

template <typename REAL> struct kcoef {
  REAL c0, cf; /* cf: weight of the source field f (kernels get f = nullptr without one) */
  REAL c[3][4];
  int radius, three_d;
};

/* Physical faces the tier-2 kernels fill while they update: index 2 axis + side, kind 0 none,
 * 1 Dirichlet (ghost = two_g - u), 2 Neumann (ghost = u). Axes are the kernel's (step.cu:
 * logical ones). */
template <typename REAL> struct kfaces {
  int kind[6];
  REAL two_g[6];
};

struct knorm {
  double sum, sumsq, maxabs, nonfinite;
};

/* Faces whose ghost cells mirror the interior (the fused 3D kernel with homogeneous faces):
 * on[a][s] = 1, and neg[a][s] = 1 for Dirichlet 0 (ghost = 0 - u) against Neumann (u). */
struct kmirror {
  int on[3][2], neg[3][2];
};

/* PDL: wait for the previous kernel of the stream (a no-op when not launched with PDL),
 * then let the next one start its launch. */
__device__ __forceinline__ void pdl_enter()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/* ---- the context ----------------------------------------------------------------------- */

#define MAX_FIELDS 4
#define NORM_BLOCKS_PER_SM 4

/* The fused path of a context (fused_run.cu). */
struct cuda_fused {
  int on; /* planned: plan is valid, advance() runs fused launches */
  struct fused_plan plan;
  int residual_steps;     /* the most steps of a launch that sums residuals (0: none) */
  int mirrored;           /* the plan takes homogeneous reflecting faces as halo faces */
  kmirror mirror;         /* ... which, and their rule */
  klay mirror_lay;        /* ... on the fields' device layout */
  unsigned mirror_blocks; /* mirror_edges' blocks per face before each launch (0: none) */
  int stale_faces;        /* the reflecting faces' ghosts are not filled between launches */
  int split_faces;        /* launches in parts: z faces whose planes are sent (bit 0: low,
                             bit 1: high) */
  int split_xy;           /* ... x and y faces whose tiles' cells are sent (bit 2 axis + side;
                             both 0: whole launches) */
  int split_one;          /* in parts as one signalled launch, the halo lane waiting on sig */
  unsigned *sig;          /* device: the signalled launches' count */
  unsigned sig_target;    /* its value once the last launch's sent planes are stored */
  /* cuStreamWaitValue32, from the driver through the runtime (split_one) */
  CUresult (*wait_value)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  double *res_scratch;  /* residual launches: per-warp sums, then the 8 totals (lazy) */
  double *res_h;        /* ... page-locked host copy of the 8 totals */
  cudaEvent_t res_done; /* ... recorded after the copy */
};

/* The exchange's clock (exchange_mark, exchange_clock): per exchange, in a ring of slots,
 * events at its start and end on the current lane and at the end of the bulk lane's work
 * issued in between (bulk: there is some). A slot is read back before it is reused, XCLOCK
 * exchanges later, by when its events have long completed. */
#define XCLOCK 16
struct xclock {
  cudaEvent_t start[XCLOCK], bulk_end[XCLOCK], end[XCLOCK];
  int bulk[XCLOCK];
  int64_t marked, read; /* exchanges ended, and read back */
  int open;             /* between mark 0 and mark 1 */
  double exchange_s, exposed_s;
};

struct cuda_ctx {
  struct backend_options opt;
  int device;
  cudaDeviceProp prop;
  char pci[32];
  cudaStream_t lane[2];
  cudaEvent_t mark[2];
  cudaEvent_t norms_done; /* norms_begin: recorded after the partial sums' copy */
  int cur;
  int last_kernel[2]; /* the lane's last operation was one of our kernels (PDL may follow) */
  struct face_rule face[6];
  struct field_track track[MAX_FIELDS];
  int tile[4];     /* tier 2: threads along t0, t1; cells of s per block; form (0 scalar, 1 vector,
                      2 vector with the deeper queue) */
  int tuned;       /* tile chosen by cuda_tune */
  int forced;      /* tile fixed by backend_options.tile2 */
  int single_tier; /* prepare(): the tier of this block's single steps (0: fused) */
  int star_radius; /* ... tier 2 of radius 2 to 4 (star.cu): the radius (0: not) */
  int star_elem;   /* ... and the field's element size */
  int star_source; /* ... and whether it has a source term */
  struct step_plan steps; /* prepare(): the single steps (and the fused path's face fills) */
  struct cuda_fused fu;
  knorm *partial;      /* device, NORM_BLOCKS_PER_SM x SMs */
  knorm *partial_h;    /* host copy */
  double *res_partial; /* residual(): device, partial sums and the total (lazy) */
  double *res_h;       /* residual(): page-locked host copy of the total */
  struct xclock *xc;   /* the exchange's clock (lazy) */
};

static inline struct cuda_ctx *CTX(void *p)
{
  return (struct cuda_ctx *)p;
}

/* The device copy of a block pads each x row to a multiple of 32 elements, with room for two
 * 16-byte vectors beyond the ghost cells (tier 2 loads one vector past a row's end, and
 * update_lean writes a face's x ghost as the 32-byte sector that holds it), and shifts the
 * whole array by `lead` elements so that interior x = 0 of every row lies on a 128-byte
 * boundary (the one-step kernels run faster so: docs/benchmarks.md). Same interior and
 * ghost cells as the driver's layout; only the strides and the shift differ (the driver never
 * indexes device memory itself). */
static inline struct layout dev_layout(const struct layout *l)
{
  struct layout d = *l;
  const int64_t w = 16 / l->elem, line = 128 / l->elem;
  d.lead = (line - l->halo[0] % line) % line;
  d.stride[1] = (l->n[0] + 2 * l->halo[0] + 2 * w + 31) / 32 * 32;
  d.stride[2] = d.stride[1] * (l->n[1] + 2 * l->halo[1]);
  d.count = d.lead + d.stride[2] * (l->n[2] + 2 * l->halo[2]);
  return d;
}

static inline klay make_klay(const struct layout *lay)
{
  const struct layout dl = dev_layout(lay);
  const struct layout *l = &dl;
  klay k;
  k.origin = layout_index(l, 0, 0, 0);
  for (int a = 0; a < 3; a++) {
    k.s[a] = l->stride[a];
    k.n[a] = l->n[a];
    k.halo[a] = l->halo[a];
  }
  return k;
}

static inline kbox make_kbox(const struct box *b)
{
  kbox k;
  for (int a = 0; a < 3; a++) {
    k.lo[a] = b->lo[a];
    k.hi[a] = b->hi[a];
  }
  return k;
}

template <typename REAL> static kcoef<REAL> make_kcoef(const struct stencil_coef *coef)
{
  kcoef<REAL> k;
  k.c0 = (REAL)coef->c0;
  k.cf = (REAL)coef->cf;
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      k.c[a][m] = (REAL)coef->c[a][m];
  k.radius = coef->radius;
  k.three_d = coef->ndim == 3;
  return k;
}

/* Launch on the current lane, with PDL when the lane's previous operation was a kernel, and
 * `smem` bytes of dynamic shared memory. */
template <typename... P, typename... A>
static int launch_smem(struct cuda_ctx *c, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                       A... args)
{
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->lane[c->cur];
  cudaLaunchAttribute attr[1];
  if (c->opt.pdl && c->last_kernel[c->cur]) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, args...));
  CHECK_LAUNCH(cfg.stream);
  c->last_kernel[c->cur] = 1;
  return STENCIL_OK;
}

template <typename... P, typename... A>
static int launch(struct cuda_ctx *c, void (*kernel)(P...), dim3 grid, dim3 block, A... args)
{
  return launch_smem(c, kernel, grid, block, 0, args...);
}

/* Make the current lane wait for everything issued so far to the other lane. */
static inline int wait_other(struct cuda_ctx *c)
{
  const int o = 1 - c->cur;
  CHECK_CUDA(cudaEventRecord(c->mark[o], c->lane[o]));
  CHECK_CUDA(cudaStreamWaitEvent(c->lane[c->cur], c->mark[o], 0));
  c->last_kernel[o] = 0;
  c->last_kernel[c->cur] = 0;
  return STENCIL_OK;
}

/* The current lane's stream, for an operation that is not one of our kernels. */
static inline cudaStream_t stream_of(struct cuda_ctx *c)
{
  c->last_kernel[c->cur] = 0;
  return c->lane[c->cur];
}

static inline int64_t clamp_grid(int64_t n, int64_t max)
{
  return n < 1 ? 1 : n > max ? max : n;
}

/* ---- across the backend's files ----------------------------------------------------------- */

/* memory.cu */
int device_malloc(struct cuda_ctx *c, size_t bytes, void **p, const char *what);
struct field_track *track_of(struct cuda_ctx *c, const void *buf, int create);
void track_reset(struct cuda_ctx *c, const void *buf);
int cuda_alloc(void *ctx, const struct layout *l, void **buf);
void cuda_release(void *ctx, void *buf);
int cuda_upload(void *ctx, const struct layout *l, void *buf, const void *host);
int cuda_download(void *ctx, const struct layout *l, void *host, const void *buf);
int cuda_buffer_alloc(void *ctx, size_t bytes, int device, void **p);
void cuda_buffer_release(void *ctx, void *p, int device);
int cuda_pack(void *ctx, const struct layout *l, const void *u, int n, const struct box *b,
              void *const *bufs);
int cuda_unpack(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                const void *const *bufs);
int cuda_copy_boxes(void *ctx, const struct layout *l, void *u, int n, const struct box *from,
                    const struct box *to);
int cuda_boundaries(void *ctx, const struct layout *l, void *u, const int on[3][2],
                    const enum bc_kind kind[3][2], const double value[3][2]);
int cuda_field_box(void *ctx, const struct layout *l, const struct box *b, struct field_span *s);
/* The edge and corner ghosts of the mirrored faces of c->fu (before a fused launch). */
int cuda_mirror_edges(struct cuda_ctx *c, void *u);
/* Cells of the whole block that lie on face f = 2 axis + side, and of box b. */
int64_t face_cells(const struct layout *l, int f);
int64_t face_cells_in(const struct layout *l, const struct box *b, int f);

/* reduce.cu */
int cuda_norms_begin(void *ctx, const struct layout *l, const void *u);
int cuda_norms_end(void *ctx, struct norms *out);
int cuda_residual(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                  const void *f, double *sumsq);

/* step.cu */
int cuda_update(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                const void *f, void *v, const struct box *b);
/* Time each candidate launch shape on update(u -> v, b) and keep the fastest (overwrites v on
 * b); the forced shape of backend_options.tile2 instead where there is one. */
int cuda_tune(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
              void *v, const struct box *b);
/* A clear message when this binary carries no code the device can run. */
int cuda_check_image(struct cuda_ctx *c);
/* NULL when tier-2 launch shape t (struct cuda_ctx.tile) is valid, else why not. */
const char *tile_error(const int t[4]);
/* Whether the single steps of this block and coefficients run tier 2 (else tier 1). */
int tier2_applies(const struct cuda_ctx *c, const struct layout *l,
                  const struct stencil_coef *coef);

/* star.cu */
/* Whether the single steps of this block and coefficients run tier 2 of radius 2 to 4. */
int star_applies(const struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef);
/* Whether tier 2 at radius 2 to 4 (with a source or not) on box b writes the ghosts of x face
 * `side` (where it is a known reflecting face): its form does, and b holds the layers they
 * mirror in whole vectors. */
int star_covers_x(const struct layout *l, int radius, int source, const struct box *b, int side);
int cuda_update_star(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                     const void *u, const void *f, void *v, const struct box *b);
/* Its launch shape in words (the device line). */
void star_describe(int radius, int elem, int source, char *buf, size_t len);

/* backend.cu */
int cuda_lane_select(void *ctx, int lane);
int cuda_exchange_mark(void *ctx, int mark);
int cuda_exchange_clock(void *ctx, double *exchange_s, double *exposed_s);
void cuda_xclock_free(struct cuda_ctx *c);
int cuda_lane_fence(void *ctx);

/* fused_run.cu */
/* halo_depth for the fused path: out->steps = 0 (with out->why) where it does not run. */
int fused_halo_depth(const struct backend_options *opt, const struct problem_class *p,
                     const int64_t min_cells[3], struct halo_plan *out);
/* Plan the fused path on the block (c->fu.on = 1), or leave it off. */
int fused_prepare(struct cuda_ctx *c, const struct layout *l, const struct stencil_coef *coef,
                  int has_source, const struct block_faces *faces, struct advance_info *info);
int fused_advance(struct cuda_ctx *c, const void *u, const void *f, void *v, int k, unsigned mask,
                  const struct exchanger *x, double sums[BACKEND_MAX_STEPS]);
/* The fused plan in words (kernel, T, tiles, chunks, launches in parts). */
void fused_describe_run(const struct cuda_ctx *c, char *buf, size_t len);
