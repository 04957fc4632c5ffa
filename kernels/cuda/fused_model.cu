/* The wave model of the fused kernels' launches (fused_model.h). */
#include <stdarg.h>
#include <stdio.h>

#include <functional>
#include <queue>
#include <vector>

#include "kernels/cuda/fused_model.h"

int fused_fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "stencil: error: fused kernel: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

int64_t fm_iterations(int64_t planes, int T)
{
  return (planes + 2 * T + 2) / 3 * 3;
}

int fm_wave_chunk(int64_t n, int64_t tiles, int T, int64_t resident)
{
  int best = (int)(n < 65535 ? n : 65535);
  double best_cost = -1;
  for (int64_t k = 1; k <= 65535; k++) {
    const int64_t c = (n + k - 1) / k;
    if (k > 1 && c < 4 * T)
      break;
    if (k > 1 && c == (n + k - 2) / (k - 1))
      continue;
    const int64_t chunks = (n + c - 1) / c;
    const int64_t waves = resident > 0 ? (tiles * chunks + resident - 1) / resident : 1;
    const double cost = (double)waves * (double)fm_iterations(c, T);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = (int)c;
    }
  }
  return best;
}

/* The slots' model for groups of CTAs dispatched in order, group i: count[i] CTAs of work[i]
 * iterations each, to `resident` slots as they free; returns when the last slot is done. */
static int64_t fm_groups_time(const std::vector<int64_t> &count, const std::vector<int64_t> &work,
                              int64_t resident)
{
  /* The slots' busy-until times as (time, count) in increasing time: at most `resident`
   * entries, each group of equal CTAs taken from the front. */
  std::vector<int64_t> t(1, 0), k(1, resident);
  for (size_t g = 0; g < count.size(); g++)
    for (int64_t left = count[g]; left > 0;) {
      const int64_t take = fm_min(k[0], left), at = t[0] + work[g];
      left -= take;
      if ((k[0] -= take) == 0) {
        t.erase(t.begin());
        k.erase(k.begin());
      }
      size_t i = 0;
      while (i < t.size() && t[i] < at)
        i++;
      if (i < t.size() && t[i] == at)
        k[i] += take;
      else {
        t.insert(t.begin() + (ptrdiff_t)i, at);
        k.insert(k.begin() + (ptrdiff_t)i, take);
      }
    }
  return t.back();
}

int64_t fm_chunks_time(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c)
{
  std::vector<int64_t> count, work;
  for (int64_t z = 0; z < n;) {
    const int64_t len = fm_min(z == 0 ? c0 : c, n - z);
    z += len;
    count.push_back(tiles);
    work.push_back(fm_iterations(len, T));
  }
  return fm_groups_time(count, work, resident);
}

int64_t fm_tile_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int64_t uniform,
                       int *whole, int *pieces, int *c)
{
  *whole = *pieces = *c = 0;
  int64_t best = uniform;
  /* all the whole waves (fewer model no faster, and searching them costs time per launch) */
  const int64_t a = resident > 0 ? (tiles - 1) / resident * resident : 0;
  if (a > 0)
    for (int64_t k = 2; k <= 16; k++) {
      const int64_t cc = (n + k - 1) / k, first = n - (k - 1) * cc;
      if (cc < 4 * T)
        break;
      if (first < 1)
        continue;
      const int64_t time = fm_groups_time(
          {a, tiles - a, (tiles - a) * (k - 1)},
          {fm_iterations(n, T), fm_iterations(first, T), fm_iterations(cc, T)}, resident);
      if (time < best && time * 100 < uniform * 99) {
        best = time;
        *whole = (int)a;
        *pieces = (int)k;
        *c = (int)cc;
      }
    }
  return best;
}

int64_t fm_wave_chunks(int64_t n, int64_t tiles, int T, int64_t resident, int *c0, int *c)
{
  /* equal chunks (the first one takes the rest): the candidate to beat */
  *c = fm_wave_chunk(n, tiles, T, resident);
  *c0 = fm_first_chunk(n, *c);
  int64_t best = fm_chunks_time(n, tiles, T, resident < 1 ? 1 : resident, *c0, *c);
  if (resident < 1)
    return best;
  /* A first chunk of n - m b planes, then m of b: m at most 64, within eight waves of CTAs
   * (beyond, equal chunks leave little to gain), b in steps of at most 1/1024 of n. The work
   * beyond the slots' share bounds the time from below and grows with m by each fill. */
  const int64_t step = n / 1024 + 1;
  for (int64_t m = 1; m <= 64 && (m + 1) * tiles <= 8 * resident && n - m * 4 * T >= 4 * T; m++) {
    if ((tiles * (n + (m + 1) * 2 * T) + resident - 1) / resident > best)
      break;
    for (int64_t b = 4 * T; n - m * b >= 4 * T; b += step) {
      const int64_t a = n - m * b;
      if (a > 65535 || b > 65535)
        continue;
      const int64_t time = fm_chunks_time(n, tiles, T, resident, a, b);
      if (time < best) {
        best = time;
        *c0 = (int)a;
        *c = (int)b;
      }
    }
  }
  return best;
}

