/* GPU halo transports: CUDA IPC and NCCL (see transport/gpu.h for the protocol). */
#include "transport/gpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cuda_check.h"
#include "common/error_mpi.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#ifdef STENCIL_HAVE_NCCL
#include <nccl.h>
/* NCCL entry points, resolved with dlsym so the program starts without libnccl. The
 * communicator is non-blocking (ncclConfig_t.blocking = 0, NCCL 2.14 or later): its set-up can
 * be given up when another rank's failed (nccl_init), and a call that returns ncclInProgress
 * is complete once ncclCommGetAsyncError says so (nccl_settle). */
struct nccl_api {
  void *lib;
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*comm_init_rank_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*comm_abort)(ncclComm_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  const char *(*error_string)(ncclResult_t);
  const char *(*last_error)(ncclComm_t); /* NCCL's own words on its last error */
};

#define CHECK_NCCL(api, call)                                                                      \
  do {                                                                                             \
    ncclResult_t check_nccl_ = (call);                                                             \
    if (check_nccl_ != ncclSuccess)                                                                \
      FAIL(STENCIL_ERR, "NCCL call %s failed: %s (%s)", #call, (api)->error_string(check_nccl_),   \
           (api)->last_error(NULL));                                                               \
  } while (0)

static int nccl_load(struct nccl_api *a, char *why, size_t len)
{
  memset(a, 0, sizeof *a);
  a->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!a->lib) {
    snprintf(why, len, "cannot load libnccl.so.2: %s", dlerror());
    return 0;
  }
  /* POSIX allows converting dlsym's object pointer to a function pointer through memcpy. */
#define NCCL_SYM(field, name)                                                                      \
  do {                                                                                             \
    void *sym_ = dlsym(a->lib, name);                                                              \
    if (!sym_) {                                                                                   \
      snprintf(why, len, "libnccl.so.2 has no %s", name);                                          \
      dlclose(a->lib);                                                                             \
      a->lib = NULL;                                                                               \
      return 0;                                                                                    \
    }                                                                                              \
    memcpy(&a->field, &sym_, sizeof sym_);                                                         \
  } while (0)
  NCCL_SYM(get_unique_id, "ncclGetUniqueId");
  NCCL_SYM(comm_init_rank_config, "ncclCommInitRankConfig");
  NCCL_SYM(comm_get_async_error, "ncclCommGetAsyncError");
  NCCL_SYM(comm_abort, "ncclCommAbort");
  NCCL_SYM(send, "ncclSend");
  NCCL_SYM(recv, "ncclRecv");
  NCCL_SYM(group_start, "ncclGroupStart");
  NCCL_SYM(group_end, "ncclGroupEnd");
  NCCL_SYM(error_string, "ncclGetErrorString");
  NCCL_SYM(last_error, "ncclGetLastError");
#undef NCCL_SYM
  return 1;
}
#endif

/* What ipc needs per message: where it goes (the receiving rank's two buffers: its receive
 * buffers, or its field buffers at the ghost cells of span for a box) and the receiving rank's
 * event. */
struct ipc_msg {
  void *dst[2];
  struct field_span span;
  int opened; /* dst came from cudaIpcOpenMemHandle */
  cudaEvent_t peer_done;
  void *own[2]; /* this rank's receive buffers: h's own and a second one */
};

/* The handles a rank sends to the neighbour that fills one of its receive boxes. */
struct ipc_wire {
  cudaIpcMemHandle_t mem[2];
  cudaIpcEventHandle_t done;
  struct field_span span; /* field boxes: where in mem the ghost cells are */
  int failed;             /* the sender could not set its side up: nothing to open */
};

