/* The CPU emulation of CUDA (emu.h): fibers, barriers, shuffles, shared memory, mbarriers,
 * clusters and the runtime calls the fused kernels' host code makes. */
#include "kernels/cuda/emu/emu.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

/* Fibers: a switch saves the callee-saved registers, the SSE and x87 control words and the
 * stack pointer of one context and restores the other's (x86-64 System V). */
extern "C" void emu_switch(void **save_sp, void *load_sp);
asm(R"(
  .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");

namespace emu {

[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "emu: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* The emulated device: its multiprocessors (what the plans see). */
static const int SMS = 4;
static const size_t SMEM_OPTIN = 227 * 1024;
static const size_t STACK = 512 * 1024;

struct warp_state {
  int live = 0, arrived = 0;
  unsigned gen = 0;
  uint64_t buf[32];
};

struct barrier {
  int live = 0, arrived = 0;
  unsigned gen = 0;
};

struct cta {
  uint3 bid;
  unsigned rank;
  unsigned char *smem = nullptr;
  size_t smem_bytes = 0;
  barrier bar;
  std::vector<warp_state> warps;
};

struct fiber {
  void *sp = nullptr; /* saved stack pointer while switched out */
  unsigned char *stack = nullptr;
  uint3 tid;
  int lane = 0, warp = 0;
  cta *c = nullptr;
  bool done = false;
  unsigned cluster_gen = 0; /* the cluster barrier's generation at this thread's arrive */
};

/* The launch in progress. */
static struct {
  dim3 grid, block, cdim;
  const void *fn;
  invoker call;
  void **args;
  std::vector<cta> ctas; /* the cluster's */
  barrier cluster;
  std::vector<fiber> fibers;
  fiber *cur = nullptr;
  void *sched_sp = nullptr;
  uint64_t rng = 0;           /* the scheduler's order (xorshift) */
  unsigned long long launches = 0;
  unsigned long long events = 0; /* state changes: a round without any is a deadlock */
} L;

static std::vector<unsigned char *> stacks; /* reused across launches */

fiber *current()
{
  if (!L.cur)
    die("a device function was called outside a kernel launch");
  return L.cur;
}
const dim3 &cluster_dim()
{
  return L.cdim;
}
unsigned cluster_rank()
{
  return current()->c->rank;
}

static void yield()
{
  fiber *f = L.cur;
  emu_switch(&f->sp, L.sched_sp);
}

/* Arrive at b and wait for its release (all live participants arrived). */
static void barrier_wait(barrier &b)
{
  const unsigned g = b.gen;
  L.events++;
  if (++b.arrived >= b.live) {
    b.arrived = 0;
    b.gen++;
    return;
  }
  while (b.gen == g)
    yield();
}

/* A barrier whose live count fell to its arrivals is released. */
static void barrier_recheck(barrier &b)
{
  if (b.arrived > 0 && b.arrived >= b.live) {
    b.arrived = 0;
    b.gen++;
  }
}

void sync_threads()
{
  barrier_wait(current()->c->bar);
}

static warp_state &my_warp(const char *what)
{
  fiber *f = current();
  warp_state &w = f->c->warps[f->warp];
  const int lanes = (int)(L.block.x * L.block.y * L.block.z) - 32 * f->warp;
  if (w.live < (lanes < 32 ? lanes : 32))
    die("%s in warp %d of CTA (%u,%u,%u), where a lane has exited", what, f->warp, f->c->bid.x,
        f->c->bid.y, f->c->bid.z);
  return w;
}

static void warp_wait(warp_state &w)
{
  const unsigned g = w.gen;
  L.events++;
  if (++w.arrived == w.live) {
    w.arrived = 0;
    w.gen++;
    return;
  }
  while (w.gen == g)
    yield();
}

void sync_warp()
{
  warp_wait(my_warp("__syncwarp"));
}

uint64_t shfl(uint64_t v, shfl_kind kind, int arg)
{
  warp_state &w = my_warp("a warp shuffle");
  const int lane = current()->lane;
  w.buf[lane] = v;
  warp_wait(w);
  int src = lane;
  switch (kind) {
  case SHFL_IDX:
    src = arg & 31;
    break;
  case SHFL_UP:
    src = lane - arg;
    break;
  case SHFL_DOWN:
    src = lane + arg;
    break;
  case SHFL_XOR:
    src = lane ^ arg;
    break;
  }
  const uint64_t r = src >= 0 && src < w.live ? w.buf[src] : v;
  warp_wait(w);
  return r;
}

void cluster_arrive()
{
  fiber *f = current();
  f->cluster_gen = L.cluster.gen;
  L.events++;
  if (++L.cluster.arrived >= L.cluster.live) {
    L.cluster.arrived = 0;
    L.cluster.gen++;
  }
}

void cluster_wait()
{
  fiber *f = current();
  while (L.cluster.gen == f->cluster_gen)
    yield();
}

unsigned char *dyn_smem()
{
  return current()->c->smem;
}

uint32_t smem_addr(const void *p)
{
  cta *c = current()->c;
  const unsigned char *q = static_cast<const unsigned char *>(p);
  if (q < c->smem || q > c->smem + c->smem_bytes)
    die("a shared address of memory outside the CTA's dynamic shared memory");
  return c->rank << 24 | (uint32_t)(q - c->smem);
}

uint32_t smem_map(uint32_t a, unsigned rank)
{
  if (rank >= L.ctas.size())
    die("mapa to CTA %u of a cluster of %zu", rank, L.ctas.size());
  return rank << 24 | (a & 0xffffffu);
}

void *smem_ptr(uint32_t a)
{
  const unsigned rank = a >> 24, off = a & 0xffffffu;
  if (rank >= L.ctas.size())
    die("shared address of CTA %u of a cluster of %zu", rank, L.ctas.size());
  cta &c = L.ctas[rank];
  if (off + 8 > c.smem_bytes + 8)
    die("shared address %u beyond the %zu bytes of dynamic shared memory", off, c.smem_bytes);
  return c.smem + off;
}

/* An mbarrier: the arrivals a phase needs, those still pending, the transaction bytes still
 * pending (negative while stores run ahead of their expectation), the phase (its parity is
 * what waits see) and a mark that it was initialised. */
#define MBAR_MARK 0xa5
struct mbar {
  uint16_t count, pending;
  int16_t tx;
  uint8_t phase, mark;
};
static_assert(sizeof(mbar) == 8, "an mbarrier is 8 bytes");

void mbar_init(uint32_t a, unsigned count)
{
  mbar *m = static_cast<mbar *>(smem_ptr(a));
  if (count == 0 || count > 0xffffu)
    die("mbarrier initialised with %u arrivals", count);
  m->count = m->pending = (uint16_t)count;
  m->tx = 0;
  m->phase = 0;
  m->mark = MBAR_MARK;
  L.events++;
}

static mbar *mbar_at(uint32_t a)
{
  mbar *m = static_cast<mbar *>(smem_ptr(a));
  if (m->mark != MBAR_MARK)
    die("mbarrier at %#x used but not initialised", a);
  L.events++;
  return m;
}

static void mbar_complete(mbar *m)
{
  if (m->pending == 0 && m->tx == 0) {
    m->pending = m->count;
    m->phase++;
  }
}

static void mbar_add_tx(mbar *m, long bytes)
{
  const long tx = m->tx + bytes;
  if (tx < -32768 || tx > 32767)
    die("mbarrier transaction count %ld out of the emulation's range", tx);
  m->tx = (int16_t)tx;
}

static void mbar_arrival(mbar *m, uint32_t a)
{
  if (m->pending == 0)
    die("more arrivals on the mbarrier at %#x than its phase needs", a);
  m->pending--;
}

void mbar_arrive(uint32_t a)
{
  mbar *m = mbar_at(a);
  mbar_arrival(m, a);
  mbar_complete(m);
}

void mbar_arrive_expect(uint32_t a, unsigned bytes)
{
  mbar *m = mbar_at(a);
  mbar_add_tx(m, (long)bytes);
  mbar_arrival(m, a);
  mbar_complete(m);
}

void mbar_complete_tx(uint32_t a, unsigned bytes)
{
  mbar *m = mbar_at(a);
  mbar_add_tx(m, -(long)bytes);
  mbar_complete(m);
}

void mbar_wait_parity(uint32_t a, unsigned parity)
{
  for (;;) {
    const mbar *m = static_cast<const mbar *>(smem_ptr(a));
    if (m->mark != MBAR_MARK)
      die("wait on the mbarrier at %#x, not initialised", a);
    if ((m->phase & 1u) != (parity & 1u))
      return;
    yield();
  }
}

/* ---- fibers and the scheduler --------------------------------------------------------- */

static void fiber_main()
{
  fiber *f = L.cur;
  L.call(L.fn, L.args);
  f->done = true;
  L.events++;
  cta &c = *f->c;
  warp_state &w = c.warps[f->warp];
  w.live--;
  if (w.arrived > 0 && w.arrived >= w.live) {
    w.arrived = 0;
    w.gen++;
  }
  c.bar.live--;
  barrier_recheck(c.bar);
  L.cluster.live--;
  if (L.cluster.arrived > 0 && L.cluster.arrived >= L.cluster.live) {
    L.cluster.arrived = 0;
    L.cluster.gen++;
  }
  emu_switch(&f->sp, L.sched_sp); /* never resumed */
  abort();
}

/* A fresh fiber's stack: emu_switch's saved words (the control words of this thread, six
 * registers) under fiber_main as the return address, under a zero word that keeps the stack
 * 16-byte aligned at fiber_main's entry. */
static void *fiber_stack(unsigned char *stack)
{
  uint64_t *top = reinterpret_cast<uint64_t *>(stack + STACK);
  *--top = 0;
  *--top = reinterpret_cast<uint64_t>(&fiber_main);
  for (int r = 0; r < 6; r++)
    *--top = 0;
  uint32_t cw[2];
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(cw[0]), "=m"(cw[1]));
  *--top = (uint64_t)cw[0] | (uint64_t)cw[1] << 32;
  return top;
}

static uint64_t next_random()
{
  L.rng ^= L.rng << 13;
  L.rng ^= L.rng >> 7;
  L.rng ^= L.rng << 17;
  return L.rng;
}

static void run_cluster(const uint3 &first, size_t smem)
{
  const unsigned nthreads = L.block.x * L.block.y * L.block.z;
  const unsigned ncta = L.cdim.x * L.cdim.y * L.cdim.z;
  L.ctas.assign(ncta, cta());
  for (unsigned r = 0; r < ncta; r++) {
    cta &c = L.ctas[r];
    c.rank = r;
    c.bid = {first.x + r % L.cdim.x, first.y + r / L.cdim.x % L.cdim.y,
             first.z + r / (L.cdim.x * L.cdim.y)};
    c.smem_bytes = smem;
    c.smem = static_cast<unsigned char *>(aligned_alloc(128, (smem + 16 + 127) / 128 * 128));
    memset(c.smem, 0xff, smem + 16); /* NaN in fp32 and fp64: reads before writes show */
    c.bar.live = (int)nthreads;
    c.warps.assign((nthreads + 31) / 32, warp_state());
    for (unsigned w = 0; w < c.warps.size(); w++)
      c.warps[w].live = (int)(nthreads - 32 * w < 32 ? nthreads - 32 * w : 32);
  }
  L.cluster = barrier();
  L.cluster.live = (int)(nthreads * ncta);
  const size_t nf = (size_t)nthreads * ncta;
  while (stacks.size() < nf) {
    void *s = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (s == MAP_FAILED)
      die("cannot map a fiber stack");
    stacks.push_back(static_cast<unsigned char *>(s));
  }
  L.fibers.assign(nf, fiber());
  for (size_t i = 0; i < nf; i++) {
    fiber &f = L.fibers[i];
    const unsigned t = (unsigned)(i % nthreads);
    f.c = &L.ctas[i / nthreads];
    f.tid = {t % L.block.x, t / L.block.x % L.block.y, t / (L.block.x * L.block.y)};
    f.lane = (int)(t % 32);
    f.warp = (int)(t / 32);
    f.stack = stacks[i];
    f.sp = fiber_stack(f.stack);
  }
  /* Rounds over the warps of the cluster in a random order. A third of the clusters give each
   * lane one turn a round, skipped with probability 1/4, so that the warps drift apart a
   * little; a third run each warp greedily, its lanes round robin for as long as it changes any
   * state (a warp runs ahead as far as its waits let it: a missing wait shows); a third run
   * each CTA greedily, its warps so, for as long as any changes state (a CTA runs ahead of the
   * others of its cluster as far as its waits let it: a missing wait between CTAs shows). A
   * deadlock is a run of rounds in which no fiber changed any state. */
  const size_t nw = (nthreads + 31) / 32 * ncta;
  std::vector<size_t> order(nw);
  for (size_t i = 0; i < nw; i++)
    order[i] = i;
  const int mode = (int)(next_random() % 3); /* 0 lanes, 1 warps, 2 CTAs */
  const size_t wpc = (nthreads + 31) / 32;
  int idle = 0;
  size_t left = nf;
  auto run_warp = [&](size_t w) {
    const size_t f0 = w / wpc * nthreads + w % wpc * 32;
    const size_t f1 = std::min(f0 + 32, (w / wpc + 1) * nthreads);
    for (unsigned long long mark = L.events - 1; mark != L.events;) {
      mark = L.events;
      for (size_t i = f0; i < f1; i++) {
        fiber &f = L.fibers[i];
        if (f.done || (mode == 0 && next_random() % 4 == 0))
          continue;
        L.cur = &f;
        threadIdx = f.tid;
        blockIdx = f.c->bid;
        emu_switch(&L.sched_sp, f.sp);
        L.cur = nullptr;
        if (f.done)
          left--;
      }
      if (mode == 0)
        break;
    }
  };
  while (left > 0) {
    const unsigned long long before = L.events;
    for (size_t i = nw - 1; i > 0; i--)
      std::swap(order[i], order[next_random() % (i + 1)]);
    if (mode < 2) {
      for (size_t w : order)
        run_warp(w);
    } else { /* the CTAs in the order of their first warp in `order` */
      std::vector<char> seen(ncta, 0);
      for (size_t w0 : order) {
        const size_t c = w0 / wpc;
        if (seen[c]++)
          continue;
        for (unsigned long long mark = L.events - 1; mark != L.events;) {
          mark = L.events;
          for (size_t w : order)
            if (w / wpc == c)
              run_warp(w);
        }
      }
    }
    idle = L.events == before ? idle + 1 : 0;
    if (left > 0 && idle > 64)
      die("deadlock: %zu threads of the cluster at CTA (%u,%u,%u) wait for ever (a barrier or a "
          "phase some threads never reach)",
          left, first.x, first.y, first.z);
  }
  for (cta &c : L.ctas)
    free(c.smem);
  L.ctas.clear();
}

static std::unordered_map<const void *, invoker> &registry()
{
  static std::unordered_map<const void *, invoker> r;
  return r;
}

/* The dynamic shared memory each kernel may take (cudaFuncSetAttribute; 48 KiB without). */
static std::unordered_map<const void *, size_t> &smem_optin()
{
  static std::unordered_map<const void *, size_t> m;
  return m;
}

const void *register_kernel(const void *fn, invoker call)
{
  registry()[fn] = call;
  return fn;
}

static cudaError_t last_error = cudaSuccess;

static cudaError_t launch(const void *fn, dim3 grid, dim3 block, dim3 cdim, size_t smem,
                          void **args)
{
  auto it = registry().find(fn);
  if (it == registry().end())
    die("launch of a kernel that was not registered (emu::kernel_ptr)");
  if (L.cur)
    die("a launch from inside a kernel");
  const unsigned threads = block.x * block.y * block.z;
  auto optin = smem_optin().find(fn);
  const size_t smem_max = optin == smem_optin().end() ? 48 * 1024 : optin->second;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      smem > smem_max || grid.x % cdim.x || grid.y % cdim.y || grid.z % cdim.z ||
      cdim.x * cdim.y * cdim.z > 16 || grid.y > 65535 || grid.z > 65535) {
    last_error = cudaErrorInvalidConfiguration;
    return last_error;
  }
  L.grid = gridDim = grid;
  L.block = blockDim = block;
  L.cdim = cdim;
  L.fn = fn;
  L.launches++;
  L.rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)grid.x << 32 | grid.y << 16 | block.x) ^ L.launches;
  L.call = it->second;
  L.args = args;
  for (unsigned z = 0; z < grid.z; z += cdim.z)
    for (unsigned y = 0; y < grid.y; y += cdim.y)
      for (unsigned x = 0; x < grid.x; x += cdim.x)
        run_cluster(uint3{x, y, z}, smem);
  return cudaSuccess;
}

} // namespace emu

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

