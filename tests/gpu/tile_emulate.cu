/* The tier-2 tile form's per-thread code (kernels/cuda/heat_tile.cuh) run on the host for
 * every thread of every block, phase by phase, as the kernel runs it: prologue; per plane,
 * head (wait for copies) for every thread, a barrier, body (copy ahead, update) for every
 * thread; tail. No GPU is needed (label unit).
 *
 * The emulated cp.async copies land only when their thread waits for them, and every
 * shared-memory word is checked: a read of a word whose copy is still in flight or that no
 * copy wrote, a read of a word another thread's copy landed in since the last barrier, and a
 * copy into a word another thread read since the last barrier, or that a copy still in
 * flight targets, are errors; so are global accesses outside the arrays and copies left in
 * flight when a block ends. The updated array (interior, ghost cells and padding) must equal
 * a plain loop's, bit for bit, over many random boxes, launch shapes, faces and sizes.
 *
 *   tile_emulate [CASES [SEED]]   default 400 cases, seed 1 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

/* ---- the emulated primitives ------------------------------------------------------------- */

struct emu_copy {
  int group;
  unsigned char *dst;
  const unsigned char *src;
};

struct emu_state {
  unsigned char *sm;
  size_t words; /* 4-byte words of shared memory */
  std::vector<int> wr_ep, wr_id, rd_ep, rd_id;
  std::vector<unsigned char> inflight;
  int epoch, id;
  std::vector<std::vector<emu_copy>> pend;
  std::vector<int> groups;
  const unsigned char *u_lo, *u_hi, *f_lo, *f_hi;
  unsigned char *v_lo, *v_hi;
  long errors;
  char first[400];
};
static emu_state emu;

static void emu_error(const char *what, size_t word)
{
  if (emu.errors++ == 0)
    snprintf(emu.first, sizeof emu.first, "%s (shared word %zu, thread %d, phase %d)", what, word,
             emu.id, emu.epoch);
}

static size_t emu_word(const void *p, size_t bytes)
{
  const unsigned char *c = (const unsigned char *)p;
  if (c < emu.sm || c + bytes > emu.sm + 4 * emu.words) {
    emu_error("shared-memory access outside the block's buffers", 0);
    return (size_t)-1;
  }
  return (size_t)(c - emu.sm) / 4;
}

template <typename REAL> static void tile_copy16(REAL *dst, const REAL *src)
{
  const unsigned char *s = (const unsigned char *)src;
  if (s < emu.u_lo || s + 16 > emu.u_hi || (s - emu.u_lo) % 16)
    emu_error("copy from outside u, or not 16-byte aligned", 0);
  const size_t w = emu_word(dst, 16);
  if (w == (size_t)-1)
    return;
  if (((unsigned char *)dst - emu.sm) % 16)
    emu_error("copy to a shared address that is not 16-byte aligned", w);
  for (size_t i = w; i < w + 4; i++) {
    if (emu.inflight[i])
      emu_error("copy into a word another copy in flight targets", i);
    if (emu.rd_ep[i] == emu.epoch && emu.rd_id[i] != emu.id)
      emu_error("copy into a word another thread read since the last barrier", i);
    if (emu.wr_ep[i] == emu.epoch && emu.wr_id[i] != emu.id)
      emu_error("copy into a word another thread's copy wrote since the last barrier", i);
    emu.inflight[i] = 1;
  }
  if (s >= emu.u_lo && s + 16 <= emu.u_hi)
    emu.pend[emu.id].push_back(emu_copy{emu.groups[emu.id], (unsigned char *)dst, s});
}

static void tile_commit()
{
  emu.groups[emu.id]++;
}

/* The copies of all but the newest `pending` groups land now. */
static void tile_wait(int pending)
{
  std::vector<emu_copy> &q = emu.pend[emu.id];
  std::vector<emu_copy> keep;
  for (const emu_copy &c : q) {
    if (c.group >= emu.groups[emu.id] - pending) {
      keep.push_back(c);
      continue;
    }
    memcpy(c.dst, c.src, 16);
    const size_t w = (size_t)(c.dst - emu.sm) / 4;
    for (size_t i = w; i < w + 4; i++) {
      emu.inflight[i] = 0;
      emu.wr_ep[i] = emu.epoch;
      emu.wr_id[i] = emu.id;
    }
  }
  q.swap(keep);
}

