#include "io/outdir.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error_mpi.h"
#include "io/config.h"
#include "io/field_io.h"

struct outdir {
  char dir[CONFIG_PATH_MAX];
  char lock[CONFIG_PATH_MAX + 32];
  int created; /* directory levels outdir_open created, innermost = dir */
  int fd;      /* the lock file, open and flock'ed while the run holds it; -1: not held */
  pthread_t beat;
  int beating;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int quit;
};

int outdir_make(const char *dir, int *created)
{
  char buf[CONFIG_PATH_MAX];
  if (created)
    *created = 0;
  if (strlen(dir) >= sizeof buf)
    FAIL(STENCIL_ERR, "output directory name too long: %s", dir);
  strcpy(buf, dir);
  const size_t n = strlen(buf);
  for (size_t i = 1; i <= n; i++) {
    if ((buf[i] != '/' && buf[i] != '\0') || buf[i - 1] == '/')
      continue; /* (an empty part: "a//b", "a/") */
    const char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0777) == 0) {
      if (created)
        ++*created;
    } else if (errno != EEXIST) {
      FAIL(STENCIL_ERR, "cannot create output directory %s: %s", buf, strerror(errno));
    } else if (created) {
      *created = 0; /* only a run of levels ending at dir counts */
    }
    buf[i] = c;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    FAIL(STENCIL_ERR, "output directory %s is not a directory", dir);
  /* Try it: access() says yes to root even where writing fails. */
  char probe[CONFIG_PATH_MAX + 64];
  snprintf(probe, sizeof probe, "%s/.stencil-probe-%ld", dir, (long)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    FAIL(STENCIL_ERR, "output directory %s is not writable: %s", dir, strerror(errno));
  close(fd);
  unlink(probe);
  return STENCIL_OK;
}

/* ---- the lock file --------------------------------------------------------------------- */

#define LOCK_HEADER "stencil output lock: one run writes this directory at a time\n"

struct holder {
  int valid; /* the file starts with LOCK_HEADER, or is empty (read_holder) */
  char host[256];
  long pid;
  char job[64];  /* SLURM_JOB_ID, or "-" */
  long restarts; /* SLURM_RESTART_COUNT, 0 when unset */
  char started[32];
};

