#include "domain/decomp.h"

#include <stdio.h>
#include <string.h>

#include "common/error_mpi.h"

void decomp_split(int64_t n, int p, int c, int64_t *count, int64_t *offset)
{
  const int64_t base = n / p, extra = n % p;
  *count = base + (c < extra ? 1 : 0);
  *offset = c * base + (c < extra ? c : extra);
}

int decomp_create(MPI_Comm comm, const int64_t global[3], const int periodic[3],
                  const int dims_req[3], int halo, struct decomp *d)
{
  memset(d, 0, sizeof *d);
  d->cart = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_size(comm, &d->size));
  d->ndim = global[2] == 1 ? 2 : 3;
  int dims[3] = {dims_req[0], dims_req[1], dims_req[2]};
  if (d->ndim == 2) {
    if (dims[2] > 1)
      FAIL0(STENCIL_ERR_USAGE, "--dims: a 2D grid (nz = 1) cannot be split along z (asked for %d)",
            dims[2]);
    dims[2] = 1;
  }
  int fixed = 1, free_axes = 0;
  for (int a = 0; a < 3; a++) {
    if (dims[a] < 0)
      FAIL0(STENCIL_ERR_USAGE, "--dims: rank counts must be positive");
    if (dims[a] > 0)
      fixed *= dims[a];
    else
      free_axes++;
  }
  if (free_axes == 0 && fixed != d->size)
    FAIL0(STENCIL_ERR_USAGE, "--dims %dx%dx%d has %d ranks but the run has %d", dims[0], dims[1],
          dims[2], fixed, d->size);
  if (free_axes > 0 && d->size % fixed != 0)
    FAIL0(STENCIL_ERR_USAGE, "--dims: the fixed rank counts (product %d) do not divide %d ranks",
          fixed, d->size);
  if (free_axes > 0) {
    /* MPI_Dims_create puts the most ranks first; give them to z (the slowest axis), so each
     * rank's block keeps long contiguous x rows and its largest halos are whole planes. */
    int zyx[3] = {dims[2], dims[1], dims[0]};
    CHECK_MPI(MPI_Dims_create(d->size, 3, zyx));
    for (int a = 0; a < 3; a++)
      dims[a] = zyx[2 - a];
  }
  for (int a = 0; a < 3; a++) {
    d->dims[a] = dims[a];
    d->global[a] = global[a];
    d->periodic[a] = periodic[a];
    d->halo[a] = a < d->ndim ? halo : 0;
  }
  for (int a = 0; a < 3; a++)
    if (d->dims[a] > 1 && global[a] / d->dims[a] < (halo > 1 ? halo : 1))
      FAIL0(STENCIL_ERR_USAGE,
            "%d ranks along %c but the grid has only %lld cells there (each rank needs at least "
            "%d); use fewer ranks or --dims",
            d->dims[a], "xyz"[a], (long long)global[a], halo > 1 ? halo : 1);
  /* MPI's dims are slowest-first (row-major); ours are x-first. Reverse for MPI. */
  int mdims[3] = {d->dims[2], d->dims[1], d->dims[0]};
  int mper[3] = {periodic[2], periodic[1], periodic[0]};
  CHECK_MPI(MPI_Cart_create(comm, 3, mdims, mper, 1, &d->cart));
  CHECK_MPI(MPI_Comm_rank(d->cart, &d->rank));
  int mc[3];
  CHECK_MPI(MPI_Cart_coords(d->cart, d->rank, 3, mc));
  for (int a = 0; a < 3; a++) {
    d->coords[a] = mc[2 - a];
    decomp_split(global[a], d->dims[a], d->coords[a], &d->n[a], &d->offset[a]);
    d->physical[a][0] = !periodic[a] && d->coords[a] == 0 && a < d->ndim;
    d->physical[a][1] = !periodic[a] && d->coords[a] == d->dims[a] - 1 && a < d->ndim;
  }
  return STENCIL_OK;
}

void decomp_free(struct decomp *d)
{
  if (d->cart != MPI_COMM_NULL)
    MPI_Comm_free(&d->cart);
  d->cart = MPI_COMM_NULL;
}

int64_t decomp_min_cells(const struct decomp *d, int axis)
{
  return d->global[axis] / d->dims[axis];
}

int decomp_set_halo(struct decomp *d, const int halo[3])
{
  for (int a = 0; a < d->ndim; a++) {
    const long long fewest = decomp_min_cells(d, a), cells = d->global[a];
    const int ranks = d->dims[a];
    if (halo[a] < 1 || halo[a] > fewest)
      FAIL0(STENCIL_ERR_USAGE,
            "a halo of %d cells along %c does not fit: the smallest block has %lld cells there "
            "(%lld over %d rank%s)",
            halo[a], "xyz"[a], fewest, cells, ranks, ranks > 1 ? "s" : "");
  }
  for (int a = 0; a < 3; a++)
    d->halo[a] = a < d->ndim ? halo[a] : 0;
  return STENCIL_OK;
}

int decomp_neighbor(const struct decomp *d, const int dir[3])
{
  int mc[3];
  for (int a = 0; a < 3; a++) {
    int c = d->coords[a] + dir[a];
    if (c < 0 || c >= d->dims[a]) {
      if (!d->periodic[a])
        return MPI_PROC_NULL;
      c = (c + d->dims[a]) % d->dims[a];
    }
    mc[2 - a] = c;
  }
  int r = MPI_PROC_NULL;
  MPI_Cart_rank(d->cart, mc, &r);
  return r;
}

void decomp_layout(const struct decomp *d, int elem, struct layout *l)
{
  layout_init(l, d->n, d->halo, elem);
}
