/* Self-checking harness for the fused kernels (kernels/cuda/fused.h: the 2D warp-strip and
 * the 3D warp-row kernel).
 *
 *   fused_check check [cases] [seed]      GPU: fused kernel vs a one-step GPU kernel, bitwise,
 *                                         N steps (N not a multiple of T too); the one-step
 *                                         kernel also vs the CPU reference on small cases
 *   fused_check one [options]             one GPU case (for compute-sanitizer runs); fails
 *                                         when no kernel can run it (no plan)
 *   fused_check plans                     host only: which faces the 3D warp-row plans read
 *                                         through, which plans launch plane ranges, and the
 *                                         wave model of the chunks
 *
 * Options of `one`: --ndim 2|3 --n X Y [Z] --prec f32|f64 --bc dirichlet|periodic|neumann|mixed
 *   --T t --cluster cx cy (3D) --chunk c --steps N --halo H (3D: periodic faces only, the rows
 *   aligned for the warp-row kernel)
 *
 * Fields: the padded layout of kernels/layout.h, random values in [-1, 1) (never zeros).
 * One step everywhere has the operation order of kernels/backend.h:
 *   v = c0 u; v = fma(cx, u[x-1] + u[x+1], v); v = fma(cy, u[y-1] + u[y+1], v); (3D) v =
 *   fma(cz, ..., v), compiled without other contraction (-fmad=false, -ffp-contract=off). Ghost
 * cells before each step (reference) or launch (fused): periodic axes copied T deep, edges and
 * corners included (axis by axis); reflecting faces 1 deep (ghost = 2g - u or u). The 2D fused
 * kernel re-applies reflecting faces itself after every fused step.
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

enum bc_set { BC_DIRICHLET_ALL, BC_PERIODIC_ALL, BC_NEUMANN_MIX, BC_MIXED, BC_COUNT };
static const char *bc_name[] = {"dirichlet", "periodic", "neumann", "mixed"};

struct problem {
  int ndim, elem, halo;
  int64_t n[3];
  int bc;
  struct fused_faces faces;
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
                         int halo)
{
  memset(p, 0, sizeof *p);
  p->ndim = ndim;
  p->elem = elem;
  p->halo = halo;
  p->bc = bc;
  for (int a = 0; a < 3; a++)
    p->n[a] = a < ndim ? n[a] : 1;
  const double g[3][2] = {{0.25, -0.5}, {0.75, 0.125}, {-0.375, 1.0}};
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      int k = FUSED_FACE_DIRICHLET;
      if (bc == BC_PERIODIC_ALL)
        k = FUSED_FACE_HALO;
      else if (bc == BC_NEUMANN_MIX)
        k = (a + s) % 2 ? FUSED_FACE_NEUMANN : FUSED_FACE_DIRICHLET;
      else if (bc == BC_MIXED)
        k = a == 0 ? FUSED_FACE_HALO : a == 1 ? FUSED_FACE_DIRICHLET : FUSED_FACE_NEUMANN;
      if (a >= ndim)
        k = FUSED_FACE_HALO;
      p->faces.kind[a][s] = k;
      p->faces.value[a][s] = g[a][s];
    }
  /* c_a = alpha dt / h_a^2 with slightly irrational values; c0 = 1 - 2 sum c_a. */
  p->coef.ndim = ndim;
  p->coef.radius = 1;
  const double c[3] = {0.1113, 0.0871, 0.0659};
  double sum = 0;
  for (int a = 0; a < ndim; a++) {
    p->coef.c[a][0] = c[a] * (1 + 0.01 * a);
    sum += p->coef.c[a][0];
  }
  p->coef.c0 = 1 - 2 * sum;
  const int64_t nn[3] = {p->n[0], p->n[1], p->n[2]};
  const int hh[3] = {halo, halo, ndim == 3 ? halo : 0};
  layout_init(&p->lay, nn, hh, elem);
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

/* ---- one step and ghost cells: shared by host and device ---------------------------- */

template <typename REAL> struct coefs {
  REAL c0, c1, c2, c3;
};