static void me(struct holder *h)
{
  memset(h, 0, sizeof *h);
  if (gethostname(h->host, sizeof h->host - 1) != 0)
    strcpy(h->host, "?");
  h->pid = (long)getpid();
  const char *job = getenv("SLURM_JOB_ID"), *rc = getenv("SLURM_RESTART_COUNT");
  snprintf(h->job, sizeof h->job, "%s", job && job[0] ? job : "-");
  h->restarts = rc ? atol(rc) : 0;
  const time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(h->started, sizeof h->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Parse what a lock file holds; fields it lacks stay empty. An empty file counts as a lock
 * (one whose text a crash of its node lost); a file with other text is none. Returns 0 when
 * the file cannot be opened (gone meanwhile). */
static int read_holder(const char *path, struct holder *h)
{
  memset(h, 0, sizeof *h);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  char line[512];
  h->valid = !fgets(line, sizeof line, f) || strcmp(line, LOCK_HEADER) == 0;
  while (h->valid && fgets(line, sizeof line, f)) {
    if (sscanf(line, "host %255s", h->host) == 1 || sscanf(line, "pid %ld", &h->pid) == 1 ||
        sscanf(line, "slurm_job %63s", h->job) == 1 ||
        sscanf(line, "slurm_restart_count %ld", &h->restarts) == 1 ||
        sscanf(line, "started %31s", h->started) == 1)
      continue;
  }
  fclose(f);
  return 1;
}

/* Write the lock of h as `path` atomically: beside it, flock'ed, then renamed over a stale
 * one (replace) or linked to the name (failing if one exists: *exists is then set). *fd: the
 * lock file, open and flock'ed until closed: the kernel releases the flock when the process
 * ends, however it ends. */
static int write_lock(const char *path, const struct holder *h, int replace, int *exists, int *fd)
{
  char tmp[CONFIG_PATH_MAX + 96];
  snprintf(tmp, sizeof tmp, "%s.%s.%ld", path, h->host, h->pid);
  *fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (*fd < 0)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  flock(*fd, LOCK_EX | LOCK_NB); /* a new file: nobody else holds it */
  char text[512];
  const int n =
      snprintf(text, sizeof text,
               LOCK_HEADER "host %s\npid %ld\nslurm_job %s\nslurm_restart_count %ld\nstarted %s\n",
               h->host, h->pid, h->job, h->restarts, h->started);
  errno = EIO; /* what a short write without an error reports */
  int bad = write(*fd, text, (size_t)n) != n;
  if (!bad)
    bad = replace ? rename(tmp, path) != 0 : link(tmp, path) != 0;
  const int e = errno;
  unlink(tmp);
  if (bad) {
    close(*fd);
    *fd = -1;
  }
  if (bad && !replace && e == EEXIST) {
    *exists = 1;
    return STENCIL_OK;
  }
  if (bad)
    FAIL(STENCIL_ERR, "cannot create %s: %s", path, strerror(e));
  return STENCIL_OK;
}

/* Whether a process holds the flock of the lock file `path`: 1 yes, 0 no, -1 unknown (the
 * file system has no flock). Meaningful on the holder's host only: some file systems keep
 * flocks local to each node. */
static int lock_held(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  int held = -1;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0)
    held = 0;
  else if (errno == EWOULDBLOCK)
    held = 1;
  close(fd); /* releases the flock taken here */
  return held;
}

/* Why the run in h, whose lock `path` was last refreshed `age` seconds ago, has ended (its
 * lock may be taken over), or NULL while it may run. On the same host the flock says whether
 * its process is alive (a process that ended, zombie or not, holds no flock); where flocks are
 * not supported, whether its pid exists. */
static const char *ended(const char *path, const struct holder *h, const struct holder *self,
                         double age, char *why, size_t len)
{
  if (h->pid > 0 && strcmp(h->host, self->host) == 0) {
    const int held = lock_held(path);
    if (held == 0 || (held < 0 && kill((pid_t)h->pid, 0) != 0 && errno == ESRCH)) {
      snprintf(why, len, "its process %ld on this host has ended", h->pid);
      return why;
    }
  }
  if (strcmp(h->job, "-") != 0 && strcmp(h->job, self->job) == 0 && h->restarts < self->restarts) {
    snprintf(why, len, "it is an earlier start of this Slurm job %s (requeued)", h->job);
    return why;
  }
  if (age > OUTDIR_STALE_S) {
    snprintf(why, len, "it has not refreshed the lock for %.0f s", age);
    return why;
  }
  return NULL;
}

static int take_lock(struct outdir *od)
{
  struct holder self, other;
  me(&self);
  for (int attempt = 0; attempt < 2; attempt++) {
    int exists = 0;
    CHECK(write_lock(od->lock, &self, 0, &exists, &od->fd));
    if (!exists)
      return STENCIL_OK;
    struct stat st;
    if (stat(od->lock, &st) != 0 || !read_holder(od->lock, &other))
      continue; /* released meanwhile: try again */
    /* Never replace a file stencil did not write (it may be the input). */
    if (!other.valid)
      FAIL(STENCIL_ERR,
           "%s is not a lock file of stencil (it does not start with \"%.*s\"); move it away or "
           "choose another --output-dir",
           od->lock, (int)strlen(LOCK_HEADER) - 1, LOCK_HEADER);
    const double age = difftime(time(NULL), st.st_mtime);
    char why[160];
    if (!ended(od->lock, &other, &self, age, why, sizeof why))
      FAIL(STENCIL_ERR,
           "output directory %s is in use by another run (host %s, pid %ld, Slurm job %s, "
           "started %s; lock %s refreshed %.0f s ago): wait for it to end, or choose another "
           "--output-dir",
           od->dir, other.host[0] ? other.host : "?", other.pid, other.job[0] ? other.job : "?",
           other.started[0] ? other.started : "?", od->lock, age);
    log_warn0("taking over the lock %s of the run on host %s, pid %ld: %s\n", od->lock,
              other.host[0] ? other.host : "?", other.pid, why);
    CHECK(write_lock(od->lock, &self, 1, &exists, &od->fd));
    /* Two runs taking over at once: the last rename wins; the other finds out here. */
    struct stat mine;
    if (fstat(od->fd, &mine) == 0 && stat(od->lock, &st) == 0 && mine.st_dev == st.st_dev &&
        mine.st_ino == st.st_ino)
      return STENCIL_OK;
    close(od->fd);
    od->fd = -1;
    read_holder(od->lock, &other);
    FAIL(STENCIL_ERR,
         "output directory %s was taken by another run starting at the same time (host %s, "
         "pid %ld)",
         od->dir, other.host[0] ? other.host : "?", other.pid);
  }
  FAIL(STENCIL_ERR, "cannot take the lock %s: it keeps appearing and disappearing", od->lock);
}

/* Refresh the lock's modification time until outdir_close. */
static void *heartbeat(void *arg)
{
  struct outdir *od = arg;
  pthread_mutex_lock(&od->mu);
  while (!od->quit) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += OUTDIR_HEARTBEAT_S;
    pthread_cond_timedwait(&od->cv, &od->mu, &until);
    if (!od->quit)
      futimens(od->fd, NULL);
  }
  pthread_mutex_unlock(&od->mu);
  return NULL;
}

