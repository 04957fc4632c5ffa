#pragma once
/* The halo exchange of a field, for every backend and transport:
 *
 *   pack (backend) -> post -> wait -> unpack (backend)
 *
 * and, within the block, the copies of the periodic wraps of axes a rank spans alone (backend
 * copy_boxes, at pack time) where the backend does not read them through (its advance_info).
 * The backend fills the ghost cells of reflecting faces itself; it calls the exchange through
 * the struct exchanger of exchange_create (kernels/backend.h), from advance() and
 * fill_ghosts().
 *
 * Host-memory backends pack into malloc'ed buffers sent with MPI. Device-memory backends pack
 * with kernels into page-locked host buffers (mpi-host), device buffers sent by MPI
 * (mpi-device) or device buffers moved by CUDA IPC or NCCL (transport/gpu.h), all ordered on
 * the backend's queue. Where the backend reads its own faces and wraps (3D), ipc copies the
 * sent cells of the messages whose rows are long from field to field instead, with no pack or
 * unpack (field boxes, transport/gpu.h). */
#include <mpi.h>

#include "domain/decomp.h"
#include "domain/halo.h"
#include "kernels/backend.h"
#include "transport/gpu.h"

/* Seconds spent in each part of the exchange, and between its post and its finish (work the
 * backend does while the messages travel), summed over the run; and what this rank sent: the
 * exchanges, their messages and bytes. */
struct exchange_times {
  double pack, post, finish, between;
  double exchanges, messages, bytes;
};

struct exchange {
  const struct backend_ops *ops;
  void *ctx;
  struct layout lay;
  struct halo *halo;
  enum halo_transport transport; /* resolved; mpi-host for host-memory backends */
  void *gpu;                     /* struct halo_gpu * for ipc and nccl */
  int copy_wraps;                /* copy the periodic wraps at pack time */
  int nboxes;                    /* messages sent by ipc of field boxes: no pack, no unpack */
  struct halo_boxes boxes;       /* ... which, and where they lie */
  const void *sent;              /* the field of the last exchange_pack */
  struct exchanger face;         /* what the backend calls */
  struct exchange_times times;
  double posted; /* MPI_Wtime at the end of the last post */
};

/* Plan h's messages with buffers where the transport wants them and set the transport up:
 * face neighbours only, or also edges and corners (corners = 1: deep halos that feed several
 * steps of a star stencil reach diagonal neighbours' cells). info: what the backend's
 * prepare() said of this block. fields: the run's two field buffers, which ipc may copy
 * between directly. Collective over d->cart; every rank returns the same status. */
int exchange_create(struct exchange *x, const struct backend_ops *ops, void *ctx, struct halo *h,
                    const struct decomp *d, int elem, int corners, const struct advance_info *info,
                    enum halo_transport want, void *const fields[2]);
void exchange_free(struct exchange *x);
