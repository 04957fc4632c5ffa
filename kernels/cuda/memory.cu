/* The CUDA backend's memory: fields and halo buffers, copies to and from the host, the
 * halo boxes' pack / unpack / wrap copies and the ghost fills of reflecting faces (context.h). */
#include "kernels/cuda/context.h"

/* ---- kernels ----------------------------------------------------------------------------- */

/* Up to MOVES_MAX box copies in one launch: move i copies ext[i] cells from `from` to `to`,
 * cell (x, y, z) at x + y s[1] + z s[2] with each side's strides (a box of the padded array,
 * or a dense buffer: strides ext[0], ext[0] ext[1]); it has the blocks first[i] ..
 * first[i + 1] - 1. */
enum { MOVES_MAX = 26 };
struct kmoves {
  int first[MOVES_MAX + 1];
  const void *from[MOVES_MAX];
  void *to[MOVES_MAX];
  int ext[MOVES_MAX][3];
  int64_t fs[MOVES_MAX][2], ts[MOVES_MAX][2]; /* y and z strides of from and to */
};

template <typename REAL> static __global__ void move_boxes(kmoves m)
{
  pdl_enter();
  int i = 0;
  while ((int)blockIdx.x >= m.first[i + 1])
    i++;
  /* 32-bit index arithmetic: 64-bit division costs more than the copy (the host checks the
   * counts) */
  const unsigned nx = m.ext[i][0], ny = m.ext[i][1], count = nx * ny * m.ext[i][2];
  const REAL *from = (const REAL *)m.from[i];
  REAL *to = (REAL *)m.to[i];
  const unsigned step = (unsigned)(m.first[i + 1] - m.first[i]) * blockDim.x;
  for (unsigned t = (blockIdx.x - m.first[i]) * blockDim.x + threadIdx.x; t < count; t += step) {
    const unsigned x = t % nx, r = t / nx, y = r % ny, z = r / ny;
    to[x + y * m.ts[i][0] + z * m.ts[i][1]] = from[x + y * m.fs[i][0] + z * m.fs[i][1]];
  }
}

/* The edge and corner ghosts of mirrored faces: every ghost cell with a coordinate beyond a
 * mirrored face and another outside the interior, as filling each face's ghosts over the whole
 * padded extent of the other axes, in axis order x, y, z, after the exchange would leave it:
 * the cell reflected across every mirrored face it lies beyond (into the interior, or into
 * ghosts the exchange filled), with each Dirichlet reflection's 0 - u applied in axis order.
 * Block (., a, side) walks the ghost layers of face (a, side) over the frame of the other two
 * axes outside their interior; a cell belongs to the lowest mirrored axis it lies beyond. The
 * cells read are never written here. */
template <typename REAL> static __global__ void mirror_edges(REAL *u, klay L, kmirror m)
{
  pdl_enter();
  const int a = blockIdx.y, side = blockIdx.z;
  if (!m.on[a][side])
    return;
  const int a1 = a == 0 ? 1 : 0, a2 = a == 2 ? 1 : 2;
  const int64_t n1 = L.n[a1], n2 = L.n[a2], h1 = L.halo[a1], h2 = L.halo[a2], w1 = n1 + 2 * h1;
  const int64_t frame = w1 * (n2 + 2 * h2) - n1 * n2, count = frame * L.halo[a];
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < count;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t depth = t / frame, f = t % frame;
    int64_t c[3];
    c[a] = side ? L.n[a] + depth : -1 - depth;
    if (f < 2 * h2 * w1) { /* rows beyond a2's faces, the whole padded a1 extent */
      const int64_t r = f / w1;
      c[a1] = f % w1 - h1;
      c[a2] = r < h2 ? r - h2 : n2 + r - h2;
    } else { /* a2 inside: the columns beyond a1's faces */
      const int64_t g = f - 2 * h2 * w1, q = g % (2 * h1);
      c[a2] = g / (2 * h1);
      c[a1] = q < h1 ? q - h1 : n1 + q - h1;
    }
    int owner = -1, negate = 0;
    int64_t from[3];
    for (int b = 0; b < 3; b++) {
      const int out = c[b] < 0 ? 0 : c[b] >= L.n[b] ? 1 : -1;
      from[b] = c[b];
      if (out >= 0 && m.on[b][out]) {
        owner = owner < 0 ? b : owner;
        from[b] = out ? 2 * L.n[b] - 1 - c[b] : -1 - c[b];
        negate += m.neg[b][out];
      }
    }
    if (owner != a)
      continue;
    REAL x = u[L.origin + from[0] + from[1] * L.s[1] + from[2] * L.s[2]];
    for (int i = 0; i < negate; i++)
      x = (REAL)0 - x;
    u[L.origin + c[0] + c[1] * L.s[1] + c[2] * L.s[2]] = x;
  }
}

