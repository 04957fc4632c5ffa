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
 * recvbuf pointers at every exchange). mpi-host and mpi-device use halo_post/halo_wait. */
#include <stddef.h>

#include "domain/halo.h"

struct halo_gpu;

/* Whether transport t can work for these messages, the same answer on every rank; why gets
 * the reason when not. ipc: every neighbour on this node; nccl: libnccl.so.2 loads;
 * mpi-device: MPIX_Query_cuda_support() says so. Collective over h->comm. */
int halo_gpu_usable(const struct halo *h, enum halo_transport t, int *ok, char *why, size_t len);

/* Set up t (ipc or nccl) for h's messages, ordered on stream (a cudaStream_t). Collective over
 * h->comm. */
int halo_gpu_create(struct halo_gpu **g, struct halo *h, enum halo_transport t, void *stream);
/* Start the exchange of the packed buffers (enqueued on the stream; no host wait). */
int halo_gpu_post(struct halo_gpu *g, struct halo *h);
/* Order the stream after the arrival of every message; point recvbuf at the data. */
int halo_gpu_wait(struct halo_gpu *g, struct halo *h);
/* Release; restores h's own buffers so halo_free can free them. */
void halo_gpu_free(struct halo_gpu *g, struct halo *h);