template <typename REAL>
__host__ __device__ inline REAL step_cell(const REAL *u, int64_t i, int64_t sy, int64_t sz,
                                          int three_d, coefs<REAL> c)
{
  REAL acc = c.c0 * u[i];
  acc = stencil_fma(c.c1, u[i - 1] + u[i + 1], acc);
  acc = stencil_fma(c.c2, u[i - sy] + u[i + sy], acc);
  if (three_d)
    acc = stencil_fma(c.c3, u[i - sz] + u[i + sz], acc);
  return acc;
}

struct fill_args {
  int axis, depth, kind[2];
  int64_t n[3], lo[3], hi[3]; /* slab ranges of the other axes */
  int64_t s[3], origin;
  double two_g[2];
};

/* Cell `idx` of the ghost slab of one axis: copy (periodic) or reflect (depth 1). */
template <typename REAL>
__host__ __device__ inline void fill_cell(REAL *u, const fill_args &f, int64_t idx)
{
  const int a = f.axis;
  int64_t len[3];
  for (int b = 0; b < 3; b++)
    len[b] = b == a ? 2 * f.depth : f.hi[b] - f.lo[b];
  int64_t c[3];
  int r = (int)idx; /* slabs have < 2^31 cells: 32-bit division is much cheaper */
  for (int b = 0; b < 3; b++) {
    c[b] = r % (int)len[b];
    r /= (int)len[b];
  }
  for (int b = 0; b < 3; b++)
    if (b != a)
      c[b] += f.lo[b];
  const int side = c[a] >= f.depth;
  c[a] = side ? f.n[a] + (c[a] - f.depth) : c[a] - f.depth;
  int64_t src[3] = {c[0], c[1], c[2]};
  const int kind = f.kind[side];
  if (kind == FUSED_FACE_HALO) {
    src[a] = ((c[a] % f.n[a]) + f.n[a]) % f.n[a];
  } else {
    if ((side == 0 && c[a] != -1) || (side == 1 && c[a] != f.n[a]))
      return;
    src[a] = side ? f.n[a] - 1 : 0;
  }
  const int64_t di = f.origin + c[0] * f.s[0] + c[1] * f.s[1] + c[2] * f.s[2];
  const int64_t si = f.origin + src[0] * f.s[0] + src[1] * f.s[1] + src[2] * f.s[2];
  const REAL in = u[si];
  u[di] = kind == FUSED_FACE_DIRICHLET ? (REAL)f.two_g[side] - in : in;
}

template <typename REAL> __global__ void fill_kernel(REAL *u, fill_args f, int64_t count)
{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x)
    fill_cell(u, f, i);
}

template <typename REAL>
__global__ void step_kernel(const REAL *u, REAL *v, int64_t nx, int64_t ny, int64_t nz, int64_t sy,
                            int64_t sz, int64_t origin, int three_d, coefs<REAL> c)
{
  const int64_t count = nx * ny * nz;
  for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < count;
       q += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = q % nx, j = (q / nx) % ny, k = q / (nx * ny);
    const int64_t at = origin + i + j * sy + k * sz;
    v[at] = step_cell(u, at, sy, sz, three_d, c);
  }
}

/* 3D variant with a 2D thread block per (x, y) tile and a z loop: the timed baseline. */
template <typename REAL>
__global__ void step_kernel_xy(const REAL *__restrict__ u, REAL *__restrict__ v, int64_t nx,
                               int64_t ny, int64_t nz, int64_t sy, int64_t sz, int64_t origin,
                               int three_d, coefs<REAL> c)
{
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t j = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  if (i >= nx || j >= ny)
    return;
  for (int64_t k = blockIdx.z; k < nz; k += gridDim.z) {
    const int64_t at = origin + i + j * sy + k * sz;
    v[at] = step_cell(u, at, sy, sz, three_d, c);
  }
}

template <typename REAL> static coefs<REAL> coefs_of(const struct problem *p)
{
  coefs<REAL> c;
  c.c0 = (REAL)p->coef.c0;
  c.c1 = (REAL)p->coef.c[0][0];
  c.c2 = (REAL)p->coef.c[1][0];
  c.c3 = (REAL)p->coef.c[2][0];
  return c;
}

