#include "app/exchange.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#ifdef STENCIL_HAVE_CUDA
#include "domain/halo_gpu.h"
#endif

/* ---- device choice --------------------------------------------------------------------- */

#ifdef STENCIL_HAVE_CUDA
static void host_name(char *buf, size_t len)
{
  if (gethostname(buf, len) != 0)
    snprintf(buf, len, "?");
  buf[len - 1] = 0;
}
#endif

int devices_choose(MPI_Comm comm, const struct options *o, const struct backend_ops **ops,
                   int *device)
{
  *ops = &backend_cpu;
  *device = 0;
  if (o->backend == BACKEND_CPU)
    return STENCIL_OK;
#ifndef STENCIL_HAVE_CUDA
  if (o->backend == BACKEND_CUDA)
    FAIL0(STENCIL_ERR_USAGE, "--backend cuda: this build has no CUDA backend (configure where "
                             "nvcc is found, or with -DSTENCIL_ENABLE_CUDA=ON); use --backend cpu");
  (void)comm;
  return STENCIL_OK;
#else
  int count = 0, lrank = 0, lsize = 1;
  char why[256], host[128];
  host_name(host, sizeof host);
  CHECK(backend_cuda.devices(&count, why, sizeof why));
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  CHECK_MPI(MPI_Comm_rank(node, &lrank));
  CHECK_MPI(MPI_Comm_size(node, &lsize));
  CHECK_MPI(MPI_Comm_free(&node));
  const int none = count == 0, crowded = lsize > count && !o->allow_gpu_sharing;
  int any_none = 0, any_crowded = 0;
  CHECK_MPI(MPI_Allreduce(&none, &any_none, 1, MPI_INT, MPI_MAX, comm));
  CHECK_MPI(MPI_Allreduce(&crowded, &any_crowded, 1, MPI_INT, MPI_MAX, comm));
  if (o->backend == BACKEND_AUTO && (any_none || any_crowded)) {
    log_info0("backend      auto: cpu (%s)\n",
              any_none ? "a rank sees no CUDA device" : "more ranks than GPUs on a node");
    return STENCIL_OK;
  }
  int status = STENCIL_OK;
  if (none) {
    if (lrank == 0)
      log_error("--backend cuda: no CUDA device is visible on host %s (%s)", host, why);
    status = STENCIL_ERR;
  } else if (crowded) {
    if (lrank == 0)
      log_error("--backend cuda: %d ranks run on host %s but it has %d GPU%s; start one rank "
                "per GPU, or pass --allow-gpu-sharing to let ranks share them",
                lsize, host, count, count > 1 ? "s" : "");
    status = STENCIL_ERR;
  }
  CHECK(status_agree(comm, status));
  *ops = &backend_cuda;
  *device = lrank % count;
  return STENCIL_OK;
#endif
}

int devices_print(MPI_Comm comm, const struct backend_ops *ops, void *ctx)
{
  if (!ops->describe)
    return STENCIL_OK;
  enum { LINE = 640 };
  char mine[LINE], host[64];
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "?");
  host[sizeof host - 1] = 0;
  char desc[LINE - 80]; /* leaves room for the host name */
  ops->describe(ctx, desc, sizeof desc);
  snprintf(mine, sizeof mine, "%s: %s", host, desc);
  int rank = 0, size = 1;
  CHECK_MPI(MPI_Comm_rank(comm, &rank));
  CHECK_MPI(MPI_Comm_size(comm, &size));
  char *all = rank == 0 ? malloc((size_t)LINE * (size_t)size) : NULL;
  if (rank == 0 && !all)
    FAIL(STENCIL_ERR, "out of host memory");
  CHECK_MPI(MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, comm));
  for (int i = 0; rank == 0 && i < size; i++)
    log_info0("device       rank %d -> %s\n", i, all + (size_t)LINE * (size_t)i);
  free(all);
  return STENCIL_OK;
}

/* ---- exchange -------------------------------------------------------------------------- */

#ifdef STENCIL_HAVE_CUDA
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

/* auto: the first of ipc, nccl, mpi-device that works here, else mpi-host. A forced
 * transport that cannot work is refused with the reason. Collective. */
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

/* ipc of plane ranges (halo_gpu.h) where every rank can: the update reads its own faces, the
 * block is 3D and every message is a z face, whose planes the backend's field_planes gives
 * as one byte range. Collective. */
static int planes_plan(struct exchange *x, const struct halo *h, const struct decomp *d, int elem,
                       void *const fields[2])
{
  int ok =
      x->transport == HALO_IPC && x->own_faces && fields && x->ops->field_planes && d->ndim == 3;
  struct layout l;
  decomp_layout(d, elem, &l);
  for (int i = 0; ok && i < h->nmsg; i++) {
    const struct halo_msg *m = &h->msg[i];
    size_t rb = 0;
    ok = m->dir[0] == 0 && m->dir[1] == 0 &&
         x->ops->field_planes(x->ctx, &l, m->send.lo[2], m->send.hi[2], &x->planes.send_off[i],
                              &x->planes.bytes[i]) &&
         x->ops->field_planes(x->ctx, &l, m->recv.lo[2], m->recv.hi[2], &x->planes.recv_off[i],
                              &rb) &&
         rb == x->planes.bytes[i];
  }
  CHECK_MPI(MPI_Allreduce(&ok, &x->use_planes, 1, MPI_INT, MPI_MIN, h->comm));
  for (int k = 0; k < 2 && x->use_planes; k++)
    x->planes.field[k] = fields[k];
  return STENCIL_OK;
}
#endif

