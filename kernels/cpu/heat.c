/* CPU backend: C17 + OpenMP over the rank's block. Everything runs synchronously.
 *
 * Fused x-face ghosts: the rows of a block are a row length apart, so a separate fill of the
 * x faces touches one cold cache line per row (a sizeable part of an update). The context
 * learns the rule of each x face from boundary() calls; update() then writes the x ghosts
 * of every row whose computed cells include the reflected ones, while the row is in cache,
 * and counts the rows it covered per field buffer and face (struct field_track). boundary()
 * along x skips the fill when every row of the face was covered with the same rule since the
 * buffer's last fill. This assumes the boxes updated between two fills of a buffer do not
 * overlap (the driver's shell and inner boxes partition the block). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "kernels/backend.h"
#include "kernels/face_track.h"
#include "kernels/step.h"

/* The x-face ghosts update_ writes along with its rows: kind[s] for side s (XG_NONE: none),
 * two_g[s] = 2 g of a Dirichlet face. */
enum { XG_NONE = 0, XG_DIRICHLET = 1, XG_NEUMANN = 2 };
struct xghost {
  int kind[2];
  double two_g[2];
};

#define REAL double
#define SUFFIX f64
#include "kernels/cpu/heat_real.h"
#undef REAL
#undef SUFFIX
#define REAL float
#define SUFFIX f32
#include "kernels/cpu/heat_real.h"
#undef REAL
#undef SUFFIX

#define MAX_FIELDS 8

/* NULL is a valid context too for the kernels of step_cpu (tests call them directly):
 * nothing is fused then. */
struct cpu_ctx {
  struct face_rule face[2];
  struct field_track track[MAX_FIELDS];
  struct step_plan plan; /* prepare() */
  struct norms norms;    /* norms_begin() */
};

static struct field_track *track_of(struct cpu_ctx *c, const void *buf, int create)
{
  return c ? field_track_find(c->track, MAX_FIELDS, buf, create) : NULL;
}

static void track_reset(struct cpu_ctx *c, const void *buf)
{
  if (c)
    field_track_reset(c->track, MAX_FIELDS, buf);
}

static int cpu_create(void **ctx, const struct backend_options *opt)
{
  (void)opt;
  struct cpu_ctx *c = calloc(1, sizeof *c);
  if (!c)
    FAIL(STENCIL_ERR, "out of host memory for the CPU backend's context");
  *ctx = c;
  return STENCIL_OK;
}

static void cpu_destroy(void *ctx)
{
  free(ctx);
}

static int cpu_alloc(void *ctx, const struct layout *l, void **buf)
{
  (void)ctx;
  size_t bytes = (size_t)l->count * (size_t)l->elem;
  /* 64-byte alignment for vector loads; the size is rounded up as aligned_alloc wants. */
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p)
    FAIL(STENCIL_ERR, "out of host memory: cannot allocate %.3f GiB for a field",
         (double)bytes / (1 << 30));
  /* First touch in parallel so pages land near the threads that use them. */
  const int64_t pages = (int64_t)((bytes + 4095) / 4096);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pages; i++) {
    size_t off = (size_t)i * 4096;
    memset((char *)p + off, 0, bytes - off < 4096 ? bytes - off : 4096);
  }
  *buf = p;
  track_reset(ctx, p);
  return STENCIL_OK;
}

static void cpu_release(void *ctx, void *buf)
{
  struct field_track *t = track_of(ctx, buf, 0);
  if (t)
    t->buf = NULL;
  free(buf);
}

static struct box interior_box(const struct layout *l)
{
  struct box b = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  return b;
}

static void pack_box(const struct layout *l, const void *u, const struct box *b, void *host)
{
  if (l->elem == 8)
    copy_box_f64(l, (double *)u, b, host, 1);
  else
    copy_box_f32(l, (float *)u, b, host, 1);
}

