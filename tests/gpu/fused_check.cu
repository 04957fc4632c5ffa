/* Self-checking harness for the fused kernels (kernels/cuda/fused.h: the 2D warp-strip and
 * the 3D warp-row kernel), on a GPU or on the CPU emulation of CUDA (tests/emu).
 *
 *   fused_check check [cases] [seed]      fixed and random cases: fused launches against
 *                                         single steps on the host (the CPU backend's
 *                                         semantics), bitwise, N steps (N not a multiple of
 *                                         T too); residual sums to 1e-12
 *   fused_check one [options]             one case (for compute-sanitizer runs); fails when
 *                                         no kernel can run it (no plan)
 *   fused_check plans                     host only: which faces the 3D warp-row plans read
 *                                         through, which plans launch plane ranges, and the
 *                                         wave model of the chunks
 *
 * Options of `one`: --ndim 2|3 --n X Y [Z] --prec f32|f64 --radius r --bc NAME (bc_name) --T t
 *   --cluster cx cy (3D) --chunk c --steps N --halo H --source --residual MASK
 *
 * Fields: the padded layout of kernels/layout.h (3D: rows aligned as the device layout's),
 * random values in [-1, 1) (never zeros). A single step is the CPU backend's: the ghost cells
 * filled (periodic axes copied, axis by axis with edges and corners; reflecting faces r deep,
 * ghost m = 2g - u or u of the cell m - 1 inside), then the update of kernels/point.h on the
 * interior, with the source term where there is one. Before each fused launch the ghost cells
 * are filled T r deep, axis by axis: the wraps, and the faces the plan takes as mirrored halo
 * faces as their mirror (the kernel reads them through itself, or from memory where it does
 * not; fused_faces_of); other reflecting faces the kernels apply themselves.
 * Exit status: 0 all passed, 1 a failure, 2 usage, 77 no GPU (skipped; STENCIL_REQUIRE_GPU=1
 * makes that a failure). */
#include "kernels/cuda/cuda_rt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>

extern "C" {
#include "kernels/cuda/fused.h"
}
#include "kernels/cuda/fused_model.h" /* fm_wave_chunks, fm_chunks_time, fm_signal_times */
#include "kernels/cuda/strip2d.cuh"   /* STRIP_STEPS_R */
#include "kernels/cuda/tile3d.cuh"    /* TILE3D_MAX_STEPS */

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "fused_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
              cudaGetErrorString(e_));                                                             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* ---- problems ------------------------------------------------------------------------- */

/* Face sets: every face Dirichlet of a nonzero value; periodic; Neumann and Dirichlet 0
 * alternating; x periodic, y Dirichlet, z Neumann; Dirichlet 0 all round; Dirichlet 0 and
 * Neumann alternating but one Dirichlet face of value 1 (a hot wall: x_lo, beside a Dirichlet-0
 * y_hi and z_lo); two hot walls, x_hi and y_lo, beside a Dirichlet-0 x_lo and z_hi and a
 * Neumann y_hi and z_lo. */
enum bc_set {
  BC_DIRICHLET_ALL,
  BC_PERIODIC_ALL,
  BC_NEUMANN_MIX,
  BC_MIXED,
  BC_DIRICHLET0,
  BC_HOT_WALL,
  BC_HOT_WALLS,
  BC_COUNT
};
static const char *bc_name[] = {"dirichlet",  "periodic", "neumann", "mixed",
                                "dirichlet0", "hotwall",  "hotwalls"};

struct problem {
  int ndim, elem, halo, radius, source;
  int64_t n[3];
  int bc;
  struct block_faces bf; /* the physical faces of the block (one rank: periodic = wrapped) */
  struct fused_faces faces;
  int mirrored; /* fused_faces_of: reflecting faces taken as mirrored halo faces */
  struct stencil_coef coef;
  struct layout lay;
};