/* The ghost slabs of one fill, axis by axis (later axes span the earlier ones' ghosts). */
static int fill_plan(const struct problem *p, int depth, fill_args f[3], int64_t count[3])
{
  const struct layout *l = &p->lay;
  int nf = 0;
  for (int a = 0; a < p->ndim; a++) {
    fill_args *g = &f[nf];
    memset(g, 0, sizeof *g);
    g->axis = a;
    g->depth = depth;
    for (int s = 0; s < 2; s++) {
      g->kind[s] = p->faces.kind[a][s];
      g->two_g[s] = 2.0 * p->faces.value[a][s];
    }
    int64_t cnt = 2 * depth;
    for (int b = 0; b < 3; b++) {
      g->n[b] = l->n[b];
      g->s[b] = l->stride[b];
      if (b == a)
        continue;
      const int64_t h = b < a ? depth : 0;
      g->lo[b] = b < p->ndim ? -h : 0;
      g->hi[b] = b < p->ndim ? l->n[b] + h : 1;
      cnt *= g->hi[b] - g->lo[b];
    }
    g->origin = layout_index(l, 0, 0, 0);
    count[nf++] = cnt;
  }
  return nf;
}

template <typename REAL> static void host_fill(const struct problem *p, REAL *u, int depth)
{
  fill_args f[3];
  int64_t count[3];
  const int nf = fill_plan(p, depth, f, count);
  for (int i = 0; i < nf; i++)
    for (int64_t q = 0; q < count[i]; q++)
      fill_cell(u, f[i], q);
}

template <typename REAL> static void dev_fill(const struct problem *p, REAL *u, int depth)
{
  fill_args f[3];
  int64_t count[3];
  const int nf = fill_plan(p, depth, f, count);
  for (int i = 0; i < nf; i++) {
    const int64_t blocks = (count[i] + 255) / 256;
    CK(stencil_launch(fill_kernel<REAL>, dim3((unsigned)(blocks < 4096 ? blocks : 4096)), dim3(256),
                      0, 0, u, f[i], count[i]));
  }
}

template <typename REAL> static void host_step(const struct problem *p, const REAL *u, REAL *v)
{
  const struct layout *l = &p->lay;
  const coefs<REAL> c = coefs_of<REAL>(p);
  for (int64_t k = 0; k < l->n[2]; k++)
    for (int64_t j = 0; j < l->n[1]; j++)
      for (int64_t i = 0; i < l->n[0]; i++) {
        const int64_t at = layout_index(l, i, j, k);
        v[at] = step_cell(u, at, l->stride[1], l->stride[2], p->ndim == 3, c);
      }
}

template <typename REAL> static void dev_step(const struct problem *p, const REAL *u, REAL *v)
{
  const struct layout *l = &p->lay;
  const int64_t count = l->n[0] * l->n[1] * l->n[2];
  const int64_t blocks = (count + 255) / 256;
  CK(stencil_launch(step_kernel<REAL>, dim3((unsigned)(blocks < 65536 ? blocks : 65536)), dim3(256),
                    0, 0, u, v, l->n[0], l->n[1], l->n[2], l->stride[1], l->stride[2],
                    layout_index(l, 0, 0, 0), p->ndim == 3, coefs_of<REAL>(p)));
}

/* Periodic ghosts must be T deep for a fused launch; reflecting faces need 1. */
static int fill_depth(const struct problem *p, int steps)
{
  (void)p;
  return steps;
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
};

static void case_name(const struct problem *p, const struct shape *s, int steps, char *buf,
                      size_t len)
{
  snprintf(buf, len, "%dD %lldx%lldx%lld %s bc=%s halo=%d T=%d cluster=%dx%d chunk=%d N=%d",
           p->ndim, (long long)p->n[0], (long long)p->n[1], (long long)p->n[2],
           p->elem == 4 ? "f32" : "f64", bc_name[p->bc], p->halo, s->T, s->cx, s->cy, s->chunk,
           steps);
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
  return fused_plan_block(&p->lay, &p->coef, 0, &p->faces, &cfg, device, pl);
}

/* The CPU reference: `steps` single steps from init, through the buffers a and b (each
 * p->lay.count elements); returns the one holding the result. */