struct halo_gpu {
  enum halo_transport t;
  cudaStream_t stream;
  int rank;
  int parity;
  struct ipc_msg m[HALO_MAX_MSG];
  cudaEvent_t done;
  MPI_Request req[2 * HALO_MAX_MSG];
  int nreq;
  char token;
  const struct halo_boxes *boxes; /* ipc of field boxes (NULL: packed buffers only) */
  int last_field;                 /* the field boxes were last sent from (-1: none yet) */
#ifdef STENCIL_HAVE_NCCL
  struct nccl_api nccl;
  ncclComm_t comm; /* NULL, or made (perhaps failed): halo_gpu_free aborts it */
#endif
};

/* ---- which transports can work --------------------------------------------------------- */

static int mpi_cuda_aware(char *why, size_t len)
{
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  if (MPIX_Query_cuda_support())
    return 1;
  snprintf(why, len, "this MPI (Open MPI) is not CUDA-aware: MPIX_Query_cuda_support() = 0");
  return 0;
#else
  snprintf(why, len, "this MPI offers no MPIX_Query_cuda_support() to say it is CUDA-aware");
  return 0;
#endif
}

static int neighbours_on_node(const struct halo *h, int *local)
{
  MPI_Comm node;
  MPI_Group all, mine;
  int rank = 0;
  *local = 1;
  CHECK_MPI(MPI_Comm_rank(h->comm, &rank));
  CHECK_MPI(MPI_Comm_split_type(h->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  CHECK_MPI(MPI_Comm_group(h->comm, &all));
  CHECK_MPI(MPI_Comm_group(node, &mine));
  for (int i = 0; i < h->nmsg; i++) {
    int there = MPI_UNDEFINED;
    CHECK_MPI(MPI_Group_translate_ranks(all, 1, &h->msg[i].peer, mine, &there));
    if (there == MPI_UNDEFINED)
      *local = 0;
  }
  MPI_Group_free(&all);
  MPI_Group_free(&mine);
  MPI_Comm_free(&node);
  return STENCIL_OK;
}

/* CUDA IPC opens a neighbour's memory through the neighbour's GPU, which this process must
 * see: per-task GPU binding (Slurm's --gpus-per-task / --gpu-bind, or CUDA_VISIBLE_DEVICES per
 * rank) hides it. Each rank sends its GPU's PCI bus id to its neighbours (tags as in
 * halo_post) and looks theirs up among its own devices. */
static int neighbours_visible(const struct halo *h, int *visible, char *why, size_t len)
{
  enum { ID = 32 };
  char mine[ID] = "", theirs[HALO_MAX_MSG][ID];
  MPI_Request req[2 * HALO_MAX_MSG];
  int dev = 0, n = 0;
  /* A rank that cannot read its own sends "" (which no neighbour finds): every rank takes
   * part in the swap and in the agreement after it, and ipc is then not usable. */
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetPCIBusId(mine, ID, dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    mine[0] = 0;
  }
  for (int i = 0; i < h->nmsg; i++) {
    const struct halo_msg *m = &h->msg[i];
    const int back[3] = {-m->dir[0], -m->dir[1], -m->dir[2]};
    CHECK_MPI(MPI_Irecv(theirs[i], ID, MPI_CHAR, m->peer, halo_dir_tag(back), h->comm, &req[n++]));
    CHECK_MPI(MPI_Isend(mine, ID, MPI_CHAR, m->peer, halo_dir_tag(m->dir), h->comm, &req[n++]));
  }
  CHECK_MPI(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
  *visible = e == cudaSuccess;
  if (!*visible)
    snprintf(why, len, "cannot read the PCI bus id of this process's GPU: %s",
             cudaGetErrorString(e));
  for (int i = 0; i < h->nmsg && *visible; i++) {
    int d = 0;
    theirs[i][ID - 1] = 0;
    if (!theirs[i][0]) {
      *visible = 0;
      snprintf(why, len, "neighbour rank %d cannot read the PCI bus id of its GPU", h->msg[i].peer);
    } else if (cudaDeviceGetByPCIBusId(&d, theirs[i]) != cudaSuccess) {
      cudaGetLastError(); /* not sticky: clear it */
      *visible = 0;
      snprintf(why, len,
               "the GPU of neighbour rank %d (PCI %s) is not visible to this process "
               "(CUDA_VISIBLE_DEVICES or a per-task GPU binding hides it)",
               h->msg[i].peer, theirs[i]);
    }
  }
  return STENCIL_OK;
}

int halo_gpu_usable(const struct halo *h, enum halo_transport t, int *ok, char *why, size_t len)
{
  int mine = 1;
  why[0] = 0;
  switch (t) {
  case HALO_AUTO:
  case HALO_MPI_HOST: break;
  case HALO_MPI_DEVICE: mine = mpi_cuda_aware(why, len); break;
  case HALO_IPC: {
    int visible = 1; /* every rank takes part in the exchange of bus ids */
    CHECK(neighbours_visible(h, &visible, why, len));
    CHECK(neighbours_on_node(h, &mine));
    if (!mine)
      snprintf(why, len, "a neighbour is on another node");
    mine = mine && visible;
    break;
  }
  case HALO_NCCL: {
#ifdef STENCIL_HAVE_NCCL
    struct nccl_api a;
    mine = nccl_load(&a, why, len);
    if (mine)
      dlclose(a.lib);
#else
    mine = 0;
    snprintf(why, len,
             "this build has no NCCL support (nccl.h of NCCL 2.14 or later was not found at "
             "configure time)");
#endif
    break;
  }
  }
  CHECK_MPI(MPI_Allreduce(&mine, ok, 1, MPI_INT, MPI_MIN, h->comm));
  if (!*ok && mine)
    snprintf(why, len, "not usable on every rank");
  return STENCIL_OK;
}

/* ---- ipc ------------------------------------------------------------------------------- */

static int same_extent(const struct field_span *a, const struct field_span *b)
{
  return a->width == b->width && a->rows == b->rows && a->planes == b->planes;
}

/* Rows that fill their planes and planes that follow each other: one byte range. */
static int dense(const struct field_span *s)
{
  return s->width == s->pitch && s->slice == (size_t)s->rows * s->pitch;
}

/* The box at span s of src onto the box at span d of dst (the same extent), on stream: one
 * range where both are dense, else a 3D copy of rows (the copy engines take strided rows). */
static int copy_box(void *dst, const struct field_span *d, const void *src,
                    const struct field_span *s, cudaStream_t stream)
{
  char *to = (char *)dst + d->offset;
  const char *from = (const char *)src + s->offset;
  if (dense(s) && dense(d)) {
    CHECK_CUDA(
        cudaMemcpyAsync(to, from, s->slice * (size_t)s->planes, cudaMemcpyDeviceToDevice, stream));
    return STENCIL_OK;
  }
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr.ptr = (void *)from;
  p.srcPtr.pitch = p.srcPtr.xsize = s->pitch;
  p.srcPtr.ysize = s->slice / s->pitch;
  p.dstPtr.ptr = to;
  p.dstPtr.pitch = p.dstPtr.xsize = d->pitch;
  p.dstPtr.ysize = d->slice / d->pitch;
  p.extent.width = s->width;
  p.extent.height = (size_t)s->rows;
  p.extent.depth = (size_t)s->planes;
  p.kind = cudaMemcpyDefault;
  CHECK_CUDA(cudaMemcpy3DAsync(&p, stream));
  return STENCIL_OK;
}

/* This rank's side of ipc: its event, a second receive buffer per packed message and their
 * handles, into out (zeroed by the caller). */
static int ipc_local(struct halo_gpu *g, struct halo *h, struct ipc_wire *out)
{
  const struct halo_boxes *pl = g->boxes;
  CHECK_CUDA(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming | cudaEventInterprocess));
  cudaIpcEventHandle_t ev;
  CHECK_CUDA(cudaIpcGetEventHandle(&ev, g->done));
  cudaIpcMemHandle_t fields[2];
  for (int p = 0; pl && p < 2; p++)
    CHECK_CUDA(cudaIpcGetMemHandle(&fields[p], pl->field[p]));
  for (int i = 0; i < h->nmsg; i++) {
    struct ipc_msg *m = &g->m[i];
    out[i].done = ev;
    if (pl && pl->on[i]) {
      memcpy(out[i].mem, fields, sizeof fields);
      out[i].span = pl->recv[i];
      continue;
    }
    CHECK_CUDA(cudaMalloc(&m->own[1], h->msg[i].bytes ? h->msg[i].bytes : 1));
    for (int p = 0; p < 2; p++)
      CHECK_CUDA(cudaIpcGetMemHandle(&out[i].mem[p], m->own[p]));
  }
  return STENCIL_OK;
}

/* Every rank takes part in the swap of handles, failed or not (a rank that left before it
 * would leave its neighbours waiting for its message), then fails if it or a neighbour did. */
static int ipc_create(struct halo_gpu *g, struct halo *h)
{
  struct ipc_wire out[HALO_MAX_MSG], in[HALO_MAX_MSG];
  const struct halo_boxes *pl = g->boxes;
  memset(out, 0, sizeof out);
  const int status = ipc_local(g, h, out);
  for (int i = 0; i < h->nmsg; i++)
    out[i].failed = status != STENCIL_OK;
  /* My receive buffers of message i go to its peer, which sends into them with its message
   * travelling in direction -dir: tags as in halo_post. */
  g->nreq = 0;
  for (int i = 0; i < h->nmsg; i++) {
    const struct halo_msg *hm = &h->msg[i];
    int back[3] = {-hm->dir[0], -hm->dir[1], -hm->dir[2]};
    CHECK_MPI(MPI_Irecv(&in[i], (int)sizeof in[i], MPI_BYTE, hm->peer, halo_dir_tag(hm->dir),
                        h->comm, &g->req[g->nreq++]));
    CHECK_MPI(MPI_Isend(&out[i], (int)sizeof out[i], MPI_BYTE, hm->peer, halo_dir_tag(back),
                        h->comm, &g->req[g->nreq++]));
  }
  CHECK_MPI(MPI_Waitall(g->nreq, g->req, MPI_STATUSES_IGNORE));
  g->nreq = 0;
  if (status != STENCIL_OK)
    return status;
  for (int i = 0; i < h->nmsg; i++) {
    struct ipc_msg *m = &g->m[i];
    if (in[i].failed)
      FAIL(STENCIL_ERR,
           "halo ipc: neighbour rank %d could not set up its receive buffers (its error says "
           "why)",
           h->msg[i].peer);
    /* Both ranks of a message must have chosen alike: a box of the same extent, or packed
     * (an unset span), else one would write where the other does not read. */
    const struct field_span none = {0}, *send = pl && pl->on[i] ? &pl->send[i] : &none;
    if (!same_extent(&in[i].span, send))
      FAIL(STENCIL_ERR,
           "halo ipc: rank %d sends a box of %zu bytes x %lld x %lld towards rank %d, which "
           "expects %zu x %lld x %lld (0 bytes: packed cells, no box)",
           g->rank, send->width, (long long)send->rows, (long long)send->planes, h->msg[i].peer,
           in[i].span.width, (long long)in[i].span.rows, (long long)in[i].span.planes);
    /* (a peer's fields may be opened for two messages: the driver counts the openings; the
     * free closes whichever of the two opened) */
    m->opened = 1;
    for (int p = 0; p < 2; p++) {
      void *dst = NULL;
      CHECK_CUDA(cudaIpcOpenMemHandle(&dst, in[i].mem[p], cudaIpcMemLazyEnablePeerAccess));
      m->dst[p] = dst;
    }
    m->span = in[i].span;
    CHECK_CUDA(cudaIpcOpenEventHandle(&m->peer_done, in[i].done));
  }
  return STENCIL_OK;
}

/* The send to and receive from each neighbour of the exchange, as zero-byte MPI messages. */
static int tokens_post(struct halo_gpu *g, struct halo *h)
{
  g->nreq = 0;
  for (int i = 0; i < h->nmsg; i++) {
    const struct halo_msg *hm = &h->msg[i];
    int back[3] = {-hm->dir[0], -hm->dir[1], -hm->dir[2]};
    CHECK_MPI(
        MPI_Irecv(NULL, 0, MPI_BYTE, hm->peer, halo_dir_tag(back), h->comm, &g->req[g->nreq++]));
    CHECK_MPI(MPI_Isend(&g->token, 0, MPI_BYTE, hm->peer, halo_dir_tag(hm->dir), h->comm,
                        &g->req[g->nreq++]));
  }
  return STENCIL_OK;
}

static int ipc_post(struct halo_gpu *g, struct halo *h, const void *f)
{
  const struct halo_boxes *pl = g->boxes;
  const int p = g->parity;
  const int fp = !pl ? 0 : f == pl->field[0] ? 0 : f == pl->field[1] ? 1 : -1;
  if (fp < 0)
    FAIL(STENCIL_ERR, "halo ipc: the field to send is neither of the two set up");
  /* A box lands in the ghost cells of the neighbour's field of the same parity, which its
   * next launch reads; the event waited for below follows only its reads of the other field.
   * So the exchanges must alternate between the two fields. */
  if (pl && fp == g->last_field)
    FAIL(STENCIL_ERR,
         "halo ipc: two exchanges in a row from field %d, whose ghost cells the "
         "neighbours may still read",
         fp);
  g->last_field = pl ? fp : -1;
  for (int i = 0; i < h->nmsg; i++) {
    struct ipc_msg *m = &g->m[i];
    /* The neighbour's unpack of two exchanges ago (which read dst[p]), or its last read of
     * the ghost cells of its field fp (a box), precedes its latest event: the token of the
     * last exchange said that event was recorded. */
    if (m->peer_done)
      CHECK_CUDA(cudaStreamWaitEvent(g->stream, m->peer_done, 0));
    if (pl && pl->on[i])
      CHECK(copy_box(m->dst[fp], &m->span, f, &pl->send[i], g->stream));
    else if (h->msg[i].bytes)
      CHECK_CUDA(cudaMemcpyAsync(m->dst[p], h->msg[i].sendbuf, h->msg[i].bytes,
                                 cudaMemcpyDeviceToDevice, g->stream));
  }
  CHECK_CUDA(cudaEventRecord(g->done, g->stream));
  return tokens_post(g, h);
}

static int ipc_wait(struct halo_gpu *g, struct halo *h)
{
  CHECK_MPI(MPI_Waitall(g->nreq, g->req, MPI_STATUSES_IGNORE));
  g->nreq = 0;
  const int p = g->parity;
  for (int i = 0; i < h->nmsg; i++) {
    struct ipc_msg *m = &g->m[i];
    /* The neighbour recorded its event after its copies into own[p]. */
    if (m->peer_done)
      CHECK_CUDA(cudaStreamWaitEvent(g->stream, m->peer_done, 0));
    if (!g->boxes || !g->boxes->on[i])
      h->msg[i].recvbuf = m->own[p];
  }
  g->parity = 1 - p;
  return STENCIL_OK;
}

/* ---- nccl ------------------------------------------------------------------------------ */

#ifdef STENCIL_HAVE_NCCL
/* The message a rank whose communicator could not be made sends every other rank, so that
 * none waits in NCCL's set-up for it (nccl_init). */
enum { NCCL_FAILED_TAG = 1000 };

/* A non-blocking call's result once it is done: r, or while r is ncclInProgress, the
 * communicator's state when it no longer is. */
static ncclResult_t nccl_settle(const struct nccl_api *a, ncclComm_t comm, ncclResult_t r)
{
  while (r == ncclInProgress) {
    const ncclResult_t q = a->comm_get_async_error(comm, &r);
    if (q != ncclSuccess)
      return q;
  }
  return r;
}

/* ncclCommInitRankConfig on every rank. A rank whose set-up fails tells every other rank
 * (NCCL_FAILED_TAG); a rank still in its set-up polls for that message and gives up (NCCL
 * would wait for the failed rank for ever), so every rank reaches the agreement after
 * halo_gpu_create. A rank done before the message comes learns of the failure there. The
 * communicator, made or not, is aborted by halo_gpu_free. */
static int nccl_init(struct halo_gpu *g, struct halo *h, int size, ncclUniqueId id)
{
  static const int failed = 1; /* the message's buffer, alive until its send completes */
  const struct nccl_api *a = &g->nccl;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = a->comm_init_rank_config(&g->comm, size, id, g->rank, &config);
  while (r == ncclInProgress) {
    int told = 0;
    MPI_Status st;
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, NCCL_FAILED_TAG, h->comm, &told, &st));
    if (told) {
      int one = 0;
      CHECK_MPI(
          MPI_Recv(&one, 1, MPI_INT, st.MPI_SOURCE, NCCL_FAILED_TAG, h->comm, MPI_STATUS_IGNORE));
      FAIL(STENCIL_ERR,
           "--halo-transport nccl: rank %d could not set up its NCCL communicator; this "
           "rank stopped waiting for it",
           st.MPI_SOURCE);
    }
    const struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    const ncclResult_t q = a->comm_get_async_error(g->comm, &r);
    if (q != ncclSuccess)
      r = q;
  }
  if (r != ncclSuccess) {
    for (int p = 0; p < size; p++) {
      MPI_Request req;
      if (p != g->rank &&
          MPI_Isend(&failed, 1, MPI_INT, p, NCCL_FAILED_TAG, h->comm, &req) == MPI_SUCCESS)
        MPI_Request_free(&req);
    }
    FAIL(STENCIL_ERR, "--halo-transport nccl: ncclCommInitRankConfig failed on this rank: %s (%s)",
         a->error_string(r), a->last_error(NULL));
  }
  return STENCIL_OK;
}

