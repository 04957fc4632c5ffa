#pragma once
/* Halo exchange between neighbouring ranks by non-blocking point-to-point messages, split
 * into post and wait so the caller can compute while messages travel. The caller packs
 * the send boxes into send buffers before halo_post and unpacks the receive boxes after
 * halo_wait (through the backend). Buffers are host memory unless an allocator gives others;
 * halo_post and halo_wait need every message to have them. */
#include <mpi.h>
#include <stddef.h>

#include "domain/decomp.h"
#include "kernels/layout.h"

#define HALO_MAX_MSG 26

/* How messages travel between GPU ranks (docs/design/architecture.md); the CPU backend uses MPI on
 * host buffers. */
enum halo_transport {
  HALO_AUTO = 0,   /* ipc when every neighbour is on this node, else nccl, else mpi-device
                      when MPI is CUDA-aware, else mpi-host */
  HALO_MPI_HOST,   /* MPI on page-locked host buffers: works everywhere */
  HALO_MPI_DEVICE, /* MPI on device buffers: CUDA-aware MPI only */
  HALO_IPC,        /* CUDA IPC peer copies between the ranks of one node */
  HALO_NCCL,       /* NCCL send/receive */
};
const char *halo_transport_name(enum halo_transport t);

/* Where the message buffers come from: malloc (no allocator), or a backend's page-locked
 * host memory (device = 0) or device memory (device = 1). */
struct halo_allocator {
  int (*alloc)(void *ctx, size_t bytes, int device, void **p);
  void (*release)(void *ctx, void *p, int device);
  void *ctx;
  int device;
};

struct halo_msg {
  int dir[3];      /* direction of the neighbour */
  int peer;        /* its rank */
  struct box send; /* our cells it needs */
  struct box recv; /* our ghost cells it fills */
  size_t bytes;
  void *sendbuf, *recvbuf;
};

struct halo {
  MPI_Comm comm;
  int nmsg;
  struct halo_msg msg[HALO_MAX_MSG];
  /* What this rank would send itself (the periodic wrap of an axis it spans alone) is not a
   * message: the caller copies box wrap_from[i] of the field onto its ghost box wrap_to[i]. */
  int nwrap;
  struct box wrap_from[HALO_MAX_MSG], wrap_to[HALO_MAX_MSG];
  MPI_Request req[2 * HALO_MAX_MSG];
  int nreq;
  struct halo_allocator alloc; /* alloc.alloc == NULL: malloc */
};

/* Plan the messages for this rank: face neighbours only (star stencils), or also edges
 * and corners (corners = 1), and the wrap copies; no buffers yet. Not collective. */
int halo_plan(struct halo *h, const struct decomp *d, int elem, int corners);
/* halo_plan, then malloc'd buffers for every message. Not collective. */
int halo_create(struct halo *h, const struct decomp *d, int elem, int corners);
/* Release the message buffers and take new ones from a (NULL: malloc), none for each message i
 * with none[i] set (none = NULL: every message has buffers). Not collective. */
int halo_buffers(struct halo *h, const struct halo_allocator *a, const int *none);
/* The MPI tag of a message travelling in direction dir (each component -1, 0 or 1). */
int halo_dir_tag(const int dir[3]);
void halo_free(struct halo *h);

/* Start receiving every ghost box and sending every packed box. */
int halo_post(struct halo *h);
/* Wait until every message of halo_post has completed. */
int halo_wait(struct halo *h);

/* Total bytes sent per exchange. */
size_t halo_bytes(const struct halo *h);
