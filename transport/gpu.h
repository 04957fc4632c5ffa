#pragma once
/* Halo transports that move device buffers (built with the CUDA backend only):
 *
 *   ipc   CUDA IPC: each rank copies its packed send buffers straight into its neighbours'
 *         receive buffers (cudaMemcpyAsync on peer pointers from cudaIpcOpenMemHandle) and
 *         records an interprocess event; a zero-byte MPI message per neighbour says "recorded",
 *         and the receiver's stream waits on that event before unpacking. Receive buffers are
 *         doubled (by the parity of the exchange), and before copying into a neighbour's
 *         buffer the sender's stream waits on the neighbour's latest event, which follows its
 *         unpack of two exchanges ago: no host ever waits for a GPU.
 *   nccl  ncclSend/ncclRecv of every message in one group on the stream (libnccl.so.2 is
 *         opened at run time).
 *
 * The caller packs into h->msg[i].sendbuf (device memory) on `stream`, calls halo_gpu_post,
 * then halo_gpu_wait, then unpacks h->msg[i].recvbuf on the same stream (ipc changes the
 * recvbuf pointers at every exchange). mpi-host and mpi-device use halo_post/halo_wait.
 *
 * ipc of field boxes (struct halo_boxes): for the messages the backend marks so, the copy goes
 * from the sender's field straight into the receiver's ghost cells, on a copy engine: no pack,
 * no unpack, no buffers. A box is one byte range where it is whole planes (z faces of a slab),
 * else a strided 3D copy. The other messages of the exchange travel packed, as above. The
 * rank's two field buffers are exported (the ranks swap them in step, so buffer k of the
 * sender meets buffer k of the receiver). Before copying into one, the sender's stream waits
 * on the receiver's latest event, recorded at its last post: the caller must post only after
 * its last read of the ghost cells it received into that field before (the fused path posts
 * after the launch, or the part of it, that reads them). */
#include <stddef.h>

#include "domain/halo.h"

struct halo_gpu;

/* Whether transport t can work for these messages, the same answer on every rank; why gets
 * the reason when not. ipc: every neighbour on this node, its GPU visible to this process;
 * nccl: libnccl.so.2 loads;
 * mpi-device: MPIX_Query_cuda_support() says so. Collective over h->comm. */
int halo_gpu_usable(const struct halo *h, enum halo_transport t, int *ok, char *why, size_t len);

/* ipc of field boxes: this rank's two field buffers (each a cudaMalloc base) and, for each
 * message i with on[i] (the same choice on both of its ranks), where in a field buffer lie the
 * cells it sends and the ghost cells it receives (the same extent on both ranks). */
struct halo_boxes {
  void *field[2];
  int on[HALO_MAX_MSG];
  struct field_span send[HALO_MAX_MSG], recv[HALO_MAX_MSG];
};

/* Set up t (ipc or nccl) for h's messages, ordered on stream (a cudaStream_t); boxes (ipc
 * only, NULL: packed buffers) as above, the same choice on every rank. Collective over
 * h->comm. */
int halo_gpu_create(struct halo_gpu **g, struct halo *h, enum halo_transport t, void *stream,
                    const struct halo_boxes *boxes);
/* Start the exchange of the packed buffers and of field f's boxes (enqueued on the stream;
 * no host wait). */
int halo_gpu_post(struct halo_gpu *g, struct halo *h, const void *f);
/* Order the stream after the arrival of every message; point recvbuf at the data. */
int halo_gpu_wait(struct halo_gpu *g, struct halo *h);
/* Release; restores h's own buffers so halo_free can free them. */
void halo_gpu_free(struct halo_gpu *g, struct halo *h);