template <typename REAL> static REAL tile_lds(const REAL *p)
{
  const size_t w = emu_word(p, sizeof(REAL));
  if (w == (size_t)-1)
    return (REAL)NAN;
  for (size_t i = w; i < w + sizeof(REAL) / 4; i++) {
    if (emu.inflight[i])
      emu_error("read of a word whose copy was not waited for", i);
    else if (emu.wr_ep[i] < 0)
      emu_error("read of a word no copy wrote", i);
    else if (emu.wr_ep[i] == emu.epoch && emu.wr_id[i] != emu.id)
      emu_error("read of a word another thread's copy wrote since the last barrier", i);
    emu.rd_id[i] = emu.rd_ep[i] == emu.epoch && emu.rd_id[i] != emu.id ? -2 : emu.id;
    emu.rd_ep[i] = emu.epoch;
  }
  return *p;
}

template <typename REAL> static REAL tile_ldg(const REAL *p)
{
  const unsigned char *c = (const unsigned char *)p;
  if (c < emu.f_lo || c + sizeof(REAL) > emu.f_hi) {
    emu_error("source read outside f", 0);
    return (REAL)NAN;
  }
  return *p;
}

template <typename REAL> static void tile_stg(REAL *p, REAL x)
{
  unsigned char *c = (unsigned char *)p;
  if (c < emu.v_lo || c + sizeof(REAL) > emu.v_hi) {
    emu_error("store outside v", 0);
    return;
  }
  *p = x;
}

#define TILE_EMULATION 1
#include "kernels/cuda/heat_tile.cuh"

/* ---- one launch, emulated ------------------------------------------------------------------ */

template <typename REAL, int R> static void emulate(const tile_args<REAL> &a, const int64_t grid[3])
{
  const int nt = a.tx * a.tt;
  const size_t bytes = tile_smem_bytes((int)sizeof(REAL), R, a.tx, a.tt, a.ring);
  std::vector<double> smem(bytes / sizeof(double) + 2);
  emu.sm = (unsigned char *)smem.data();
  emu.words = bytes / 4;
  emu.wr_ep.assign(emu.words, -1);
  emu.wr_id.assign(emu.words, -1);
  emu.rd_ep.assign(emu.words, -1);
  emu.rd_id.assign(emu.words, -1);
  emu.inflight.assign(emu.words, 0);
  std::vector<tile_thread<REAL, R>> th((size_t)nt);
  for (int64_t bz = 0; bz < grid[2]; bz++)
    for (int64_t by = 0; by < grid[1]; by++)
      for (int64_t bx = 0; bx < grid[0]; bx++) {
        memset(emu.sm, 0xff, bytes); /* NaN in either precision */
        for (size_t i = 0; i < emu.words; i++)
          emu.wr_ep[i] = emu.rd_ep[i] = -1;
        emu.pend.assign((size_t)nt, std::vector<emu_copy>());
        emu.groups.assign((size_t)nt, 0);
        emu.epoch = 0;
        tile_block b;
        tile_block_init<REAL, R>(a, bx, by, bz, b);
        REAL *sm = (REAL *)emu.sm;
        for (int t = 0; t < nt; t++) {
          emu.id = t;
          tile_thread_init<REAL, R>(a, b, t, th[t]);
          tile_prologue<REAL, R>(a, th[t], sm);
        }
        for (int i = 0; i < b.nk; i++) {
          for (int t = 0; t < nt; t++) {
            emu.id = t;
            tile_head<REAL>(a);
          }
          emu.epoch++; /* __syncthreads() */
          for (int t = 0; t < nt; t++) {
            emu.id = t;
            tile_body<REAL, R>(a, b, th[t], i, sm);
          }
        }
        for (int t = 0; t < nt; t++) {
          emu.id = t;
          tile_tail();
          if (!emu.pend[t].empty())
            emu_error("copies left in flight at the end of the block", 0);
        }
      }
}

/* ---- the reference: a plain loop over the box, every backend's operation order ----------- */

template <typename REAL> static void reference(const tile_args<REAL> &a, REAL *v)
{
  for (int64_t k = a.lo[2]; k < a.hi[2]; k++)
    for (int64_t j = a.lo[1]; j < a.hi[1]; j++)
      for (int64_t x = a.lo[0]; x < a.hi[0]; x++) {
        const int64_t o = a.row0 + j * a.s1 + k * a.ss + x + a.h0;
        const REAL *p = a.u + o;
        REAL acc = a.c0 * p[0];
        acc = acc + a.cx * (p[-1] + p[1]);
        if (a.three_d)
          acc = acc + a.cy * (p[-a.s1] + p[a.s1]);
        acc = acc + a.cs * (p[-a.ss] + p[a.ss]);
        if (a.f)
          acc = acc + a.cf * a.f[o];
        v[o] = acc;
        const int64_t at[3] = {x, j, k}, st[3] = {1, a.s1, a.ss};
        for (int ax = 0; ax < 3; ax++)
          for (int side = 0; side < 2; side++) {
            const int kind = a.kind[2 * ax + side];
            if (kind && at[ax] == (side ? a.n[ax] - 1 : 0))
              v[o + (side ? st[ax] : -st[ax])] = kind == 1 ? a.two_g[2 * ax + side] - acc : acc;
          }
      }
}