/* The faces one boundary launch fills (face f = 2 axis + side): the rule, 2g, and the blocks
 * of face f, [first[f], first[f + 1]) in a bx[f] x by[f] tiling (none: not filled). */
template <typename REAL> struct kbfaces {
  int dirichlet[6];
  REAL two_g[6];
  unsigned first[7], bx[6], by[6];
};

/* The h ghosts of an x face of a row (x = 0 at row, n cells; side 0: x -h .. -1, side 1:
 * x n .. n + h - 1), each the face's rule of its mirror cell (x -1 - m and n + m mirror m and
 * n - 1 - m), written as the whole 32-byte sectors that hold them: x = 0 lies on a sector
 * boundary (dev_layout), the other cells of those sectors are interior cells (rewritten with
 * their values) or row padding (written 0; at least a sector of it lies between two rows), so
 * that the memory need not read a sector to merge a partial write. */
template <typename REAL>
static __device__ __forceinline__ void reflect_row(REAL *row, int n, int h, int side, int dirichlet,
                                                   REAL two_g)
{
  constexpr int S = 32 / (int)sizeof(REAL), V = S / 2;
  struct __align__(16) vec
  {
    REAL c[V];
  };
  const int g0 = side ? n : -h;
  const int w0 = side ? n / S * S : -((h + S - 1) / S * S);
  const int w1 = side ? (n + h + S - 1) / S * S : 0;
  for (int x = w0; x < w1; x += S) {
    vec half[2];
#pragma unroll
    for (int e = 0; e < S; e++) {
      const int xe = x + e;
      REAL val = (REAL)0;
      if (xe >= g0 && xe < g0 + h) {
        const REAL in = row[side ? 2 * n - 1 - xe : -1 - xe];
        val = dirichlet ? two_g - in : in;
      } else if (xe >= 0 && xe < n) {
        val = row[xe];
      }
      half[e / V].c[e % V] = val;
    }
    ((vec *)(row + x))[0] = half[0];
    ((vec *)(row + x))[1] = half[1];
  }
}

/* Ghost layers beyond physical faces by reflection (see backend.h). The faces are independent:
 * each reads interior cells and writes its own ghost slab. Face f has its own blocks, no empty
 * ones (a grid sized by the largest face on every face would spend its time in blocks with
 * nothing to do). On a y or z face a thread writes one ghost cell per iteration, consecutive
 * threads along x: index i runs over the cells of a row, o over the layers and rows (up to 128
 * blocks per face along o, looping: faster than 1024, or than one cell per thread, between
 * fused launches; docs/benchmarks.md). On an x face a thread writes the ghosts of a row
 * (reflect_row), i over y and o over z: a few 32-byte sectors a row, read and written whole, a
 * warp's 32 rows in flight at once. 32-bit index arithmetic (64-bit division costs more than
 * the memory traffic here). */
template <typename REAL> static __global__ void boundary_faces(REAL *u, klay L, kbfaces<REAL> F)
{
  pdl_enter();
  int f = 0;
  while (f < 5 && blockIdx.x >= F.first[f + 1])
    f++;
  const int axis = f / 2, side = f % 2;
  const unsigned b = blockIdx.x - F.first[f], bx = b % F.bx[f], by = b / F.bx[f];
  const int a1 = axis == 0 ? 1 : 0, a2 = axis == 2 ? 1 : 2;
  const unsigned n1 = (unsigned)L.n[a1], n2 = (unsigned)L.n[a2], h = (unsigned)L.halo[axis];
  const unsigned inner = n1, outer = axis == 0 ? n2 : h * n2;
  const unsigned i = bx * blockDim.x + threadIdx.x;
  if (i >= inner)
    return;
  const int dirichlet = F.dirichlet[f];
  const REAL two_g = F.two_g[f];
  if (axis == 0) {
    REAL *row = u + L.origin + (int64_t)i * L.s[1];
    for (unsigned o = by; o < outer; o += F.by[f])
      reflect_row(row + (int64_t)o * L.s[2], (int)L.n[0], (int)h, side, dirichlet, two_g);
    return;
  }
  const int64_t st = L.s[axis], dir = side ? 1 : -1;
  const int64_t face = side ? L.n[axis] - 1 : 0;
  for (unsigned o = by; o < outer; o += F.by[f]) {
    const unsigned m = o % h + 1, c2 = o / h;
    REAL *edge = u + L.origin + face * st + (int64_t)i * L.s[a1] + (int64_t)c2 * L.s[a2];
    const REAL in = edge[-dir * (int64_t)(m - 1) * st];
    edge[dir * (int64_t)m * st] = dirichlet ? two_g - in : in;
  }
}