int exchange_create(struct exchange *x, const struct backend_ops *ops, void *ctx, struct halo *h,
                    const struct decomp *d, int elem, int corners, int own_faces,
                    enum halo_transport want, void *const fields[2])
{
  memset(x, 0, sizeof *x);
  x->ops = ops;
  x->ctx = ctx;
  x->halo = h;
  x->own_faces = own_faces;
  x->transport = HALO_MPI_HOST;
  if (!ops->buffer_alloc) {
    CHECK(status_agree(d->cart, halo_create(h, d, elem, corners)));
    return STENCIL_OK;
  }
#ifdef STENCIL_HAVE_CUDA
  /* Plan with host buffers first (to know the neighbours), then choose, then allocate the
   * transport's (plane ranges need none: the host ones stay, untouched). */
  CHECK(status_agree(d->cart, halo_create(h, d, elem, corners)));
  CHECK(resolve_transport(x, h, want));
  CHECK(planes_plan(x, h, d, elem, fields));
  if (!x->use_planes) {
    halo_free(h);
    struct halo_allocator a = {buffer_alloc, buffer_release, x, x->transport != HALO_MPI_HOST};
    CHECK(status_agree(d->cart, halo_create_with(h, d, elem, corners, &a)));
  }
  if (x->transport == HALO_IPC || x->transport == HALO_NCCL)
    CHECK(status_agree(d->cart, halo_gpu_create((struct halo_gpu **)&x->gpu, h, x->transport,
                                                ops->lane_queue(ctx, LANE_HALO),
                                                x->use_planes ? &x->planes : NULL)));
  char wraps[80] = "";
  if (h->nwrap > 0)
    snprintf(wraps, sizeof wraps, ", and %d periodic wrap%s %s", h->nwrap, h->nwrap == 1 ? "" : "s",
             own_faces ? "read through by the kernel" : "copied within the block");
  log_info0("halo         transport %s%s, %d message%s of %zu bytes per exchange on rank 0%s%s\n",
            halo_transport_name(x->transport), want == HALO_AUTO ? " (auto)" : "", h->nmsg,
            h->nmsg == 1 ? "" : "s", halo_bytes(h), wraps,
            x->use_planes && h->nmsg > 0
                ? "; the sent planes copied from field to field (no pack, no unpack)"
                : "");
  return STENCIL_OK;
#else
  (void)want;
  (void)fields;
  FAIL(STENCIL_ERR, "exchange_create: a backend with buffer_alloc needs the CUDA build");
#endif
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

/* Pack every message's send box of f into its buffer (recv = 0), or unpack every receive
 * buffer into f's ghost cells (recv = 1): in one launch where the backend can. */
static int move_messages(const struct exchange *x, const struct layout *l, void *f, int recv)
{
  const struct halo *h = x->halo;
  if (x->use_planes || h->nmsg == 0)
    return STENCIL_OK;
  struct box b[HALO_MAX_MSG];
  void *buf[HALO_MAX_MSG];
  for (int i = 0; i < h->nmsg; i++) {
    b[i] = recv ? h->msg[i].recv : h->msg[i].send;
    buf[i] = recv ? h->msg[i].recvbuf : h->msg[i].sendbuf;
  }
  if (recv && x->ops->unpack_boxes)
    return x->ops->unpack_boxes(x->ctx, l, f, h->nmsg, b, (const void *const *)buf);
  if (!recv && x->ops->pack_boxes)
    return x->ops->pack_boxes(x->ctx, l, f, h->nmsg, b, buf);
  for (int i = 0; i < h->nmsg; i++)
    CHECK(recv ? x->ops->unpack(x->ctx, l, f, &b[i], buf[i])
               : x->ops->pack(x->ctx, l, f, &b[i], buf[i]));
  return STENCIL_OK;
}

int exchange_pack(struct exchange *x, const struct layout *l, void *f)
{
  const struct halo *h = x->halo;
  x->sent = f;
  CHECK(move_messages(x, l, f, 0));
  if (h->nwrap > 0 && !x->own_faces)
    CHECK(x->ops->copy_boxes(x->ctx, l, f, h->nwrap, h->wrap_from, h->wrap_to));
  return STENCIL_OK;
}

int exchange_post(struct exchange *x)
{
  if (x->halo->nmsg == 0) /* nothing to send: no host wait, no event (a CUDA graph may be
                             recording the step) */
    return STENCIL_OK;
#ifdef STENCIL_HAVE_CUDA
  if (x->gpu)
    return halo_gpu_post(x->gpu, x->halo, x->sent);
#endif
  if (x->ops->lane_sync)
    CHECK(x->ops->lane_sync(x->ctx, LANE_HALO));
  else
    CHECK(x->ops->sync(x->ctx));
  return halo_post(x->halo);
}

int exchange_finish(struct exchange *x, const struct layout *l, void *f, const struct config *c,
                    const struct decomp *d, int fence)
{
  struct halo *h = x->halo;
#ifdef STENCIL_HAVE_CUDA
  if (x->gpu && h->nmsg > 0)
    CHECK(halo_gpu_wait(x->gpu, h));
  else
#endif
    CHECK(halo_wait(h));
  CHECK(move_messages(x, l, f, 1));
  int physical = 0, on[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  for (int a = 0; a < d->ndim && !x->own_faces; a++)
    for (int s = 0; s < 2; s++) {
      on[a][s] = d->physical[a][s];
      physical |= on[a][s];
    }
  if (fence && physical && x->ops->lane_fence)
    CHECK(x->ops->lane_fence(x->ctx));
  if (physical && x->ops->boundaries)
    return x->ops->boundaries(x->ctx, l, f, on, c->bc, c->bc_value);
  for (int a = 0; a < d->ndim; a++)
    for (int s = 0; s < 2; s++)
      if (on[a][s])
        CHECK(x->ops->boundary(x->ctx, l, f, a, s, c->bc[a][s], c->bc_value[a][s]));
  return STENCIL_OK;
}
