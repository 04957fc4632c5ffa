#pragma once
/* XDMF 2 descriptions of field files, for ParaView and VisIt (docs/user/output-format.md):
 * the final field (<final>.xdmf), the snapshots (snapshots.xdmf) and the checkpoints
 * (checkpoints.xdmf). Paths inside are relative to the XDMF file.
 *
 * Geometry. A field file of every cell (stride 1) is cell data on the node grid: n + 1 points
 * per axis from 0 with spacing h, so the grid covers the domain [0, n h] exactly and cell
 * (i, j, k) is the cell of the solver. A subsampled snapshot (stride s > 1) keeps the cells
 * 0, s, 2s, ... : its values are point data at the kept cells' centres, (k s + 1/2) h. A 2D
 * field lies in the plane z = 0 (xdmf.c, write_grid). */
#include <stddef.h>
#include <stdint.h>

#include "io/config.h"

/* One field file of an XDMF file. */
struct xdmf_grid {
  char file[256]; /* the HDF5 file, relative to the XDMF file (its dataset /field) */
  int64_t step;
  double time;     /* the XDMF Time: the simulated time, or the step where dt = 0 (Poisson) */
  int ndim;        /* 2 or 3 */
  int64_t dims[3]; /* /field's extents, slowest first */
  int stride;      /* 1: every cell; s: cells 0, s, 2s, ... along each axis */
  int elem;        /* bytes per value */
};

/* The grid of a field file of config c at `step`, subsampled by stride. */
void xdmf_grid_of(struct xdmf_grid *g, const char *file, const struct config *c, int64_t step,
                  int stride);

/* The XDMF file of one field file: h5path with its ".h5" replaced by ".xdmf" (or ".xdmf"
 * added). */
void xdmf_path_for(char *buf, size_t len, const char *h5path);

/* Write path atomically (temporary name, fsync, rename): one uniform grid (count 1, temporal
 * 0) or a temporal collection of count grids. spacing: the cell size per axis (x, y, z). */
int xdmf_write(const char *path, const double spacing[3], const struct xdmf_grid *g, int count,
               int temporal);
