/* The CUDA backend against the CPU backend, bit for bit (label gpu).
 *
 * For fp64 and fp32, 2D and 3D, ragged sizes (multiples of no tile), every kernel tier and
 * boundary kind: the same random field and ghost cells go into both backends, a few steps
 * run (update, then ghost cells: reflection on physical faces, fresh random values on
 * "received" faces), and the fields must agree in every bit. The CUDA side also updates the
 * block in pieces (shell slabs on the halo lane, the rest on the bulk lane) as the driver
 * does with --overlap on. Packs, unpacks and norms are compared too.
 *
 *   test_gpu_kernels           run the checks (exit 77 without a GPU, unless
 *                              STENCIL_REQUIRE_GPU=1, then 1)
 *   test_gpu_kernels --probe   only say whether a GPU is visible (exit 0, or 77 / 1 as above)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/backend.h"
#include "tests/unit/unit.h"

#define SKIP 77

/* Deterministic pseudo-random values in [0.5, 1.5) (xorshift64*). */
static double rnd(uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return 0.5 + (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void fill(void *p, int64_t n, int elem, uint64_t *s)
{
  for (int64_t i = 0; i < n; i++) {
    if (elem == 8)
      ((double *)p)[i] = rnd(s);
    else
      ((float *)p)[i] = (float)rnd(s);
  }
}

struct side {
  const struct backend_ops *ops;
  void *ctx;
  void *u, *v;
};

enum face_mode { FACES_DIRICHLET, FACES_NEUMANN, FACES_RECEIVED, FACES_MIXED };

struct gcase {
  int64_t n[3];
  int ndim, elem, tier;
  enum face_mode mode;
  int steps;
  int source; /* update with a source field f (v = stencil(u) + cf f) */
};

/* The ghost box beyond face (axis, side) over the interior range of the other axes. */
static struct box ghost_box(const struct layout *l, int axis, int side)
{
  struct box b = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  b.lo[axis] = side ? l->n[axis] : -l->halo[axis];
  b.hi[axis] = side ? l->n[axis] + l->halo[axis] : 0;
  return b;
}

/* What a face gets in this case: -1 received (random values), else a bc_kind. */
static int face_kind(const struct gcase *g, int axis, int side)
{
  switch (g->mode) {
  case FACES_DIRICHLET: return BC_DIRICHLET;
  case FACES_NEUMANN: return BC_NEUMANN;
  case FACES_RECEIVED: return -1;
  case FACES_MIXED: return axis == 0 ? -1 : side ? BC_NEUMANN : BC_DIRICHLET;
  }
  return -1;
}

/* Ghost cells of f on both backends: reflection, or the same random values. */
static int ghosts(struct side *sd, const struct layout *l, const struct gcase *g, void *const f[2],
                  uint64_t *seed, void *tmp)
{
  for (int a = 0; a < g->ndim; a++)
    for (int s = 0; s < 2; s++) {
      const int k = face_kind(g, a, s);
      const double value = 0.25 + 0.5 * a + 0.125 * s;
      if (k < 0) {
        struct box b = ghost_box(l, a, s);
        fill(tmp, box_count(&b), l->elem, seed);
        for (int i = 0; i < 2; i++)
          CHECK(sd[i].ops->unpack(sd[i].ctx, l, f[i], &b, tmp));
      } else {
        for (int i = 0; i < 2; i++)
          CHECK(sd[i].ops->boundary(sd[i].ctx, l, f[i], a, s, (enum bc_kind)k, value));
      }
    }
  return STENCIL_OK;
}

/* Shell slabs one cell deep on every face plus the rest, as the driver splits a block. */
static int split_boxes(const struct layout *l, int ndim, struct box *out, struct box *inner)
{
  struct box in = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  int nb = 0;
  for (int a = 0; a < ndim; a++)
    if (l->n[a] > 2)
      in.lo[a] = 1, in.hi[a] = l->n[a] - 1;
  *inner = in;
  for (int a = ndim - 1; a >= 0; a--) {
    if (in.lo[a] == 0)
      continue;
    struct box lo = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
    for (int b = a + 1; b < 3; b++)
      lo.lo[b] = in.lo[b], lo.hi[b] = in.hi[b];
    struct box hi = lo;
    lo.hi[a] = in.lo[a];
    hi.lo[a] = in.hi[a];
    out[nb++] = lo;
    out[nb++] = hi;
  }
  return nb;
}

static int run_case(const struct gcase *g, int split)
{
  struct layout l;
  const int halo[3] = {1, 1, g->ndim == 3 ? 1 : 0};
  layout_init(&l, g->n, halo, g->elem);
  struct stencil_coef coef;
  memset(&coef, 0, sizeof coef);
  coef.ndim = g->ndim;
  coef.radius = 1;
  const double c[3] = {0.11, 0.07, 0.05};
  double sum = 0;
  for (int a = 0; a < g->ndim; a++)
    coef.c[a][0] = c[a], sum += c[a];
  coef.c0 = 1.0 - 2.0 * sum;
  coef.cf = 0.0625;

  struct side sd[2] = {{&backend_cpu, NULL, NULL, NULL}, {&backend_cuda, NULL, NULL, NULL}};
  void *src[2] = {NULL, NULL};
  struct backend_options bo = {0, 0, g->tier, 1};
  const int64_t cells = l.n[0] * l.n[1] * l.n[2];
  const size_t bytes = (size_t)cells * (size_t)l.elem;
  /* a and b also take packs that reach into the ghost layer: padded size. */
  const size_t padded = (size_t)l.count * (size_t)l.elem;
  void *host = malloc(bytes), *a = malloc(padded), *b = malloc(padded);
  void *tmp = malloc((size_t)l.count * (size_t)l.elem);
  if (!host || !a || !b || !tmp)
    FAIL(STENCIL_ERR, "out of host memory");
  for (int i = 0; i < 2; i++) {
    CHECK(sd[i].ops->create(&sd[i].ctx, &bo));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &sd[i].u));
    CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &sd[i].v));
    if (g->source)
      CHECK(sd[i].ops->alloc(sd[i].ctx, &l, &src[i]));
  }
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(g->n[0] * 131 + g->n[1] * 7 + g->n[2]);
  if (g->source) {
    fill(host, cells, l.elem, &seed);
    for (int i = 0; i < 2; i++)
      CHECK(sd[i].ops->upload(sd[i].ctx, &l, src[i], host));
  }
  fill(host, cells, l.elem, &seed);
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->upload(sd[i].ctx, &l, sd[i].u, host));
  void *f[2] = {sd[0].u, sd[1].u};
  CHECK(ghosts(sd, &l, g, f, &seed, tmp));
  const struct box all = {{0, 0, 0}, {l.n[0], l.n[1], l.n[2]}};
  if (sd[1].ops->tune && !split) {
    /* Every candidate tile overwrites v; the last one's result is checked below too. */
    CHECK(sd[1].ops->tune(sd[1].ctx, &l, &coef, sd[1].u, sd[1].v, &all));
    if (g->tier == 1) /* tier 1 has nothing to tune: tune leaves v alone */
      CHECK(sd[1].ops->update(sd[1].ctx, &l, &coef, sd[1].u, NULL, sd[1].v, &all));
    CHECK(sd[0].ops->update(sd[0].ctx, &l, &coef, sd[0].u, NULL, sd[0].v, &all));
    CHECK(sd[0].ops->download(sd[0].ctx, &l, a, sd[0].v));
    CHECK(sd[1].ops->download(sd[1].ctx, &l, b, sd[1].v));
    EXPECT(memcmp(a, b, bytes) == 0, "after tune: %lldx%lldx%lld fp%d tier %d tile %s",
           (long long)l.n[0], (long long)l.n[1], (long long)l.n[2], 8 * l.elem, g->tier,
           getenv("STENCIL_CUDA_TILE"));
  }
  struct box shell[6], inner;
  const int nb = split_boxes(&l, g->ndim, shell, &inner);
  for (int t = 0; t < g->steps; t++) {
    CHECK(sd[0].ops->update(sd[0].ctx, &l, &coef, sd[0].u, src[0], sd[0].v, &all));
    if (split) {
      CHECK(sd[1].ops->lane_fence(sd[1].ctx));
      CHECK(sd[1].ops->lane_select(sd[1].ctx, LANE_HALO));
      for (int i = 0; i < nb; i++)
        CHECK(sd[1].ops->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &shell[i]));
      CHECK(sd[1].ops->lane_select(sd[1].ctx, LANE_BULK));
      CHECK(sd[1].ops->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &inner));
      CHECK(sd[1].ops->lane_select(sd[1].ctx, LANE_HALO));
      CHECK(sd[1].ops->lane_fence(sd[1].ctx));
    } else {
      CHECK(sd[1].ops->update(sd[1].ctx, &l, &coef, sd[1].u, src[1], sd[1].v, &all));
    }
    void *nf[2] = {sd[0].v, sd[1].v};
    CHECK(ghosts(sd, &l, g, nf, &seed, tmp));
    for (int i = 0; i < 2; i++) {
      void *s = sd[i].u;
      sd[i].u = sd[i].v;
      sd[i].v = s;
    }
  }
  CHECK(sd[1].ops->sync(sd[1].ctx));
  for (int i = 0; i < 2; i++)
    CHECK(sd[i].ops->download(sd[i].ctx, &l, i ? b : a, sd[i].u));
  int64_t first = -1;
  for (int64_t i = 0; i < cells && first < 0; i++)
    if (memcmp((char *)a + i * l.elem, (char *)b + i * l.elem, (size_t)l.elem) != 0)
      first = i;
  EXPECT(first < 0,
         "%lldx%lldx%lld fp%d tier %d tile '%s' faces %d %s: first difference at cell %lld (x "
         "%lld y %lld z %lld): cpu %.17g cuda %.17g",
         (long long)l.n[0], (long long)l.n[1], (long long)l.n[2], 8 * l.elem, g->tier,
         getenv("STENCIL_CUDA_TILE"), g->mode, split ? "split" : "whole", (long long)first,
         (long long)(first % l.n[0]), (long long)(first / l.n[0] % l.n[1]),
         (long long)(first / l.n[0] / l.n[1]),
         first < 0     ? 0.0
         : l.elem == 8 ? ((double *)a)[first]
                       : ((float *)a)[first],
         first < 0     ? 0.0
         : l.elem == 8 ? ((double *)b)[first]
                       : ((float *)b)[first]);
  /* A pack that reaches into the ghost layer, and the norms. */
  struct box pb = {{-1, 0, 0}, {l.n[0] > 3 ? 3 : l.n[0], l.n[1], l.n[2]}};
  CHECK(sd[0].ops->pack(sd[0].ctx, &l, sd[0].u, &pb, a));
  CHECK(sd[1].ops->pack(sd[1].ctx, &l, sd[1].u, &pb, b));
  CHECK(sd[1].ops->sync(sd[1].ctx));
  EXPECT(memcmp(a, b, (size_t)box_count(&pb) * (size_t)l.elem) == 0, "pack differs");
  struct norms na, nb2;
  CHECK(sd[0].ops->norms(sd[0].ctx, &l, sd[0].u, &na));
  CHECK(sd[1].ops->norms(sd[1].ctx, &l, sd[1].u, &nb2));
  EXPECT(fabs(na.sum - nb2.sum) <= 1e-12 * fabs(na.sum) && na.maxabs == nb2.maxabs &&
             fabs(na.sumsq - nb2.sumsq) <= 1e-12 * na.sumsq && na.nonfinite == nb2.nonfinite,
         "norms differ: sum %.17g vs %.17g, max %.17g vs %.17g", na.sum, nb2.sum, na.maxabs,
         nb2.maxabs);
  for (int i = 0; i < 2; i++) {
    sd[i].ops->release(sd[i].ctx, sd[i].u);
    sd[i].ops->release(sd[i].ctx, sd[i].v);
    if (src[i])
      sd[i].ops->release(sd[i].ctx, src[i]);
    sd[i].ops->destroy(sd[i].ctx);
  }
  free(host), free(a), free(b), free(tmp);
  return STENCIL_OK;
}