/* ---- cases ----------------------------------------------------------------------------------- */

static uint64_t rng = 1;
static uint64_t next(void)
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}
static int64_t pick(int64_t lo, int64_t hi) /* in [lo, hi] */
{
  return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
}
static double uniform(void)
{
  return 0.5 + (double)(next() >> 11) / 9007199254740992.0;
}

/* A case: block n (3D, or 2D with n[2] = 1), a box, faces, source, launch shape. */
template <typename REAL, int R> static int run_case(int id, int three_d, const int64_t n3[3])
{
  constexpr int E = 16 / sizeof(REAL);
  /* The device layout of heat.cu (dev_layout): halo 1 (none along z in 2D), rows padded to a
   * multiple of 32 elements with room for one vector beyond the ghost cell. */
  const int halo[3] = {1, 1, three_d ? 1 : 0};
  const int64_t sy = (n3[0] + 2 * halo[0] + 2 * E + 31) / 32 * 32;
  const int64_t sz = sy * (n3[1] + 2 * halo[1]);
  const int64_t count = sz * (n3[2] + 2 * halo[2]);
  const int64_t origin = halo[0] + halo[1] * sy + halo[2] * sz;
  /* Logical axes: t1 = y, s = z (3D); t1 = z, s = y (2D). */
  const int map[3] = {0, three_d ? 1 : 2, three_d ? 2 : 1};
  const int64_t stride[3] = {1, sy, sz};
  tile_args<REAL> a;
  memset(&a, 0, sizeof a);
  a.row0 = origin - halo[0];
  a.s1 = stride[map[1]];
  a.ss = stride[map[2]];
  a.h0 = halo[0];
  a.three_d = three_d;
  for (int ax = 0; ax < 3; ax++)
    a.n[ax] = n3[map[ax]];
  /* The box: whole, inner, a shell slab, or random. */
  int64_t lo[3] = {0, 0, 0}, hi[3] = {n3[0], n3[1], n3[2]};
  const int nd = three_d ? 3 : 2;
  const int kind = (int)pick(0, 3);
  if (kind == 1) {
    for (int ax = 0; ax < nd; ax++)
      if (n3[ax] > 2)
        lo[ax] = 1, hi[ax] = n3[ax] - 1;
  } else if (kind == 2) {
    const int ax = (int)pick(0, nd - 1);
    if (pick(0, 1))
      hi[ax] = lo[ax] + 1;
    else
      lo[ax] = hi[ax] - 1;
  } else if (kind == 3) {
    for (int ax = 0; ax < nd; ax++) {
      lo[ax] = pick(0, n3[ax] - 1);
      hi[ax] = pick(lo[ax] + 1, n3[ax]);
    }
  }
  for (int ax = 0; ax < 3; ax++) {
    a.lo[ax] = lo[map[ax]];
    a.hi[ax] = hi[map[ax]];
  }
  /* Coefficients as the tests use them; faces: none, Dirichlet or Neumann, each. */
  const double c[3] = {0.11, 0.07, 0.05};
  a.c0 = (REAL)(1.0 - 2.0 * (c[0] + c[1] + (three_d ? c[2] : 0.0)));
  a.cx = (REAL)c[0];
  a.cy = (REAL)c[1];
  a.cs = (REAL)(three_d ? c[2] : c[1]);
  a.cf = (REAL)0.0625;
  for (int f = 0; f < 6; f++) {
    const int real_face = map[f / 2] < nd;
    a.kind[f] = real_face ? (int)pick(0, 2) : 0;
    a.two_g[f] = (REAL)(2.0 * (0.25 + 0.125 * f));
  }
  /* Launch shape. */
  static const int txs[] = {32, 32, 64, 96};
  a.tx = txs[pick(0, 3)];
  a.tt = (int)pick(1, 3);
  if (!three_d && pick(0, 1))
    a.tt = 1;
  static const int zcs[] = {1, 2, 3, 5, 8, 64};
  a.zc = zcs[pick(0, 5)];
  a.ring = (int)pick(TILE_MIN_RING, TILE_MAX_RING);
  a.pitch = a.tx + 2 * E;
  a.plane = (R * a.tt + 2) * a.pitch;
  if (tile_shape_error((int)sizeof(REAL), R, a.tx, a.tt, a.ring))
    return 0; /* not a valid shape (the tuner and STENCIL_CUDA_TILE refuse it too) */
  const int source = (int)pick(0, 1);
  /* Arrays: u random everywhere (ghosts and padding too), f random, v random (what must
   * survive). Base addresses 256-byte aligned, as cudaMalloc gives. */
  const size_t bytes = ((size_t)count * sizeof(REAL) + 255) / 256 * 256;
  REAL *u = (REAL *)aligned_alloc(256, bytes), *f = (REAL *)aligned_alloc(256, bytes);
  REAL *v = (REAL *)aligned_alloc(256, bytes), *want = (REAL *)aligned_alloc(256, bytes);
  if (!u || !f || !v || !want) {
    fprintf(stderr, "tile_emulate: out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < count; i++) {
    u[i] = (REAL)uniform();
    f[i] = (REAL)uniform();
    v[i] = want[i] = (REAL)(-uniform());
  }
  a.u = u;
  a.f = source ? f : nullptr;
  a.v = v;
  emu.u_lo = (const unsigned char *)u;
  emu.u_hi = (const unsigned char *)(u + count);
  emu.f_lo = (const unsigned char *)f;
  emu.f_hi = (const unsigned char *)(f + count);
  emu.v_lo = (unsigned char *)v;
  emu.v_hi = (unsigned char *)(v + count);
  emu.errors = 0;
  const int64_t grid[3] = {(a.hi[0] - a.lo[0] + a.tx - 1) / a.tx,
                           (a.hi[1] - a.lo[1] + R * a.tt - 1) / (R * a.tt),
                           (a.hi[2] - a.lo[2] + a.zc - 1) / a.zc};
  emulate<REAL, R>(a, grid);
  reference<REAL>(a, want);
  int64_t bad = -1;
  for (int64_t i = 0; i < count && bad < 0; i++)
    if (memcmp(&v[i], &want[i], sizeof(REAL)))
      bad = i;
  int status = 0;
  if (emu.errors || bad >= 0) {
    fprintf(stderr,
            "tile_emulate: case %d FAILED: fp%d %dD %lldx%lldx%lld box [%lld,%lld)x[%lld,%lld)x"
            "[%lld,%lld) R %d block %dx%d zc %d ring %d source %d faces %d%d%d%d%d%d: ",
            id, (int)(8 * sizeof(REAL)), three_d ? 3 : 2, (long long)n3[0], (long long)n3[1],
            (long long)n3[2], (long long)lo[0], (long long)hi[0], (long long)lo[1],
            (long long)hi[1], (long long)lo[2], (long long)hi[2], R, a.tx, a.tt, a.zc, a.ring,
            source, a.kind[0], a.kind[1], a.kind[2], a.kind[3], a.kind[4], a.kind[5]);
    if (emu.errors)
      fprintf(stderr, "%ld access errors, first: %s\n", emu.errors, emu.first);
    else
      fprintf(stderr, "element %lld differs: %.17g, expected %.17g\n", (long long)bad,
              (double)v[bad], (double)want[bad]);
    status = 1;
  }
  free(u), free(f), free(v), free(want);
  return status;
}

int main(int argc, char **argv)
{
  const int cases = argc > 1 ? atoi(argv[1]) : 400;
  rng = argc > 2 ? strtoull(argv[2], NULL, 10) * 0x9e3779b97f4a7c15ull + 1 : 1;
  static const int64_t sizes3[][3] = {{37, 29, 23}, {70, 9, 13}, {5, 3, 2}, {1, 6, 4},
                                      {130, 2, 3},  {33, 17, 1}, {64, 8, 9}};
  static const int64_t sizes2[][3] = {{133, 67, 1}, {4, 301, 1}, {1, 1, 1}, {65, 3, 1}};
  int failed = 0, run = 0;
  for (int id = 0; id < cases; id++) {
    const int three_d = id % 4 != 3;
    const int64_t *n = three_d ? sizes3[pick(0, 6)] : sizes2[pick(0, 3)];
    const int which = (int)pick(0, 3);
    const int rc = which == 0   ? run_case<float, 4>(id, three_d, n)
                   : which == 1 ? run_case<float, 2>(id, three_d, n)
                   : which == 2 ? run_case<double, 4>(id, three_d, n)
                                : run_case<double, 2>(id, three_d, n);
    failed += rc;
    run++;
  }
  printf("tile_emulate: %d cases, %d failed\n", run, failed);
  return failed ? 1 : 0;
}
