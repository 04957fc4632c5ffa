#include "domain/halo.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* Message tags: the index of the direction the message travels in, so two messages
 * between the same pair of ranks (periodic wrap on a short axis) stay apart. */
static int dir_tag(const int dir[3])
{
  return (dir[0] + 1) + 3 * (dir[1] + 1) + 9 * (dir[2] + 1);
}

int halo_create(struct halo *h, const struct decomp *d, int elem, int corners)
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
        struct halo_msg *m = &h->msg[h->nmsg++];
        memcpy(m->dir, dir, sizeof dir);
        m->peer = peer;
        for (int a = 0; a < 3; a++) {
          const int64_t n = d->n[a], w = d->halo[a];
          if (dir[a] < 0) {
            m->send.lo[a] = 0, m->send.hi[a] = w;
            m->recv.lo[a] = -w, m->recv.hi[a] = 0;
          } else if (dir[a] > 0) {
            m->send.lo[a] = n - w, m->send.hi[a] = n;
            m->recv.lo[a] = n, m->recv.hi[a] = n + w;
          } else {
            m->send.lo[a] = m->recv.lo[a] = 0;
            m->send.hi[a] = m->recv.hi[a] = n;
          }
        }
        m->bytes = (size_t)box_count(&m->send) * (size_t)elem;
        if (m->bytes > (size_t)INT_MAX) {
          halo_free(h);
          FAIL(STENCIL_ERR, "a halo message of %zu bytes exceeds MPI's int count; use more ranks",
               m->bytes);
        }
        m->sendbuf = malloc(m->bytes ? m->bytes : 1);
        m->recvbuf = malloc(m->bytes ? m->bytes : 1);
        if (!m->sendbuf || !m->recvbuf) {
          halo_free(h);
          FAIL(STENCIL_ERR, "out of host memory for halo buffers");
        }
      }
  return STENCIL_OK;
}

void halo_free(struct halo *h)
{
  for (int i = 0; i < h->nmsg; i++) {
    free(h->msg[i].sendbuf);
    free(h->msg[i].recvbuf);
  }
  h->nmsg = 0;
}

int halo_post(struct halo *h)
{
  h->nreq = 0;
  for (int i = 0; i < h->nmsg; i++) {
    struct halo_msg *m = &h->msg[i];
    /* What arrives from the neighbour in direction dir travelled in direction -dir. */
    int back[3] = {-m->dir[0], -m->dir[1], -m->dir[2]};
    CHECK_MPI(MPI_Irecv(m->recvbuf, (int)m->bytes, MPI_BYTE, m->peer, dir_tag(back), h->comm,
                        &h->req[h->nreq++]));
  }
  for (int i = 0; i < h->nmsg; i++) {
    struct halo_msg *m = &h->msg[i];
    CHECK_MPI(MPI_Isend(m->sendbuf, (int)m->bytes, MPI_BYTE, m->peer, dir_tag(m->dir), h->comm,
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
