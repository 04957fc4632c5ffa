/* CPU kernels for one element type. Included twice by heat.c with
 * REAL (float/double) and SUFFIX (f32/f64) defined; not a public header. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

#define STAR(name) CAT(name, CAT(_, SUFFIX))

/* The radius-1 update of the cell at p, without the source term (three_d: a constant at
 * every call, so the 2D form has no z term after inlining). */
static inline REAL FN(cell1_)(const REAL *restrict p, int64_t sy, int64_t sz, REAL c0, REAL cx,
                              REAL cy, REAL cz, int three_d)
{
  return three_d
             ? STAR(stencil_star1)(c0, cx, cy, cz, p[0], p[-1], p[1], p[-sy], p[sy], p[-sz], p[sz])
             : STAR(stencil_star1_2d)(c0, cx, cy, p[0], p[-1], p[1], p[-sy], p[sy]);
}

/* A row of the general update (radius a constant at every call: the loops over the pairs
 * unroll and the row vectorises). */
static inline void FN(row_star_)(const REAL *restrict p, const REAL *restrict s, REAL *restrict q,
                                 int64_t nx, int64_t sy, int64_t sz, int three_d, int radius,
                                 REAL c0, const REAL c[3][4], REAL cf)
{
  if (s) {
#pragma omp simd
    for (int64_t i = 0; i < nx; i++)
      q[i] =
          STAR(stencil_source)(cf, s[i], STAR(stencil_star)(p + i, sy, sz, three_d, radius, c0, c));
  } else {
#pragma omp simd
    for (int64_t i = 0; i < nx; i++)
      q[i] = STAR(stencil_star)(p + i, sy, sz, three_d, radius, c0, c);
  }
}

/* One row of nx cells of v = stencil(u) [+ cf f] into q (p: the row of u, s: of f or NULL,
 * st: the strides of u), each cell by the point update of kernels/point.h. */
static inline void FN(update_row_)(const struct stencil_coef *coef, const REAL c[3][4],
                                   const int64_t st[3], const REAL *restrict p,
                                   const REAL *restrict s, REAL *restrict q, int64_t nx)
{
  const int r = coef->radius, three_d = coef->ndim == 3;
  const REAL c0 = (REAL)coef->c0, cf = (REAL)coef->cf;
  const int64_t sy = st[1], sz = st[2];
  if (r == 1) { /* four loops, so each vectorises without a test per cell */
    const REAL cx = c[0][0], cy = c[1][0], cz = c[2][0];
    if (three_d && !s) {
#pragma omp simd
      for (int64_t i = 0; i < nx; i++)
        q[i] = FN(cell1_)(p + i, sy, sz, c0, cx, cy, cz, 1);
    } else if (!s) {
#pragma omp simd
      for (int64_t i = 0; i < nx; i++)
        q[i] = FN(cell1_)(p + i, sy, sz, c0, cx, cy, cz, 0);
    } else if (three_d) {
#pragma omp simd
      for (int64_t i = 0; i < nx; i++)
        q[i] = STAR(stencil_source)(cf, s[i], FN(cell1_)(p + i, sy, sz, c0, cx, cy, cz, 1));
    } else {
#pragma omp simd
      for (int64_t i = 0; i < nx; i++)
        q[i] = STAR(stencil_source)(cf, s[i], FN(cell1_)(p + i, sy, sz, c0, cx, cy, cz, 0));
    }
    return;
  }
  /* each radius and dimension its own loops */
  if (r == 2 && three_d)
    FN(row_star_)(p, s, q, nx, sy, sz, 1, 2, c0, c, cf);
  else if (r == 2)
    FN(row_star_)(p, s, q, nx, sy, sz, 0, 2, c0, c, cf);
  else if (r == 3 && three_d)
    FN(row_star_)(p, s, q, nx, sy, sz, 1, 3, c0, c, cf);
  else if (r == 3)
    FN(row_star_)(p, s, q, nx, sy, sz, 0, 3, c0, c, cf);
  else if (three_d)
    FN(row_star_)(p, s, q, nx, sy, sz, 1, 4, c0, c, cf);
  else
    FN(row_star_)(p, s, q, nx, sy, sz, 0, 4, c0, c, cf);
}