/* ---- fields and buffers -------------------------------------------------------------------- */

int device_malloc(struct cuda_ctx *c, size_t bytes, void **p, const char *what)
{
  size_t free_b = 0, total_b = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    *p = NULL;
    FAIL(STENCIL_ERR,
         "out of device memory on GPU %d (%s): %s needs %zu bytes (%.3f GiB) but only %zu bytes "
         "(%.3f GiB) of %.3f GiB are free; use more GPUs or a smaller grid",
         c->device, c->prop.name, what, bytes, (double)bytes / (1 << 30), free_b,
         (double)free_b / (1 << 30), (double)total_b / (1 << 30));
  }
  CHECK_CUDA(e);
  return STENCIL_OK;
}

struct field_track *track_of(struct cuda_ctx *c, const void *buf, int create)
{
  return field_track_find(c->track, MAX_FIELDS, buf, create);
}

void track_reset(struct cuda_ctx *c, const void *buf)
{
  field_track_reset(c->track, MAX_FIELDS, buf);
}

int cuda_alloc(void *ctx, const struct layout *l, void **buf)
{
  struct cuda_ctx *c = CTX(ctx);
  const size_t bytes = (size_t)dev_layout(l).count * (size_t)l->elem;
  CHECK(device_malloc(c, bytes, buf, "a field"));
  CHECK_CUDA(cudaMemsetAsync(*buf, 0, bytes, stream_of(c)));
  CHECK_CUDA(cudaStreamSynchronize(c->lane[c->cur]));
  track_of(c, *buf, 1);
  return STENCIL_OK;
}

void cuda_release(void *ctx, void *buf)
{
  struct cuda_ctx *c = CTX(ctx);
  struct field_track *t = track_of(c, buf, 0);
  if (t)
    t->buf = NULL;
  cudaFree(buf);
}

int cuda_buffer_alloc(void *ctx, size_t bytes, int device, void **p)
{
  struct cuda_ctx *c = CTX(ctx);
  if (device)
    return device_malloc(c, bytes, p, "a halo buffer");
  CHECK_CUDA(cudaMallocHost(p, bytes ? bytes : 1));
  return STENCIL_OK;
}

void cuda_buffer_release(void *ctx, void *p, int device)
{
  (void)ctx;
  if (device)
    cudaFree(p);
  else
    cudaFreeHost(p);
}

