/* Unit tests of the Cartesian decomposition (domain/decomp.h).
 *
 *   - decomp_split: hand-computed examples, and for many (n, p) the invariants: counts
 *     differ by at most one, the n % p larger blocks are the first ones, offsets are
 *     contiguous and the counts sum to n.
 *   - decomp_create / decomp_neighbor on MPI_COMM_SELF: one rank owns everything, periodic
 *     axes wrap to the rank itself, other axes have no neighbour; refused --dims.
 *   - halo_create on MPI_COMM_SELF: what a rank sends itself is a wrap copy, not a message
 *     (26, 6 or 2 of them), and the CPU backend's copy_boxes of those boxes fills every ghost
 *     cell they cover, edges and corners too, with the interior cell at the wrapped position.
 *   - On 4 ranks (run through mpiexec -n 4): for several rank grids, 2D and 3D, periodic or
 *     not, the blocks of all ranks tile the global grid and every neighbour (all 26
 *     directions) is the rank whose coordinates are ours + dir, wrapped on periodic axes.
 *     The neighbour table is built independently from the gathered coordinates. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/error_mpi.h"
#include "domain/decomp.h"
#include "domain/halo.h"
#include "kernels/backend.h"
#include "unit.h"

static void test_split_examples(void)
{
  /* 10 cells over 4 ranks: 3 3 2 2 at 0 3 6 8. */
  const int64_t count10[4] = {3, 3, 2, 2}, off10[4] = {0, 3, 6, 8};
  for (int c = 0; c < 4; c++) {
    int64_t n, o;
    decomp_split(10, 4, c, &n, &o);
    EXPECT(n == count10[c] && o == off10[c], "split(10, 4, %d) = %lld at %lld", c, (long long)n,
           (long long)o);
  }
  /* 7 over 3: 3 2 2 at 0 3 5; 5 over 5: one each; 3 over 1: all. */
  const int64_t count7[3] = {3, 2, 2}, off7[3] = {0, 3, 5};
  for (int c = 0; c < 3; c++) {
    int64_t n, o;
    decomp_split(7, 3, c, &n, &o);
    EXPECT(n == count7[c] && o == off7[c], "split(7, 3, %d) = %lld at %lld", c, (long long)n,
           (long long)o);
  }
  for (int c = 0; c < 5; c++) {
    int64_t n, o;
    decomp_split(5, 5, c, &n, &o);
    EXPECT(n == 1 && o == c, "split(5, 5, %d) = %lld at %lld", c, (long long)n, (long long)o);
  }
  int64_t n, o;
  decomp_split(3, 1, 0, &n, &o);
  EXPECT(n == 3 && o == 0, "split(3, 1, 0) = %lld at %lld", (long long)n, (long long)o);
  /* Large extents (beyond 32 bits) keep exact offsets. */
  const int64_t big = ((int64_t)1 << 33) + 5;
  decomp_split(big, 3, 2, &n, &o);
  EXPECT(n == big / 3 && o == big - big / 3, "split(2^33+5, 3, 2) = %lld at %lld", (long long)n,
         (long long)o);
}

static void test_split_invariants(void)
{
  const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 16, 17, 31, 64, 100, 1000, 1000003};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int p = 1; p <= 17 && p <= sizes[s]; p++) {
      const int64_t total = sizes[s];
      int64_t next = 0, sum = 0, first = -1;
      for (int c = 0; c < p; c++) {
        int64_t n, o;
        decomp_split(total, p, c, &n, &o);
        if (c == 0)
          first = n;
        EXPECT(o == next, "split(%lld, %d, %d): offset %lld, expected %lld", (long long)total, p, c,
               (long long)o, (long long)next);
        /* The first total % p ranks get total / p + 1, the others total / p. */
        const int64_t want = total / p + (c < total % p ? 1 : 0);
        EXPECT(n == want, "split(%lld, %d, %d): count %lld, expected %lld", (long long)total, p, c,
               (long long)n, (long long)want);
        EXPECT(n >= 1 && n <= first && first - n <= 1, "split(%lld, %d, %d): count %lld unbalanced",
               (long long)total, p, c, (long long)n);
        next = o + n;
        sum += n;
      }
      EXPECT(sum == total, "split(%lld, %d): counts sum to %lld", (long long)total, p,
             (long long)sum);
    }
}

