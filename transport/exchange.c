#include "transport/exchange.h"

#include <stdio.h>
#include <string.h>

#include "common/error_mpi.h"

static int buffer_alloc(void *ctx, size_t bytes, int device, void **p)
{
  const struct exchange *x = ctx;
  return x->ops->buffer_alloc(x->ctx, bytes, device, p);
}

static void buffer_release(void *ctx, void *p, int device)
{
  const struct exchange *x = ctx;
  x->ops->buffer_release(x->ctx, p, device);
}

/* Pack the send box of f of every message that is no field box into its buffer (recv = 0), or
 * unpack their receive buffers into f's ghost cells (recv = 1), in one backend call. */
static int move_messages(const struct exchange *x, void *f, int recv)
{
  const struct halo *h = x->halo;
  struct box b[HALO_MAX_MSG];
  void *buf[HALO_MAX_MSG];
  int n = 0;
  for (int i = 0; i < h->nmsg; i++) {
    if (x->boxes.on[i])
      continue;
    b[n] = recv ? h->msg[i].recv : h->msg[i].send;
    buf[n++] = recv ? h->msg[i].recvbuf : h->msg[i].sendbuf;
  }
  if (n == 0)
    return STENCIL_OK;
  if (recv)
    return x->ops->unpack(x->ctx, &x->lay, f, n, b, (const void *const *)buf);
  return x->ops->pack(x->ctx, &x->lay, f, n, b, buf);
}

static int exchange_pack(void *arg, void *f)
{
  struct exchange *x = arg;
  const double t0 = MPI_Wtime();
  const struct halo *h = x->halo;
  x->sent = f;
  if (x->ops->exchange_mark)
    CHECK(x->ops->exchange_mark(x->ctx, 0));
  CHECK(move_messages(x, f, 0));
  if (h->nwrap > 0 && x->copy_wraps)
    CHECK(x->ops->copy_boxes(x->ctx, &x->lay, f, h->nwrap, h->wrap_from, h->wrap_to));
  x->times.pack += MPI_Wtime() - t0;
  return STENCIL_OK;
}

/* Start the messages (MPI transports first wait on the host for the packing). */
static int exchange_post(void *arg)
{
  struct exchange *x = arg;
  const double t0 = MPI_Wtime();
  if (x->halo->nmsg > 0) {
#ifdef STENCIL_HAVE_CUDA
    if (x->gpu)
      CHECK(halo_gpu_post(x->gpu, x->halo, x->sent));
    else
#endif
    {
      CHECK(x->ops->queue_sync(x->ctx));
      CHECK(halo_post(x->halo));
    }
  }
  x->posted = MPI_Wtime();
  x->times.post += x->posted - t0;
  x->times.exchanges += 1;
  x->times.messages += x->halo->nmsg;
  x->times.bytes += (double)halo_bytes(x->halo);
  return STENCIL_OK;
}

/* Complete the messages and unpack them into f's ghost cells. */
static int exchange_finish(void *arg, void *f)
{
  struct exchange *x = arg;
  const double t0 = MPI_Wtime();
  x->times.between += t0 - x->posted;
  struct halo *h = x->halo;
#ifdef STENCIL_HAVE_CUDA
  if (x->gpu && h->nmsg > 0)
    CHECK(halo_gpu_wait(x->gpu, h));
  else
#endif
    CHECK(halo_wait(h));
  CHECK(move_messages(x, f, 1));
  if (x->ops->exchange_mark)
    CHECK(x->ops->exchange_mark(x->ctx, 1));
  x->times.finish += MPI_Wtime() - t0;
  return STENCIL_OK;
}

#ifdef STENCIL_HAVE_CUDA
static int resolve_transport(struct exchange *x, struct halo *h, enum halo_transport want)
{
  char why[256];
  int ok = 0;
  if (want == HALO_MPI_HOST) {
    x->transport = want;
    return STENCIL_OK;
  }
  if (want != HALO_AUTO) {
    CHECK(halo_gpu_usable(h, want, &ok, why, sizeof why));
    if (!ok)
      FAIL0(STENCIL_ERR_USAGE,
            "--halo-transport %s cannot work here: %s; use mpi-host (always "
            "works) or auto",
            halo_transport_name(want), why);
    x->transport = want;
    return STENCIL_OK;
  }
  const enum halo_transport order[] = {HALO_IPC, HALO_NCCL, HALO_MPI_DEVICE};
  x->transport = HALO_MPI_HOST;
  for (int i = 0; i < 3; i++) {
    CHECK(halo_gpu_usable(h, order[i], &ok, why, sizeof why));
    if (ok) {
      x->transport = order[i];
      break;
    }
  }
  return STENCIL_OK;
}

/* Rows of a box narrower than this travel packed: a copy engine moves a strided box row by
 * row at a rate nearly independent of the row's width up to a few hundred bytes, so a box of
 * narrow rows (an x face, an edge along z) takes it longer than a pack kernel does
 * (docs/design/architecture.md, "Halo exchange"). */
#define BOX_ROW_MIN 256

/* ipc of field boxes (transport/gpu.h) where every rank can: the backend reads its own faces
 * and wraps (none is filled between launches) and the block is 3D. Where every message is a z
 * face, its boxes grow to whole planes, x and y ghosts and row padding included: one byte range
 * a message. Otherwise a message is a box where its rows are at least BOX_ROW_MIN bytes (the
 * same extent on both ranks: the same choice). Collective. */
