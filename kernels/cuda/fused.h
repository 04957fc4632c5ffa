#pragma once
/* The fused multi-step star-stencil kernels (radius 1: 3D 7-point, 2D 5-point; fp32 and
 * fp64): the 2D warp-strip kernel (strip2d.cuh) and the 3D warp-row kernel (tile3d.cuh),
 * whose faces are all halo faces (the backend passes homogeneous reflecting faces to it as
 * halo faces, kernels/cuda/fused_run.cu). docs/design/fused-kernels.md describes them.
 *
 * One launch advances the field by T steps (T = 1..FUSED_MAX_STEPS):
 *
 *   v = S^T(u) on the interior of the block,  S = the update of kernels/backend.h
 *
 * with the same operation order as every other backend (bitwise equal to T single steps
 * when compiled with -fmad=false). Cells beyond a CTA's stored tile are recomputed
 * redundantly (a trapezoid T cells deep); in 3D, clusters of CTAs may hand their edge rows to
 * each other through distributed shared memory instead.
 *
 * Faces of the block:
 *   FUSED_FACE_HALO:      ghost cells hold valid data T deep at entry, edges and corners
 *                           included (periodic wrap or a neighbour rank's cells; the
 *                           exchange needs corners = 1), unless the plan reads_faces:
 *                           then the faces with faces.read != FUSED_READ_MEMORY need
 *                           none, and the cells of those beyond them neither;
 *   FUSED_FACE_DIRICHLET: ghost(m) = 2g - u(m-1), re-applied after every fused step (2D);
 *   FUSED_FACE_NEUMANN:   ghost(m) = u(m-1), likewise (2D).
 * Reflecting faces need no valid ghost cells at entry.
 *
 * Layout: u and v are padded blocks of kernels/layout.h (halo >= T on every axis, x
 * fastest), device memory, distinct. Only interior cells of v are written.
 *
 * Plain C interface, no CUDA types: the stream is a cudaStream_t passed as void *.
 * Errors print "stencil: error: fused kernel: ..." on stderr and return 1 (STENCIL_ERR);
 * this file does not use common/ so the standalone harness needs no MPI. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FUSED_MAX_STEPS 8
/* The default T of the 3D clustered form in fp32 (at T = 4 its kernel spills 168 bytes: the
 * hand-off's registers beside 3 T planes of rows; the T built, 4, runs where asked), and the
 * default T of a launch of CTAs clustered cy along y in 3D (elem bytes a cell) from the
 * default T of one CTA: the rule both the plan and the driver take. */
#define FUSED_CLUSTER_STEPS_F32 3
#define FUSED_CLUSTER_STEPS(elem, cy, T)                                                           \
  ((cy) > 1 && (elem) == 4 && (T) > FUSED_CLUSTER_STEPS_F32 ? FUSED_CLUSTER_STEPS_F32 : (T))
/* Most steps of a launch with residual sums, by element size (registers: the lean kernel
 * also keeps a double sum per level; launches of 4 in fp32 and 5 in fp64 are the fastest,
 * docs/design/fused-kernels.md, "Steps per launch"). */
#define FUSED_RESIDUAL_STEPS(elem) ((elem) == 8 ? 5 : 4)
/* The same in 3D at radius 1 with a source and halo faces (tile3d.cuh's forms 6 and 7): the
 * residual sums' registers beside f's rows; fp32 spills at 4. */
#define FUSED_RESIDUAL_STEPS_3D 3

enum fused_face_kind {
  FUSED_FACE_HALO = 0,
  FUSED_FACE_DIRICHLET = 1,
  FUSED_FACE_NEUMANN = 2,
};

/* How the 3D warp-row kernel may read the ghost cells of a halo face (other kernels read them
 * from memory, and the caller must fill them): from memory; reflected into the block (cell
 * -1 - m or 2n - 1 - m: Neumann, or a Dirichlet face of value 0 with each reflection's
 * 0 - u); or wrapped (m + n or m - n: the periodic wrap of a block that spans its axis). */
enum fused_read {
  FUSED_READ_MEMORY = 0,
  FUSED_READ_MIRROR = 1,
  FUSED_READ_MIRROR_NEG = 2,
  FUSED_READ_WRAP = 3,
};

/* What lies beyond each face: kind[axis][side], axis 0 = x, 1 = y, 2 = z; side 0 = low. */
struct fused_faces {
  int kind[3][2];
  double value[3][2]; /* Dirichlet value g */
  int read[3][2];     /* halo faces: enum fused_read */
};

/* Requested launch shape; 0 in any field = choose from the device. */
struct fused_config {
  int steps;      /* T: fused steps per launch */
  int cluster[2]; /* 3D: CTAs per cluster along x and y (1 x 1 or 0: one CTA per tile) */
  int chunk;      /* cells of the streaming axis (z in 3D, y in 2D) per CTA */
};

/* 3D warp rows: the chunks of launches of a kernel (fm_wave_chunks, fm_tile_chunks) at its
 * T, its CTAs resident and its tiles. */