int fm_range_chunks(int64_t n, int c0, int c, int waves, int64_t tiles, int T, int64_t resident,
                    int64_t nz, int *rc0, int *rc)
{
  *rc0 = c0;
  *rc = c;
  if (nz == n)
    return 0;
  const int64_t shorts = (n - c0) / c;
  if (waves && tiles > resident && nz - shorts * c >= c) {
    *rc0 = (int)(nz - shorts * c);
    return 1;
  }
  if (waves)
    *rc = fm_wave_chunk(nz, tiles, T, resident);
  *rc0 = fm_first_chunk(nz, *rc);
  return 0;
}

int64_t fm_signal_times(int64_t n, int64_t tiles, int T, int64_t resident, int64_t c0, int64_t c,
                        int64_t lo, int64_t *tlo, int64_t *thi)
{
  const int64_t k = n <= c0 ? 1 : 1 + (n - c0 + c - 1) / c, first = n - (k - 1) * c;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> slots;
  for (int64_t r = 0; r < fm_max(resident, 1); r++)
    slots.push(0);
  int64_t end = 0;
  *tlo = *thi = 0;
  for (int64_t j = 0; j < k; j++) {
    const int64_t chunk = j == 0 ? 0 : j == 1 ? k - 1 : j - 1; /* dispatch order */
    const int64_t w = fm_iterations(chunk == 0 ? first : c, T);
    for (int64_t t = 0; t < tiles; t++) {
      const int64_t at = slots.top();
      slots.pop();
      slots.push(at + w);
      end = fm_max(end, at + w);
      if (chunk == 0)
        *tlo = fm_max(*tlo, at + fm_min(lo, w));
      if (chunk == k - 1)
        *thi = fm_max(*thi, at + w);
    }
  }
  return end;
}

/* sums[l] = part[0][l] + part[1][l] + ... over n warps, in a fixed order; one CTA of 256. */
static __global__ void __launch_bounds__(256) fm_reduce(const double *part, int64_t n, double *sums)
{
  __shared__ double acc[8][256];
  for (int l = 0; l < 8; l++) {
    double v = 0;
    for (int64_t w = threadIdx.x; w < n; w += 256)
      v += part[w * 8 + l];
    acc[l][threadIdx.x] = v;
  }
  __syncthreads();
  for (int half = 128; half >= 1; half /= 2) {
    if ((int)threadIdx.x < half)
      for (int l = 0; l < 8; l++)
        acc[l][threadIdx.x] += acc[l][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x < 8)
    sums[threadIdx.x] = acc[threadIdx.x][0];
}

int fm_sums(const double *part, int64_t n, double *sums, void *stream)
{
  FM_CHECK_CUDA(
      stencil_launch(fm_reduce, dim3(1), dim3(256), 0, (cudaStream_t)stream, part, n, sums));
  return 0;
}

static cudaStream_t fm_side;
static cudaEvent_t fm_forked, fm_joined;

int fm_fork(cudaStream_t s, cudaStream_t *side)
{
  if (!fm_side) {
    FM_CHECK_CUDA(cudaStreamCreateWithFlags(&fm_side, cudaStreamNonBlocking));
    FM_CHECK_CUDA(cudaEventCreateWithFlags(&fm_forked, cudaEventDisableTiming));
    FM_CHECK_CUDA(cudaEventCreateWithFlags(&fm_joined, cudaEventDisableTiming));
  }
  FM_CHECK_CUDA(cudaEventRecord(fm_forked, s));
  FM_CHECK_CUDA(cudaStreamWaitEvent(fm_side, fm_forked, 0));
  *side = fm_side;
  return 0;
}

int fm_join(cudaStream_t s)
{
  FM_CHECK_CUDA(cudaEventRecord(fm_joined, fm_side));
  FM_CHECK_CUDA(cudaStreamWaitEvent(s, fm_joined, 0));
  return 0;
}