static int boxes_plan(struct exchange *x, const struct halo *h, const struct decomp *d,
                      void *const fields[2])
{
  int ok = x->transport == HALO_IPC && !x->copy_wraps && fields && d->ndim == 3;
  int slab = 1;
  for (int i = 0; i < h->nmsg; i++)
    slab = slab && h->msg[i].dir[0] == 0 && h->msg[i].dir[1] == 0;
  for (int i = 0; ok && i < h->nmsg; i++) {
    struct box b[2] = {h->msg[i].send, h->msg[i].recv};
    struct field_span *s[2] = {&x->boxes.send[i], &x->boxes.recv[i]};
    for (int k = 0; ok && k < 2; k++) {
      for (int a = 0; slab && a < 2; a++) {
        b[k].lo[a] = -x->lay.halo[a];
        b[k].hi[a] = x->lay.n[a] + x->lay.halo[a];
      }
      ok = x->ops->field_box(x->ctx, &x->lay, &b[k], s[k]);
      if (slab)
        s[k]->width = s[k]->pitch;
    }
    x->boxes.on[i] = slab || s[0]->width >= BOX_ROW_MIN;
  }
  int all = 0;
  CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, h->comm));
  x->nboxes = 0;
  for (int i = 0; i < h->nmsg; i++) {
    x->boxes.on[i] = all && x->boxes.on[i];
    x->nboxes += x->boxes.on[i];
  }
  for (int k = 0; k < 2 && x->nboxes; k++)
    x->boxes.field[k] = fields[k];
  return STENCIL_OK;
}

/* Plan the messages first (to know the neighbours), then choose the transport and the field
 * boxes, then allocate the buffers of the messages that travel packed: page-locked host memory
 * for mpi-host, device memory otherwise; none for field boxes. */
static int create_device(struct exchange *x, struct halo *h, const struct decomp *d, int elem,
                         int corners, enum halo_transport want, void *const fields[2])
{
  CHECK(status_agree(d->cart, halo_plan(h, d, elem, corners)));
  CHECK(resolve_transport(x, h, want));
  CHECK(boxes_plan(x, h, d, fields));
  struct halo_allocator a = {buffer_alloc, buffer_release, x, x->transport != HALO_MPI_HOST};
  CHECK(status_agree(d->cart, halo_buffers(h, &a, x->boxes.on)));
  if (x->transport == HALO_IPC || x->transport == HALO_NCCL)
    CHECK(status_agree(d->cart,
                       halo_gpu_create((struct halo_gpu **)&x->gpu, h, x->transport,
                                       x->ops->queue(x->ctx), x->nboxes ? &x->boxes : NULL)));
  char wraps[80] = "";
  if (h->nwrap > 0)
    snprintf(wraps, sizeof wraps, ", and %d periodic wrap%s %s", h->nwrap, h->nwrap == 1 ? "" : "s",
             x->copy_wraps ? "copied within the block" : "read through by the kernel");
  char boxes[120] = "";
  if (x->nboxes == h->nmsg && h->nmsg > 0)
    snprintf(boxes, sizeof boxes,
             "; the sent cells copied from field to field by copy engines (no pack, no unpack)");
  else if (x->nboxes > 0)
    snprintf(boxes, sizeof boxes,
             "; %d copied from field to field by copy engines, the others (rows under %d bytes) "
             "packed",
             x->nboxes, BOX_ROW_MIN);
  log_info0("halo         transport %s%s, %d message%s of %zu bytes per exchange on rank 0%s%s\n",
            halo_transport_name(x->transport), want == HALO_AUTO ? " (auto)" : "", h->nmsg,
            h->nmsg == 1 ? "" : "s", halo_bytes(h), wraps, boxes);
  return STENCIL_OK;
}
#endif

int exchange_create(struct exchange *x, const struct backend_ops *ops, void *ctx, struct halo *h,
                    const struct decomp *d, int elem, int corners, const struct advance_info *info,
                    enum halo_transport want, void *const fields[2])
{
  memset(x, 0, sizeof *x);
  x->ops = ops;
  x->ctx = ctx;
  x->halo = h;
  decomp_layout(d, elem, &x->lay);
  x->copy_wraps = !info->reads_faces;
  x->transport = HALO_MPI_HOST;
  x->face = (struct exchanger){x, 0, exchange_pack, exchange_post, exchange_finish};
  if (ops->caps.device_memory) {
#ifdef STENCIL_HAVE_CUDA
    CHECK(create_device(x, h, d, elem, corners, want, fields));
#else
    (void)fields;
    (void)want;
    FAIL(STENCIL_ERR, "exchange_create: a device-memory backend needs the CUDA build");
#endif
  } else {
    struct halo_allocator host = {buffer_alloc, buffer_release, x, 0};
    CHECK(status_agree(d->cart, halo_plan(h, d, elem, corners)));
    CHECK(status_agree(d->cart, halo_buffers(h, &host, NULL)));
  }
  x->face.messages = h->nmsg > 0;
  return STENCIL_OK;
}

void exchange_free(struct exchange *x)
{
#ifdef STENCIL_HAVE_CUDA
  if (x->gpu)
    halo_gpu_free(x->gpu, x->halo);
#endif
  x->gpu = NULL;
  if (x->halo)
    halo_free(x->halo);
}