/* Collective: every rank loads NCCL and takes rank 0's unique id (with whether rank 0 could
 * make one) before any can fail, so that none is left waiting in a broadcast; nccl_init
 * then keeps a failure inside NCCL's set-up from leaving the others waiting in it. */
static int nccl_create(struct halo_gpu *g, struct halo *h)
{
  char why[256];
  int loaded = nccl_load(&g->nccl, why, sizeof why), all = 0, size = 1;
  CHECK_MPI(MPI_Allreduce(&loaded, &all, 1, MPI_INT, MPI_MIN, h->comm));
  if (!loaded)
    FAIL(STENCIL_ERR, "--halo-transport nccl: %s", why);
  if (!all)
    FAIL0(STENCIL_ERR, "--halo-transport nccl: libnccl.so.2 could not be loaded on every rank");
  CHECK_MPI(MPI_Comm_size(h->comm, &size));
  struct {
    ncclUniqueId id;
    int status; /* ncclResult_t of rank 0's ncclGetUniqueId */
  } root;
  memset(&root, 0, sizeof root);
  if (g->rank == 0)
    root.status = (int)g->nccl.get_unique_id(&root.id);
  CHECK_MPI(MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, h->comm));
  if (root.status != ncclSuccess)
    FAIL0(STENCIL_ERR, "--halo-transport nccl: ncclGetUniqueId failed on rank 0: %s",
          g->nccl.error_string((ncclResult_t)root.status));
  return nccl_init(g, h, size, root.id);
}