/* A NaN planted in the field is counted by the norms, as on the CPU. */
static int nonfinite_case(void)
{
  struct layout l;
  const int64_t n[3] = {17, 9, 5};
  const int halo[3] = {1, 1, 1};
  layout_init(&l, n, halo, 8);
  struct backend_options bo = {0, 0, 0, 1};
  void *ctx = NULL, *u = NULL;
  CHECK(backend_cuda.create(&ctx, &bo));
  CHECK(backend_cuda.alloc(ctx, &l, &u));
  double *h = calloc((size_t)(n[0] * n[1] * n[2]), sizeof *h);
  if (!h)
    FAIL(STENCIL_ERR, "out of host memory");
  h[100] = NAN;
  h[101] = INFINITY;
  h[7] = -3.0;
  CHECK(backend_cuda.upload(ctx, &l, u, h));
  struct norms nm;
  CHECK(backend_cuda.norms(ctx, &l, u, &nm));
  EXPECT(nm.nonfinite == 2 && nm.maxabs == 3.0 && nm.sum == -3.0, "nonfinite %lld max %g sum %g",
         (long long)nm.nonfinite, nm.maxabs, nm.sum);
  backend_cuda.release(ctx, u);
  backend_cuda.destroy(ctx);
  free(h);
  return STENCIL_OK;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  log_init(0, 1, 1);
  int count = 0;
  char why[256];
  backend_cuda.devices(&count, why, sizeof why);
  if (count == 0) {
    const char *req = getenv("STENCIL_REQUIRE_GPU");
    const int required = req && strcmp(req, "1") == 0;
    printf("test_gpu_kernels: no CUDA device (%s)%s\n", why,
           required ? "; STENCIL_REQUIRE_GPU=1: failing" : "; skipped");
    MPI_Finalize();
    return required ? 1 : SKIP;
  }
  if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
    printf("test_gpu_kernels: %d CUDA device%s\n", count, count > 1 ? "s" : "");
    MPI_Finalize();
    return 0;
  }
  const int64_t sizes3[][3] = {{37, 29, 23}, {70, 9, 131}, {5, 3, 2}, {1, 6, 4}};
  const int64_t sizes2[][3] = {{133, 67, 1}, {4, 301, 1}};
  /* Tier 2 tuned over every form, then with each form forced (scalar, vector, vector with the
   * deeper queue; small z chunks so a block streams through several). */
  static const char *const forms[] = {"", "32x4x8x0", "32x2x8x1", "32x4x16x2", "64x1x4x1"};
  const int nforms = (int)(sizeof forms / sizeof forms[0]);
  for (int prec = 0; prec < 2; prec++)
    for (int tier = 1; tier <= 2 + nforms - 1; tier++)
      for (int mode = 0; mode < 4; mode++) {
        const int form = tier > 2 ? tier - 2 : 0;
        setenv("STENCIL_CUDA_TILE", forms[form], 1);
        for (int s = 0; s < 4; s++) {
          struct gcase g = {{sizes3[s][0], sizes3[s][1], sizes3[s][2]},
                            3,
                            prec ? 4 : 8,
                            tier > 2 ? 2 : tier,
                            (enum face_mode)mode,
                            4,
                            mode == FACES_MIXED};
          CHECK(run_case(&g, 0) == STENCIL_OK ? 0 : 1);
          CHECK(run_case(&g, 1) == STENCIL_OK ? 0 : 1);
        }
        for (int s = 0; s < 2; s++) {
          struct gcase g = {{sizes2[s][0], sizes2[s][1], 1},
                            2,
                            prec ? 4 : 8,
                            tier > 2 ? 2 : tier,
                            (enum face_mode)mode,
                            4,
                            mode == FACES_MIXED};
          CHECK(run_case(&g, 0) == STENCIL_OK ? 0 : 1);
          CHECK(run_case(&g, 1) == STENCIL_OK ? 0 : 1);
        }
      }
  unsetenv("STENCIL_CUDA_TILE");
  CHECK(nonfinite_case() == STENCIL_OK ? 0 : 1);
  const int rc = unit_finish("test_gpu_kernels");
  MPI_Finalize();
  return rc;
}