template <typename REAL>
static REAL *host_steps(const struct problem *p, const REAL *init, REAL *a, REAL *b, int steps)
{
  const size_t bytes = (size_t)p->lay.count * sizeof(REAL);
  memcpy(a, init, bytes);
  memcpy(b, init, bytes);
  for (int n = 0; n < steps; n++) {
    host_fill(p, a, 1);
    host_step(p, a, b);
    REAL *t = a;
    a = b;
    b = t;
  }
  return a;
}

static int no_plan; /* cases skipped for want of a plan (the kernel cannot run them) */

/* Run N steps by reference and fused; 0 = bitwise equal. */
template <typename REAL>
static int run_case(const struct problem *p, const struct shape *s, int steps, int cpu_check,
                    int verbose)
{
  char name[300];
  case_name(p, s, steps, name, sizeof name);
  struct fused_plan pl;
  if (make_plan(p, s, 0, &pl)) {
    printf("SKIP  %s (no plan)\n", name);
    no_plan++;
    return 0;
  }
  const size_t bytes = (size_t)p->lay.count * sizeof(REAL);
  REAL *init = (REAL *)malloc(bytes), *ref = (REAL *)malloc(bytes), *got = (REAL *)malloc(bytes);
  random_field(p, init);
  int status = 0;
  {
    REAL *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemcpy(a, init, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, init, bytes, cudaMemcpyHostToDevice));
    for (int n = 0; n < steps; n++) {
      dev_fill(p, a, 1);
      dev_step(p, a, b);
      REAL *t = a;
      a = b;
      b = t;
    }
    CK(cudaMemcpy(ref, a, bytes, cudaMemcpyDeviceToHost));
    if (cpu_check) { /* the one-step GPU kernel against the CPU */
      REAL *x = (REAL *)malloc(bytes), *y = (REAL *)malloc(bytes);
      int64_t w[3];
      if (compare(p, host_steps(p, init, x, y, steps), ref, w)) {
        printf("FAIL  %s: one-step GPU kernel differs from the CPU at (%lld,%lld,%lld)\n", name,
               (long long)w[0], (long long)w[1], (long long)w[2]);
        status = 1;
      }
      free(x);
      free(y);
    }
    CK(cudaMemcpy(a, init, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, init, bytes, cudaMemcpyHostToDevice));
    for (int done = 0; done < steps;) {
      const int t = steps - done < pl.steps ? steps - done : pl.steps;
      dev_fill(p, a, fill_depth(p, t));
      if (fused_launch(&pl, a, NULL, b, t, NULL))
        status = 1;
      REAL *x = a;
      a = b;
      b = x;
      done += t;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, a, bytes, cudaMemcpyDeviceToHost));
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  int64_t w[3];
  const int64_t bad = compare(p, ref, got, w);
  if (bad) {
    const int64_t at = layout_index(&p->lay, w[0], w[1], w[2]);
    printf("FAIL  %s: %lld cells differ, first (%lld,%lld,%lld): %.17g vs reference %.17g\n", name,
           (long long)bad, (long long)w[0], (long long)w[1], (long long)w[2], (double)got[at],
           (double)ref[at]);
    status = 1;
  } else if (status) {
    printf("FAIL  %s: kernel error\n", name);
  } else if (verbose) {
    char d[200];
    fused_describe(&pl, d, sizeof d);
    printf("ok    %s [%s]\n", name, d);
  }
  free(init);
  free(ref);
  free(got);
  return status;
}

static int run_any(const struct problem *p, const struct shape *s, int steps, int cpu_check,
                   int verbose)
{
  return p->elem == 8 ? run_case<double>(p, s, steps, cpu_check, verbose)
                      : run_case<float>(p, s, steps, cpu_check, verbose);
}

/* A random case: small, often ragged; 2D every boundary set, 3D periodic (the warp-row kernel
 * takes halo faces only, its rows aligned as the device layout's), one CTA or clusters along
 * y. */