int outdir_open(MPI_Comm comm, const char *dir, struct outdir **out)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  *out = NULL;
  int status = STENCIL_OK;
  struct outdir *od = NULL;
  if (rank == 0) {
    od = calloc(1, sizeof *od);
    status = od ? STENCIL_OK : STENCIL_ERR;
    if (od) {
      od->fd = -1;
      pthread_mutex_init(&od->mu, NULL);
      pthread_cond_init(&od->cv, NULL);
    } else {
      log_error("out of host memory");
    }
    if (!status && strlen(dir) >= sizeof od->dir) {
      log_error("output directory name too long: %s", dir);
      status = STENCIL_ERR;
    }
    if (!status) {
      snprintf(od->dir, sizeof od->dir, "%s", dir);
      snprintf(od->lock, sizeof od->lock, "%s/%s", dir, OUTDIR_LOCK);
      status = outdir_make(dir, &od->created);
    }
    if (!status)
      status = take_lock(od);
    if (!status)
      od->beating = pthread_create(&od->beat, NULL, heartbeat, od) == 0;
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  if (status)
    outdir_close(od, 1);
  else
    *out = od;
  return status;
}

void outdir_close(struct outdir *od, int failed)
{
  if (!od)
    return;
  if (od->beating) {
    pthread_mutex_lock(&od->mu);
    od->quit = 1;
    pthread_cond_signal(&od->cv);
    pthread_mutex_unlock(&od->mu);
    pthread_join(od->beat, NULL);
  }
  if (od->fd >= 0) {
    unlink(od->lock);
    close(od->fd);
  }
  if (failed) {
    char buf[CONFIG_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", od->dir);
    for (int i = 0; i < od->created; i++) {
      if (rmdir(buf) != 0)
        break; /* not empty: it holds something now */
      char *slash = strrchr(buf, '/');
      if (!slash || slash == buf)
        break;
      *slash = '\0';
    }
  }
  pthread_mutex_destroy(&od->mu);
  pthread_cond_destroy(&od->cv);
  free(od);
}

int outdir_mark_stopped(const char *dir, const char *text)
{
  char path[CONFIG_PATH_MAX + 32], tmp[CONFIG_PATH_MAX + 48];
  snprintf(path, sizeof path, "%s/%s", dir, OUTDIR_STOPPED);
  snprintf(tmp, sizeof tmp, "%s.partial", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  const size_t n = strlen(text);
  int e = 0;
  errno = EIO; /* what a short write without an error reports */
  if (write(fd, text, n) != (ssize_t)n || fsync(fd) != 0)
    e = errno;
  if (close(fd) != 0 && !e)
    e = errno;
  if (!e && rename(tmp, path) != 0)
    e = errno;
  if (e) {
    unlink(tmp);
    FAIL(STENCIL_ERR, "cannot write %s: %s", path, strerror(e));
  }
  return field_sync_dir(path);
}

int outdir_clear_stopped(const char *dir)
{
  char path[CONFIG_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s", dir, OUTDIR_STOPPED);
  if (unlink(path) != 0 && errno != ENOENT)
    FAIL(STENCIL_ERR, "cannot remove %s: %s", path, strerror(errno));
  return STENCIL_OK;
}