static void test_self(void)
{
  /* 3D, periodic along x and z: one rank, every periodic neighbour is itself. */
  const int64_t g3[3] = {10, 7, 5};
  const int per[3] = {1, 0, 1}, free_dims[3] = {0, 0, 0};
  struct decomp d;
  int st = decomp_create(MPI_COMM_SELF, g3, per, free_dims, 1, &d);
  EXPECT(st == STENCIL_OK, "decomp_create on MPI_COMM_SELF failed (%d)", st);
  if (st)
    return;
  EXPECT(d.size == 1 && d.rank == 0 && d.ndim == 3, "size %d rank %d ndim %d", d.size, d.rank,
         d.ndim);
  for (int a = 0; a < 3; a++) {
    EXPECT(d.dims[a] == 1 && d.coords[a] == 0, "axis %d: dims %d coords %d", a, d.dims[a],
           d.coords[a]);
    EXPECT(d.n[a] == g3[a] && d.offset[a] == 0, "axis %d: n %lld offset %lld", a, (long long)d.n[a],
           (long long)d.offset[a]);
    EXPECT(d.halo[a] == 1, "axis %d: halo %d", a, d.halo[a]);
    for (int s = 0; s < 2; s++)
      EXPECT(d.physical[a][s] == !per[a], "axis %d side %d: physical %d", a, s, d.physical[a][s]);
  }
  for (int dz = -1; dz <= 1; dz++)
    for (int dy = -1; dy <= 1; dy++)
      for (int dx = -1; dx <= 1; dx++) {
        const int dir[3] = {dx, dy, dz};
        const int want = dy != 0 ? MPI_PROC_NULL : 0; /* y is the only closed axis */
        const int got = decomp_neighbor(&d, dir);
        EXPECT(got == want, "self 3D: neighbour (%d,%d,%d) = %d, expected %d", dx, dy, dz, got,
               want);
      }
  decomp_free(&d);

  /* 2D: z is not split, has no halo and no physical faces. */
  const int64_t g2[3] = {6, 4, 1};
  const int per2[3] = {0, 1, 0};
  st = decomp_create(MPI_COMM_SELF, g2, per2, free_dims, 1, &d);
  EXPECT(st == STENCIL_OK, "2D decomp_create on MPI_COMM_SELF failed (%d)", st);
  if (st)
    return;
  EXPECT(d.ndim == 2 && d.halo[2] == 0 && d.n[2] == 1, "2D: ndim %d halo_z %d nz %lld", d.ndim,
         d.halo[2], (long long)d.n[2]);
  EXPECT(!d.physical[2][0] && !d.physical[2][1], "2D: z faces marked physical");
  EXPECT(d.physical[0][0] && d.physical[0][1] && !d.physical[1][0] && !d.physical[1][1],
         "2D: physical faces x %d %d y %d %d", d.physical[0][0], d.physical[0][1], d.physical[1][0],
         d.physical[1][1]);
  const int up[3] = {0, 1, 0}, left[3] = {-1, 0, 0};
  EXPECT(decomp_neighbor(&d, up) == 0, "2D: periodic y neighbour is not self");
  EXPECT(decomp_neighbor(&d, left) == MPI_PROC_NULL, "2D: closed x has a neighbour");
  decomp_free(&d);
}