static uint64_t rng_state = 12345;
static uint64_t rng_next(void)
{
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static int rng_int(int lo, int hi) /* [lo, hi] */
{
  return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}
static double rng_unit(void)
{
  return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static void problem_init(struct problem *p, int ndim, const int64_t n[3], int elem, int bc,
                         int halo, int radius, int source)
{
  memset(p, 0, sizeof *p);
  p->ndim = ndim;
  p->elem = elem;
  p->halo = halo;
  p->bc = bc;
  p->radius = radius;
  p->source = source;
  for (int a = 0; a < 3; a++)
    p->n[a] = a < ndim ? n[a] : 1;
  const double g[3][2] = {{0.25, -0.5}, {0.75, 0.125}, {-0.375, 1.0}};
  for (int a = 0; a < ndim; a++)
    for (int s = 0; s < 2; s++) {
      enum bc_kind k = BC_DIRICHLET;
      double v = g[a][s];
      if (bc == BC_PERIODIC_ALL || (bc == BC_MIXED && a == 0))
        k = BC_PERIODIC;
      else if (bc == BC_NEUMANN_MIX || bc == BC_HOT_WALL)
        k = (a + s) % 2 ? BC_NEUMANN : BC_DIRICHLET;
      else if (bc == BC_MIXED && a == 2)
        k = BC_NEUMANN;
      if (bc == BC_NEUMANN_MIX || bc == BC_DIRICHLET0 || bc == BC_HOT_WALL)
        v = 0;
      if (bc == BC_HOT_WALL && a == 0 && s == 0)
        v = 1;
      if (bc == BC_HOT_WALLS) {
        k = (a == 1 && s == 1) || (a == 2 && s == 0) ? BC_NEUMANN : BC_DIRICHLET;
        v = a == 0 && s == 1 ? -0.5 : a == 1 && s == 0 ? 0.75 : 0;
      }
      p->bf.kind[a][s] = k;
      p->bf.value[a][s] = k == BC_DIRICHLET ? v : 0;
      p->bf.exchanged[a][s] = p->bf.wrapped[a][s] = k == BC_PERIODIC;
    }
  for (int s = 0; s < 2; s++) /* z of a 2D problem: a wrap of one plane, never read */
    p->bf.kind[2][s] = ndim == 3 ? p->bf.kind[2][s] : BC_PERIODIC;
  /* c[a][m - 1] = alpha dt w_m / h_a^2 with slightly irrational values; c0 = 1 - 2 sum. */
  p->coef.ndim = ndim;
  p->coef.radius = radius;
  const double c[3] = {0.1113, 0.0871, 0.0659}, w[4] = {1.0, -0.083, 0.0117, -0.0019};
  double sum = 0;
  for (int a = 0; a < ndim; a++)
    for (int m = 0; m < radius; m++) {
      p->coef.c[a][m] = c[a] * (1 + 0.01 * a) * w[m] / radius;
      sum += p->coef.c[a][m];
    }
  p->coef.c0 = 1 - 2 * sum;
  p->coef.cf = 0.0371;
  const int64_t nn[3] = {p->n[0], p->n[1], p->n[2]};
  const int hh[3] = {halo, halo, ndim == 3 ? halo : 0};
  layout_init(&p->lay, nn, hh, elem);
  fused_faces_of(ndim, fused_mirrors(&p->lay, &p->coef, source), &p->bf, &p->faces, &p->mirrored);
}

/* Rows and interior rows on 16-byte boundaries, as the CUDA backend's device layout has them
 * (the warp-row kernel needs it): x ghost layers and rows padded to whole vectors. */
static void align_rows(struct problem *p)
{
  struct layout *l = &p->lay;
  const int A = 16 / l->elem;
  l->halo[0] = (l->halo[0] + A - 1) / A * A;
  l->stride[1] = (l->n[0] + 2 * l->halo[0] + A - 1) / A * A;
  l->stride[2] = l->stride[1] * (l->n[1] + 2 * l->halo[1]);
  l->count = l->stride[2] * (l->n[2] + 2 * l->halo[2]);
}

/* ---- single steps on the host (the CPU backend's semantics) ------------------------------ */

/* The ghost cells `depth` deep, axis by axis (later axes span the earlier ones' ghosts):
 * periodic axes copied; reflecting faces by ghost m = 2g - u or u of the cell m - 1 inside
 * (Dirichlet or Neumann: the CPU backend's boundary(), and the mirror of a homogeneous face
 * at any depth). */
template <typename REAL> static void host_fill(const struct problem *p, REAL *u, int depth)
{
  const struct layout *l = &p->lay;
  for (int a = 0; a < p->ndim; a++) {
    int64_t lo[3], hi[3];
    for (int b = 0; b < 3; b++) {
      const int64_t h = b < a && b < p->ndim ? depth : 0;
      lo[b] = -h;
      hi[b] = l->n[b] + h;
    }
    for (int s = 0; s < 2; s++) {
      const enum bc_kind k = p->bf.kind[a][s];
      const REAL two_g = (REAL)(2.0 * p->bf.value[a][s]);
      for (int m = 1; m <= depth; m++) {
        int64_t c[3], src;
        const int64_t at = s ? l->n[a] - 1 + m : -m;
        if (k == BC_PERIODIC)
          src = ((at % l->n[a]) + l->n[a]) % l->n[a];
        else
          src = s ? l->n[a] - m : m - 1;
        if (src < 0 || src >= l->n[a])
          continue; /* (a reflection deeper than the block: never read) */
        for (c[2] = a == 2 ? 0 : lo[2]; c[2] < (a == 2 ? 1 : hi[2]); c[2]++)
          for (c[1] = a == 1 ? 0 : lo[1]; c[1] < (a == 1 ? 1 : hi[1]); c[1]++)
            for (c[0] = a == 0 ? 0 : lo[0]; c[0] < (a == 0 ? 1 : hi[0]); c[0]++) {
              int64_t d[3] = {c[0], c[1], c[2]}, f[3] = {c[0], c[1], c[2]};
              d[a] = at;
              f[a] = src;
              const REAL in = u[layout_index(l, f[0], f[1], f[2])];
              u[layout_index(l, d[0], d[1], d[2])] = k == BC_DIRICHLET ? two_g - in : in;
            }
      }
    }
  }
}

/* One step u -> v on the interior (u's ghosts filled r deep): kernels/point.h's update. */
template <typename REAL>
static void host_update(const struct problem *p, const REAL *u, const REAL *f, REAL *v)
{
  const struct layout *l = &p->lay;
  REAL c[3][4];
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      c[a][m] = (REAL)p->coef.c[a][m];
  for (int64_t k = 0; k < l->n[2]; k++)
    for (int64_t j = 0; j < l->n[1]; j++)
      for (int64_t i = 0; i < l->n[0]; i++) {
        const int64_t at = layout_index(l, i, j, k);
        REAL acc = stencil_star(u + at, l->stride[1], l->stride[2], p->ndim == 3, p->radius,
                                (REAL)p->coef.c0, c);
        if (f)
          acc = stencil_source((REAL)p->coef.cf, f[at], acc);
        v[at] = acc;
      }
}

/* The sum over the interior of (v - u)^2 (the backends' residual()). */
template <typename REAL>
static double host_sumsq(const struct problem *p, const REAL *u, const REAL *v)
{
  const struct layout *l = &p->lay;
  double sum = 0;
  for (int64_t k = 0; k < l->n[2]; k++)
    for (int64_t j = 0; j < l->n[1]; j++)
      for (int64_t i = 0; i < l->n[0]; i++) {
        const int64_t at = layout_index(l, i, j, k);
        const double d = stencil_residual(v[at], u[at]);
        sum += d * d;
      }
  return sum;
}

template <typename REAL> static void random_field(const struct problem *p, REAL *u)
{
  for (int64_t i = 0; i < p->lay.count; i++)
    u[i] = (REAL)(2 * rng_unit() - 1);
}

/* First differing interior cell of a and b, or -1. */
template <typename REAL>
static int64_t compare(const struct problem *p, const REAL *a, const REAL *b, int64_t *where)
{
  const struct layout *l = &p->lay;
  int64_t bad = 0;
  for (int64_t k = 0; k < l->n[2]; k++)
    for (int64_t j = 0; j < l->n[1]; j++)
      for (int64_t i = 0; i < l->n[0]; i++) {
        const int64_t at = layout_index(l, i, j, k);
        if (memcmp(&a[at], &b[at], sizeof(REAL)) != 0) {
          if (bad++ == 0) {
            where[0] = i;
            where[1] = j;
            where[2] = k;
          }
        }
      }
  return bad;
}

/* ---- one case ------------------------------------------------------------------------ */

struct shape {
  int T, cx, cy, chunk; /* 0: from the plan */
  unsigned residual;    /* launches summing the residuals of these levels (with a source) */
  int parts;            /* 3D: also a launch in parts (bits 0-3: the tiles of the x and y faces,
                           bit 2 axis + side; 4, 5: the planes of the z faces), check_parts */
};

static void case_name(const struct problem *p, const struct shape *s, int steps, char *buf,
                      size_t len)
{
  snprintf(buf, len,
           "%dD %lldx%lldx%lld %s r=%d bc=%s%s halo=%d T=%d cluster=%dx%d chunk=%d N=%d res=%u "
           "parts=%d",
           p->ndim, (long long)p->n[0], (long long)p->n[1], (long long)p->n[2],
           p->elem == 4 ? "f32" : "f64", p->radius, bc_name[p->bc], p->source ? " source" : "",
           p->halo, s->T, s->cx, s->cy, s->chunk, steps, s->residual, s->parts);
}

static int make_plan(const struct problem *p, const struct shape *s, int device,
                     struct fused_plan *pl)
{
  struct fused_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.steps = s->T;
  cfg.cluster[0] = s->cx;
  cfg.cluster[1] = s->cy;
  cfg.chunk = s->chunk;
  return fused_plan_block(&p->lay, &p->coef, p->source, &p->faces, &cfg, device, pl);
}

static int no_plan; /* cases skipped for want of a plan (the kernel cannot run them) */

/* A launch of T steps in parts as the backend runs them (fused_launch_part): the
 * shell (the planes h = halo deep at the z faces in parts bits 4, 5; on the planes between, the
 * tiles of the x and y faces in bits 0-3) and the rest, each into a field of NaN bytes. Every
 * interior cell is stored by exactly one of the two, bitwise as the whole launch stores it,
 * and by the shell where the faces in parts send it (within the halo of one). Bits the plan
 * cannot split are dropped. Returns 1 on a failure (printed). */
template <typename REAL>
static int check_parts(const struct problem *p, const struct fused_plan *pl, int parts,
                       const REAL *in, const REAL *fd, const char *name)
{
  const struct layout *l = &p->lay;
  const int64_t nz = l->n[2], h = l->halo[2];
  if (!fused_splits_xy(pl))
    parts &= ~15;
  if (!fused_splits_z(pl) || nz <= 2 * h)
    parts &= ~48;
  if (!parts)
    return 0;
  const int lo = parts >> 4 & 1, hi = parts >> 5 & 1, xy = parts & 15, T = pl->steps;
  const size_t bytes = (size_t)l->count * sizeof(REAL);
  REAL *a, *b, *out[3]; /* whole, shell, rest */
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemcpy(a, in, bytes, cudaMemcpyHostToDevice));
  int bad = 0;
  for (int k = 0; k < 3; k++) {
    CK(cudaMemset(b, 0xff, bytes));
    bad |= k == 0 ? fused_launch(pl, a, fd, b, T, NULL)
                  : fused_launch_part(pl, a, fd, b, T, parts >> 4, xy, k == 1, NULL);
    CK(cudaDeviceSynchronize());
    out[k] = (REAL *)malloc(bytes);
    CK(cudaMemcpy(out[k], b, bytes, cudaMemcpyDeviceToHost));
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  REAL nan_bytes;
  memset(&nan_bytes, 0xff, sizeof nan_bytes);
  int64_t wrong = 0, w[3] = {0, 0, 0};
  const char *why = "";
  for (int64_t z = 0; z < nz; z++)
    for (int64_t y = 0; y < l->n[1]; y++)
      for (int64_t x = 0; x < l->n[0]; x++) {
        const int64_t i = layout_index(l, x, y, z);
        const int in_shell = memcmp(&out[1][i], &nan_bytes, sizeof(REAL)) != 0;
        const int in_rest = memcmp(&out[2][i], &nan_bytes, sizeof(REAL)) != 0;
        const REAL *got = in_shell ? &out[1][i] : &out[2][i];
        const int sent = (lo && z < h) || (hi && z >= nz - h) || ((xy & 1) && x < l->halo[0]) ||
                         ((xy & 2) && x >= l->n[0] - l->halo[0]) || ((xy & 4) && y < l->halo[1]) ||
                         ((xy & 8) && y >= l->n[1] - l->halo[1]);
        const char *e = in_shell == in_rest ? (in_shell ? "stored twice" : "never stored")
                        : memcmp(got, &out[0][i], sizeof(REAL)) ? "not the whole launch's value"
                        : sent && !in_shell                     ? "sent but not in the shell"
                                                                : NULL;
        if (e && !wrong++) {
          why = e;
          w[0] = x, w[1] = y, w[2] = z;
        }
      }
  for (int k = 0; k < 3; k++)
    free(out[k]);
  if (wrong || bad)
    printf("FAIL  %s: launch in parts %d: %s%lld cells wrong, first (%lld,%lld,%lld): %s\n", name,
           parts, bad ? "a launch failed; " : "", (long long)wrong, (long long)w[0],
           (long long)w[1], (long long)w[2], why);
  return wrong || bad;
}

/* Run N steps by reference and fused; 0 = bitwise equal (and residual sums within 1e-12). */
template <typename REAL>
static int run_case(const struct problem *p, const struct shape *s, int steps, int verbose)
{
  char name[300];
  case_name(p, s, steps, name, sizeof name);
  struct fused_plan pl;
  if (make_plan(p, s, 0, &pl)) {
    printf("SKIP  %s (no plan)\n", name);
    no_plan++;
    return 0;
  }
  const int rsteps = s->residual ? fused_residual_steps(&pl) : 0;
  if (s->residual && rsteps < 1) {
    printf("SKIP  %s (the plan sums no residuals)\n", name);
    no_plan++;
    return 0;
  }
  const size_t bytes = (size_t)p->lay.count * sizeof(REAL);
  REAL *init = (REAL *)malloc(bytes), *ref = (REAL *)malloc(bytes), *tmp = (REAL *)malloc(bytes),
       *got = (REAL *)malloc(bytes), *fh = (REAL *)malloc(bytes);
  random_field(p, init);
  random_field(p, fh);
  host_fill(p, fh, p->halo); /* (the driver exchanges f's halo once) */
  const REAL *f = p->source ? fh : NULL;
  int status = 0;
  /* The reference, with the residual sum of every field it passes through. */
  double *sums = (double *)calloc((size_t)steps + 1, sizeof(double));
  memcpy(ref, init, bytes);
  memcpy(tmp, init, bytes);
  for (int n = 0; n < steps; n++) {
    host_fill(p, ref, p->radius);
    host_update(p, ref, f, tmp);
    sums[n] = host_sumsq(p, ref, tmp);
    std::swap(ref, tmp);
  }
  /* The fused launches, each on the host's field with its ghosts filled T r deep. */
  REAL *a, *b, *fd = NULL;
  double *scratch = NULL, *dsums = NULL;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  if (f) {
    CK(cudaMalloc(&fd, bytes));
    CK(cudaMemcpy(fd, f, bytes, cudaMemcpyHostToDevice));
  }
  if (rsteps) {
    CK(cudaMalloc(&scratch, (fused_scratch(&pl) + 8) * sizeof(double)));
    dsums = scratch + fused_scratch(&pl);
  }
  memcpy(got, init, bytes);
  double worst = 0;
  for (int done = 0; done < steps;) {
    const int most = rsteps ? rsteps : pl.steps;
    const int t = steps - done < most ? steps - done : most;
    host_fill(p, got, pl.steps * p->radius);
    CK(cudaMemcpy(a, got, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, got, bytes, cudaMemcpyHostToDevice));
    const unsigned mask = s->residual & ((1u << t) - 1u);
    if (rsteps ? fused_launch_residual(&pl, a, fd, b, t, mask, scratch, dsums, NULL)
               : fused_launch(&pl, a, fd, b, t, NULL))
      status = 1;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, b, bytes, cudaMemcpyDeviceToHost));
    if (rsteps) {
      double ds[8];
      CK(cudaMemcpy(ds, dsums, sizeof ds, cudaMemcpyDeviceToHost));
      for (int l = 0; l < t; l++) {
        const double want = mask >> l & 1u ? sums[done + l] : 0.0;
        const double err = fabs(ds[l] - want) / (fabs(want) > 1e-300 ? fabs(want) : 1.0);
        worst = err > worst ? err : worst;
      }
    }
    done += t;
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  int parts_bad = 0;
  if (s->parts && p->ndim == 3) {
    memcpy(tmp, init, bytes);
    host_fill(p, tmp, pl.steps * p->radius);
    parts_bad = check_parts(p, &pl, s->parts, tmp, fd, name);
  }
  CK(cudaFree(fd));
  CK(cudaFree(scratch));
  int64_t w[3];
  const int64_t bad = compare(p, ref, got, w);
  if (bad) {
    const int64_t at = layout_index(&p->lay, w[0], w[1], w[2]);
    printf("FAIL  %s: %lld cells differ, first (%lld,%lld,%lld): %.17g vs reference %.17g\n", name,
           (long long)bad, (long long)w[0], (long long)w[1], (long long)w[2], (double)got[at],
           (double)ref[at]);
    status = 1;
  } else if (worst > 1e-12) {
    printf("FAIL  %s: a residual sum differs by %.3g (relative)\n", name, worst);
    status = 1;
  } else if (status) {
    printf("FAIL  %s: kernel error\n", name);
  } else if (verbose && !parts_bad) {
    char d[400];
    fused_describe(&pl, d, sizeof d);
    printf("ok    %s [%s]\n", name, d);
  }
  status |= parts_bad;
  free(init);
  free(ref);
  free(tmp);
  free(got);
  free(fh);
  free(sums);
  return status;
}

static int run_any(const struct problem *p, const struct shape *s, int steps, int verbose)
{
  return p->elem == 8 ? run_case<double>(p, s, steps, verbose)
                      : run_case<float>(p, s, steps, verbose);
}

/* The T a plan of this problem may have (the kernels built). */
static int most_steps(int ndim, int elem, int radius, int source)
{
  return ndim == 3 ? TILE3D_STEPS_R(radius) : STRIP_STEPS_R(elem, radius, source);
}

/* A random case: small, often ragged; every face set, radius 1..4, with and without a source
 * (residual sums sometimes), one CTA or (radius 1) clusters along y in 3D. */
static void random_case(struct problem *p, struct shape *s, int *steps)
{
  const int ndim = rng_int(2, 3), elem = rng_int(0, 1) ? 8 : 4;
  const int radius = rng_int(1, 4), bc = rng_int(0, BC_COUNT - 1);
  const int source = rng_int(0, 2) == 0;
  memset(s, 0, sizeof *s);
  s->T = rng_int(1, most_steps(ndim, elem, radius, source));
  const int reach = s->T * radius; /* every axis holds at least T r cells */
  int64_t n[3];
  if (ndim == 3) {
    for (int a = 0; a < 3; a++)
      n[a] = reach + (rng_int(0, 5) == 0 ? rng_int(0, 4) : rng_int(2, 50));
    s->cx = radius == 1 ? rng_int(0, 1) : 0;
    s->cy = radius == 1 ? rng_int(0, 4) : 0;
  } else {
    n[0] = reach + (rng_int(0, 5) == 0 ? rng_int(0, 6) : rng_int(5, 600));
    n[1] = reach + (rng_int(0, 5) == 0 ? rng_int(0, 4) : rng_int(3, 80));
    n[2] = 1;
  }
  s->chunk = rng_int(0, 3) == 0 ? rng_int(1, reach + 1) : rng_int(2, 24);
  const int halo = reach + (rng_int(0, 3) == 0 ? rng_int(1, 3) : 0);
  problem_init(p, ndim, n, elem, bc, halo, radius, source);
  if (ndim == 3)
    align_rows(p);
  if (source && rng_int(0, 1))
    s->residual = (unsigned)rng_int(1, 255);
  if (ndim == 3 && rng_int(0, 1))
    s->parts = rng_int(1, 63);
  *steps = rng_int(1, 3 * s->T + 2);
}

/* Fixed cases on small ragged grids: every face set and radius, with and without a source
 * (residual sums too), T = 1 and the most built (radius 1 in 2D: 1, 5 and 8); 3D radius 1
 * also with clusters of 1 x 2 and 1 x 3 where they can run (halo faces); both precisions. */
static int fixed_cases(int verbose)
{
  int fails = 0, runs = 0;
  for (int elem = 4; elem <= 8; elem += 4)
    for (int ndim = 2; ndim <= 3; ndim++)
      for (int radius = 1; radius <= 4; radius++)
        for (int bc = 0; bc < BC_COUNT; bc++) {
          int Ts[3];
          for (int k = 0; k < 3; k++) {
            const int most = most_steps(ndim, elem, radius, (k + bc) % 2);
            Ts[k] = k == 0 ? 1 : k == 1 && ndim == 2 && radius == 1 ? 5 : most;
          }
          for (int k = 0; k < 3; k++) {
            const int T = Ts[k];
            if (k > 0 && T == Ts[k - 1])
              continue;
            struct problem p;
            struct shape s;
            memset(&s, 0, sizeof s);
            const int64_t n3[3] = {45, 37, 23}, n2[3] = {333, 57, 1};
            s.T = T;
            s.chunk = 9;
            const int source = (k + bc) % 2;
            problem_init(&p, ndim, ndim == 3 ? n3 : n2, elem, bc, T * radius, radius, source);
            if (ndim == 3)
              align_rows(&p);
            const int clusters = ndim == 3 && radius == 1 && !source &&
                                 (bc == BC_PERIODIC_ALL || bc == BC_DIRICHLET0);
            for (int cy = 1; cy <= (clusters ? 3 : 1); cy++) {
              s.cx = ndim == 3 ? 1 : 0;
              s.cy = ndim == 3 ? cy : 0;
              s.residual = source && k != 1 ? 0xffu : 0;
              /* 3D, the most steps: also a launch in parts, every face sending */
              s.parts = ndim == 3 && k == 1 && cy == 1 ? 63 : 0;
              fails += run_any(&p, &s, 2 * T + 1, verbose);
              runs++;
            }
          }
        }
  /* Faces of nonzero value where the face tiles apply them (n along x whole vectors, no
   * source): radius 1's hot walls (the plain form's face tiles), radius 2's also with every
   * face of nonzero value (the z walls' planes) and beside a wrap; launches of the T built and
   * a shorter one. */
  const int walls[] = {BC_HOT_WALL, BC_HOT_WALLS, BC_DIRICHLET_ALL, BC_MIXED};
  for (int elem = 4; elem <= 8; elem += 4)
    for (int radius = 1; radius <= 2; radius++)
      for (int k = 0; k < (radius == 1 ? 2 : 4); k++) {
        struct problem p;
        struct shape s;
        memset(&s, 0, sizeof s);
        const int64_t n3[3] = {248, 37, 23}; /* (face tiles and others) */
        s.T = TILE3D_STEPS_R(radius);
        s.chunk = 9;
        s.cx = s.cy = 1;
        problem_init(&p, 3, n3, elem, walls[k], s.T * radius, radius, 0);
        align_rows(&p);
        fails += run_any(&p, &s, 2 * s.T + 1, verbose);
        runs++;
      }
  /* A source with homogeneous faces read through (n along x whole vectors): f read through
   * as u, its signs beside Dirichlet-0 faces and its mirror beside Neumann ones; every radius,
   * launches of the T built and shorter ones, with and without residual sums, whole and in
   * parts. */
  for (int elem = 4; elem <= 8; elem += 4)
    for (int radius = 1; radius <= 4; radius++)
      for (int bc = BC_PERIODIC_ALL; bc <= BC_DIRICHLET0; bc++) {
        if (bc == BC_MIXED)
          continue;
        const int TB = radius == 1 ? TILE3D_SRC_STEPS : TILE3D_STEPS_R(radius);
        for (int T = radius == 1 ? 2 : 1; T <= TB; T++) {
          struct problem p;
          struct shape s;
          memset(&s, 0, sizeof s);
          const int64_t n3[3] = {248, 37, 23};
          s.T = T;
          s.chunk = 9;
          s.cx = s.cy = 1;
          problem_init(&p, 3, n3, elem, bc, TB * radius, radius, 1);
          align_rows(&p);
          s.residual = T == TB ? 0x5u : 0;
          s.parts = T == TB ? 0 : 63;
          fails += run_any(&p, &s, 3 * T + 1, verbose);
          runs++;
        }
      }
  printf("fixed cases: %d run, %d failed\n", runs, fails);
  return fails;
}

static int mode_cases(int cases, uint64_t seed, int verbose)
{
  rng_state = seed;
  int fails = fixed_cases(verbose);
  int runs = 0, rfails = 0;
  for (int i = 0; i < cases; i++) {
    struct problem p;
    struct shape s;
    int steps;
    random_case(&p, &s, &steps);
    rfails += run_any(&p, &s, steps, verbose);
    runs++;
  }
  printf("random cases (seed %llu): %d run, %d failed (%d without a plan)\n",
         (unsigned long long)seed, runs, rfails, no_plan);
  fails += rfails;
  printf("check: %s\n", fails ? "FAILED" : "all bitwise equal");
  return fails ? 1 : 0;
}

/* ---- plans (host only) ---------------------------------------------------------------- */

/* A 3D block of nx x 40 x 36 cells (rows aligned as the device layout's), halo 4, every face
 * a halo face read as rd (x, y, z; both sides alike), planned with device -1 (no GPU) for the
 * warp-row kernel (clusters of cx x cy CTAs asked, 0: chosen). */
static int plan3(int64_t nx, int elem, const int rd[3], struct fused_plan *pl, int cx = 0,
                 int cy = 0, int T = 4)
{
  struct problem p;
  const int64_t n[3] = {nx, 40, 36};
  problem_init(&p, 3, n, elem, BC_PERIODIC_ALL, 4, 1, 0);
  align_rows(&p);
  for (int a = 0; a < 3; a++)
    p.faces.read[a][0] = p.faces.read[a][1] = rd[a];
  struct shape sh;
  memset(&sh, 0, sizeof sh);
  sh.T = T;
  sh.cx = cx;
  sh.cy = cy;
  return make_plan(&p, &sh, -1, pl);
}

static int mode_plans(void)
{
  int bad = 0;
  auto want = [&](int ok, const char *what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    bad |= !ok;
  };
  struct fused_plan pl;
  const int wrap[3] = {FUSED_READ_WRAP, FUSED_READ_WRAP, FUSED_READ_WRAP};
  const int mixed[3] = {FUSED_READ_MIRROR_NEG, FUSED_READ_MIRROR, FUSED_READ_MEMORY};
  want(!plan3(64, 4, wrap, &pl) && pl.reads_faces && pl.faces.read[0][1] == FUSED_READ_WRAP &&
           !fused_splits_z(&pl),
       "fp32 64 x 40 x 36, every face wrapped: warp rows read them through, no plane ranges");
  want(!plan3(45, 4, wrap, &pl) && !pl.reads_faces && pl.faces.read[0][0] == FUSED_READ_MEMORY &&
           pl.faces.read[2][1] == FUSED_READ_MEMORY,
       "fp32 x = 45 (not whole 16-byte vectors): every face from memory");
  want(!plan3(46, 8, mixed, &pl) && pl.reads_faces && fused_splits_z(&pl) &&
           pl.faces.read[0][0] == FUSED_READ_MIRROR_NEG,
       "fp64 x = 46, x Dirichlet 0, y Neumann, z messages: read through, plane ranges");
  want(!plan3(45, 8, mixed, &pl) && !pl.reads_faces && fused_splits_z(&pl),
       "fp64 x = 45: from memory (the driver fills), plane ranges possible");
  want(!plan3(64, 4, wrap, &pl) && fused_launch_planes(&pl, NULL, NULL, NULL, 4, 0, 4, 0, 0, NULL),
       "a plane range of a block wrapped along z is refused (the message above is expected)");
  want(!plan3(64, 4, mixed, &pl) && fused_launch_planes(&pl, NULL, NULL, NULL, 4, 8, 8, 0, 0, NULL),
       "an empty plane range is refused (the message above is expected)");
  want(!plan3(64, 4, wrap, &pl) && fused_splits_xy(&pl),
       "one CTA per tile, halo faces: launches in parts by tile (the x and y faces' tiles)");
  want(!plan3(64, 4, wrap, &pl, 1, 2) && !fused_splits_xy(&pl) &&
           fused_launch_planes(&pl, NULL, NULL, NULL, 4, 0, 36, 1, 1, NULL),
       "clusters of 1 x 2: no launches by tile (the message above is expected)");
  /* clusters: 1 x N CTAs stacked along y, never asked along x */
  want(!plan3(256, 4, wrap, &pl) && pl.cluster[0] == 1 && pl.cluster[1] == 1 &&
           !plan3(256, 8, wrap, &pl) && pl.cluster[0] * pl.cluster[1] == 1,
       "no clusters unless asked (measured slower)");
  want(!plan3(128, 8, wrap, &pl, 1, 2) && pl.tile[0] == 64 - 2 * 4 && pl.grid[0] == 3 &&
           pl.tile[1] == 56,
       "fp64 x = 128, asked 1 x 2: 56 of 64 columns stored, 3 tiles along x, a cluster stores "
       "56 of its 64 rows");
  want(!plan3(256, 4, wrap, &pl, 1, 2) && pl.cluster[0] == 1 && pl.cluster[1] == 2 &&
           pl.tile[0] == 120 && pl.tile[1] == 2 * 32 - 2 * 4 && pl.grid[1] == 2,
       "fp32 asked 1 x 2: 120 of 128 columns stored, a cluster stores 56 rows");
  want(!plan3(256, 4, mixed, &pl, 1, 8) && pl.tile[1] == 8 * 32 - 2 * 4 && pl.grid[1] == 8,
       "fp32 asked 1 x 8: a cluster stores 248 rows, one along y (8 CTAs)");
  want(!plan3(256, 4, wrap, &pl, 1, 4, 0) && pl.steps == 3 && !plan3(256, 8, wrap, &pl, 1, 4, 0) &&
           pl.steps == 4 && !plan3(256, 4, wrap, &pl, 0, 0, 0) && pl.steps == 4,
       "T by default: 3 for fp32 clusters (4 spills), else 4");
  want(plan3(256, 4, wrap, &pl, 2, 1) != 0 && plan3(256, 8, wrap, &pl, 4, 2) != 0,
       "CTAs along x (2 x 1, 4 x 2) refused (the messages above are expected)");
  /* The chunks by the waves (fm_wave_chunks). Its time against CTAs scheduled one by one
   * onto the slot that frees first, in grid order; the choice never worse than equal chunks. */
  auto one_by_one = [](int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c) {
    int64_t slot[64] = {0}, end = 0;
    for (int64_t z = 0; z < n;) {
      const int64_t len = z ? (c < n - z ? c : n - z) : (c0 < n ? c0 : n);
      z += len;
      for (int64_t t = 0; t < tiles; t++) {
        int64_t *m = slot;
        for (int64_t r = 1; r < resident; r++)
          m = slot[r] < *m ? slot + r : m;
        *m += (len + 2 * T + 2) / 3 * 3;
        end = *m > end ? *m : end;
      }
    }
    return end;
  };
  int c0, c, agree = 1, never_worse = 1, sizes = 1;
  for (int k = 0; k < 400; k++) {
    const int64_t n = rng_int(1, 300), tiles = rng_int(1, 40), resident = rng_int(1, 64);
    const int T = rng_int(1, 4);
    const int64_t t = fm_wave_chunks(n, tiles, T, resident, &c0, &c);
    const int eq = fm_wave_chunk(n, tiles, T, resident);
    agree &=
        t == one_by_one(n, tiles, T, resident, c0, c) &&
        fm_chunks_time(n, tiles, T, resident, eq, eq) == one_by_one(n, tiles, T, resident, eq, eq);
    never_worse &= t <= fm_chunks_time(n, tiles, T, resident, eq, eq);
    sizes &= c0 >= 1 && c >= 1 && c0 <= n && (n - c0) % c == 0 &&
             ((c0 >= 4 * T && c >= 4 * T) || c == eq);
  }
  want(agree, "the waves model: 400 random launches timed as CTAs scheduled one by one");
  want(never_worse, "the chosen chunks never model slower than the best equal chunks");
  want(sizes, "the chunks tile the planes (the first takes what the others leave), each at "
              "least 4T planes unless they are the equal chunks' choice");
  want(fm_wave_chunks(512, 110, 4, 132, &c0, &c) == 441 && c0 == 433 && c == 79 &&
           fm_chunks_time(512, 110, 4, 132, 86, 86) == 480,
       "fp32 512^3 (110 tiles a plane, 132 slots): a first chunk of 433 planes and 79 after, "
       "441 iterations a slot, against 480 in five waves of equal chunks of 86");
  want(fm_wave_chunk(16384, 37, 4, 396) == 512,
       "warp strips on 16384^2 fp32, residual launches (37 CTAs a row of chunks, 396 slots): "
       "chunks of 512 rows, 3 whole waves (382 rows, chosen counting warps, made 1591 CTAs)");
  /* Chunks by tile (fm_tile_chunks): its time against the CTAs scheduled one by one in the
   * kernel's order (the whole tiles, then the other tiles' first pieces, their second, ...). */
  int by_agree = 1, by_better = 1, by_sizes = 1, by_some = 0;
  for (int k = 0; k < 400; k++) {
    const int64_t n = rng_int(1, 300), tiles = rng_int(1, 200), resident = rng_int(1, 64);
    const int T = rng_int(1, 4);
    fm_wave_chunks(n, tiles, T, resident, &c0, &c);
    const int64_t uniform = fm_chunks_time(n, tiles, T, resident, c0, c);
    int whole, pieces, pc;
    const int64_t t = fm_tile_chunks(n, tiles, T, resident, uniform, &whole, &pieces, &pc);
    if (!pieces) {
      by_agree &= t == uniform;
      continue;
    }
    by_some++;
    const int64_t first = n - (int64_t)(pieces - 1) * pc;
    by_sizes &= whole % resident == 0 && whole > 0 && whole < tiles && pc >= 4 * T && first >= 1 &&
                first <= pc;
    by_better &= t * 100 < uniform * 99;
    int64_t slot[64] = {0}, end = 0;
    for (int64_t q = 0; q < whole + (tiles - whole) * pieces; q++) {
      const int64_t piece = q < whole ? -1 : (q - whole) / (tiles - whole);
      const int64_t len = piece < 0 ? n : piece == 0 ? first : pc;
      int64_t *m = slot;
      for (int64_t r = 1; r < resident; r++)
        m = slot[r] < *m ? slot + r : m;
      *m += (len + 2 * T + 2) / 3 * 3;
      end = *m > end ? *m : end;
    }
    by_agree &= t == end;
  }
  want(by_agree && by_some > 10,
       "chunks by tile: 400 random launches timed as CTAs scheduled one by one in the "
       "kernel's order (or the uniform chunks' time where they are not taken)");
  want(by_better && by_sizes, "chunks by tile only where they model 1 % faster: whole waves of "
                              "tiles in one chunk, the others' pieces at least 4T planes");
  int whole, pieces, pc;
  const int64_t t128 = fm_tile_chunks(128, 793, 4, 132, fm_chunks_time(128, 793, 4, 132, 64, 64),
                                      &whole, &pieces, &pc);
  want(t128 == 852 && whole == 792 && pieces == 8 && pc == 16 &&
           fm_chunks_time(128, 793, 4, 132, 64, 64) == 936,
       "fp64 1024 x 1024 x 128 (793 tiles a plane, 132 slots): 792 tiles in one chunk, the last "
       "in 8 chunks of 16 planes, 852 iterations a slot against 936 in chunks of 64");
  /* The chunks of a range of planes (fm_range_chunks, the inner part of a launch in parts). */
  int r0, rc, tile_range = 1;
  for (int k = 0; k < 400; k++) {
    const int64_t n = rng_int(1, 300), tiles = rng_int(1, 40), resident = rng_int(1, 64),
                  nz = rng_int(1, (int)n);
    const int T = rng_int(1, 4), waves = rng_int(0, 1);
    fm_wave_chunks(n, tiles, T, resident, &c0, &c);
    fm_range_chunks(n, c0, c, waves, tiles, T, resident, nz, &r0, &rc);
    tile_range &= rc >= 1 && r0 >= 1 && r0 <= nz && (nz - r0) % rc == 0 &&
                  (nz < n || (r0 == c0 && rc == c)) && (waves || rc == c);
  }
  want(tile_range, "a range's chunks tile it (the first takes what the others leave); the "
                   "whole block keeps the plan's, a chosen --chunk its length");
  fm_wave_chunks(512, 203, 4, 132, &c0, &c);
  want(c0 == 408 && c == 52, "fp64 512^3 (203 tiles a plane, 132 slots): 408 planes, then 52");
  int ok = fm_range_chunks(512, c0, c, 1, 203, 4, 132, 508, &r0, &rc) == 1 && r0 == 404 && rc == 52;
  ok &= fm_range_chunks(512, c0, c, 1, 203, 4, 132, 504, &r0, &rc) == 1;
  want(ok && r0 == 400 && rc == 52,
       "its inner parts (one face's 4 planes left out: 404, then 52; both faces': 400): the "
       "plan's short chunks where a plane's tiles outnumber the slots");
  ok = fm_range_chunks(512, 378, 67, 1, 94, 4, 132, 508, &r0, &rc) == 0 && r0 == rc &&
       rc == fm_wave_chunk(508, 94, 4, 132);
  ok &= fm_range_chunks(512, 170, 171, 1, 387, 4, 132, 508, &r0, &rc) == 0;
  want(ok && rc == fm_wave_chunk(508, 387, 4, 132) && r0 == fm_first_chunk(508, rc),
       "equal chunks where a plane's tiles fit the slots (fp32 512^3: 94 tiles) or the plan's "
       "first chunk would end shorter than the others (170 then 171)");
  /* The signalled launch's model (fm_signal_times: the last chunk dispatched second), against
   * its CTAs scheduled one by one in that order. */
  int signal_agree = 1;
  for (int k = 0; k < 400; k++) {
    const int64_t n = rng_int(1, 300), tiles = rng_int(1, 40), resident = rng_int(1, 64);
    const int T = rng_int(1, 4);
    const int64_t lo = rng_int(1, 20);
    fm_wave_chunks(n, tiles, T, resident, &c0, &c);
    const int64_t chunks = n <= c0 ? 1 : 1 + (n - c0 + c - 1) / c, first = n - (chunks - 1) * c;
    int64_t slot[64] = {0}, end = 0, rlo = 0, rhi = 0, tlo, thi;
    for (int64_t j = 0; j < chunks; j++) {
      const int64_t chunk = j == 0 ? 0 : j == 1 ? chunks - 1 : j - 1;
      const int64_t w = ((chunk ? c : first) + 2 * T + 2) / 3 * 3;
      for (int64_t t = 0; t < tiles; t++) {
        int64_t *m = slot;
        for (int64_t r = 1; r < resident; r++)
          m = slot[r] < *m ? slot + r : m;
        if (chunk == 0)
          rlo = std::max(rlo, *m + std::min(lo, w));
        *m += w;
        end = std::max(end, *m);
        if (chunk == chunks - 1)
          rhi = std::max(rhi, *m);
      }
    }
    signal_agree &= fm_signal_times(n, tiles, T, resident, c0, c, lo, &tlo, &thi) == end &&
                    tlo == rlo && thi == rhi;
  }
  want(signal_agree, "the signalled launch's model: 400 random launches timed as CTAs "
                     "scheduled one by one, the last chunk second");
  int64_t tlo, thi;
  ok = fm_signal_times(512, 94, 4, 132, 378, 67, 12, &tlo, &thi) == 387 && tlo == 12 && thi == 225;
  want(ok, "fp32 512^3 (94 tiles, chunks 378, 67, 67): the launch's 387 iterations unchanged, "
           "the low face's planes stored after 12, the high face's after 225");
  ok =
      fm_signal_times(512, 203, 4, 132, 408, 52, 12, &tlo, &thi) == 837 && tlo == 429 && thi == 657;
  want(ok, "fp64 512^3 (203 tiles, chunks 408, 52, 52): 837 iterations, the faces' planes after "
           "429 and 657 (both within 80 %: one signalled launch)");
  ok = fm_signal_times(256, 387, 4, 132, 256, 256, 12, &tlo, &thi) == 792 && thi == 792;
  want(ok, "fp32 1024 x 1024 x 256 (387 tiles, one chunk): the high face's planes at the end "
           "(the split in shells)");
  printf("fused_check plans: %s\n", bad ? "FAILED" : "all passed");
  return bad;
}

static int mode_one(int argc, char **argv)
{
  int ndim = 3, elem = 4, bc = BC_PERIODIC_ALL, steps = 5, halo = 0, radius = 1, source = 0;
  int64_t n[3] = {37, 21, 13};
  struct shape s;
  memset(&s, 0, sizeof s);
  s.T = 3;
  for (int i = 0; i < argc; i++) {
    const char *o = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : "0")
    if (!strcmp(o, "--ndim"))
      ndim = atoi(NEXT());
    else if (!strcmp(o, "--n")) {
      n[0] = atoll(NEXT());
      n[1] = atoll(NEXT());
      if (ndim == 3)
        n[2] = atoll(NEXT());
    } else if (!strcmp(o, "--prec"))
      elem = !strcmp(NEXT(), "f64") ? 8 : 4;
    else if (!strcmp(o, "--radius"))
      radius = atoi(NEXT());
    else if (!strcmp(o, "--bc")) {
      const char *b = NEXT();
      bc = -1;
      for (int k = 0; k < BC_COUNT; k++)
        if (!strcmp(b, bc_name[k]))
          bc = k;
      if (bc < 0) {
        fprintf(stderr, "fused_check one: unknown --bc %s\n", b);
        return 2;
      }
    } else if (!strcmp(o, "--T"))
      s.T = atoi(NEXT());
    else if (!strcmp(o, "--cluster")) {
      s.cx = atoi(NEXT());
      s.cy = atoi(NEXT());
    } else if (!strcmp(o, "--chunk"))
      s.chunk = atoi(NEXT());
    else if (!strcmp(o, "--steps"))
      steps = atoi(NEXT());
    else if (!strcmp(o, "--halo"))
      halo = atoi(NEXT());
    else if (!strcmp(o, "--source"))
      source = 1;
    else if (!strcmp(o, "--residual"))
      s.residual = (unsigned)atoi(NEXT());
    else {
      fprintf(stderr, "fused_check one: unknown option %s\n", o);
      return 2;
    }
#undef NEXT
  }
  if (radius < 1 || radius > 4 || ndim < 2 || ndim > 3) {
    fprintf(stderr, "fused_check one: --radius 1..4, --ndim 2 or 3\n");
    return 2;
  }
  struct problem p;
  problem_init(&p, ndim, n, elem, bc, halo > 0 ? halo : (s.T > 0 ? s.T : 8) * radius, radius,
               source);
  if (ndim == 3)
    align_rows(&p);
  const int st = run_any(&p, &s, steps, 1);
  printf("one: %s\n", st        ? "FAILED"
                      : no_plan ? "no plan (the kernel cannot run this case)"
                                : "bitwise equal");
  return st || no_plan;
}

/* 77 (skip) without a usable GPU, unless STENCIL_REQUIRE_GPU=1 (then 1). */
static int need_gpu(void)
{
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0)
    return 0;
  const char *req = getenv("STENCIL_REQUIRE_GPU");
  printf("fused_check: no usable GPU (%s)%s\n",
         e == cudaSuccess ? "0 devices" : cudaGetErrorString(e),
         req && !strcmp(req, "1") ? "" : ": skipped");
  return req && !strcmp(req, "1") ? 1 : 77;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: fused_check check [cases] [seed] | one [options] | plans\n");
    return 2;
  }
  const char *m = argv[1];
  if (!strcmp(m, "plans"))
    return mode_plans();
  const int g = need_gpu();
  if (g)
    return g;
  if (!strcmp(m, "check")) {
    const int cases = argc > 2 ? atoi(argv[2]) : 200;
    const uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 2026;
    return mode_cases(cases, seed, getenv("FUSED_CHECK_VERBOSE") != NULL);
  }
  if (!strcmp(m, "one"))
    return mode_one(argc - 2, argv + 2);
  fprintf(stderr, "fused_check: unknown mode %s\n", m);
  return 2;
}