/* One group of every send and receive. NCCL matches sends and receives between two ranks in
 * the order they are issued, so both sides go through the directions of travel in the same
 * order (the tag of halo_post). */
static int nccl_post(struct halo_gpu *g, struct halo *h)
{
  const struct nccl_api *a = &g->nccl;
  CHECK_NCCL(a, a->group_start());
  for (int t = 0; t < 27; t++)
    for (int i = 0; i < h->nmsg; i++) {
      const struct halo_msg *m = &h->msg[i];
      const int back[3] = {-m->dir[0], -m->dir[1], -m->dir[2]};
      if (halo_dir_tag(m->dir) == t)
        CHECK_NCCL(a, a->send(m->sendbuf, m->bytes, ncclInt8, m->peer, g->comm, g->stream));
      if (halo_dir_tag(back) == t)
        CHECK_NCCL(a, a->recv(m->recvbuf, m->bytes, ncclInt8, m->peer, g->comm, g->stream));
    }
  /* the group is on the stream once it is settled: before anything queued after it */
  CHECK_NCCL(a, nccl_settle(a, g->comm, a->group_end()));
  return STENCIL_OK;
}
#endif

/* ---- the interface --------------------------------------------------------------------- */

int halo_gpu_create(struct halo_gpu **out, struct halo *h, enum halo_transport t, void *stream,
                    const struct halo_boxes *boxes)
{
  struct halo_gpu *g = calloc(1, sizeof *g);
  if (!g)
    FAIL(STENCIL_ERR, "out of host memory");
  *out = g;
  g->t = t;
  g->stream = (cudaStream_t)stream;
  g->boxes = boxes;
  g->last_field = -1;
  if (boxes && t != HALO_IPC)
    FAIL(STENCIL_ERR, "halo_gpu_create: field boxes need ipc, not %s", halo_transport_name(t));
  CHECK_MPI(MPI_Comm_rank(h->comm, &g->rank));
  for (int i = 0; i < h->nmsg; i++)
    g->m[i].own[0] = h->msg[i].recvbuf;
  switch (t) {
  case HALO_IPC: return ipc_create(g, h);
  case HALO_NCCL:
#ifdef STENCIL_HAVE_NCCL
    return nccl_create(g, h);
#else
    FAIL(STENCIL_ERR, "--halo-transport nccl: this build has no NCCL support");
#endif
  default:
    FAIL(STENCIL_ERR, "halo_gpu_create: %s is not a device transport", halo_transport_name(t));
  }
}

