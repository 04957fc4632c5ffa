#pragma once
/* The point update of every backend: the star-stencil update of one cell, with the
 * operation order that makes all backends give the same bits (docs/design/numerics.md).
 * Plain C, also compiled as CUDA C++ (host and device). */
#include <stdint.h>

#include "common/types.h"

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
 * same bits. radius is 1 to 4. Heat: c0 = 1 + alpha dt w_0 sum_a 1/h_a^2,
 * c[a][m-1] = alpha dt w_m / h_a^2, cf = dt (solvers/heat.h); Jacobi for lap u = f:
 * solvers/poisson.h. */
struct stencil_coef {
  int ndim;
  int radius;
  double c0;
  double c[3][4];
  double cf; /* weight of the source f; unused without one */
};