/* The sum over a row of (q - p)^2: q - p in the field's precision, its square summed in
 * double (exact for fp32). */
static inline double FN(row_sumsq_)(const REAL *restrict q, const REAL *restrict p, int64_t nx)
{
  double row = 0;
#pragma omp simd reduction(+ : row)
  for (int64_t i = 0; i < nx; i++) {
    const double d = STAR(stencil_residual)(q[i], p[i]);
    row += d * d;
  }
  return row;
}

static void FN(coef_real_)(const struct stencil_coef *coef, REAL c[3][4])
{
  for (int a = 0; a < 3; a++)
    for (int m = 0; m < 4; m++)
      c[a][m] = (REAL)coef->c[a][m];
}

/* v = stencil(u) [+ cf f] on box b (update_row_).
 * g: when g->kind[s] is not XG_NONE, each row's x ghosts beyond side s are also written, by
 * reflection as boundary_ does (the caller checks that the box holds the cells read).
 * sumsq: NULL, or it receives residual_'s sum of (v - u)^2 over b, each row's terms added
 * while the row is in cache. */
static void FN(update_)(const struct layout *l, const struct stencil_coef *coef,
                        const REAL *restrict u, const REAL *restrict f, REAL *restrict v,
                        const struct box *b, const struct xghost *g, double *sumsq)
{
  REAL c[3][4];
  FN(coef_real_)(coef, c);
  const int64_t st[3] = {1, l->stride[1], l->stride[2]};
  const int64_t nx = b->hi[0] - b->lo[0];
  if (nx <= 0)
    return;
  const int h = l->halo[0];
  const int klo = g->kind[0], khi = g->kind[1];
  const REAL glo = (REAL)g->two_g[0], ghi = (REAL)g->two_g[1];
  const int64_t off_lo = layout_index(l, 0, 0, 0) - layout_index(l, b->lo[0], 0, 0);
  const int64_t off_hi = layout_index(l, l->n[0] - 1, 0, 0) - layout_index(l, b->lo[0], 0, 0);
  double sum = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : sum)
  for (int64_t k = b->lo[2]; k < b->hi[2]; k++)
    for (int64_t j = b->lo[1]; j < b->hi[1]; j++) {
      const int64_t base = layout_index(l, b->lo[0], j, k);
      const REAL *restrict p = u + base;
      REAL *restrict q = v + base;
      FN(update_row_)(coef, c, st, p, f ? f + base : NULL, q, nx);
      if (sumsq)
        sum += FN(row_sumsq_)(q, p, nx);
      /* Ghosts of the x faces while the row is in cache: ghost(m) = 2g - v(m-1) or v(m-1). */
      if (klo) {
        REAL *e = q + off_lo;
        for (int m = 1; m <= h; m++)
          e[-m] = klo == XG_DIRICHLET ? glo - e[m - 1] : e[m - 1];
      }
      if (khi) {
        REAL *e = q + off_hi;
        for (int m = 1; m <= h; m++)
          e[m] = khi == XG_DIRICHLET ? ghi - e[-(m - 1)] : e[-(m - 1)];
      }
    }
  if (sumsq)
    *sumsq = sum;
}

/* Sum over the interior of (v - u)^2, v = the update of coef on u [+ cf f] (update_row_, into a
 * per-thread row buffer), v - u in the field's precision, its square summed in double (exact
 * for fp32). Returns 1 when a thread could not get its row buffer. */