static void unpack_box(void *ctx, const struct layout *l, void *u, const struct box *b,
                       const void *host)
{
  struct box in = interior_box(l);
  for (int a = 0; a < 3; a++) {
    in.lo[a] = b->lo[a] > in.lo[a] ? b->lo[a] : in.lo[a];
    in.hi[a] = b->hi[a] < in.hi[a] ? b->hi[a] : in.hi[a];
  }
  if (box_count(&in) > 0)
    track_reset(ctx, u); /* interior cells change: fused ghosts no longer match */
  if (l->elem == 8)
    copy_box_f64(l, u, b, (double *)host, 0);
  else
    copy_box_f32(l, u, b, (float *)host, 0);
}

static int cpu_pack(void *ctx, const struct layout *l, const void *u, int n, const struct box *b,
                    void *const *bufs)
{
  (void)ctx;
  for (int i = 0; i < n; i++)
    pack_box(l, u, &b[i], bufs[i]);
  return STENCIL_OK;
}

static int cpu_unpack(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                      const void *const *bufs)
{
  for (int i = 0; i < n; i++)
    unpack_box(ctx, l, u, &b[i], bufs[i]);
  return STENCIL_OK;
}

static int cpu_copy_boxes(void *ctx, const struct layout *l, void *u, int n, const struct box *from,
                          const struct box *to)
{
  (void)ctx;
  char *p = u;
  const size_t e = (size_t)l->elem;
  for (int i = 0; i < n; i++) {
    const struct box *s = &from[i], *d = &to[i];
    const int64_t ny = s->hi[1] - s->lo[1],
                  rows = box_count(s) > 0 ? ny * (s->hi[2] - s->lo[2]) : 0;
    const size_t row = (size_t)(s->hi[0] - s->lo[0]) * e;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      const int64_t j = r % ny, k = r / ny;
      memcpy(p + e * (size_t)layout_index(l, d->lo[0], d->lo[1] + j, d->lo[2] + k),
             p + e * (size_t)layout_index(l, s->lo[0], s->lo[1] + j, s->lo[2] + k), row);
    }
  }
  return STENCIL_OK;
}

static int cpu_upload(void *ctx, const struct layout *l, void *buf, const void *host)
{
  struct box b = interior_box(l);
  unpack_box(ctx, l, buf, &b, host);
  return STENCIL_OK;
}

static int cpu_download(void *ctx, const struct layout *l, void *host, const void *buf)
{
  (void)ctx;
  struct box b = interior_box(l);
  pack_box(l, buf, &b, host);
  return STENCIL_OK;
}

/* Which x ghosts update(b) writes along with its rows, and the count of the rows covered. A
 * face is fused when its rule is known and b holds, for every row of b, the cells the
 * reflection reads (x = 0..halo-1 or n-halo..n-1), and b's rows lie in the interior. */
static struct xghost plan_xghost(struct cpu_ctx *c, const struct layout *l, void *v,
                                 const struct box *b)
{
  struct xghost g = {{XG_NONE, XG_NONE}, {0.0, 0.0}};
  const int64_t h = l->halo[0], n = l->n[0];
  if (!c || box_count(b) <= 0 || h < 1 || h > n || b->lo[0] < 0 || b->hi[0] > n)
    return g;
  for (int a = 1; a < 3; a++)
    if (b->lo[a] < 0 || b->hi[a] > l->n[a])
      return g;
  const int holds[2] = {b->lo[0] == 0 && b->hi[0] >= h, b->hi[0] == n && b->lo[0] <= n - h};
  struct field_track *t = NULL;
  for (int s = 0; s < 2; s++) {
    const struct face_rule *r = &c->face[s];
    if (!r->known || !holds[s])
      continue;
    if (!t)
      t = track_of(c, v, 1);
    if (!t)
      return g; /* more buffers than tracks: no fusion, boundary() fills as usual */
    if (t->rule[s].known && (t->rule[s].kind != r->kind || t->rule[s].value != r->value))
      t->covered[s] = 0;
    t->rule[s] = *r;
    t->covered[s] += (b->hi[1] - b->lo[1]) * (b->hi[2] - b->lo[2]);
    g.kind[s] = r->kind == BC_DIRICHLET ? XG_DIRICHLET : XG_NEUMANN;
    g.two_g[s] = 2.0 * r->value;
  }
  return g;
}