/* Rank grids that cannot work on one rank are refused with a usage error and a message. */
static void test_self_refused(void)
{
  /* On MPI_COMM_SELF this process is rank 0 of 1, and so prints the message. */
  log_init(0, 1, 1);
  const int64_t g3[3] = {10, 7, 5}, g2[3] = {10, 7, 1};
  const int per[3] = {0, 0, 0};
  struct {
    const int64_t *global;
    int dims[3];
    const char *message;
  } cases[] = {
      {g3, {2, 1, 1}, "has 2 ranks but the run has 1"},
      {g2, {1, 1, 2}, "2D grid (nz = 1) cannot be split along z"},
      {g3, {-1, 1, 1}, "rank counts must be positive"},
      {g3, {0, 3, 0}, "do not divide 1 ranks"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct decomp d;
    struct unit_capture cap;
    char err[4096];
    unit_capture_begin(&cap);
    int st = decomp_create(MPI_COMM_SELF, cases[i].global, per, cases[i].dims, 1, &d);
    unit_capture_end(&cap, err, sizeof err);
    EXPECT(st == STENCIL_ERR_USAGE, "dims %dx%dx%d: status %d, expected a usage error",
           cases[i].dims[0], cases[i].dims[1], cases[i].dims[2], st);
    EXPECT(strstr(err, cases[i].message), "dims %dx%dx%d: message \"%s\" lacks \"%s\"",
           cases[i].dims[0], cases[i].dims[1], cases[i].dims[2], err, cases[i].message);
    if (st == STENCIL_OK)
      decomp_free(&d);
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  log_init(rank, size, 1);
}

/* decomp_set_halo (the fused kernels' T x radius ghost layers) and decomp_min_cells, on one
 * rank: the layout follows the new halo, and a halo deeper than the block is a usage error. */
static void test_set_halo(void)
{
  const int64_t g3[3] = {10, 7, 5};
  const int per[3] = {0, 0, 0}, free_dims[3] = {0, 0, 0};
  struct decomp d;
  int st = decomp_create(MPI_COMM_SELF, g3, per, free_dims, 1, &d);
  EXPECT(st == STENCIL_OK, "decomp_create failed (%d)", st);
  if (st)
    return;
  for (int a = 0; a < 3; a++)
    EXPECT(decomp_min_cells(&d, a) == g3[a], "axis %d: min cells %lld, expected %lld", a,
           (long long)decomp_min_cells(&d, a), (long long)g3[a]);
  const int deep[3] = {8, 4, 5};
  st = decomp_set_halo(&d, deep);
  EXPECT(st == STENCIL_OK, "halo 8x4x5 on 10x7x5 refused (%d)", st);
  struct layout l;
  decomp_layout(&d, 8, &l);
  EXPECT(l.halo[0] == 8 && l.halo[1] == 4 && l.halo[2] == 5, "layout halo %d %d %d", l.halo[0],
         l.halo[1], l.halo[2]);
  EXPECT(l.stride[1] == 10 + 16 && l.stride[2] == (10 + 16) * (7 + 8), "layout strides %lld %lld",
         (long long)l.stride[1], (long long)l.stride[2]);
  log_init(0, 1, 1);
  const int too_deep[3] = {2, 8, 2};
  struct unit_capture cap;
  char err[4096];
  unit_capture_begin(&cap);
  st = decomp_set_halo(&d, too_deep);
  unit_capture_end(&cap, err, sizeof err);
  EXPECT(st == STENCIL_ERR_USAGE, "halo 8 along y of 7 cells: status %d, expected usage", st);
  EXPECT(strstr(err, "a halo of 8 cells along y does not fit"), "message \"%s\"", err);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  log_init(rank, size, 1);
  decomp_free(&d);
}

/* One 4-rank case: gather everyone's coordinates and blocks and check the tiling and the
 * neighbours against a table built here. Collective over MPI_COMM_WORLD. */
static void check_world_case(const int64_t global[3], const int periodic[3], const int dims_req[3])
{
  struct decomp d;
  char label[128];
  snprintf(label, sizeof label, "grid %lldx%lldx%lld periodic %d%d%d dims %dx%dx%d",
           (long long)global[0], (long long)global[1], (long long)global[2], periodic[0],
           periodic[1], periodic[2], dims_req[0], dims_req[1], dims_req[2]);
  int st = decomp_create(MPI_COMM_WORLD, global, periodic, dims_req, 1, &d);
  EXPECT(st == STENCIL_OK, "%s: decomp_create failed (%d)", label, st);
  if (st)
    return;
  EXPECT(d.size == 4 && d.dims[0] * d.dims[1] * d.dims[2] == 4, "%s: dims %dx%dx%d", label,
         d.dims[0], d.dims[1], d.dims[2]);
  for (int a = 0; a < 3; a++)
    EXPECT(dims_req[a] == 0 || d.dims[a] == dims_req[a], "%s: dims[%d] = %d", label, a, d.dims[a]);
  const int ndim = global[2] == 1 ? 2 : 3;
  EXPECT(d.ndim == ndim && (ndim == 3 || d.dims[2] == 1), "%s: ndim %d dims_z %d", label, d.ndim,
         d.dims[2]);

  /* Everyone's coords, n and offset, indexed by rank in d.cart. */
  int64_t mine[9], all[4 * 9];
  for (int a = 0; a < 3; a++) {
    mine[a] = d.coords[a];
    mine[3 + a] = d.n[a];
    mine[6 + a] = d.offset[a];
  }
  MPI_Allgather(mine, 9, MPI_INT64_T, all, 9, MPI_INT64_T, d.cart);
  int64_t volume = 0;
  for (int r = 0; r < 4; r++) {
    const int64_t *p = all + 9 * r;
    int64_t v = 1;
    for (int a = 0; a < 3; a++) {
      int64_t n, o;
      decomp_split(global[a], d.dims[a], (int)p[a], &n, &o);
      EXPECT(p[3 + a] == n && p[6 + a] == o,
             "%s: rank %d axis %d: %lld cells at %lld, split says "
             "%lld at %lld",
             label, r, a, (long long)p[3 + a], (long long)p[6 + a], (long long)n, (long long)o);
      v *= p[3 + a];
    }
    volume += v;
    for (int q = 0; q < r; q++) {
      const int64_t *c = all + 9 * q;
      EXPECT(c[0] != p[0] || c[1] != p[1] || c[2] != p[2], "%s: ranks %d and %d share coords",
             label, q, r);
    }
  }
  EXPECT(volume == global[0] * global[1] * global[2], "%s: blocks cover %lld of %lld cells", label,
         (long long)volume, (long long)(global[0] * global[1] * global[2]));

  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      const int edge = s ? d.dims[a] - 1 : 0;
      const int want = a < ndim && !periodic[a] && d.coords[a] == edge;
      EXPECT(d.physical[a][s] == want, "%s: rank %d physical[%d][%d] = %d", label, d.rank, a, s,
             d.physical[a][s]);
    }

  /* Neighbours: the rank at coords + dir (wrapped where periodic), found in the table. */
  for (int dz = -1; dz <= 1; dz++)
    for (int dy = -1; dy <= 1; dy++)
      for (int dx = -1; dx <= 1; dx++) {
        const int dir[3] = {dx, dy, dz};
        int target[3], outside = 0;
        for (int a = 0; a < 3; a++) {
          int c = d.coords[a] + dir[a];
          if (c < 0 || c >= d.dims[a]) {
            if (periodic[a])
              c = (c + d.dims[a]) % d.dims[a];
            else
              outside = 1;
          }
          target[a] = c;
        }
        int want = MPI_PROC_NULL;
        for (int r = 0; r < 4 && !outside; r++) {
          const int64_t *p = all + 9 * r;
          if (p[0] == target[0] && p[1] == target[1] && p[2] == target[2])
            want = r;
        }
        EXPECT(outside || want != MPI_PROC_NULL, "%s: no rank at coords %d %d %d", label, target[0],
               target[1], target[2]);
        const int got = decomp_neighbor(&d, dir);
        EXPECT(got == want, "%s: rank %d (coords %d %d %d) neighbour (%d,%d,%d) = %d, expected %d",
               label, d.rank, d.coords[0], d.coords[1], d.coords[2], dx, dy, dz, got, want);
      }
  decomp_free(&d);
}

static void test_world(void)
{
  const int64_t g3[3] = {13, 9, 6}, g2[3] = {11, 7, 1};
  const int dims3[][3] = {{4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 2, 1},
                          {1, 2, 2}, {0, 0, 0}, {2, 0, 0}};
  const int dims2[][3] = {{4, 1, 1}, {1, 4, 1}, {2, 2, 1}, {0, 0, 1}};
  const int pers[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 1}, {0, 1, 0}};
  for (size_t p = 0; p < sizeof pers / sizeof pers[0]; p++) {
    for (size_t i = 0; i < sizeof dims3 / sizeof dims3[0]; i++)
      check_world_case(g3, pers[p], dims3[i]);
    for (size_t i = 0; i < sizeof dims2 / sizeof dims2[0]; i++)
      check_world_case(g2, pers[p], dims2[i]);
  }

  /* 4 ranks along an axis of 3 cells: every rank refuses, naming the axis. */
  const int64_t thin[3] = {3, 9, 6};
  const int no_per[3] = {0, 0, 0}, four_x[3] = {4, 1, 1};
  struct decomp d;
  struct unit_capture cap;
  char err[4096];
  unit_capture_begin(&cap);
  int st = decomp_create(MPI_COMM_WORLD, thin, no_per, four_x, 1, &d);
  unit_capture_end(&cap, err, sizeof err);
  EXPECT(st == STENCIL_ERR_USAGE, "4 ranks over 3 cells: status %d", st);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* The message is printed once, by rank 0. */
  if (rank == 0)
    EXPECT(strstr(err, "4 ranks along x but the grid has only 3 cells"), "message: \"%s\"", err);
  else
    EXPECT(err[0] == '\0', "rank %d printed \"%s\"", rank, err);
  if (st == STENCIL_OK)
    decomp_free(&d);
}

