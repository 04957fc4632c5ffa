#include "common/error_mpi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The rank and verbosity are set once by main (log_init) and only read afterwards. */
static int log_rank_ = 0;
static int log_size_ = 1;
static int log_quiet_ = 0;
static int log_shared_ = 0;

void log_set_shared(int on)
{
  log_shared_ = on;
}

void log_init(int rank, int size, int quiet)
{
  log_rank_ = rank;
  log_size_ = size;
  log_quiet_ = quiet;
}

int log_rank(void)
{
  return log_rank_;
}
int log_quiet(void)
{
  return log_quiet_;
}

void error_trace(const char *file, int line, const char *func)
{
  const char *env = getenv("STENCIL_TRACEBACK");
  if (env && env[0] == '1')
    fprintf(stderr, "stencil: [rank %d]   at %s (%s:%d)\n", log_rank_, func, file, line);
}

static int vformat_error(char *buf, size_t len, const char *fmt, va_list ap)
{
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  int n = log_size_ > 1 && !log_shared_
              ? snprintf(buf, len, "stencil: [rank %d] error: %s\n", log_rank_, msg)
              : snprintf(buf, len, "stencil: error: %s\n", msg);
  return n < 0 ? 0 : (size_t)n < len ? n : (int)len - 1;
}

int log_error_text(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const int n = vformat_error(buf, len, fmt, ap);
  va_end(ap);
  return n;
}

void log_error(const char *fmt, ...)
{
  char line[2200];
  va_list ap;
  va_start(ap, fmt);
  vformat_error(line, sizeof line, fmt, ap);
  va_end(ap);
  fputs(line, stderr);
  fflush(stderr);
}

void log_error0(const char *fmt, ...)
{
  if (log_rank_ != 0)
    return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "stencil: error: %s\n", msg);
  fflush(stderr);
}

void log_warn0(const char *fmt, ...)
{
  if (log_rank_ != 0)
    return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "stencil: warning: %s\n", msg);
  fflush(stderr);
}

void log_info0(const char *fmt, ...)
{
  if (log_rank_ != 0 || log_quiet_)
    return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

/* An agreement was left incomplete: some rank is stuck, and later ones do not wait. */
static int agree_abandoned_ = 0;

int status_agree_within(MPI_Comm comm, int status, int *agreed)
{
  int all = status;
  MPI_Request req;
  *agreed = 0;
  if (agree_abandoned_ ||
      MPI_Iallreduce(&status, &all, 1, MPI_INT, MPI_MAX, comm, &req) != MPI_SUCCESS)
    return status;
  const char *env = getenv("STENCIL_ABORT_TIMEOUT");
  const double limit = env ? atof(env) : 30.0, t0 = MPI_Wtime();
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return status;
    if (done) {
      *agreed = 1;
      return all;
    }
    if (MPI_Wtime() - t0 > limit) {
      agree_abandoned_ = 1;
      return status;
    }
    const struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

int status_agree(MPI_Comm comm, int status)
{
  if (status != STENCIL_OK) { /* (this rank's error, or one it learned at an agreement) */
    int agreed = 0;
    const int waited = !agree_abandoned_, all = status_agree_within(comm, status, &agreed);
    if (!agreed && waited)
      log_error("the other ranks did not reach the agreement on an error within "
                "STENCIL_ABORT_TIMEOUT (default 30 s): they are stuck, the job ends");
    return all;
  }
  int all = status;
  MPI_Request req;
  if (MPI_Iallreduce(&status, &all, 1, MPI_INT, MPI_MAX, comm, &req) != MPI_SUCCESS ||
      MPI_Wait(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    return STENCIL_ERR;
  return all;
}
