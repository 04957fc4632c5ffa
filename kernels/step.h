#pragma once
/* Single steps, shared by the backends: one step u -> v of the whole block, with the halo
 * exchange of v overlapped with the update of the cells it does not send. advance() of the
 * CPU backend is step_one(); the CUDA backend runs it where it takes single steps. */
#include "kernels/backend.h"

/* Two ordered work queues ("lanes") of backends that have them: the exchange's on one, the
 * bulk of the update on the other. */
enum step_lane { LANE_HALO = 0, LANE_BULK = 1 };

/* A backend's single-step kernels (the kernel tests call them directly too). */
struct step_ops {
  /* v = S(u) [+ cf f] on the cells of box b, on the current lane. */
  int (*update)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                const void *f, void *v, const struct box *b);
  /* update() of the whole interior and residual()'s sum for u in the same pass; NULL: none. */
  int (*update_residual)(void *ctx, const struct layout *l, const struct stencil_coef *coef,
                         const void *u, const void *f, void *v, double *sumsq);
  /* backend_ops.residual. */
  int (*residual)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
                  const void *f, double *sumsq);
  /* The ghost layers beyond every face with on[a][s], by reflection: Dirichlet g:
   * ghost(m) = 2g - u(m-1), Neumann: ghost(m) = u(m-1), m = 1..halo. */
  int (*boundaries)(void *ctx, const struct layout *l, void *u, const int on[3][2],
                    const enum bc_kind kind[3][2], const double value[3][2]);
  /* Time each candidate launch shape of update() on box b of u -> v, keep the fastest
   * (overwrites v on b); NULL: nothing to tune. */
  int (*tune)(void *ctx, const struct layout *l, const struct stencil_coef *coef, const void *u,
              void *v, const struct box *b);
  /* Lanes (NULL: one queue): later calls run on `lane`; lane_fence makes each lane wait for
   * the work issued so far to the other one, without a host wait. */
  int (*lane_select)(void *ctx, int lane);
  int (*lane_fence)(void *ctx);
};

/* The single-step kernels of each backend. */
extern const struct step_ops step_cpu;
#ifdef STENCIL_HAVE_CUDA
extern const struct step_ops step_cuda;
#endif

/* A block's single steps: the shell (the cells the exchange sends: halo deep on every face
 * with a neighbour, updated first) and the inner box, and the reflecting faces. */
struct step_plan {
  struct layout lay;
  struct stencil_coef coef;
  struct box inner, shell[6];
  int nshell;
  int reflect[3][2]; /* faces whose ghost cells are filled by reflection after an exchange */
  enum bc_kind kind[3][2];
  double value[3][2];
  int overlap; /* the shell and the exchange overlap the inner update (--overlap) */
};

void step_plan_init(struct step_plan *p, const struct layout *l, const struct stencil_coef *coef,
                    const struct block_faces *faces, int overlap);

/* One step u -> v, the exchange x of v and the reflecting faces (backend_ops.advance with
 * k = 1; sums[0] for mask bit 0). */
int step_one(const struct step_ops *ops, void *ctx, const struct step_plan *p, const void *u,
             const void *f, void *v, unsigned mask, const struct exchanger *x, double *sums);
/* After x's post: finish it and fill the reflecting faces of v (fence: order the lanes first,
 * the inner update having run on the other one; with or without faces to fill, as the next
 * advance may start on one lane without a fence of its own). */
int step_finish(const struct step_ops *ops, void *ctx, const struct step_plan *p, void *v,
                const struct exchanger *x, int fence);
/* backend_ops.fill_ghosts. */
int step_fill_ghosts(const struct step_ops *ops, void *ctx, const struct step_plan *p, void *u,
                     const struct exchanger *x);
