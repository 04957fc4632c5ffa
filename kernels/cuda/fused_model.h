#pragma once
/* The host side shared by the fused kernels (strip2d.cu, tile3d.cu): errors, integer helpers,
 * and the model of a launch's waves of CTAs from which the plans choose their chunks
 * (docs/design/fused-kernels.md, "Waves and chunks"). Host code only; fused_model.cu. */
#include "kernels/cuda/cuda_rt.h"
#include <stdint.h>

#include "kernels/cuda/fused.h"

#define FM_HD __host__ __device__ __forceinline__

/* ---- errors ------------------------------------------------------------------------------ */

/* Print "stencil: error: fused kernel: ..." on stderr and return 1. */
int fused_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* T of a warp-strip or warp-row plan (pl->steps): the requested one, or the fastest for the
 * problem class (`best`) capped by the halo and the kernels built (`built`). fused_plan.cu. */
int fused_plan_steps(struct fused_plan *pl, const struct fused_config *want, int tmax_halo,
                     int built, int best);
/* Pipeline iterations of a CTA or warp on `planes` planes (rows): with the fill of 2T,
 * rounded up to the unroll of 3. */
int64_t fm_iterations(int64_t planes, int T);
/* The chunk (rows or planes per CTA or warp) of a kernel whose `tiles` x ceil(n / chunk)
 * equal work items run in waves of `resident`: the one that minimises waves x (chunk + 2T
 * of pipeline fill, rounded up to the unroll of 3), at least 4T; a partly empty last wave
 * costs a whole one. resident < 1: the smallest such chunk. */
int fm_wave_chunk(int64_t n, int64_t tiles, int T, int64_t resident);
/* The same model for CTAs dispatched chunk by chunk (the grid's slowest axis) to `resident`
 * slots as they free, where the first chunk takes what the others leave (*c0 = n - m *c planes,
 * then m chunks of *c): a long first chunk keeps the slots busy while the CTAs of the short ones
 * fill the last wave. Returns the modelled time in pipeline iterations of one slot for the
 * chunks that minimise it (each at least 4T, or fm_wave_chunk's equal chunks); resident < 1:
 * those equal chunks. fm_chunks_time models a first chunk of c0 planes, then chunks of c. */
int64_t fm_wave_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int *c0, int *c);
/* The first of n planes' chunks when the others take c each: what they leave (1..c for equal
 * chunks). The warp-row kernel places its chunks by this rule (tile3d.cuh). */
static inline int fm_first_chunk(int64_t n, int c)
{
  return (int)(n - (n - 1) / c * c);
}
int64_t fm_chunks_time(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c);
/* Chunks by tile: the first *whole tiles of a plane (the whole waves of `resident` slots that
 * leave some over) in one chunk of all n planes, dispatched first, then each of the others in
 * *pieces chunks of *c (the first one what the others leave), which fill the last wave.
 * Returns the model's time (fm_chunks_time's slots) where that beats `uniform` (a launch's
 * time in chunks the same for every tile) by at least 1 %, else `uniform` with *pieces = 0.
 * docs/design/fused-kernels.md, "Waves and chunks". */
int64_t fm_tile_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int64_t uniform,
                       int *whole, int *pieces, int *c);
/* The chunks of a launch on a range of nz of a block's n planes (the inner part of a launch
 * in parts), whose whole launches take c0 planes, then chunks of c, chosen by the waves
 * (fm_wave_chunks) where `waves` is set: where a plane's tiles outnumber the resident slots,
 * the plan's short chunks, the first one shortened by the planes left out (while it stays at
 * least c long: returns 1); else equal chunks, by the waves of the range where the plan's were
 * (returns 0, as for the whole block): a long first chunk there is slower, as it holds the
 * slots the shells need (docs/design/fused-kernels.md, "Designs measured and not used"). */
int fm_range_chunks(int64_t n, int c0, int c, int waves, int64_t tiles, int T, int64_t resident,
                    int64_t nz, int *rc0, int *rc);
/* The same model for a signalled launch (tile3d_launch_signal: the last chunk dispatched
 * second): *tlo when the first chunk's CTAs have run `lo` iterations, *thi when the last
 * chunk's have ended; returns the launch's time (pipeline iterations of one slot). */
int64_t fm_signal_times(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c,
                        int64_t lo, int64_t *tlo, int64_t *thi);

/* A launch of two kernels that run concurrently (they write disjoint cells): fm_fork gives the
 * side stream for the second, which waits for everything queued on s so far; fm_join makes s
 * wait for everything queued on the side stream. The side stream is created on first use,
 * for the process's device (one device per process, as in stencil). */
int fm_fork(cudaStream_t s, cudaStream_t *side);
int fm_join(cudaStream_t s);
/* The residual sums of a launch: sums[l] = the sum of part[w * 8 + l] over its n warps' slots
 * w, in a fixed order (the same bits every run), on `stream`; 8 sums. */
int fm_sums(const double *part, int64_t n, double *sums, void *stream);

#define FM_CHECK_CUDA(call)                                                                        \
  do {                                                                                             \
    cudaError_t fm_err_ = (call);                                                                  \
    if (fm_err_ != cudaSuccess)                                                                    \
      return fused_fail("CUDA call %s failed: %s (%s)", #call, cudaGetErrorName(fm_err_),          \
                        cudaGetErrorString(fm_err_));                                              \
  } while (0)

FM_HD int64_t fm_floordiv(int64_t a, int64_t b)
{
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
FM_HD int64_t fm_ceildiv(int64_t a, int64_t b)
{
  return -fm_floordiv(-a, b);
}
FM_HD int64_t fm_min(int64_t a, int64_t b)
{
  return a < b ? a : b;
}
FM_HD int64_t fm_max(int64_t a, int64_t b)
{
  return a > b ? a : b;
}