int halo_gpu_post(struct halo_gpu *g, struct halo *h, const void *f)
{
#ifdef STENCIL_HAVE_NCCL
  if (g->t == HALO_NCCL)
    return nccl_post(g, h);
#endif
  return ipc_post(g, h, f);
}

int halo_gpu_wait(struct halo_gpu *g, struct halo *h)
{
  if (g->t == HALO_NCCL)
    return STENCIL_OK; /* the receives are ordered on the stream already */
  return ipc_wait(g, h);
}

void halo_gpu_free(struct halo_gpu *g, struct halo *h)
{
  if (!g)
    return;
  cudaStreamSynchronize(g->stream);
  if (g->nreq)
    MPI_Waitall(g->nreq, g->req, MPI_STATUSES_IGNORE);
  for (int i = 0; i < h->nmsg && i < HALO_MAX_MSG; i++) {
    struct ipc_msg *m = &g->m[i];
    if (m->opened)
      for (int p = 0; p < 2; p++)
        if (m->dst[p])
          cudaIpcCloseMemHandle(m->dst[p]);
    if (m->peer_done)
      cudaEventDestroy(m->peer_done);
    if (g->t == HALO_IPC && m->own[1])
      cudaFree(m->own[1]);
    if (m->own[0])
      h->msg[i].recvbuf = m->own[0];
  }
  if (g->done)
    cudaEventDestroy(g->done);
#ifdef STENCIL_HAVE_NCCL
  if (g->comm) /* the stream is idle: nothing in flight, and no wait for the other ranks */
    g->nccl.comm_abort(g->comm);
  if (g->nccl.lib)
    dlclose(g->nccl.lib);
#endif
  free(g);
}
