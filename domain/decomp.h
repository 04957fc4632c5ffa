#pragma once
/* Cartesian decomposition of the global grid over the ranks of a communicator. */
#include <mpi.h>
#include <stdint.h>

#include "common/types.h"
#include "kernels/layout.h"

struct decomp {
  MPI_Comm cart; /* Cartesian communicator (ranks may be reordered) */
  int rank, size;
  int ndim;           /* 2 or 3 */
  int dims[3];        /* ranks along x, y, z */
  int coords[3];      /* this rank's position */
  int periodic[3];    /* per axis */
  int64_t global[3];  /* global cells per axis */
  int64_t n[3];       /* this rank's cells per axis */
  int64_t offset[3];  /* global index of this rank's first cell */
  int halo[3];        /* ghost layers per side (0 along z in 2D) */
  int physical[3][2]; /* 1 where this rank's face is a non-periodic domain boundary */
};

/* Split n cells over p ranks: rank c gets *count cells starting at *offset; the first
 * n % p ranks get one more. Pure arithmetic. */
void decomp_split(int64_t n, int p, int c, int64_t *count, int64_t *offset);

/* Choose the rank grid (dims_req[a] = 0 lets MPI_Dims_create choose that axis), check it
 * fits the grid (every rank needs at least `halo` cells along each split axis) and build
 * the Cartesian communicator. Collective over comm; every rank reaches the same verdict,
 * and rank 0 prints it. */
int decomp_create(MPI_Comm comm, const int64_t global[3], const int periodic[3],
                  const int dims_req[3], int halo, struct decomp *d);

void decomp_free(struct decomp *d);

/* The fewest cells any rank has along axis a: global / dims (decomp_split gives that or one
 * more). The same on every rank. */
int64_t decomp_min_cells(const struct decomp *d, int axis);

/* Deepen the ghost layers to halo[a] cells on axis a (axes beyond ndim keep 0), e.g. T x
 * radius for a fused multi-step update. Every rank needs at least halo[a] cells along each
 * axis (the send boxes and the reflected layers lie in its interior): STENCIL_ERR_USAGE
 * otherwise, the same verdict on every rank. Not collective; call before decomp_layout. */
int decomp_set_halo(struct decomp *d, const int halo[3]);

/* Rank of the neighbour at offset dir (each component -1, 0 or 1), wrapping periodic axes;
 * MPI_PROC_NULL beyond a non-periodic boundary. */
int decomp_neighbor(const struct decomp *d, const int dir[3]);

/* The padded layout of this rank's block for elements of `elem` bytes. */
void decomp_layout(const struct decomp *d, int elem, struct layout *l);
