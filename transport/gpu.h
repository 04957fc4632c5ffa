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
 * ipc of plane ranges (struct halo_planes): where every message's cells lie in a range of
 * whole planes that is contiguous in both ranks' field buffers (z faces of a slab), the copy
 * goes from the sender's field straight into the receiver's ghost planes, on a copy engine:
 * no pack, no unpack, no buffers. The rank's two field buffers are exported (the ranks swap
 * them in step, so buffer k of the sender meets buffer k of the receiver). Before copying
 * into one, the sender's stream waits on the receiver's latest event, recorded at its last
 * post: the caller must post only after its last read of the ghost planes it received into
 * that field before (the fused path posts after the launch, or the part of it, that reads
 * them). */
#include <stddef.h>

#include "domain/halo.h"

struct halo_gpu;

/* Whether transport t can work for these messages, the same answer on every rank; why gets
 * the reason when not. ipc: every neighbour on this node, its GPU visible to this process;
 * nccl: libnccl.so.2 loads;
 * mpi-device: MPIX_Query_cuda_support() says so. Collective over h->comm. */
int halo_gpu_usable(const struct halo *h, enum halo_transport t, int *ok, char *why, size_t len);

/* ipc of plane ranges: this rank's two field buffers (each a cudaMalloc base) and, per
 * message, the byte offsets in a field buffer of the planes it sends and of the ghost planes
 * it receives, and their length (the same on both ranks). */
struct halo_planes {
  void *field[2];
  size_t send_off[HALO_MAX_MSG], recv_off[HALO_MAX_MSG], bytes[HALO_MAX_MSG];
};

/* Set up t (ipc or nccl) for h's messages, ordered on stream (a cudaStream_t); planes (ipc
 * only, NULL: packed buffers) as above, the same choice on every rank. Collective over
 * h->comm. */
int halo_gpu_create(struct halo_gpu **g, struct halo *h, enum halo_transport t, void *stream,
                    const struct halo_planes *planes);
/* Start the exchange of the packed buffers, or of field f's planes (enqueued on the stream;
 * no host wait). */
int halo_gpu_post(struct halo_gpu *g, struct halo *h, const void *f);
/* Order the stream after the arrival of every message; point recvbuf at the data. */
int halo_gpu_wait(struct halo_gpu *g, struct halo *h);
/* Release; restores h's own buffers so halo_free can free them. */
void halo_gpu_free(struct halo_gpu *g, struct halo *h);