struct fused_waves {
  int steps, chunk0, chunk, by_tile[3], active;
  int64_t tiles, ctas; /* CTAs of a plane of tiles, of a whole launch */
};

/* Everything a launch needs, filled by fused_plan_block. */
struct fused_plan {
  int ndim, elem, radius;
  int steps;           /* T */
  int cluster[2];      /* CTAs per cluster (x, y); 2D: (c, 1) */
  int tile[2];         /* cells per CTA (x, y); 2D: (tile, 1) */
  int chunk, rows;     /* streaming-axis cells per CTA; rows per thread (3D) */
  int chunk0;          /* 3D warp rows: planes of the first chunk (its CTAs are dispatched
                          first), what the chunks of `chunk` after it leave */
  int chunk_waves;     /* 3D warp rows: 1 when the chunks were chosen by the waves (a launch on
                          a range of planes then gets equal ones of its own, fm_wave_chunk) */
  int by_tile[3];      /* 3D warp rows, whole launches of T steps: chunks by tile
                          (fm_tile_chunks: tiles of a plane in one chunk, the others' pieces,
                          the pieces' planes; [1] = 0: the chunks above for every tile) */
  int chunk_res;       /* warp strips: the chunk of launches with residual sums (their kernel
                          fits fewer warps per multiprocessor, so the waves differ) */
  int threads;         /* per CTA */
  size_t smem_bytes;   /* dynamic shared memory per CTA at T steps */
  int64_t grid[3];     /* CTAs (x, y, z) */
  int active_clusters; /* cudaOccupancyMaxActiveClusters at T (0 if not queried) */
  int sms;             /* multiprocessors of the device */
  struct layout lay;   /* the block's layout */
  struct stencil_coef coef;
  struct fused_faces faces;
  int has_source;  /* launches pass a source field f */
  int reads_faces; /* 1 where the kernel reads faces.read's reflections and wraps itself
                      (the warp-row kernel), so their ghost cells need not be filled */
  int seg_lanes;   /* warp rows, one CTA: the lanes of a segment in the narrow last column
                      of tiles (0: none) */
  int face_tiles;  /* warp rows of radius 1 applying reflecting faces at every level: the x and
                      y faces (bit 2 axis + side) whose tiles run the face tiles' kernel */
  int lean;        /* ... launches of the T built run the halo faces' kernel, which reads the
                      homogeneous faces (and the source) through, on the other tiles; on the
                      face tiles, those of the x and y Dirichlet faces of nonzero value, the
                      plain form's face tiles' kernel (no source) or the form with faces; the
                      planes next to a z one run the form with faces on every tile */
  int face_ctas;   /* ... a plan of T = 4 (TILE3D_MAX_STEPS): the face tiles a chunk of planes
                      (0: none, the other tiles' kernel runs every tile), and the range of
                      tiles [face_span[0], face_span[1]) holding them */
  int face_span[2];
  /* 3D warp rows: the waves of launches on a kernel built for fewer steps than the plan's
   * (fp32, a source with halo faces: residual sums and launches of up to 3 steps run the
   * register queue at T = 3; tile3d_built); steps = 0: none */
  struct fused_waves waves_short;
};

/* 1 where homogeneous reflecting faces may be taken as mirrored halo faces (fused_faces_of):
 * in 3D, without a source, or with one where n along x is whole 16-byte vectors
 * (the 3D kernel then reads f through the faces as it reads u: the mirror commutes with the
 * source term too, cf (0 - f) = 0 - cf f; docs/design/fused-kernels.md). */
int fused_mirrors(const struct layout *l, const struct stencil_coef *coef, int has_source);
/* The faces of a block (kernels/backend.h) as the fused kernels take them: exchanged faces
 * are halo faces (wrapped: read through as the wrap); where `mirrors` (fused_mirrors) and every
 * reflecting face is homogeneous (Neumann, Dirichlet 0), they are halo faces whose ghosts
 * mirror the interior (*mirrored = 1: read through as the mirror, or filled so by the caller);
 * otherwise reflecting faces are FUSED_FACE_DIRICHLET / NEUMANN, which the kernels apply at
 * every level. Returns 1 for a periodic face whose ghosts are not exchanged. */
int fused_faces_of(int ndim, int mirrors, const struct block_faces *bf, struct fused_faces *ff,
                   int *mirrored);

/* 1 if the fused kernels handle this case, else 0 with the reason in why[] (a radius other
 * than 1 to 4, not 2D or 3D, an element size other than 4 or 8 bytes). Cheap; no device
 * calls. */
int fused_supported(const struct layout *l, const struct stencil_coef *coef, char *why, size_t len);

/* Before a layout exists: the steps per launch the fused kernel of this problem class uses
 * by default, the most it is built for (ndim, element size, radius, source term, a Dirichlet
 * face with a nonzero value or not, every block's n along x whole 16-byte vectors or not); 0
 * with the reason in why[] if no fused kernel runs it. No device calls. The block's halo must
 * then be >= steps x radius on every axis. */