static void random_case(struct problem *p, struct shape *s, int *steps)
{
  const int ndim = rng_int(2, 3), elem = rng_int(0, 1) ? 8 : 4;
  const int bc = ndim == 3 ? BC_PERIODIC_ALL : rng_int(0, BC_COUNT - 1);
  memset(s, 0, sizeof *s);
  int64_t n[3];
  if (ndim == 3) {
    for (int a = 0; a < 3; a++)
      n[a] = rng_int(0, 5) == 0 ? rng_int(1, 4) : rng_int(3, 56);
    s->T = rng_int(1, 4);
    s->cx = rng_int(0, 1);
    s->cy = rng_int(0, 4);
  } else {
    n[0] = rng_int(0, 5) == 0 ? rng_int(1, 6) : rng_int(5, 600);
    n[1] = rng_int(0, 5) == 0 ? rng_int(1, 4) : rng_int(3, 80);
    n[2] = 1;
    s->T = rng_int(1, 8);
  }
  s->chunk = rng_int(0, 3) == 0 ? rng_int(1, s->T + 1) : rng_int(2, 24);
  const int halo = s->T + (rng_int(0, 3) == 0 ? rng_int(1, 3) : 0);
  problem_init(p, ndim, n, elem, bc, halo);
  if (ndim == 3)
    align_rows(p);
  *steps = rng_int(1, 3 * s->T + 2);
}

/* Fixed cases on small ragged grids: 2D every boundary set and T, 3D periodic (T <= 4) with one
 * CTA and with clusters of 1 x 2; both precisions. */
