#include "kernels/step.h"

#include <string.h>

#include "common/error.h"

/* The inner box and up to six disjoint shell slabs, outermost axis first: the shell holds
 * the cells that neighbouring ranks need (halo deep on every side that has a neighbour or a
 * periodic wrap, none on reflecting faces). */
static void plan_boxes(struct step_plan *p, const struct block_faces *faces)
{
  const struct layout *l = &p->lay;
  struct box in = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  for (int a = 0; a < 3; a++) {
    const int64_t lo = faces->exchanged[a][0] ? l->halo[a] : 0;
    const int64_t hi = faces->exchanged[a][1] ? l->halo[a] : 0;
    in.lo[a] = lo < l->n[a] ? lo : l->n[a];
    in.hi[a] = l->n[a] - hi > in.lo[a] ? l->n[a] - hi : in.lo[a];
  }
  p->inner = in;
  p->nshell = 0;
  for (int a = 2; a >= 0; a--) {
    /* Full range along lower axes, inner range along higher axes. */
    struct box lo = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
    for (int b = a + 1; b < 3; b++) {
      lo.lo[b] = in.lo[b];
      lo.hi[b] = in.hi[b];
    }
    struct box hi = lo;
    lo.lo[a] = 0;
    lo.hi[a] = in.lo[a];
    hi.lo[a] = in.hi[a];
    hi.hi[a] = l->n[a];
    if (box_count(&lo) > 0)
      p->shell[p->nshell++] = lo;
    if (box_count(&hi) > 0)
      p->shell[p->nshell++] = hi;
  }
}

void step_plan_init(struct step_plan *p, const struct layout *l, const struct stencil_coef *coef,
                    const struct block_faces *faces, int overlap)
{
  memset(p, 0, sizeof *p);
  p->lay = *l;
  p->coef = *coef;
  p->overlap = overlap;
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      p->reflect[a][s] = a < coef->ndim && !faces->exchanged[a][s];
      p->kind[a][s] = faces->kind[a][s];
      p->value[a][s] = faces->value[a][s];
    }
  plan_boxes(p, faces);
}

int step_finish(const struct step_ops *ops, void *ctx, const struct step_plan *p, void *v,
                const struct exchanger *x, int fence)
{
  CHECK(x->finish(x->arg, v));
  if (fence && ops->lane_fence)
    CHECK(ops->lane_fence(ctx));
  int any = 0;
  for (int a = 0; a < 3; a++)
    any |= p->reflect[a][0] | p->reflect[a][1];
  if (!any)
    return STENCIL_OK;
  return ops->boundaries(ctx, &p->lay, v, p->reflect, p->kind, p->value);
}

int step_fill_ghosts(const struct step_ops *ops, void *ctx, const struct step_plan *p, void *u,
                     const struct exchanger *x)
{
  if (ops->lane_select)
    CHECK(ops->lane_select(ctx, LANE_HALO));
  CHECK(x->pack(x->arg, u));
  CHECK(x->post(x->arg));
  return step_finish(ops, ctx, p, u, x, 0);
}

/* With lanes, the shell and the packing run on the halo lane and the inner box on the bulk
 * lane, issued before the post (which may wait for the packing on the host); without, the
 * inner box runs between the post and the finish, while the messages travel. */
int step_one(const struct step_ops *ops, void *ctx, const struct step_plan *p, const void *u,
             const void *f, void *v, unsigned mask, const struct exchanger *x, double *sums)
{
  const struct layout *l = &p->lay;
  const struct box all = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  const int lanes = ops->lane_select != NULL;
  if ((mask & 1u) && ops->update_residual) { /* v and u's residual in one pass */
    CHECK(ops->update_residual(ctx, l, &p->coef, u, f, v, &sums[0]));
    CHECK(x->pack(x->arg, v));
    CHECK(x->post(x->arg));
    return step_finish(ops, ctx, p, v, x, 0);
  }
  if (mask & 1u)
    CHECK(ops->residual(ctx, l, &p->coef, u, f, &sums[0]));
  const int split = p->overlap && x->messages;
  if (split && lanes)
    CHECK(ops->lane_fence(ctx));
  if (lanes)
    CHECK(ops->lane_select(ctx, LANE_HALO));
  for (int i = 0; i < (split ? p->nshell : 1); i++)
    CHECK(ops->update(ctx, l, &p->coef, u, f, v, split ? &p->shell[i] : &all));
  CHECK(x->pack(x->arg, v));
  if (split && lanes) {
    CHECK(ops->lane_select(ctx, LANE_BULK));
    CHECK(ops->update(ctx, l, &p->coef, u, f, v, &p->inner));
    CHECK(ops->lane_select(ctx, LANE_HALO));
  }
  CHECK(x->post(x->arg));
  if (split && !lanes)
    CHECK(ops->update(ctx, l, &p->coef, u, f, v, &p->inner));
  return step_finish(ops, ctx, p, v, x, split && lanes);
}