using namespace emu;

const char *cudaGetErrorString(cudaError_t e)
{
  return e == cudaSuccess                     ? "no error"
         : e == cudaErrorInvalidConfiguration ? "invalid configuration argument"
         : e == cudaErrorMemoryAllocation     ? "out of memory"
         : e == cudaErrorNotSupported         ? "operation not supported (CPU emulation)"
                                              : "invalid argument";
}
const char *cudaGetErrorName(cudaError_t e)
{
  return e == cudaSuccess                     ? "cudaSuccess"
         : e == cudaErrorInvalidConfiguration ? "cudaErrorInvalidConfiguration"
         : e == cudaErrorMemoryAllocation     ? "cudaErrorMemoryAllocation"
         : e == cudaErrorNotSupported         ? "cudaErrorNotSupported"
                                              : "cudaErrorInvalidValue";
}
cudaError_t cudaGetLastError()
{
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError()
{
  return last_error;
}
cudaError_t cudaGetDeviceCount(int *n)
{
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int)
{
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d)
{
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *id)
{
  *d = 0;
  return strcmp(id, "emulation") == 0 ? cudaSuccess : (last_error = cudaErrorInvalidValue);
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "CPU emulation of CUDA");
  p->major = 9;
  p->multiProcessorCount = SMS;
  p->totalGlobalMem = (size_t)1 << 32;
  p->sharedMemPerBlockOptin = SMEM_OPTIN;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int)
{
  *v = a == cudaDevAttrMultiProcessorCount            ? SMS
       : a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? (int)SMEM_OPTIN
                                                      : 1024;
  return cudaSuccess;
}
static void flush_all();
static void submit(cudaStream_t s, std::function<void()> op);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int)
{
  snprintf(id, (size_t)len, "emulation");
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *lo, int *hi)
{
  *lo = 0;
  *hi = -1;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize()
{
  flush_all();
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
  *total = (size_t)1 << 34;
  *free_bytes = *total / 2;
  return cudaSuccess;
}
/* Device memory: shared mappings of memory files, so that another process (a rank on the same
 * node) can map an allocation from its interprocess handle, as CUDA IPC does: the handle names
 * the owner's process and file descriptor, opened through /proc. A mapping: its file (-1 for
 * one opened from a handle) and length. */
struct emu_mapping {
  int fd;
  size_t bytes;
};
static std::mutex maps_lock;
static std::unordered_map<void *, emu_mapping> maps;
struct emu_ipc_mem {
  char magic[8];
  long pid;
  int fd;
  size_t bytes;
};
static_assert(sizeof(emu_ipc_mem) <= sizeof(cudaIpcMemHandle_t), "the handle holds the mapping");

static void *map_file(int fd, size_t bytes)
{
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
  const size_t len = bytes ? bytes : 1;
  const int fd = memfd_create("stencil-emu", MFD_CLOEXEC);
  *p = fd >= 0 && ftruncate(fd, (off_t)len) == 0 ? map_file(fd, len) : NULL;
  if (!*p) {
    if (fd >= 0)
      close(fd);
    return last_error = cudaErrorMemoryAllocation;
  }
  memset(*p, 0xff, bytes);
  std::lock_guard<std::mutex> g(maps_lock);
  maps[*p] = {fd, len};
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes)
{
  return cudaMalloc(p, bytes);
}
/* Unmap p, the start of a mapping (closing its file if it has one); false if it is none. */
static bool unmap(void *p)
{
  std::lock_guard<std::mutex> g(maps_lock);
  auto it = maps.find(p);
  if (it == maps.end())
    return false;
  munmap(p, it->second.bytes);
  if (it->second.fd >= 0)
    close(it->second.fd);
  maps.erase(it);
  return true;
}
cudaError_t cudaFree(void *p)
{
  flush_all();
  return !p || unmap(p) ? cudaSuccess : (last_error = cudaErrorInvalidValue);
}
cudaError_t cudaFreeHost(void *p)
{
  return cudaFree(p);
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind)
{
  flush_all();
  memmove(d, s, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes, cudaMemcpyKind, cudaStream_t st)
{
  submit(st, [d, s, bytes] { memmove(d, s, bytes); });
  return cudaSuccess;
}
static cudaError_t memcpy3d(const cudaMemcpy3DParms *p);
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms *p, cudaStream_t st)
{
  const cudaMemcpy3DParms c = *p;
  submit(st, [c] { memcpy3d(&c); });
  return cudaSuccess;
}
static cudaError_t memcpy3d(const cudaMemcpy3DParms *p)
{
  const char *src = (const char *)p->srcPtr.ptr;
  char *dst = (char *)p->dstPtr.ptr;
  for (size_t z = 0; z < p->extent.depth; z++)
    for (size_t y = 0; y < p->extent.height; y++)
      memmove(dst + ((p->dstPos.z + z) * p->dstPtr.ysize + p->dstPos.y + y) * p->dstPtr.pitch +
                  p->dstPos.x,
              src + ((p->srcPos.z + z) * p->srcPtr.ysize + p->srcPos.y + y) * p->srcPtr.pitch +
                  p->srcPos.x,
              p->extent.width);
  return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t bytes)
{
  memset(d, v, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t bytes, cudaStream_t st)
{
  submit(st, [d, v, bytes] { memset(d, v, bytes); });
  return cudaSuccess;
}
/* Streams run their work at once, in the host's order, but for those STENCIL_EMU_DEFER names
 * (numbers in the order of creation, comma-separated): their work waits in a queue until
 * something needs it (another stream's wait on an event recorded behind it or on a counter
 * its launches set, a host synchronisation, a copy, cudaFree), the latest order a GPU may run
 * it in. A missing event between streams then shows as a wrong result
 * (tests/gpu/CMakeLists.txt, gpu_lanes). */
struct emu_stream {
  int id;
  bool deferred;
  std::deque<std::function<void()>> q;
  long issued, done;
};
/* An event's time: when it was recorded (the work before it ran already). */
struct emu_event {
  double seconds;
  emu_stream *s;
  long pos;
};
static std::vector<emu_stream *> all_streams;
static void flush_to(emu_stream *s, long pos)
{
  while (s && s->done < pos && !s->q.empty()) {
    auto op = std::move(s->q.front());
    s->q.pop_front();
    s->done++;
    op();
  }
}
static void flush_all()
{
  for (emu_stream *s : all_streams)
    flush_to(s, s->issued);
}
static void submit(cudaStream_t s, std::function<void()> op)
{
  if (s && s->deferred) {
    s->q.push_back(std::move(op));
    s->issued++;
  } else
    op();
}
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
  static int n = 0;
  *s = new emu_stream();
  (*s)->id = n++;
  const char *list = getenv("STENCIL_EMU_DEFER");
  for (const char *d = list; d && *d;) {
    char *end;
    const long id = strtol(d, &end, 10);
    if (end == d)
      emu::die("STENCIL_EMU_DEFER=%s: not a list of stream numbers", list);
    (*s)->deferred |= id == (*s)->id;
    d = *end == ',' ? end + 1 : end;
  }
  all_streams.push_back(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
  return cudaStreamCreate(s);
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned, int)
{
  return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
  flush_to(s, s->issued);
  all_streams.erase(std::find(all_streams.begin(), all_streams.end(), s));
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
  if (s)
    flush_to(s, s->issued);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned)
{
  emu_stream *o = e->s;
  const long pos = e->pos;
  if (o)
    submit(s, [o, pos] { flush_to(o, pos); });
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
  *e = new emu_event();
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned)
{
  return cudaEventCreate(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
  e->s = s && s->deferred ? s : nullptr;
  e->pos = s ? s->issued : 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  e->seconds = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
  flush_to(e->s, e->pos);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
  *ms = (float)(1e3 * (b->seconds - a->seconds));
  return cudaSuccess;
}
/* Whether STENCIL_EMU_FAIL (emu.h) names call in this process. */
static bool planted_failure(const char *call)
{
  const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  const char *f = getenv("STENCIL_EMU_FAIL"), *rank = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !rank; i++)
    rank = getenv(names[i]);
  const size_t n = strlen(call);
  return f && rank && strncmp(f, call, n) == 0 && f[n] == ':' && strcmp(f + n + 1, rank) == 0;
}
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
  if (planted_failure("cudaIpcGetMemHandle"))
    return last_error = cudaErrorInvalidValue;
  std::lock_guard<std::mutex> g(maps_lock);
  auto it = maps.find(p);
  if (it == maps.end() || it->second.fd < 0)
    return last_error = cudaErrorInvalidValue;
  emu_ipc_mem m = {"emu-mem", (long)getpid(), it->second.fd, it->second.bytes};
  memset(h, 0, sizeof *h);
  memcpy(h, &m, sizeof m);
  return cudaSuccess;
}
/* As CUDA, only another process may open a handle. */
cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned)
{
  if (planted_failure("cudaIpcOpenMemHandle"))
    return last_error = cudaErrorInvalidValue;
  emu_ipc_mem m;
  memcpy(&m, &h, sizeof m);
  if (memcmp(m.magic, "emu-mem", 8) != 0 || m.pid == (long)getpid())
    return last_error = cudaErrorInvalidValue;
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/fd/%d", m.pid, m.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  *p = fd >= 0 ? map_file(fd, m.bytes) : NULL;
  if (fd >= 0)
    close(fd);
  if (!*p)
    return last_error = cudaErrorInvalidValue;
  std::lock_guard<std::mutex> g(maps_lock);
  maps[*p] = {-1, m.bytes};
  return cudaSuccess;
}
cudaError_t cudaIpcCloseMemHandle(void *p)
{
  return unmap(p) ? cudaSuccess : (last_error = cudaErrorInvalidValue);
}
/* Work runs when it is issued, so an event is complete once recorded: another process's
 * event opens as an event of this one, which waits never hold up. */
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *h, cudaEvent_t)
{
  memset(h, 0, sizeof *h);
  memcpy(h, "emu-event", 10);
  return cudaSuccess;
}
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t h)
{
  if (memcmp(&h, "emu-event", 10) != 0)
    return last_error = cudaErrorInvalidValue;
  return cudaEventCreate(e);
}
static CUresult wait_value32(CUstream, CUdeviceptr addr, cuuint32_t value, unsigned flags)
{
  if (flags != CU_STREAM_WAIT_VALUE_GEQ)
    emu::die("cuStreamWaitValue32 with flags %u (GEQ only)", flags);
  const uint32_t *count = (const uint32_t *)addr;
  if ((int32_t)(*count - value) < 0)
    flush_all(); /* (the launch that counts may wait on a deferred stream) */
  const uint32_t have = *count;
  if ((int32_t)(have - value) < 0)
    emu::die("cuStreamWaitValue32 for %u, but the launches before it have set %u: it would wait "
             "for ever",
             value, have);
  return CUDA_SUCCESS;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned,
                                             unsigned long long, cudaDriverEntryPointQueryResult *q)
{
  *fn = nullptr;
  *q = cudaDriverEntryPointSymbolNotFound;
  if (strcmp(symbol, "cuStreamWaitValue32") == 0) {
    *fn = (void *)&wait_value32;
    *q = cudaDriverEntryPointSuccess;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *f, cudaFuncAttribute a, int v)
{
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (v < 0 || (size_t)v > SMEM_OPTIN)
      return last_error = cudaErrorInvalidValue;
    smem_optin()[f] = (size_t)v;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *)
{
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *, int threads,
                                                          size_t smem)
{
  *n = threads > 0 && threads <= 1024 && smem <= SMEM_OPTIN ? 1 : 0;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *, const cudaLaunchConfig_t *cfg)
{
  *n = cfg->dynamicSmemBytes <= SMEM_OPTIN ? 2 : 0;
  return cudaSuccess;
}
static std::unordered_map<const void *, emu::capturer> &captures()
{
  static std::unordered_map<const void *, emu::capturer> m;
  return m;
}
void emu::register_capture(const void *fn, emu::capturer c)
{
  captures()[fn] = c;
}
static cudaError_t launch_on(cudaStream_t st, const void *f, dim3 grid, dim3 block, dim3 c,
                             size_t smem, void **args)
{
  if (!(st && st->deferred))
    return emu::launch(f, grid, block, c, smem, args);
  std::shared_ptr<emu::captured> cap(captures().at(f)(args));
  const int id = st->id;
  submit(st, [=] {
    const cudaError_t e = emu::launch(f, grid, block, c, smem, cap->ptrs);
    if (e != cudaSuccess)
      emu::die("a launch held back on stream %d failed when it ran: error %d", id, (int)e);
  });
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t st)
{
  return launch_on(st, f, grid, block, dim3(1, 1, 1), smem, args);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *f, void **args)
{
  dim3 c(1, 1, 1);
  for (unsigned i = 0; i < cfg->numAttrs; i++)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension)
      c = dim3(cfg->attrs[i].val.clusterDim.x, cfg->attrs[i].val.clusterDim.y,
               cfg->attrs[i].val.clusterDim.z);
  return launch_on(cfg->stream, f, cfg->gridDim, cfg->blockDim, c, cfg->dynamicSmemBytes, args);
}
