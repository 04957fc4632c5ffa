#include "domain/halo.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"

/* Message tags: the index of the direction the message travels in, so two messages
 * between the same pair of ranks (periodic wrap on a short axis) stay apart. */
int halo_dir_tag(const int dir[3])
{
  return (dir[0] + 1) + 3 * (dir[1] + 1) + 9 * (dir[2] + 1);
}

const char *halo_transport_name(enum halo_transport t)
{
  switch (t) {
  case HALO_AUTO: return "auto";
  case HALO_MPI_HOST: return "mpi-host";
  case HALO_MPI_DEVICE: return "mpi-device";
  case HALO_IPC: return "ipc";
  case HALO_NCCL: return "nccl";
  }
  return "?";
}

static int buffer_get(struct halo *h, size_t bytes, void **p)
{
  *p = NULL;
  if (h->alloc.alloc)
    return h->alloc.alloc(h->alloc.ctx, bytes ? bytes : 1, h->alloc.device, p);
  *p = malloc(bytes ? bytes : 1);
  if (!*p)
    FAIL(STENCIL_ERR, "out of host memory for halo buffers");
  return STENCIL_OK;
}

static void buffer_put(struct halo *h, void *p)
{
  if (!p)
    return;
  if (h->alloc.alloc)
    h->alloc.release(h->alloc.ctx, p, h->alloc.device);
  else
    free(p);
}

int halo_create(struct halo *h, const struct decomp *d, int elem, int corners)
{
  const int status = halo_plan(h, d, elem, corners);
  return status == STENCIL_OK ? halo_buffers(h, NULL, NULL) : status;
}

/* The cells sent towards dir (recv = 0: the interior's halo-wide slab on that side) or
 * received from it (recv = 1: the ghost layers on that side). */
static void dir_box(const struct decomp *d, const int dir[3], int recv, struct box *b)
{
  for (int a = 0; a < 3; a++) {
    const int64_t n = d->n[a], w = d->halo[a];
    b->lo[a] = dir[a] == 0 ? 0 : dir[a] < 0 ? (recv ? -w : 0) : (recv ? n : n - w);
    b->hi[a] = dir[a] == 0 ? n : dir[a] < 0 ? (recv ? 0 : w) : (recv ? n + w : n);
  }
}

int halo_plan(struct halo *h, const struct decomp *d, int elem, int corners)
{
  memset(h, 0, sizeof *h);
  h->comm = d->cart;
  for (int dz = -1; dz <= 1; dz++)
    for (int dy = -1; dy <= 1; dy++)
      for (int dx = -1; dx <= 1; dx++) {
        int dir[3] = {dx, dy, dz};
        int nonzero = (dx != 0) + (dy != 0) + (dz != 0);
        if (nonzero == 0 || (!corners && nonzero > 1))
          continue;
        int skip = 0;
        for (int a = 0; a < 3; a++)
          if (dir[a] != 0 && d->halo[a] == 0)
            skip = 1;
        int peer = skip ? MPI_PROC_NULL : decomp_neighbor(d, dir);
        if (peer == MPI_PROC_NULL)
          continue;
        if (peer == d->rank) {
          /* It lands on this rank's ghosts on the opposite side, the receive box of -dir. */
          const int back[3] = {-dx, -dy, -dz};
          dir_box(d, dir, 0, &h->wrap_from[h->nwrap]);
          dir_box(d, back, 1, &h->wrap_to[h->nwrap++]);
          continue;
        }
        struct halo_msg *m = &h->msg[h->nmsg++];
        memcpy(m->dir, dir, sizeof dir);
        m->peer = peer;
        dir_box(d, dir, 0, &m->send);
        dir_box(d, dir, 1, &m->recv);
        m->bytes = (size_t)box_count(&m->send) * (size_t)elem;
        if (m->bytes > (size_t)INT_MAX) {
          halo_free(h);
          FAIL(STENCIL_ERR, "a halo message of %zu bytes exceeds MPI's int count; use more ranks",
               m->bytes);
        }
      }
  return STENCIL_OK;
}

static void buffers_put(struct halo *h)
{
  for (int i = 0; i < h->nmsg; i++) {
    buffer_put(h, h->msg[i].sendbuf);
    buffer_put(h, h->msg[i].recvbuf);
    h->msg[i].sendbuf = h->msg[i].recvbuf = NULL;
  }
}

int halo_buffers(struct halo *h, const struct halo_allocator *a, const int *none)
{
  buffers_put(h);
  if (a)
    h->alloc = *a;
  else
    memset(&h->alloc, 0, sizeof h->alloc);
  for (int i = 0; i < h->nmsg; i++) {
    struct halo_msg *m = &h->msg[i];
    if (none && none[i])
      continue;
    int status = buffer_get(h, m->bytes, &m->sendbuf);
    if (status == STENCIL_OK)
      status = buffer_get(h, m->bytes, &m->recvbuf);
    if (status != STENCIL_OK) {
      halo_free(h);
      return status;
    }
  }
  return STENCIL_OK;
}

void halo_free(struct halo *h)
{
  buffers_put(h);
  h->nmsg = 0;
}

int halo_post(struct halo *h)
{
  h->nreq = 0;
  for (int i = 0; i < h->nmsg; i++) {
    struct halo_msg *m = &h->msg[i];
    /* What arrives from the neighbour in direction dir travelled in direction -dir. */
    int back[3] = {-m->dir[0], -m->dir[1], -m->dir[2]};
    CHECK_MPI(MPI_Irecv(m->recvbuf, (int)m->bytes, MPI_BYTE, m->peer, halo_dir_tag(back), h->comm,
                        &h->req[h->nreq++]));
  }
  for (int i = 0; i < h->nmsg; i++) {
    struct halo_msg *m = &h->msg[i];
    CHECK_MPI(MPI_Isend(m->sendbuf, (int)m->bytes, MPI_BYTE, m->peer, halo_dir_tag(m->dir), h->comm,
                        &h->req[h->nreq++]));
  }
  return STENCIL_OK;
}

int halo_wait(struct halo *h)
{
  CHECK_MPI(MPI_Waitall(h->nreq, h->req, MPI_STATUSES_IGNORE));
  h->nreq = 0;
  return STENCIL_OK;
}

size_t halo_bytes(const struct halo *h)
{
  size_t b = 0;
  for (int i = 0; i < h->nmsg; i++)
    b += h->msg[i].bytes;
  return b;
}
