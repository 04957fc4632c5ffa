#pragma once
/* Fused ghost writes, shared by the backends: a backend that writes the reflected ghost cells
 * of physical faces while it updates the rows next to them learns each face's rule from its
 * boundary() calls, counts per field buffer how many cells of each face its updates covered,
 * and skips the separate fill in boundary() when the whole face was covered with the same rule
 * since that buffer's last fill. Plain C (also compiled as CUDA C++). */
#include <stdint.h>
#include <string.h>

#include "common/types.h"

/* What a backend learns about a physical face from its boundary() calls. */
struct face_rule {
  int known;
  enum bc_kind kind;
  double value;
};

/* Per field buffer, faces indexed 2 axis + side: cells covered by fused ghost writes since the
 * last fill, and the rule they were written with. */
struct field_track {
  const void *buf;
  int64_t covered[6];
  struct face_rule rule[6];
};

/* The record of buffer buf among t[0..n), created in a free slot if `create`; NULL if there
 * is none (the caller then fills as usual). */
static inline struct field_track *field_track_find(struct field_track *t, int n, const void *buf,
                                                   int create)
{
  for (int i = 0; i < n; i++)
    if (t[i].buf == buf)
      return &t[i];
  if (!create)
    return NULL;
  for (int i = 0; i < n; i++)
    if (!t[i].buf) {
      memset(&t[i], 0, sizeof t[i]);
      t[i].buf = buf;
      return &t[i];
    }
  return NULL;
}

/* Forget what the updates covered in buf (its interior or ghosts were written otherwise). */
static inline void field_track_reset(struct field_track *t, int n, const void *buf)
{
  struct field_track *r = field_track_find(t, n, buf, 0);
  if (r)
    memset(r->covered, 0, sizeof r->covered);
}
