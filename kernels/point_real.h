/* The point update in one precision (STENCIL_REAL, names STENCIL_SFX(name)); included by
 * kernels/point.h for float and double, not a public header. */
#define R_ STENCIL_REAL

/* Radius 1, 3D (7 points): v = c0 u; v = fma(cx, xm + xp, v); v = fma(cy, ym + yp, v);
 * v = fma(cz, zm + zp, v). */
STENCIL_POINT R_ STENCIL_SFX(stencil_star1)(R_ c0, R_ cx, R_ cy, R_ cz, R_ u, R_ xm, R_ xp, R_ ym,
                                            R_ yp, R_ zm, R_ zp)
{
  R_ v = c0 * u;
  v = stencil_fma(cx, xm + xp, v);
  v = stencil_fma(cy, ym + yp, v);
  return stencil_fma(cz, zm + zp, v);
}

/* Radius 1, 2D (5 points): the same without z. */
STENCIL_POINT R_ STENCIL_SFX(stencil_star1_2d)(R_ c0, R_ cx, R_ cy, R_ u, R_ xm, R_ xp, R_ ym,
                                               R_ yp)
{
  R_ v = c0 * u;
  v = stencil_fma(cx, xm + xp, v);
  return stencil_fma(cy, ym + yp, v);
}

/* Any radius: the cell at p of an array with row stride sy and plane stride sz; the axes x, y
 * (and z with three_d) in order, each its pairs m = 1..radius in order. */
STENCIL_POINT R_ STENCIL_SFX(stencil_star)(const R_ *p, int64_t sy, int64_t sz, int three_d,
                                           int radius, R_ c0, const R_ (*c)[4])
{
  R_ v = c0 * p[0];
  STENCIL_UNROLL
  for (int m = 1; m <= radius; m++)
    v = stencil_fma(c[0][m - 1], p[-m] + p[m], v);
  STENCIL_UNROLL
  for (int m = 1; m <= radius; m++)
    v = stencil_fma(c[1][m - 1], p[-m * sy] + p[m * sy], v);
  if (three_d) {
    STENCIL_UNROLL
    for (int m = 1; m <= radius; m++)
      v = stencil_fma(c[2][m - 1], p[-m * sz] + p[m * sz], v);
  }
  return v;
}

/* The steps of the update above, for a kernel that gathers the neighbours as it goes: the
 * centre (v = c0 u), then one pair (v = fma(c, um + up, v)) for each axis in order and each
 * m = 1..radius in order; stencil_star_nb is their composition. */
STENCIL_POINT R_ STENCIL_SFX(stencil_centre)(R_ c0, R_ u)
{
  return c0 * u;
}
STENCIL_POINT R_ STENCIL_SFX(stencil_pair)(R_ c, R_ um, R_ up, R_ v)
{
  return stencil_fma(c, um + up, v);
}

/* Any radius, from the neighbours a kernel holds: nm[a][m - 1] and np[a][m - 1] are the cells
 * m before and after u along axis a (a < ndim, m = 1..radius); the same order as
 * stencil_star. */
STENCIL_POINT R_ STENCIL_SFX(stencil_star_nb)(int ndim, int radius, R_ c0, const R_ (*c)[4], R_ u,
                                              const R_ (*nm)[4], const R_ (*np)[4])
{
  R_ v = STENCIL_SFX(stencil_centre)(c0, u);
  STENCIL_UNROLL
  for (int a = 0; a < 3; a++) {
    if (a >= ndim)
      break;
    STENCIL_UNROLL
    for (int m = 1; m <= radius; m++)
      v = STENCIL_SFX(stencil_pair)(c[a][m - 1], nm[a][m - 1], np[a][m - 1], v);
  }
  return v;
}

/* The source term, last: v = fma(cf, f, v). */
STENCIL_POINT R_ STENCIL_SFX(stencil_source)(R_ cf, R_ f, R_ v)
{
  return stencil_fma(cf, f, v);
}

/* What a residual sums the square of: the update v of u minus u, in the field's precision,
 * then in double (exact squares for fp32). */
STENCIL_POINT double STENCIL_SFX(stencil_residual)(R_ v, R_ u)
{
  return (double)(v - u);
}

#undef R_
