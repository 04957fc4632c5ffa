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

/* ---- the point update --------------------------------------------------------------------

 * One cell of the update above, for the radius-1 stars (3D 7-point, 2D 5-point) and any
 * radius, the source term, and the difference a residual sums. Every backend and kernel
 * computes through these, so the operation order lives here only: with no contraction by the
 * compiler (-ffp-contract=off, nvcc -fmad=false) each one is the same sequence of roundings
 * on the CPU and the GPU. Generated for float (_f32) and double (_f64) from point_real.h; C++
 * has overloads without the suffix. */
#ifdef __CUDACC__
#define STENCIL_POINT static __host__ __device__ __forceinline__
#else
#define STENCIL_POINT static inline
#endif
#ifdef __CUDA_ARCH__ /* (the device pass: unroll the pairs where the radius is a constant) */
#define STENCIL_UNROLL _Pragma("unroll")
#else
#define STENCIL_UNROLL
#endif

#define STENCIL_REAL float
#define STENCIL_SFX(name) name##_f32
#include "kernels/point_real.h"
#undef STENCIL_REAL
#undef STENCIL_SFX
#define STENCIL_REAL double
#define STENCIL_SFX(name) name##_f64
#include "kernels/point_real.h"
#undef STENCIL_REAL
#undef STENCIL_SFX

#ifdef __cplusplus
extern "C++" {
#define STENCIL_OVERLOADS(R, SFX)                                                                  \
  STENCIL_POINT R stencil_star1(R c0, R cx, R cy, R cz, R u, R xm, R xp, R ym, R yp, R zm, R zp)   \
  {                                                                                                \
    return stencil_star1_##SFX(c0, cx, cy, cz, u, xm, xp, ym, yp, zm, zp);                         \
  }                                                                                                \
  STENCIL_POINT R stencil_star1_2d(R c0, R cx, R cy, R u, R xm, R xp, R ym, R yp)                  \
  {                                                                                                \
    return stencil_star1_2d_##SFX(c0, cx, cy, u, xm, xp, ym, yp);                                  \
  }                                                                                                \
  STENCIL_POINT R stencil_star(const R *p, int64_t sy, int64_t sz, int three_d, int radius, R c0,  \
                               const R(*c)[4])                                                     \
  {                                                                                                \
    return stencil_star_##SFX(p, sy, sz, three_d, radius, c0, c);                                  \
  }                                                                                                \
  STENCIL_POINT R stencil_star_nb(int ndim, int radius, R c0, const R(*c)[4], R u,                 \
                                  const R(*nm)[4], const R(*np)[4])                                \
  {                                                                                                \
    return stencil_star_nb_##SFX(ndim, radius, c0, c, u, nm, np);                                  \
  }                                                                                                \
  STENCIL_POINT R stencil_centre(R c0, R u)                                                        \
  {                                                                                                \
    return stencil_centre_##SFX(c0, u);                                                            \
  }                                                                                                \
  STENCIL_POINT R stencil_pair(R c, R um, R up, R v)                                               \
  {                                                                                                \
    return stencil_pair_##SFX(c, um, up, v);                                                       \
  }                                                                                                \
  STENCIL_POINT R stencil_source(R cf, R f, R v)                                                   \
  {                                                                                                \
    return stencil_source_##SFX(cf, f, v);                                                         \
  }                                                                                                \
  STENCIL_POINT double stencil_residual(R v, R u)                                                  \
  {                                                                                                \
    return stencil_residual_##SFX(v, u);                                                           \
  }
STENCIL_OVERLOADS(float, f32)
STENCIL_OVERLOADS(double, f64)
#undef STENCIL_OVERLOADS
}
#endif