/* update_ on box b, with the x ghosts it can fill, and residual_'s sum when sumsq. */
static void update_box(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                       const void *u, const void *f, void *v, const struct box *b, double *sumsq)
{
  const struct xghost g = plan_xghost(ctx, l, v, b);
  if (l->elem == 8)
    update_f64(l, coef, u, f, v, b, &g, sumsq);
  else
    update_f32(l, coef, u, f, v, b, &g, sumsq);
}

static int cpu_update(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                      const void *u, const void *f, void *v, const struct box *b)
{
  update_box(ctx, l, coef, u, f, v, b, NULL);
  return STENCIL_OK;
}

static int cpu_update_residual(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                               const void *u, const void *f, void *v, double *sumsq)
{
  const struct box b = interior_box(l);
  update_box(ctx, l, coef, u, f, v, &b, sumsq);
  return STENCIL_OK;
}

static int cpu_residual(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                        const void *u, const void *f, double *sumsq)
{
  (void)ctx;
  const int failed =
      l->elem == 8 ? residual_f64(l, coef, u, f, sumsq) : residual_f32(l, coef, u, f, sumsq);
  if (failed)
    FAIL(STENCIL_ERR, "out of host memory for the residual's row buffers");
  return STENCIL_OK;
}

static int cpu_boundary(void *ctx, const struct layout *l, void *u, int axis, int side,
                        enum bc_kind kind, double value)
{
  struct cpu_ctx *c = ctx;
  if (c && axis == 0) {
    c->face[side].known = 1;
    c->face[side].kind = kind;
    c->face[side].value = value;
    /* Skip when fused updates wrote every row's ghosts of this face with the same rule. */
    struct field_track *t = track_of(c, u, 0);
    const int done = t && t->covered[side] == l->n[1] * l->n[2] && t->rule[side].known &&
                     t->rule[side].kind == kind && t->rule[side].value == value;
    if (t)
      t->covered[side] = 0;
    if (done)
      return STENCIL_OK;
  }
  if (l->elem == 8)
    boundary_f64(l, u, axis, side, kind, value);
  else
    boundary_f32(l, u, axis, side, kind, value);
  return STENCIL_OK;
}

static int cpu_boundaries(void *ctx, const struct layout *l, void *u, const int on[3][2],
                          const enum bc_kind kind[3][2], const double value[3][2])
{
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++)
      if (on[a][s])
        CHECK(cpu_boundary(ctx, l, u, a, s, kind[a][s], value[a][s]));
  return STENCIL_OK;
}

/* The norms run at once; end hands them over. */
static int cpu_norms_begin(void *ctx, const struct layout *l, const void *u)
{
  struct cpu_ctx *c = ctx;
  if (l->elem == 8)
    norms_f64(l, u, &c->norms);
  else
    norms_f32(l, u, &c->norms);
  return STENCIL_OK;
}

static int cpu_norms_end(void *ctx, struct norms *out)
{
  *out = ((struct cpu_ctx *)ctx)->norms;
  return STENCIL_OK;
}

static int cpu_sync(void *ctx)
{
  (void)ctx;
  return STENCIL_OK;
}

/* STREAM-like triad a = b + s c over arrays far larger than the caches; the best of a few
 * repetitions, counting 3 x 8 bytes per element (two reads, one write), as STREAM does. */
static int cpu_measure_bandwidth(void *ctx, double *bytes_per_second)
{
  (void)ctx;
  const int64_t n = (int64_t)1 << 25; /* 256 MiB per array */
  double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b),
         *c = malloc((size_t)n * sizeof *c);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    FAIL(STENCIL_ERR, "out of host memory for the bandwidth measurement (768 MiB)");
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const double s = 3.0 + rep;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
      a[i] = b[i] + s * c[i];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const double bw = 24.0 * (double)n / dt;
    best = bw > best ? bw : best;
  }
  /* Keep the result alive so the loop is not optimised away. */
  const int ok = a[n / 2] == b[n / 2] + 7.0 * c[n / 2];
  free(a), free(b), free(c);
  if (!ok)
    FAIL(STENCIL_ERR, "the bandwidth measurement computed a wrong triad");
  *bytes_per_second = best;
  return STENCIL_OK;
}