/* One rank, periodic axes per[], halo 2, edges and corners or not: no message, nwrap wrap
 * copies, and after copy_boxes every ghost cell whose coordinates wrap into the interior along
 * periodic axes (and lie in it along the others, with at most one axis out when !corners)
 * holds that interior cell; the ghosts no wrap covers keep their sentinel. */
static void check_wraps(const int per[3], int corners, int nwrap)
{
  const int64_t g[3] = {5, 4, 3};
  const int free_dims[3] = {0, 0, 0};
  struct decomp d;
  struct halo h;
  if (decomp_create(MPI_COMM_SELF, g, per, free_dims, 2, &d) != STENCIL_OK ||
      halo_create(&h, &d, 8, corners) != STENCIL_OK) {
    EXPECT(0, "decomp_create or halo_create failed");
    return;
  }
  EXPECT(h.nmsg == 0 && h.nwrap == nwrap,
         "periodic %d%d%d corners %d: %d messages, %d wraps "
         "(expected 0, %d)",
         per[0], per[1], per[2], corners, h.nmsg, h.nwrap, nwrap);
  struct layout l;
  layout_init(&l, d.n, d.halo, 8);
  void *ctx = NULL, *buf = NULL;
  EXPECT(backend_cpu.create(&ctx, &(struct backend_options){0}) == STENCIL_OK &&
             backend_cpu.alloc(ctx, &l, &buf) == STENCIL_OK,
         "cpu backend");
  double *u = buf;
  int64_t lo[3], hi[3];
  for (int a = 0; a < 3; a++)
    lo[a] = -d.halo[a], hi[a] = d.n[a] + d.halo[a];
  for (int64_t k = lo[2]; k < hi[2]; k++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t i = lo[0]; i < hi[0]; i++) {
        const int inside = i >= 0 && i < d.n[0] && j >= 0 && j < d.n[1] && k >= 0 && k < d.n[2];
        u[layout_index(&l, i, j, k)] = inside ? (double)(1 + i + 10 * j + 100 * k) : -1.0;
      }
  EXPECT(backend_cpu.copy_boxes(ctx, &l, u, h.nwrap, h.wrap_from, h.wrap_to) == STENCIL_OK,
         "copy_boxes");
  int bad = 0;
  for (int64_t k = lo[2]; k < hi[2]; k++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t i = lo[0]; i < hi[0]; i++) {
        const int64_t c[3] = {i, j, k};
        int64_t w[3];
        int covered = 1, out = 0;
        for (int a = 0; a < 3; a++) {
          const int beyond = c[a] < 0 || c[a] >= d.n[a];
          out += beyond;
          w[a] = (c[a] + d.n[a]) % d.n[a];
          covered &= !beyond || per[a];
        }
        covered &= out > 0 && (corners || out == 1);
        const double want = covered   ? (double)(1 + w[0] + 10 * w[1] + 100 * w[2])
                            : out > 0 ? -1.0
                                      : (double)(1 + i + 10 * j + 100 * k);
        if (u[layout_index(&l, i, j, k)] != want && bad++ < 3)
          EXPECT(0, "periodic %d%d%d corners %d: cell (%lld,%lld,%lld) = %g, expected %g", per[0],
                 per[1], per[2], corners, (long long)i, (long long)j, (long long)k,
                 u[layout_index(&l, i, j, k)], want);
      }
  EXPECT(bad == 0, "periodic %d%d%d corners %d: %d cells wrong", per[0], per[1], per[2], corners,
         bad);
  backend_cpu.release(ctx, buf);
  backend_cpu.destroy(ctx);
  halo_free(&h);
  decomp_free(&d);
}

static void test_wraps(void)
{
  const int all[3] = {1, 1, 1}, x_only[3] = {1, 0, 0}, xz[3] = {1, 0, 1};
  check_wraps(all, 1, 26);
  check_wraps(all, 0, 6);
  check_wraps(x_only, 1, 2);
  check_wraps(xz, 1, 8);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  log_init(rank, size, 1);
  test_split_examples();
  test_split_invariants();
  test_self();
  test_self_refused();
  test_set_halo();
  test_wraps();
  if (size == 4)
    test_world();
  else if (size != 1)
    EXPECT(0, "run on 1 or 4 ranks (got %d)", size);
  /* Every rank's verdict counts. */
  int failed = unit_failures_, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  char name[64];
  snprintf(name, sizeof name, "test_decomp [rank %d of %d]", rank, size);
  unit_finish(name);
  MPI_Finalize();
  return any ? 1 : 0;
}