int fused_default_steps(int ndim, int elem, int radius, int has_source, int inhomogeneous,
                        int x_vectors, int *steps, char *why, size_t len);

/* Choose T and the launch shape for `device` (0 fields of *want from the device: its SM
 * count and the CTAs resident; device < 0: without one), capped by the layout's halo. */
int fused_plan_block(const struct layout *l, const struct stencil_coef *coef, int has_source,
                     const struct fused_faces *faces, const struct fused_config *want, int device,
                     struct fused_plan *plan);

/* One launch: v = S^steps(u), 1 <= steps <= plan->steps, on `stream` (a cudaStream_t or
 * NULL). f: the source field (same layout; plan->has_source) or NULL. Asynchronous. */
int fused_launch(const struct fused_plan *plan, const void *u, const void *f, void *v, int steps,
                 void *stream);

/* The same launch on planes [z0, z1) of the block only (3D warp-row plans,
 * fused_splits_z: not wrapped along z): a shell of planes and the rest on two streams; and
 * of its tiles: all (tiles 0), or (fused_splits_xy) those that compute cells within the halo
 * of the x and y faces in `tiles` (bit 2 axis + side; edge 1: the cells those faces send)
 * or the others (edge 0). The two launches with the same tiles and edges 1 and 0 store every
 * cell of the planes once. */
int fused_launch_planes(const struct fused_plan *plan, const void *u, const void *f, void *v,
                        int steps, int64_t z0, int64_t z1, int tiles, int edge, void *stream);
/* A part of a launch in parts (3D warp-row plans): shell 1, the planes h = halo[2] deep at
 * the z faces in zfaces (bit 0: low, 1: high) and, on the planes between, the tiles of the x
 * and y faces in xyfaces (as fused_launch_planes' tiles); shell 0, the other tiles of those
 * planes. The two parts store every cell of the block once. */
int fused_launch_part(const struct fused_plan *plan, const void *u, const void *f, void *v,
                      int steps, int zfaces, int xyfaces, int shell, void *stream);
/* Or all planes in one launch that tells when the planes the exchange sends at the z faces
 * in `faces` (bit 0: low, 1: high) are stored: each warp that stores some adds 1 to *counter
 * (device memory) after them; *count gets what this launch adds, for a stream's wait on the
 * value. fused_signals: 1 when this form suits the plan and faces (3D warp rows of
 * one CTA, not wrapped along z; chunks that hold the sent planes; the model's time for them,
 * tile3d.cuh's TILE3D_SIGNAL_BY; faces 0: whether the form can run at all). */
int fused_launch_signal(const struct fused_plan *plan, const void *u, void *v, int steps, int faces,
                        unsigned *counter, unsigned *count, void *stream);
int fused_signals(const struct fused_plan *plan, int faces);
/* 1 when fused_launch_planes can run this plan; and on some of its tiles (3D warp rows of one
 * CTA per tile that apply no face). */
int fused_splits_z(const struct fused_plan *plan);
int fused_splits_xy(const struct fused_plan *plan);

/* A launch that also sums the squared residual of the fields it starts from and passes
 * through (warp-strip plans only; for the Poisson iteration's checks): after it, sums[l] =
 * the sum over the block's interior of (v - u)^2 for u the field after l steps and v its
 * update, v - u in the field's precision as in the backends' residual() (the same bits),
 * squared and summed in double, for every l = 0..steps - 1 whose bit l is set in mask (0
 * otherwise; sums has 8 entries). The last field's residual is the next launch's l = 0.
 * scratch: fused_scratch(plan) doubles, sums: 8 doubles, both device memory. A
 * reduction in a fixed order: the same bits every run (not those of residual()). Needs
 * steps <= fused_residual_steps(plan). */
int fused_launch_residual(const struct fused_plan *plan, const void *u, const void *f, void *v,
                          int steps, unsigned mask, double *scratch, double *sums, void *stream);
size_t fused_scratch(const struct fused_plan *plan);
/* The most steps of a launch with residual sums: plan->steps, at most FUSED_RESIDUAL_STEPS(elem)
 * in 2D and, in 3D at radius 1, FUSED_RESIDUAL_STEPS_3D where the faces are read through (the
 * form with faces: its T); 0 for plans that cannot sum residuals (no source). */
int fused_residual_steps(const struct fused_plan *plan);

/* 1 where every kernel of the plan applies the reflecting faces it meets at every level from
 * its own cells (the 2D strips; the 3D warp rows of radius 1 with a face of nonzero value),
 * so that it never reads their ghost cells. */
int fused_applies_faces(const struct fused_plan *plan);

/* One line describing the plan (kernel, T, tiles, chunks, CTAs resident). */
void fused_describe(const struct fused_plan *plan, char *buf, size_t len);

/* Registers per thread and local-memory (spill) bytes of the kernel for `steps`. */
int fused_attributes(const struct fused_plan *plan, int steps, int *regs, int *local_bytes);

#ifdef __cplusplus
}
#endif