/* Copy between the interior of buf and a dense host array (pageable or pinned). */
static int copy_interior(struct cuda_ctx *c, const struct layout *l, void *dev, void *host,
                         int upload)
{
  cudaMemcpy3DParms p = {};
  const size_t e = (size_t)l->elem;
  const struct layout dl = dev_layout(l);
  const int64_t sy = dl.stride[1];
  /* Rows of sy elements from the shifted start (each row's ghost cell x = -halo). */
  cudaPitchedPtr d = make_cudaPitchedPtr((char *)dev + dl.lead * e, (size_t)sy * e, (size_t)sy,
                                         (size_t)(l->n[1] + 2 * l->halo[1]));
  cudaPitchedPtr h =
      make_cudaPitchedPtr(host, (size_t)l->n[0] * e, (size_t)l->n[0], (size_t)l->n[1]);
  cudaPos dpos = make_cudaPos((size_t)l->halo[0] * e, (size_t)l->halo[1], (size_t)l->halo[2]);
  if (upload) {
    p.srcPtr = h;
    p.dstPtr = d;
    p.dstPos = dpos;
    p.kind = cudaMemcpyHostToDevice;
  } else {
    p.srcPtr = d;
    p.srcPos = dpos;
    p.dstPtr = h;
    p.kind = cudaMemcpyDeviceToHost;
  }
  p.extent = make_cudaExtent((size_t)l->n[0] * e, (size_t)l->n[1], (size_t)l->n[2]);
  /* Everything issued before on either lane comes first. */
  CHECK(wait_other(c));
  cudaStream_t s = stream_of(c);
  CHECK_CUDA(cudaMemcpy3DAsync(&p, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return STENCIL_OK;
}

int cuda_upload(void *ctx, const struct layout *l, void *buf, const void *host)
{
  struct cuda_ctx *c = CTX(ctx);
  track_reset(c, buf);
  return copy_interior(c, l, buf, (void *)host, 1);
}

int cuda_download(void *ctx, const struct layout *l, void *host, const void *buf)
{
  return copy_interior(CTX(ctx), l, (void *)buf, host, 0);
}

/* Cells of box b that lie on face f = 2 axis + side. */
int64_t face_cells_in(const struct layout *l, const struct box *b, int f)
{
  const int a = f / 2, side = f % 2;
  const int64_t at = side ? l->n[a] - 1 : 0;
  if (b->lo[a] > at || b->hi[a] <= at)
    return 0;
  int64_t c = 1;
  for (int x = 0; x < 3; x++) {
    if (x == a)
      continue;
    const int64_t lo = b->lo[x] > 0 ? b->lo[x] : 0, hi = b->hi[x] < l->n[x] ? b->hi[x] : l->n[x];
    c *= hi > lo ? hi - lo : 0;
  }
  return c;
}

int64_t face_cells(const struct layout *l, int f)
{
  struct box all = {{0, 0, 0}, {l->n[0], l->n[1], l->n[2]}};
  return face_cells_in(l, &all, f);
}

/* ---- halo boxes and boundaries ------------------------------------------------------------- */

/* One side of a move: box b of the padded array u (dense = NULL) or the dense buffer. */
static void move_side(const struct layout *l, void *u, const struct box *b, void *dense,
                      void **base, int64_t st[2])
{
  const klay L = make_klay(l);
  const int64_t nx = b->hi[0] - b->lo[0], ny = b->hi[1] - b->lo[1];
  if (dense) {
    *base = dense;
    st[0] = nx;
    st[1] = nx * ny;
    return;
  }
  *base = (char *)u +
          (size_t)l->elem * (size_t)(L.origin + b->lo[0] + b->lo[1] * L.s[1] + b->lo[2] * L.s[2]);
  st[0] = L.s[1];
  st[1] = L.s[2];
}

/* n moves of box b[i]: from u to dense[i] (pack), dense[i] to u (unpack), or, with dense =
 * NULL, from box b[i] of u to box to[i] of u (same extents); in launches of MOVES_MAX. */
static int moves_launch(struct cuda_ctx *c, const struct layout *l, void *u, int n,
                        const struct box *b, const struct box *to, void *const *dense, int unpack)
{
  for (int done = 0; done < n; done += MOVES_MAX) {
    kmoves m = {};
    int k = 0;
    for (int i = done; i < n && i < done + MOVES_MAX; i++) {
      const int64_t cells = box_count(&b[i]);
      if (cells <= 0)
        continue;
      if (cells >= ((int64_t)1 << 31))
        FAIL(STENCIL_ERR,
             "a halo box of %lld cells is too large for the copy kernel's 32-bit "
             "indices; use more ranks",
             (long long)cells);
      for (int a = 0; a < 3; a++)
        m.ext[k][a] = (int)(b[i].hi[a] - b[i].lo[a]);
      void *box_base, *other;
      int64_t box_st[2], other_st[2];
      move_side(l, u, &b[i], NULL, &box_base, box_st);
      move_side(l, u, to ? &to[i] : &b[i], to ? NULL : dense[i], &other, other_st);
      m.from[k] = unpack ? other : box_base;
      m.to[k] = unpack ? box_base : other;
      for (int a = 0; a < 2; a++) {
        m.fs[k][a] = unpack ? other_st[a] : box_st[a];
        m.ts[k][a] = unpack ? box_st[a] : other_st[a];
      }
      m.first[k + 1] = m.first[k] + (int)clamp_grid((cells + 255) / 256, 1024);
      k++;
    }
    for (int i = k + 1; i <= MOVES_MAX; i++)
      m.first[i] = m.first[k];
    if (k == 0)
      continue;
    const dim3 grid((unsigned)m.first[k], 1, 1), block(256, 1, 1);
    if (l->elem == 8)
      CHECK(launch(c, move_boxes<double>, grid, block, m));
    else
      CHECK(launch(c, move_boxes<float>, grid, block, m));
  }
  return STENCIL_OK;
}

/* Record face f's rule; 0 when tier-2 updates have written its ghosts, the halo deep, with
 * the same rule since the last fill (then nothing is left to fill). */
static int face_needs_fill(struct cuda_ctx *c, const struct layout *l, const void *u, int f,
                           enum bc_kind kind, double value)
{
  c->face[f].known = 1;
  c->face[f].kind = kind;
  c->face[f].value = value;
  struct field_track *t = track_of(c, u, 0);
  const int fused = t && t->covered[f] == face_cells(l, f) && t->rule[f].known &&
                    t->rule[f].kind == kind && t->rule[f].value == value;
  if (t)
    t->covered[f] = 0;
  return !fused;
}

/* One launch for the faces with on[a][s] (every face's cells and values as boundary()). */
int cuda_boundaries(void *ctx, const struct layout *l, void *u, const int on[3][2],
                    const enum bc_kind kind[3][2], const double value[3][2])
{
  struct cuda_ctx *c = CTX(ctx);
  kbfaces<double> F64 = {};
  kbfaces<float> F32 = {};
  int64_t blocks = 0;
  for (int f = 0; f < 6; f++) {
    const int a = f / 2, s = f % 2;
    F64.first[f] = F32.first[f] = (unsigned)blocks;
    if (!on[a][s] || !face_needs_fill(c, l, u, f, kind[a][s], value[a][s]))
      continue;
    F64.dirichlet[f] = F32.dirichlet[f] = kind[a][s] == BC_DIRICHLET;
    F64.two_g[f] = 2.0 * value[a][s];
    F32.two_g[f] = (float)(2.0 * value[a][s]);
    const int64_t n1 = l->n[a == 0 ? 1 : 0], n2 = l->n[a == 2 ? 1 : 2], h = l->halo[a];
    if (n1 * n2 * h >= ((int64_t)1 << 32))
      FAIL(STENCIL_ERR,
           "face %c%s has %lld ghost cells: too many for the boundary kernel's 32-bit indices; "
           "use more ranks",
           "xyz"[a], s ? "_hi" : "_lo", (long long)(n1 * n2 * h));
    const int64_t inner = n1, outer = a == 0 ? n2 : h * n2;
    F64.bx[f] = F32.bx[f] = (unsigned)((inner + 127) / 128);
    F64.by[f] = F32.by[f] = (unsigned)clamp_grid(outer, 128);
    blocks += (int64_t)F64.bx[f] * F64.by[f];
  }
  F64.first[6] = F32.first[6] = (unsigned)blocks;
  if (blocks == 0)
    return STENCIL_OK;
  dim3 block(128, 1, 1), grid((unsigned)blocks, 1, 1);
  if (l->elem == 8)
    return launch(c, boundary_faces<double>, grid, block, (double *)u, make_klay(l), F64);
  return launch(c, boundary_faces<float>, grid, block, (float *)u, make_klay(l), F32);
}

int cuda_pack(void *ctx, const struct layout *l, const void *u, int n, const struct box *b,
              void *const *bufs)
{
  return moves_launch(CTX(ctx), l, (void *)u, n, b, NULL, bufs, 0);
}

/* (Unpacks reach ghost cells only: what the tier-2 updates wrote along the faces stays.) */
int cuda_unpack(void *ctx, const struct layout *l, void *u, int n, const struct box *b,
                const void *const *bufs)
{
  return moves_launch(CTX(ctx), l, u, n, b, NULL, (void *const *)bufs, 1);
}

int cuda_copy_boxes(void *ctx, const struct layout *l, void *u, int n, const struct box *from,
                    const struct box *to)
{
  return moves_launch(CTX(ctx), l, u, n, from, to, NULL, 0);
}

int cuda_field_box(void *ctx, const struct layout *l, const struct box *b, struct field_span *s)
{
  (void)ctx;
  const struct layout d = dev_layout(l);
  const size_t e = (size_t)l->elem;
  for (int a = 0; a < 3; a++)
    if (b->lo[a] >= b->hi[a] || b->lo[a] < -l->halo[a] || b->hi[a] > l->n[a] + l->halo[a])
      return 0;
  s->offset = (size_t)layout_index(&d, b->lo[0], b->lo[1], b->lo[2]) * e;
  s->width = (size_t)(b->hi[0] - b->lo[0]) * e;
  s->rows = b->hi[1] - b->lo[1];
  s->planes = b->hi[2] - b->lo[2];
  s->pitch = (size_t)d.stride[1] * e;
  s->slice = (size_t)d.stride[2] * e;
  return 1;
}

int cuda_mirror_edges(struct cuda_ctx *c, void *u)
{
  const struct cuda_fused *fu = &c->fu;
  if (!fu->mirror_blocks)
    return STENCIL_OK;
  const dim3 grid(fu->mirror_blocks, 3, 2), block(256, 1, 1);
  if (fu->plan.elem == 8)
    return launch(c, mirror_edges<double>, grid, block, (double *)u, fu->mirror_lay, fu->mirror);
  return launch(c, mirror_edges<float>, grid, block, (float *)u, fu->mirror_lay, fu->mirror);
}
