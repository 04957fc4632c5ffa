#pragma once
/* Halo exchange between neighbouring ranks by non-blocking point-to-point messages, split
 * into post and wait so the caller can compute while messages travel. The caller packs
 * the send boxes into send buffers before halo_post and unpacks the receive boxes after
 * halo_wait (through the backend). Buffers are host memory. */
#include <mpi.h>
#include <stddef.h>

#include "domain/decomp.h"
#include "kernels/layout.h"

#define HALO_MAX_MSG 26

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
  MPI_Request req[2 * HALO_MAX_MSG];
  int nreq;
};

/* Plan the messages for this rank: face neighbours only (star stencils), or also edges
 * and corners (corners = 1). Allocates the host buffers. Not collective. */
int halo_create(struct halo *h, const struct decomp *d, int elem, int corners);
void halo_free(struct halo *h);

/* Start receiving every ghost box and sending every packed box. */
int halo_post(struct halo *h);
/* Wait until every message of halo_post has completed. */
int halo_wait(struct halo *h);

/* Total bytes sent per exchange. */
size_t halo_bytes(const struct halo *h);
