#pragma once
/* The driver's halo exchange and GPU set-up, for every backend and transport:
 *
 *   pack (backend) -> post -> wait -> unpack (backend) -> physical boundaries (backend)
 *
 * What a rank would send itself (the periodic wrap of an axis it spans alone) is copied within
 * the field at pack time instead (backend copy_boxes), whatever the transport.
 *
 * The CPU backend packs into malloc'ed buffers and sends them with MPI. The CUDA backend packs
 * with kernels into page-locked host buffers (mpi-host), device buffers sent by MPI
 * (mpi-device) or device buffers moved by CUDA IPC or NCCL (domain/halo_gpu.h), all ordered
 * on its halo lane. Where every message is a z face of a field kernel that reads its own
 * faces (tier 3 on slabs), ipc copies the sent planes from field to field instead, with no
 * pack or unpack (halo_gpu.h, plane ranges). */
#include <mpi.h>

#include "app/options.h"
#include "domain/decomp.h"
#include "domain/halo.h"
#include "domain/halo_gpu.h"
#include "io/config.h"
#include "kernels/backend.h"

struct exchange {
  const struct backend_ops *ops;
  void *ctx;
  struct halo *halo;
  enum halo_transport transport; /* resolved; mpi-host for the CPU backend */
  void *gpu;                     /* struct halo_gpu * for ipc and nccl */
  int own_faces;  /* the update reads physical faces and periodic wraps itself: no boundary
                     fill, no wrap copy (tier 3's warp-row kernel, backend.h fused_prepare) */
  int use_planes; /* ipc of plane ranges: no pack, no unpack */
  struct halo_planes planes; /* ... its offsets */
  const void *sent;          /* the field of the last exchange_pack */
};

/* The backend of this run and, for cuda, this rank's device: node-local rank modulo the
 * devices visible on the node. Refuses more ranks than GPUs on a node unless
 * --allow-gpu-sharing; auto falls back to cpu then, and when any rank sees no GPU.
 * Collective over comm; every rank returns the same status. */
int devices_choose(MPI_Comm comm, const struct options *o, const struct backend_ops **ops,
                   int *device);
/* Rank 0 prints one line per rank: host and device (backends with describe only).
 * Collective over comm. */
int devices_print(MPI_Comm comm, const struct backend_ops *ops, void *ctx);

/* Plan h's messages with buffers where the transport wants them and set the transport up:
 * face neighbours only, or also edges and corners (corners = 1: the fused tier 3, whose deep
 * halos feed several steps of a star stencil, which reach diagonal neighbours' cells).
 * fields: the run's two field buffers, which ipc may copy between directly (with own_faces
 * and z faces only). Collective over d->cart;
 * every rank returns the same status. */
int exchange_create(struct exchange *x, const struct backend_ops *ops, void *ctx, struct halo *h,
                    const struct decomp *d, int elem, int corners, int own_faces,
                    enum halo_transport want, void *const fields[2]);
void exchange_free(struct exchange *x);

/* Pack every send box of f and copy the periodic wraps within the block into f's ghost
 * cells (on the backend's current lane; no copies with own_faces). */
int exchange_pack(struct exchange *x, const struct layout *l, void *f);
/* Start the messages (MPI transports first wait for the packing on the host). */
int exchange_post(struct exchange *x);
/* Complete the messages, unpack into f's ghost cells and fill the ghost cells of physical
 * faces (not with own_faces). fence: order the lanes before the boundaries (they read cells
 * of the inner box). */
int exchange_finish(struct exchange *x, const struct layout *l, void *f, const struct config *c,
                    const struct decomp *d, int fence);