static int cpu_devices(int *count, char *why, size_t len)
{
  (void)why, (void)len;
  *count = 1;
  return STENCIL_OK;
}

/* Single steps only: a halo of one radius, faces only. */
static int cpu_halo_depth(const struct backend_options *opt, const struct problem_class *p,
                          const int64_t min_cells[3], struct halo_plan *out)
{
  (void)min_cells;
  memset(out, 0, sizeof *out);
  for (int a = 0; a < p->ndim; a++)
    out->halo[a] = p->radius;
  out->steps = 1;
  snprintf(out->why, sizeof out->why, "single steps, OpenMP over the rows of the block");
  if (opt->steps > 0 || opt->cluster[0] > 0 || opt->chunk > 0)
    snprintf(out->note, sizeof out->note,
             "the fused-kernel options (--steps-per-launch, --cluster-size, --chunk) are ignored: "
             "the cpu backend has no fused kernel");
  return STENCIL_OK;
}

static void cpu_describe(void *ctx, char *buf, size_t len)
{
  (void)ctx;
  snprintf(buf, len, "cpu");
}

static int cpu_prepare(void *ctx, const struct halo_plan *hp, const struct layout *l,
                       const struct stencil_coef *coef, int has_source,
                       const struct block_faces *faces, void *u, void *v, struct advance_info *info)
{
  (void)hp, (void)has_source, (void)u, (void)v;
  struct cpu_ctx *c = ctx;
  step_plan_init(&c->plan, l, coef, faces, 1);
  info->steps = 1;
  info->residual_steps = 1;
  info->reads_faces = 0;
  return STENCIL_OK;
}

const struct step_ops step_cpu = {
    .update = cpu_update,
    .update_residual = cpu_update_residual,
    .residual = cpu_residual,
    .boundaries = cpu_boundaries,
};

static int cpu_advance(void *ctx, const void *u, const void *f, void *v, int k, unsigned mask,
                       const struct exchanger *x, double sums[BACKEND_MAX_STEPS])
{
  if (k != 1)
    FAIL(STENCIL_ERR, "advance: the cpu backend takes single steps, %d asked", k);
  return step_one(&step_cpu, ctx, &((struct cpu_ctx *)ctx)->plan, u, f, v, mask, x, sums);
}

static int cpu_fill_ghosts(void *ctx, void *u, const struct exchanger *x)
{
  return step_fill_ghosts(&step_cpu, ctx, &((struct cpu_ctx *)ctx)->plan, u, x);
}

static int cpu_buffer_alloc(void *ctx, size_t bytes, int device, void **p)
{
  (void)ctx;
  if (device)
    FAIL(STENCIL_ERR, "the cpu backend has no device memory");
  *p = malloc(bytes ? bytes : 1);
  if (!*p)
    FAIL(STENCIL_ERR, "out of host memory: %zu bytes for a halo buffer", bytes);
  return STENCIL_OK;
}

static void cpu_buffer_release(void *ctx, void *p, int device)
{
  (void)ctx, (void)device;
  free(p);
}

static void *cpu_queue(void *ctx)
{
  (void)ctx;
  return NULL;
}

static int cpu_field_box(void *ctx, const struct layout *l, const struct box *b,
                         struct field_span *s)
{
  (void)ctx, (void)l, (void)b;
  memset(s, 0, sizeof *s);
  return 0; /* (host transports copy packed buffers only) */
}

const struct backend_ops backend_cpu = {
    .name = "cpu",
    .caps = {.device_memory = 0},
    .devices = cpu_devices,
    .halo_depth = cpu_halo_depth,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .describe = cpu_describe,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .prepare = cpu_prepare,
    .advance = cpu_advance,
    .fill_ghosts = cpu_fill_ghosts,
    .norms_begin = cpu_norms_begin,
    .norms_end = cpu_norms_end,
    .residual = cpu_residual,
    .sync = cpu_sync,
    .measure_bandwidth = cpu_measure_bandwidth,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_release = cpu_buffer_release,
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .copy_boxes = cpu_copy_boxes,
    .queue = cpu_queue,
    .queue_sync = cpu_sync,
    .field_box = cpu_field_box,
};