static int FN(residual_)(const struct layout *l, const struct stencil_coef *coef,
                         const REAL *restrict u, const REAL *restrict f, double *sumsq)
{
  REAL c[3][4];
  FN(coef_real_)(coef, c);
  const int64_t st[3] = {1, l->stride[1], l->stride[2]}, nx = l->n[0];
  double sum = 0;
  int failed = 0;
#pragma omp parallel reduction(+ : sum, failed)
  {
    REAL *w = malloc(sizeof *w * (size_t)(nx > 0 ? nx : 1));
    failed += w == NULL;
#pragma omp for collapse(2) schedule(static)
    for (int64_t k = 0; k < l->n[2]; k++)
      for (int64_t j = 0; j < l->n[1]; j++) {
        if (!w)
          continue;
        const int64_t base = layout_index(l, 0, j, k);
        FN(update_row_)(coef, c, st, u + base, f ? f + base : NULL, w, nx);
        sum += FN(row_sumsq_)(w, u + base, nx);
      }
    free(w);
  }
  *sumsq = sum;
  return failed > 0;
}

/* Copy box b between the padded array u and a dense buffer d (to_dense: u -> d). */
static void FN(copy_box_)(const struct layout *l, REAL *u, const struct box *b, REAL *d,
                          int to_dense)
{
  const int64_t nx = b->hi[0] - b->lo[0], ny = b->hi[1] - b->lo[1];
  if (nx <= 0 || ny <= 0)
    return;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = b->lo[2]; k < b->hi[2]; k++)
    for (int64_t j = b->lo[1]; j < b->hi[1]; j++) {
      REAL *row = u + layout_index(l, b->lo[0], j, k);
      REAL *drow = d + ((k - b->lo[2]) * ny + (j - b->lo[1])) * nx;
      if (to_dense)
        memcpy(drow, row, (size_t)nx * sizeof(REAL));
      else
        memcpy(row, drow, (size_t)nx * sizeof(REAL));
    }
}

/* Ghost layers beyond one physical face, by reflection across the face. */
static void FN(boundary_)(const struct layout *l, REAL *u, int axis, int side, enum bc_kind kind,
                          double value)
{
  const int h = l->halo[axis];
  const REAL two_g = (REAL)(2.0 * value);
  const int64_t st = l->stride[axis];
  /* The face's cells: every interior cell with coordinate 0 (or n-1) along axis. */
  struct box f = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  f.lo[axis] = side ? l->n[axis] - 1 : 0;
  f.hi[axis] = f.lo[axis] + 1;
  const int64_t dir = side ? 1 : -1; /* outward */
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = f.lo[2]; k < f.hi[2]; k++)
    for (int64_t j = f.lo[1]; j < f.hi[1]; j++)
      for (int64_t i = f.lo[0]; i < f.hi[0]; i++) {
        REAL *edge = u + layout_index(l, i, j, k);
        for (int m = 1; m <= h; m++) {
          const REAL in = edge[-dir * (m - 1) * st];
          edge[dir * m * st] = kind == BC_DIRICHLET ? two_g - in : in;
        }
      }
}

static void FN(norms_)(const struct layout *l, const REAL *u, struct norms *out)
{
  double sum = 0, sumsq = 0, maxabs = 0;
  int64_t nonfinite = 0;
#pragma omp parallel for collapse(2) reduction(+ : sum, sumsq, nonfinite) reduction(max : maxabs)
  for (int64_t k = 0; k < l->n[2]; k++)
    for (int64_t j = 0; j < l->n[1]; j++) {
      const REAL *row = u + layout_index(l, 0, j, k);
      for (int64_t i = 0; i < l->n[0]; i++) {
        const double x = (double)row[i];
        if (!isfinite(x)) {
          nonfinite++;
          continue;
        }
        sum += x;
        sumsq += x * x;
        maxabs = fabs(x) > maxabs ? fabs(x) : maxabs;
      }
    }
  out->sum = sum;
  out->sumsq = sumsq;
  out->maxabs = maxabs;
  out->nonfinite = nonfinite;
}

#undef STAR
#undef FN
#undef CAT
#undef CAT_