static int fixed_cases(int verbose)
{
  int fails = 0, runs = 0;
  for (int elem = 4; elem <= 8; elem += 4)
    for (int ndim = 2; ndim <= 3; ndim++)
      for (int bc = 0; bc < BC_COUNT; bc++)
        for (int T = 1; T <= FUSED_MAX_STEPS; T++) {
          if (ndim == 3 && (bc != BC_PERIODIC_ALL || T > TILE3D_MAX_STEPS))
            continue;
          struct problem p;
          struct shape s;
          memset(&s, 0, sizeof s);
          const int64_t n3[3] = {75, 69, 33}, n2[3] = {1333, 77, 1};
          s.T = T;
          s.chunk = 9;
          problem_init(&p, ndim, ndim == 3 ? n3 : n2, elem, bc, T);
          if (ndim == 3)
            align_rows(&p);
          for (int cy = 1; cy <= (ndim == 3 ? 2 : 1); cy++) {
            s.cx = ndim == 3 ? 1 : 0;
            s.cy = ndim == 3 ? cy : 0;
            fails += run_any(&p, &s, 2 * T + 1, T == 1 && cy == 1, verbose);
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
    const int cpu = p.lay.count < 200000 && i % 4 == 0;
    rfails += run_any(&p, &s, steps, cpu, verbose);
    runs++;
  }
  printf("random cases (seed %llu): %d run, %d failed\n", (unsigned long long)seed, runs, rfails);
  fails += rfails;
  printf("check: %s\n", fails ? "FAILED" : "all bitwise equal");
  return fails ? 1 : 0;
}

/* ---- one case from the command line ------------------------------------------------- */

/* ---- plans (host only) ---------------------------------------------------------------- */

/* A 3D block of nx x 40 x 36 cells (rows aligned as the device layout's), halo 4, every face
 * a halo face read as rd (x, y, z; both sides alike), planned with device -1 (no GPU) for the
 * warp-row kernel (clusters of cx x cy CTAs asked, 0: chosen). */
static int plan3(int64_t nx, int elem, const int rd[3], struct fused_plan *pl, int cx = 0,
                 int cy = 0)
{
  struct problem p;
  const int64_t n[3] = {nx, 40, 36};
  problem_init(&p, 3, n, elem, BC_PERIODIC_ALL, 4);
  align_rows(&p);
  for (int a = 0; a < 3; a++)
    p.faces.read[a][0] = p.faces.read[a][1] = rd[a];
  struct shape sh;
  memset(&sh, 0, sizeof sh);
  sh.T = 4;
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
  want(!plan3(64, 4, wrap, &pl) && fused_launch_planes(&pl, NULL, NULL, 4, 0, 4, NULL),
       "a plane range of a block wrapped along z is refused (the message above is expected)");
  want(!plan3(64, 4, mixed, &pl) && fused_launch_planes(&pl, NULL, NULL, 4, 8, 8, NULL),
       "an empty plane range is refused (the message above is expected)");
  /* clusters: spanning x where n_x = BX ncx (BX: 128 cells in fp32, 64 in fp64) and both x
   * faces are read through */
  want(!plan3(256, 8, wrap, &pl, 4, 1) && pl.xspan && pl.cluster[0] == 4 && pl.cluster[1] == 1 &&
           pl.tile[0] == 256 && pl.grid[0] == 4,
       "fp64 256 x 40 x 36 wrapped, asked 4 x 1: they span x, storing all 256 columns");
  want(plan3(256, 8, wrap, &pl, 2, 1) != 0,
       "fp64 256 wide, asked 2 x 1: 2 CTAs of 64 columns cannot span x, refused (the message "
       "above is expected)");
  want(!plan3(256, 4, wrap, &pl) && !pl.xspan && pl.cluster[0] == 1 && pl.cluster[1] == 1 &&
           !plan3(256, 8, wrap, &pl) && !pl.xspan && pl.cluster[0] * pl.cluster[1] == 1,
       "no clusters unless asked (measured slower)");
  want(!plan3(64, 8, mixed, &pl, 1, 2) && pl.xspan && pl.cluster[0] == 1 && pl.tile[0] == 64 &&
           pl.tile[1] == 2 * 32 - 2 * 4,
       "fp64 x = 64 between Dirichlet-0 faces, asked 1 x 2: one CTA spans x (faces at every "
       "level), a cluster stores 56 of its 64 rows");
  want(!plan3(128, 8, wrap, &pl, 1, 2) && !pl.xspan && pl.tile[0] == 64 - 2 * 4 &&
           pl.grid[0] == 3 && pl.tile[1] == 56,
       "fp64 x = 128, asked 1 x 2: no x span (56 of 64 columns stored), 3 tiles along x");
  want(!plan3(256, 4, wrap, &pl, 1, 2) && !pl.xspan && pl.cluster[0] == 1 && pl.cluster[1] == 2 &&
           pl.tile[0] == 120 && pl.tile[1] == 2 * 32 - 2 * 4 && pl.grid[1] == 2,
       "asked 1 x 2: no x span (120 of 128 columns stored), a cluster stores 56 rows");
  want(!plan3(192, 4, wrap, &pl) && !pl.xspan && pl.cluster[0] == 1,
       "x = 192 (not a multiple of 128): one CTA along x");
  want(plan3(192, 4, wrap, &pl, 2, 1) != 0,
       "2 CTAs along x where they cannot span it are refused (the message above is expected)");
  want(!plan3(1024, 4, mixed, &pl, 8, 1) && pl.xspan && pl.cluster[0] == 8 &&
           !plan3(512, 8, mixed, &pl, 8, 1) && pl.xspan && pl.cluster[0] == 8,
       "fp32 x = 1024 and fp64 x = 512, asked 8: clusters of 8 CTAs span x");
  const int xmem[3] = {FUSED_READ_MEMORY, FUSED_READ_WRAP, FUSED_READ_WRAP};
  want(plan3(256, 8, xmem, &pl, 2, 1) != 0,
       "x faces from memory (neighbour ranks): 2 CTAs along x refused (the message above is "
       "expected)");
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
  int ndim = 3, elem = 4, bc = BC_PERIODIC_ALL, steps = 5, halo = 0;
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
    else if (!strcmp(o, "--bc")) {
      const char *b = NEXT();
      for (int k = 0; k < BC_COUNT; k++)
        if (!strcmp(b, bc_name[k]))
          bc = k;
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
    else {
      fprintf(stderr, "fused_check one: unknown option %s\n", o);
      return 2;
    }
#undef NEXT
  }
  struct problem p;
  problem_init(&p, ndim, n, elem, bc, halo > 0 ? halo : (s.T > 0 ? s.T : 8));
  if (ndim == 3)
    align_rows(&p);
  const int st = run_any(&p, &s, steps, 1, 1);
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
