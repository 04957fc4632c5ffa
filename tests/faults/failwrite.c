/* LD_PRELOAD interposer for the I/O fault tests: the writes of one rank to files whose path
 * contains a given string fail with a given errno once a byte budget is spent.
 *
 *   FAILWRITE_MATCH   substring of the path (required; otherwise nothing fails)
 *   FAILWRITE_RANK    the rank whose writes fail (OMPI_COMM_WORLD_RANK, PMI_RANK or
 *                     SLURM_PROCID; default: every rank)
 *   FAILWRITE_ERRNO   ENOSPC (default), EIO or EDQUOT
 *   FAILWRITE_AFTER   bytes that succeed before the first failure (default 0)
 *   FAILWRITE_ALLOC   1: posix_fallocate fails too (default 0: it succeeds)
 *
 * Files are recognised when opened (open, open64, openat, creat); every write call on such a
 * descriptor (write, pwrite, pwrite64, writev, pwritev) counts against the budget, and fsync
 * fails once the budget is spent. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXFD 4096

static char marked[MAXFD];
static long long budget = -1; /* -1: not initialised */
static int err = ENOSPC, active = 0, fail_alloc = 0;
static const char *match;

static void init(void)
{
  if (budget >= 0)
    return;
  match = getenv("FAILWRITE_MATCH");
  const char *r = getenv("FAILWRITE_RANK");
  const char *me = getenv("OMPI_COMM_WORLD_RANK");
  if (!me)
    me = getenv("PMI_RANK");
  if (!me)
    me = getenv("SLURM_PROCID");
  active = match && match[0] && (!r || (me && strcmp(r, me) == 0));
  const char *e = getenv("FAILWRITE_ERRNO");
  err = e && strcmp(e, "EIO") == 0 ? EIO : e && strcmp(e, "EDQUOT") == 0 ? EDQUOT : ENOSPC;
  const char *a = getenv("FAILWRITE_AFTER");
  budget = a ? atoll(a) : 0;
  const char *f = getenv("FAILWRITE_ALLOC");
  fail_alloc = f && strcmp(f, "1") == 0;
}

static int track(int fd, const char *path)
{
  init();
  if (fd >= 0 && fd < MAXFD)
    marked[fd] = active && path && strstr(path, match) != NULL;
  return fd;
}

/* 1 when a write of n bytes to fd must fail (and then errno is set). */
static int refuse(int fd, size_t n)
{
  init();
  if (fd < 0 || fd >= MAXFD || !marked[fd])
    return 0;
  if ((long long)n <= budget) {
    budget -= (long long)n;
    return 0;
  }
  budget = 0;
  errno = err;
  return 1;
}

#define REAL(ret, name, ...)                                                                       \
  static ret (*real_##name)(__VA_ARGS__);                                                          \
  if (!real_##name)                                                                                \
  real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static mode_t mode_arg(int flags, va_list ap)
{
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
  REAL(int, open, const char *, int, ...);
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return track(real_open(path, flags, m), path);
}

int open64(const char *path, int flags, ...)
{
  REAL(int, open64, const char *, int, ...);
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return track(real_open64(path, flags, m), path);
}

int openat(int dir, const char *path, int flags, ...)
{
  REAL(int, openat, int, const char *, int, ...);
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  return track(real_openat(dir, path, flags, m), path);
}

int creat(const char *path, mode_t m)
{
  REAL(int, creat, const char *, mode_t);
  return track(real_creat(path, m), path);
}

int close(int fd)
{
  REAL(int, close, int);
  if (fd >= 0 && fd < MAXFD)
    marked[fd] = 0;
  return real_close(fd);
}

ssize_t write(int fd, const void *b, size_t n)
{
  REAL(ssize_t, write, int, const void *, size_t);
  return refuse(fd, n) ? -1 : real_write(fd, b, n);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t o)
{
  REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
  return refuse(fd, n) ? -1 : real_pwrite(fd, b, n, o);
}

ssize_t pwrite64(int fd, const void *b, size_t n, off_t o)
{
  REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
  return refuse(fd, n) ? -1 : real_pwrite64(fd, b, n, o);
}

static size_t iov_bytes(const struct iovec *v, int c)
{
  size_t n = 0;
  for (int i = 0; i < c; i++)
    n += v[i].iov_len;
  return n;
}

ssize_t writev(int fd, const struct iovec *v, int c)
{
  REAL(ssize_t, writev, int, const struct iovec *, int);
  return refuse(fd, iov_bytes(v, c)) ? -1 : real_writev(fd, v, c);
}

ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o)
{
  REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t);
  return refuse(fd, iov_bytes(v, c)) ? -1 : real_pwritev(fd, v, c, o);
}

int fsync(int fd)
{
  REAL(int, fsync, int);
  init();
  if (fd >= 0 && fd < MAXFD && marked[fd] && budget == 0) {
    errno = err;
    return -1;
  }
  return real_fsync(fd);
}

int posix_fallocate(int fd, off_t o, off_t n)
{
  REAL(int, posix_fallocate, int, off_t, off_t);
  init();
  if (fail_alloc && fd >= 0 && fd < MAXFD && marked[fd])
    return err;
  return real_posix_fallocate(fd, o, n);
}
