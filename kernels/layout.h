#pragma once
/* Memory layout of one rank's block of a field, shared by the driver and every backend.
 *
 *   u: (n[2] + 2 halo[2]) x (n[1] + 2 halo[1]) x (n[0] + 2 halo[0]), x fastest.
 *
 * Interior cell (i, j, k), 0 <= i < n[0] etc., sits at layout_index(l, i, j, k); ghost
 * cells have indices -halo..-1 and n..n+halo-1. In 2D n[2] = 1 and halo[2] = 0. A backend
 * may shift the whole array by `lead` elements (0 on the host; the CUDA backend's device
 * copy uses it to start every interior row on a 128-byte boundary). */
#include <stdint.h>

#include "common/types.h"

struct layout {
  int64_t n[3];      /* interior cells per axis */
  int halo[3];       /* ghost layers per side, per axis */
  int64_t stride[3]; /* element strides: 1, x row length, xy plane size */
  int64_t lead;      /* elements before ghost cell (-halo, -halo, -halo) */
  int64_t count;     /* elements in the padded array, lead included */
  int elem;          /* bytes per element: 8 (fp64) or 4 (fp32) */
};

/* A box of cells [lo, hi) in interior coordinates (ghost cells have negative or >= n
 * coordinates). */
struct box {
  int64_t lo[3], hi[3];
};

/* Where a box of cells lies in a buffer: `planes` planes `slice` bytes apart, each `rows` rows
 * `pitch` bytes apart, each row `width` contiguous bytes, the first at byte `offset`. */
struct field_span {
  size_t offset, width, pitch, slice;
  int64_t rows, planes;
};

static inline void layout_init(struct layout *l, const int64_t n[3], const int halo[3], int elem)
{
  for (int a = 0; a < 3; a++) {
    l->n[a] = n[a];
    l->halo[a] = halo[a];
  }
  l->stride[0] = 1;
  l->stride[1] = n[0] + 2 * halo[0];
  l->stride[2] = l->stride[1] * (n[1] + 2 * halo[1]);
  l->lead = 0;
  l->count = l->stride[2] * (n[2] + 2 * halo[2]);
  l->elem = elem;
}

static inline int64_t layout_index(const struct layout *l, int64_t i, int64_t j, int64_t k)
{
  return l->lead + (i + l->halo[0]) + (j + l->halo[1]) * l->stride[1] +
         (k + l->halo[2]) * l->stride[2];
}

static inline int64_t box_count(const struct box *b)
{
  int64_t c = 1;
  for (int a = 0; a < 3; a++)
    c *= b->hi[a] > b->lo[a] ? b->hi[a] - b->lo[a] : 0;
  return c;
}
