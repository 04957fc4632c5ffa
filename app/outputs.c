/* SCHED_BATCH (Linux) for the checkpoint writer thread. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "app/outputs.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/history.h"
#include "app/signals.h"
#include "common/error_mpi.h"
#include "io/checkpoint.h"
#include "io/field_io.h"
#include "io/outdir.h"
#include "io/snapshot.h"
#include "io/xdmf.h"

/* The flags reduced with MPI_MAX at every agreement. */
enum { FLAG_SIGNAL, FLAG_INTERVAL, FLAG_WALLTIME, NFLAGS };

/* The background writer (--checkpoint-mode background). HDF5 here is not thread-safe, so
 * while a job runs this thread makes every HDF5 call of the process: the main thread waits
 * for it (writer_wait) before it writes a snapshot or the final field. The thread's MPI
 * calls (MPI-IO, agreements) go through a communicator of its own. */
struct writer {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int started, pending, quit, reported;
  int64_t step;      /* the job: write the checkpoint of this step from buf */
  int status;        /* of the last finished job, the same on every rank */
  double write_s;    /* of the last finished job, slowest rank */
  struct decomp dec; /* the run's, with cart = the writer's own communicator */
  void *buf;         /* host copy of this rank's block */
};

struct outputs {
  const struct options *opt;
  const struct config *cfg;
  const struct decomp *dec;
  const struct provenance *prov;
  const char *dir;
  struct outputs_field field;
  struct snapshots *snap;
  char restart_path[CONFIG_PATH_MAX + 64];
  char aside[CONFIG_PATH_MAX + 128]; /* where a restart moved later files ("": nothing) */
  int64_t restart_step;              /* -1: fresh run */
  int64_t first_step;                /* step at outputs_begin */
  int64_t last_ckpt;                 /* step of this run's newest checkpoint, -1: none */
  int64_t host_step;                 /* step of the field now in field.host, -1: none */
  const char *stop_reason; /* after a stop: "SIGUSR1", "SIGTERM", "SIGINT" or "--walltime" */
  int64_t stop_step;       /* ... and the step of its checkpoint */

  /* Agreement (see outputs.h). */
  MPI_Comm agree;
  MPI_Request req;
  int req_active;
  int64_t next_agree; /* the first step at or after which the next agreement is made */
  int64_t last_step;  /* of the last outputs_after_step (outputs_begin's before it) */
  int64_t advance;    /* the most steps between two calls of outputs_after_step so far */
  int send[NFLAGS], recv[NFLAGS];

  /* Clocks (MPI_Wtime seconds) and checkpoint statistics. */
  double t_start, t_loop, t_last_ckpt;
  int nckpt;
  double bytes, copy_s, write_s, stall_s, max_stall_s, max_write_s;
  int handlers;
  int background;
  struct writer w;
};

int outputs_create(struct outputs **out, const struct options *o, const struct config *c,
                   const struct decomp *d, const struct provenance *prov, double t_start)
{
  struct outputs *s = calloc(1, sizeof *s);
  if (!s)
    FAIL(STENCIL_ERR, "out of host memory");
  *out = s;
  s->opt = o;
  s->cfg = c;
  s->dec = d;
  s->prov = prov;
  s->dir = c->output_dir;
  s->restart_step = -1;
  s->last_ckpt = -1;
  s->host_step = -1;
  s->t_start = t_start;
  s->agree = MPI_COMM_NULL;
  s->req = MPI_REQUEST_NULL;
  s->w.dec.cart = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_dup(d->cart, &s->agree));
  if (o->checkpoint_background) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      FAIL0(STENCIL_ERR,
            "--checkpoint-mode background needs MPI_THREAD_MULTIPLE, which this MPI library "
            "did not provide; use --checkpoint-mode sync");
    s->background = 1;
  }
  CHECK(signals_install());
  s->handlers = 1;
  return STENCIL_OK;
}

/* ---- set-up ---------------------------------------------------------------------------- */

/* Names in dir that start with `prefix` and end with `suffix`, removed (rank 0). */
static int remove_matching(const char *dir, const char *prefix, const char *suffix)
{
  DIR *dp = opendir(dir);
  if (!dp)
    return STENCIL_OK;
  struct dirent *e;
  int status = STENCIL_OK;
  const size_t lp = strlen(prefix), ls = strlen(suffix);
  while ((e = readdir(dp)) != NULL) {
    const size_t n = strlen(e->d_name);
    if (n < lp + ls || strncmp(e->d_name, prefix, lp) != 0 ||
        strcmp(e->d_name + n - ls, suffix) != 0)
      continue;
    char path[CONFIG_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0 && errno != ENOENT) {
      log_error("cannot remove %s: %s", path, strerror(errno));
      status = STENCIL_ERR;
    }
  }
  closedir(dp);
  return status;
}

/* A fresh run must not mix its files with an earlier run's (rank 0). */
static int check_fresh_dir(const struct outputs *s)
{
  int64_t *ck = NULL, *sn = NULL;
  int nck = 0, nsn = 0;
  int status = output_list_steps(s->dir, CHECKPOINT_PREFIX, &ck, &nck);
  if (!status)
    status = output_list_steps(s->dir, SNAPSHOT_PREFIX, &sn, &nsn);
  if (!status && nck + nsn > 0) {
    if (!s->opt->overwrite) {
      log_error("%s holds %d checkpoint%s and %d snapshot%s of an earlier run; continue it with "
                "--restart latest, pass --overwrite to delete them, or choose another "
                "--output-dir",
                s->dir, nck, nck == 1 ? "" : "s", nsn, nsn == 1 ? "" : "s");
      status = STENCIL_ERR;
    } else {
      char path[CONFIG_PATH_MAX + 64];
      for (int i = 0; i < nck + nsn; i++) {
        if (i < nck)
          checkpoint_path(path, sizeof path, s->dir, ck[i]);
        else
          snapshot_path(path, sizeof path, s->dir, sn[i - nck]);
        if (unlink(path) != 0 && errno != ENOENT) {
          log_error("cannot remove %s: %s", path, strerror(errno));
          status = STENCIL_ERR;
        }
      }
      const char *const index[2] = {SNAPSHOT_XDMF, CHECKPOINT_XDMF};
      for (int i = 0; i < 2; i++) {
        char xdmf[CONFIG_PATH_MAX + 64];
        snprintf(xdmf, sizeof xdmf, "%s/%s", s->dir, index[i]);
        if (unlink(xdmf) != 0 && errno != ENOENT)
          status = STENCIL_ERR;
      }
    }
  }
  free(ck);
  free(sn);
  return status;
}

/* 1 when a and b name the same existing file. */
static int same_file(const char *a, const char *b)
{
  struct stat sa, sb;
  return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/* The directory part of path ("." for a plain name, "/" for "/name"); returns the name. */
static const char *split_dir(const char *path, char *dir, size_t len)
{
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, len, ".");
  else
    snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  return slash ? slash + 1 : path;
}

/* 1 when `path` (existing or not) lies in the output directory under a name the run writes,
 * moves or deletes there: the final field and its XDMF file, checkpoints, snapshots, their
 * XDMF indexes, the history, the stop marker, the lock, *.partial. */
static int in_output_names(const struct outputs *s, const char *path)
{
  char dir[CONFIG_PATH_MAX], final_xdmf[CONFIG_PATH_MAX];
  const char *name = split_dir(path, dir, sizeof dir);
  if (!same_file(dir, s->dir))
    return 0;
  xdmf_path_for(final_xdmf, sizeof final_xdmf, s->cfg->output_final);
  const char *const names[] = {s->cfg->output_final, final_xdmf,     SNAPSHOT_XDMF, CHECKPOINT_XDMF,
                               HISTORY_FILE,         OUTDIR_STOPPED, OUTDIR_LOCK};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i]) == 0)
      return 1;
  const size_t n = strlen(name);
  return strncmp(name, CHECKPOINT_PREFIX, strlen(CHECKPOINT_PREFIX)) == 0 ||
         strncmp(name, SNAPSHOT_PREFIX, strlen(SNAPSHOT_PREFIX)) == 0 ||
         (n > 8 && strcmp(name + n - 8, ".partial") == 0);
}

/* No file the run reads may be one it writes or deletes, and the JSON report must be a new
 * or plain file that can be created (rank 0, before anything is written or deleted). */
static int check_not_input(const struct outputs *s)
{
  const struct options *o = s->opt;
  char final[CONFIG_PATH_MAX + 300];
  snprintf(final, sizeof final, "%s/%s", s->dir, s->cfg->output_final);
  if (same_file(o->input, final))
    FAIL(STENCIL_ERR,
         "the final output %s is the input file %s: the run would replace it; choose another "
         "--output-dir or /output/final",
         final, o->input);
  if (in_output_names(s, o->input))
    FAIL(STENCIL_ERR,
         "the input %s lies in the output directory %s under a name the run writes or deletes "
         "there (checkpoint_*, snapshot_*, the XDMF files, %s, %s, %s, *.partial); move it or "
         "choose another --output-dir",
         o->input, s->dir, HISTORY_FILE, OUTDIR_STOPPED, OUTDIR_LOCK);
  const char *json = o->report_json;
  if (!json)
    return STENCIL_OK;
  const char *restart = o->restart && strcmp(o->restart, "latest") != 0 ? o->restart : NULL;
  if (same_file(json, o->input) || same_file(json, restart) || in_output_names(s, json))
    FAIL(STENCIL_ERR, "--report-json %s would replace %s; choose another file", json,
         same_file(json, o->input)  ? o->input
         : same_file(json, restart) ? restart
                                    : "an output of the run");
  struct stat st;
  if (stat(json, &st) == 0 && !S_ISREG(st.st_mode))
    FAIL(STENCIL_ERR, "--report-json %s is not a regular file", json);
  char dir[CONFIG_PATH_MAX];
  split_dir(json, dir, sizeof dir);
  if (stat(dir, &st) != 0)
    FAIL(STENCIL_ERR, "--report-json %s: cannot create it in %s: %s", json, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    FAIL(STENCIL_ERR, "--report-json %s: %s is not a directory", json, dir);
  return STENCIL_OK;
}

int outputs_prepare(struct outputs *s, int64_t *restart_step)
{
  *restart_step = -1;
  const struct decomp *d = s->dec;
  int bad = d->rank == 0 ? check_not_input(s) : STENCIL_OK;
  CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, d->cart));
  if (bad)
    return bad;
  if (s->opt->restart) {
    CHECK(checkpoint_resolve(d->cart, s->opt->restart, s->dir, s->opt->input, s->cfg, s->cfg->steps,
                             s->restart_path, sizeof s->restart_path, &s->restart_step));
    *restart_step = s->restart_step;
    log_info0("restart      from %s at step %lld\n", s->restart_path, (long long)s->restart_step);
    return STENCIL_OK;
  }
  int status = d->rank == 0 ? check_fresh_dir(s) : STENCIL_OK;
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, d->cart));
  return status;
}

int outputs_read_restart(struct outputs *s, void *host)
{
  return checkpoint_read(s->restart_path, s->cfg, s->dec, host);
}

/* Whether dir/name exists. */
static int exists_in(const struct outputs *s, const char *name)
{
  char path[CONFIG_PATH_MAX + 300];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  return access(path, F_OK) == 0;
}

/* Move dir/name into the aside folder, creating it on first use (rank 0). */
static int move_aside(const struct outputs *s, char *aside, size_t len, const char *name)
{
  char from[CONFIG_PATH_MAX + 300], to[2 * CONFIG_PATH_MAX + 600];
  snprintf(from, sizeof from, "%s/%s", s->dir, name);
  if (access(from, F_OK) != 0)
    return STENCIL_OK;
  if (!aside[0]) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
    snprintf(aside, len, "%s/superseded-%lld-%s-%ld", s->dir, (long long)s->restart_step, stamp,
             (long)getpid());
    if (mkdir(aside, 0777) != 0)
      FAIL(STENCIL_ERR, "cannot create %s: %s", aside, strerror(errno));
  }
  snprintf(to, sizeof to, "%s/%s", aside, name);
  if (rename(from, to) != 0)
    FAIL(STENCIL_ERR, "cannot move %s to %s: %s", from, to, strerror(errno));
  return STENCIL_OK;
}

/* Move the earlier run's files past the restart step aside (rank 0): checkpoints and
 * snapshots, each series' XDMF index with them (it lists them), a history with later rows, the
 * final output and its XDMF file. An index whose series lost no file stays; checkpoints.xdmf
 * is then rebuilt from the checkpoints left. */
static int supersede(struct outputs *s)
{
  char *aside = s->aside;
  const char *const prefixes[2] = {CHECKPOINT_PREFIX, SNAPSHOT_PREFIX};
  const char *const index[2] = {CHECKPOINT_XDMF, SNAPSHOT_XDMF};
  int status = STENCIL_OK, moved = 0;
  for (int p = 0; p < 2 && !status; p++) {
    int64_t *steps = NULL;
    int n = 0, later = 0;
    status = output_list_steps(s->dir, prefixes[p], &steps, &n);
    for (int i = 0; i < n && !status; i++) {
      if (steps[i] <= s->restart_step)
        continue;
      char name[64];
      snprintf(name, sizeof name, "%s%010lld.h5", prefixes[p], (long long)steps[i]);
      status = move_aside(s, aside, sizeof s->aside, name);
      later++;
    }
    free(steps);
    moved += later;
    if (!status && later > 0 && exists_in(s, index[p])) {
      status = move_aside(s, aside, sizeof s->aside, index[p]);
      moved++;
    }
  }
  if (!status && history_past(s->dir, s->restart_step)) {
    status = move_aside(s, aside, sizeof s->aside, HISTORY_FILE);
    moved++;
  }
  char final_xdmf[CONFIG_PATH_MAX];
  xdmf_path_for(final_xdmf, sizeof final_xdmf, s->cfg->output_final);
  const char *const finals[2] = {s->cfg->output_final, final_xdmf};
  for (int i = 0; i < 2 && !status; i++) {
    if (exists_in(s, finals[i])) {
      status = move_aside(s, aside, sizeof s->aside, finals[i]);
      moved++;
    }
  }
  if (!status && aside[0]) {
    log_info0("superseded   %d file%s of the earlier run (past step %lld, the final output, the "
              "XDMF files) moved to %s\n",
              moved, moved == 1 ? "" : "s", (long long)s->restart_step, aside);
    status = field_sync_dir(aside);
  }
  if (!status)
    status = checkpoint_index(s->dir, s->cfg);
  return status;
}

static void start_agreement(struct outputs *s, int64_t step);
static int writer_start(struct outputs *s);

/* Bring the field of `step` into the host block once. Collective. */
static int download(struct outputs *s, int64_t step)
{
  if (s->host_step == step)
    return STENCIL_OK;
  CHECK(status_agree(s->dec->cart, s->field.download(s->field.arg, s->field.host)));
  s->host_step = step;
  return STENCIL_OK;
}

int outputs_begin(struct outputs *s, int64_t step, const struct outputs_field *f)
{
  const struct decomp *d = s->dec;
  s->field = *f;
  s->first_step = step;
  /* Files a killed run left half-written are garbage: their names never count. */
  int status = STENCIL_OK;
  if (d->rank == 0) {
    status = remove_matching(s->dir, CHECKPOINT_PREFIX, ".partial");
    status |= remove_matching(s->dir, SNAPSHOT_PREFIX, ".partial");
    status |= outdir_clear_stopped(s->dir); /* an earlier start's: this one now decides */
  }
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, d->cart));
  CHECK(status);
  if (s->restart_step >= 0) {
    status = d->rank == 0 ? supersede(s) : STENCIL_OK;
    CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, d->cart));
    CHECK(status);
  }
  if (s->opt->output_every > 0) {
    CHECK(snapshot_open(&s->snap, d->cart, s->dir, (int)s->opt->output_stride, s->cfg,
                        s->restart_step));
    if (step % s->opt->output_every == 0 && !snapshot_has(s->snap, step)) {
      CHECK(download(s, step));
      const struct field_meta meta = {step, (double)step * s->cfg->dt, s->prov};
      CHECK(snapshot_write(s->snap, d, &meta, s->field.host));
    }
  }
  if (s->background)
    CHECK(writer_start(s));
  s->t_loop = s->t_last_ckpt = MPI_Wtime();
  start_agreement(s, step);
  s->next_agree = next_multiple(step, s->opt->agree_every);
  s->last_step = step;
  return STENCIL_OK;
}

/* ---- the agreement --------------------------------------------------------------------- */

/* Rank 0: is the wall-time limit near? Reserve enough for the agreement's delay (2K steps plus
 * two, and an advance but one: an agreement waits for the end of the advance that reaches its
 * step), one checkpoint (1.5 x the slowest so far, or the field at 100 MB/s
 * before the first) and a margin of 1 % of the limit, at least 1 s. */
static int walltime_near(const struct outputs *s, int64_t step, double now)
{
  if (s->opt->walltime <= 0)
    return 0;
  const int64_t done = step - s->first_step;
  const double per_step = done > 0 ? (now - s->t_loop) / (double)done : 0.0;
  const double field_bytes = (double)config_points(s->cfg) * config_elem_size(s->cfg);
  const double slowest = fmax(s->max_stall_s, s->max_write_s);
  const double ckpt = slowest > 0 ? 1.5 * slowest : field_bytes / 100e6 + 0.1;
  const double margin = fmax(1.0, 0.01 * s->opt->walltime);
  const int64_t late = s->advance > 1 ? s->advance - 1 : 0;
  const double reserve = (double)(2 * s->opt->agree_every + 2 + late) * per_step + ckpt + margin;
  return now - s->t_start + reserve >= s->opt->walltime;
}

static void start_agreement(struct outputs *s, int64_t step)
{
  const double now = MPI_Wtime();
  s->send[FLAG_SIGNAL] = signals_pending();
  s->send[FLAG_INTERVAL] = s->dec->rank == 0 && s->opt->checkpoint_interval > 0 &&
                           now - s->t_last_ckpt >= s->opt->checkpoint_interval;
  s->send[FLAG_WALLTIME] = s->dec->rank == 0 && walltime_near(s, step, now);
  /* A failure here leaves the request inactive: the flags are then read as clear. */
  s->req_active =
      MPI_Iallreduce(s->send, s->recv, NFLAGS, MPI_INT, MPI_MAX, s->agree, &s->req) == MPI_SUCCESS;
}

/* ---- writing --------------------------------------------------------------------------- */

/* Count NaN/Inf in a host block: no checkpoint of a broken field. Collective over comm. */
static int check_finite_block(MPI_Comm comm, const struct outputs *s, const void *host,
                              int64_t step)
{
  const struct decomp *d = s->dec;
  const int64_t n = d->n[0] * d->n[1] * d->n[2];
  int64_t bad = 0, all = 0;
  if (s->cfg->precision == PREC_FP64) {
    const double *u = host;
    for (int64_t i = 0; i < n; i++)
      bad += !isfinite(u[i]);
  } else {
    const float *u = host;
    for (int64_t i = 0; i < n; i++)
      bad += !isfinite(u[i]);
  }
  CHECK_MPI(MPI_Allreduce(&bad, &all, 1, MPI_INT64_T, MPI_SUM, comm));
  if (all > 0)
    FAIL0(STENCIL_ERR_NUMERIC,
          "the field has %lld non-finite values (NaN or Inf) at step %lld; no checkpoint was "
          "written (the previous ones are kept)",
          (long long)all, (long long)step);
  return STENCIL_OK;
}

static double field_bytes(const struct outputs *s)
{
  return (double)config_points(s->cfg) * config_elem_size(s->cfg);
}

/* ---- the background writer ------------------------------------------------------------- */

static void *writer_main(void *arg)
{
  struct outputs *s = arg;
  struct writer *w = &s->w;
#ifdef SCHED_BATCH
  /* Linux: no wake-up preemption by this thread, so handing it a checkpoint does not cost the
   * loop's thread a time slice (measured 3-4 ms per hand-off without; microseconds with). */
  const struct sched_param batch = {0};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
#endif
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->pending && !w->quit)
      pthread_cond_wait(&w->cond, &w->lock);
    if (!w->pending)
      break;
    const int64_t step = w->step;
    pthread_mutex_unlock(&w->lock);

    const struct field_meta meta = {step, (double)step * s->cfg->dt, s->prov};
    int status = check_finite_block(w->dec.cart, s, w->buf, step);
    const double t0 = MPI_Wtime();
    if (!status)
      status =
          checkpoint_write(s->dir, s->cfg, &w->dec, &meta, w->buf, s->opt->debug_checkpoint_delay);
    double mine = MPI_Wtime() - t0, worst = mine;
    if (!status)
      status = checkpoint_prune(w->dec.cart, s->dir, (int)s->opt->keep_checkpoints, s->cfg);
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, w->dec.cart);

    pthread_mutex_lock(&w->lock);
    w->status = status;
    w->write_s = worst;
    w->pending = 0;
    w->reported = 0;
    pthread_cond_broadcast(&w->cond);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static int writer_start(struct outputs *s)
{
  struct writer *w = &s->w;
  const struct decomp *d = s->dec;
  w->dec = *d;
  w->dec.cart = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_dup(d->cart, &w->dec.cart));
  const size_t bytes = (size_t)(d->n[0] * d->n[1] * d->n[2]) * (size_t)config_elem_size(s->cfg);
  if (s->field.host_alloc) {
    if (s->field.host_alloc(s->field.arg, bytes ? bytes : 1, &w->buf) != STENCIL_OK)
      w->buf = NULL;
  } else {
    w->buf = malloc(bytes ? bytes : 1);
  }
  int status = w->buf ? STENCIL_OK : STENCIL_ERR;
  if (status)
    log_error("out of host memory for the checkpoint buffer (%zu bytes)", bytes);
  else
    memset(w->buf, 0, bytes); /* touch the pages now, not in the first checkpoint's copy */
  CHECK(status_agree(d->cart, status));
  w->reported = 1;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  status = pthread_create(&w->thread, NULL, writer_main, s) == 0 ? STENCIL_OK : STENCIL_ERR;
  if (status)
    log_error("cannot start the checkpoint writer thread");
  w->started = status == STENCIL_OK;
  return status_agree(d->cart, status);
}

/* Wait until the writer is idle; report and count the job it finished. Returns the job's
 * status (the same on every rank). */
static int writer_wait(struct outputs *s)
{
  struct writer *w = &s->w;
  if (!w->started)
    return STENCIL_OK;
  pthread_mutex_lock(&w->lock);
  while (w->pending)
    pthread_cond_wait(&w->cond, &w->lock);
  const int status = w->status, report = !w->reported;
  const double write_s = w->write_s;
  const int64_t step = w->step;
  w->reported = 1;
  pthread_mutex_unlock(&w->lock);
  if (!report || status)
    return status;
  const double bytes = field_bytes(s);
  s->write_s += write_s;
  s->max_write_s = fmax(s->max_write_s, write_s);
  char path[CONFIG_PATH_MAX + 64];
  checkpoint_path(path, sizeof path, s->dir, step);
  log_info0("checkpoint   step %lld: %.1f MiB written in the background in %.3f s (%.1f MB/s): "
            "%s\n",
            (long long)step, bytes / (1 << 20), write_s, bytes / fmax(write_s, 1e-9) / 1e6, path);
  return STENCIL_OK;
}

/* Stop the thread (after its job, if any): bounded, in case a rank failed mid-write. */
static void writer_stop(struct outputs *s)
{
  struct writer *w = &s->w;
  if (w->started) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&w->lock);
    w->quit = 1;
    pthread_cond_broadcast(&w->cond);
    int stuck = 0;
    while (w->pending && !stuck)
      stuck = pthread_cond_timedwait(&w->cond, &w->lock, &until) != 0;
    pthread_mutex_unlock(&w->lock);
    if (stuck) {
      log_error("the checkpoint writer did not finish its write within 60 s");
      pthread_detach(w->thread);
      return; /* the thread still uses w: leave it be; main aborts the job */
    }
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    w->started = 0;
  }
  if (w->dec.cart != MPI_COMM_NULL)
    MPI_Comm_free(&w->dec.cart);
  if (w->buf && s->field.host_free)
    s->field.host_free(s->field.arg, w->buf);
  else
    free(w->buf);
  w->buf = NULL;
}

/* The field's queued steps run to the end (outputs_field.drain); their time is not a stall. */
static int drain(const struct outputs *s)
{
  return s->field.drain ? status_agree(s->dec->cart, s->field.drain(s->field.arg)) : STENCIL_OK;
}

/* Background checkpoint: wait for the previous one, copy the field into the writer's buffer
 * and hand it over. The loop pays for the copy (and for any wait). Collective. */
static int write_checkpoint_background(struct outputs *s, int64_t step)
{
  const struct decomp *d = s->dec;
  CHECK(drain(s));
  const double t0 = MPI_Wtime();
  CHECK(writer_wait(s));
  const double t1 = MPI_Wtime();
  CHECK(status_agree(d->cart, s->field.download(s->field.arg, s->w.buf)));
  const double t2 = MPI_Wtime();
  pthread_mutex_lock(&s->w.lock);
  s->w.step = step;
  s->w.pending = 1;
  pthread_cond_broadcast(&s->w.cond);
  pthread_mutex_unlock(&s->w.lock);
  const double t3 = MPI_Wtime();
  double mine[3] = {t1 - t0, t2 - t1, t3 - t0}, worst[3];
  CHECK_MPI(MPI_Allreduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, d->cart));
  s->nckpt++;
  s->bytes += field_bytes(s);
  s->copy_s += worst[1];
  s->stall_s += worst[2];
  s->max_stall_s = fmax(s->max_stall_s, worst[2]);
  s->last_ckpt = step;
  s->t_last_ckpt = MPI_Wtime();
  log_info0("checkpoint   step %lld: handed to the writer; host copy %.3f s, waited for the "
            "previous write %.3f s, loop stalled %.3f s\n",
            (long long)step, worst[1], worst[0], worst[2]);
  return STENCIL_OK;
}

static int write_checkpoint(struct outputs *s, int64_t step)
{
  if (s->background)
    return write_checkpoint_background(s, step);
  const struct decomp *d = s->dec;
  if (s->host_step != step)
    CHECK(drain(s));
  const double t0 = MPI_Wtime();
  CHECK(download(s, step));
  const double t1 = MPI_Wtime();
  CHECK(check_finite_block(d->cart, s, s->field.host, step));
  const struct field_meta meta = {step, (double)step * s->cfg->dt, s->prov};
  const double t2 = MPI_Wtime();
  CHECK(checkpoint_write(s->dir, s->cfg, d, &meta, s->field.host, s->opt->debug_checkpoint_delay));
  const double t3 = MPI_Wtime();
  CHECK(checkpoint_prune(d->cart, s->dir, (int)s->opt->keep_checkpoints, s->cfg));
  /* The slowest rank's times: the loop waits for it. The write is the file alone (checksum,
   * data, fsync, rename); the NaN check and the removal of old checkpoints count in the stall. */
  double mine[3] = {t1 - t0, t3 - t2, MPI_Wtime() - t0}, worst[3];
  CHECK_MPI(MPI_Allreduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, d->cart));
  const double bytes = field_bytes(s);
  s->nckpt++;
  s->bytes += bytes;
  s->copy_s += worst[0];
  s->stall_s += worst[2];
  s->write_s += worst[1];
  s->max_write_s = fmax(s->max_write_s, worst[1]);
  s->max_stall_s = fmax(s->max_stall_s, worst[2]);
  s->last_ckpt = step;
  s->t_last_ckpt = MPI_Wtime();
  char path[CONFIG_PATH_MAX + 64];
  checkpoint_path(path, sizeof path, s->dir, step);
  log_info0("checkpoint   step %lld: %.1f MiB in %.3f s (%.1f MB/s), host copy %.3f s, loop "
            "stalled %.3f s: %s\n",
            (long long)step, bytes / (1 << 20), worst[1], bytes / fmax(worst[1], 1e-9) / 1e6,
            worst[0], worst[2], path);
  return STENCIL_OK;
}

/* The stop marker, once the stop's checkpoint is complete: what scripts test instead of the
 * launcher's status (rank 0; collective). */
static int mark_stopped(const struct outputs *s)
{
  int status = STENCIL_OK;
  if (s->dec->rank == 0) {
    char text[512], stamp[32];
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(text, sizeof text,
             "stencil stopped early; continue with --restart latest\n"
             "reason %s\nstep %lld\nend_step %lld\ncheckpoint %s%010lld.h5\nexit_status %d\n"
             "time %s\n",
             s->stop_reason, (long long)s->stop_step, (long long)s->cfg->steps, CHECKPOINT_PREFIX,
             (long long)s->stop_step, STENCIL_STOPPED, stamp);
    status = outdir_mark_stopped(s->dir, text);
  }
  return status_agree(s->dec->cart, status);
}

int outputs_after_step(struct outputs *s, int64_t step, int *stop)
{
  const struct options *o = s->opt;
  const struct decomp *d = s->dec;
  *stop = 0;
  int flags[NFLAGS] = {0, 0, 0};
  if (step - s->last_step > s->advance)
    s->advance = step - s->last_step;
  s->last_step = step;
  /* (at the end of the first advance at or after each multiple of --agree-every: agreements
     never shorten an advance) */
  const int agree = step >= s->next_agree;
  if (agree) {
    if (s->req_active) {
      CHECK_MPI(MPI_Wait(&s->req, MPI_STATUS_IGNORE));
      s->req_active = 0;
      memcpy(flags, s->recv, sizeof flags);
    }
  }
  const int at_end = step >= s->cfg->steps;
  const int stopping = !at_end && (flags[FLAG_SIGNAL] || flags[FLAG_WALLTIME]);
  const int due = (o->checkpoint_every > 0 && step % o->checkpoint_every == 0) ||
                  flags[FLAG_INTERVAL] || stopping;
  if (due && s->last_ckpt != step)
    CHECK(write_checkpoint(s, step));
  /* Before the run ends or stops, the background checkpoint must be complete. */
  if (at_end || stopping)
    CHECK(writer_wait(s));
  if (s->snap && step % o->output_every == 0) {
    CHECK(writer_wait(s)); /* one thread makes HDF5 calls at a time */
    CHECK(download(s, step));
    const struct field_meta meta = {step, (double)step * s->cfg->dt, s->prov};
    CHECK(snapshot_write(s->snap, d, &meta, s->field.host));
  }
  if (stopping) {
    s->stop_step = step;
    s->stop_reason = flags[FLAG_SIGNAL] ? signals_name(flags[FLAG_SIGNAL]) : "--walltime";
    CHECK(mark_stopped(s));
    char path[CONFIG_PATH_MAX + 64];
    checkpoint_path(path, sizeof path, s->dir, step);
    if (flags[FLAG_SIGNAL])
      log_warn0("stopping at step %lld of %lld on %s: checkpoint %s written; continue with "
                "--restart latest (exit status %d, marker %s/%s)",
                (long long)step, (long long)s->cfg->steps, s->stop_reason, path, STENCIL_STOPPED,
                s->dir, OUTDIR_STOPPED);
    else
      log_warn0("stopping at step %lld of %lld before the --walltime limit of %.0f s: checkpoint "
                "%s written; continue with --restart latest (exit status %d, marker %s/%s)",
                (long long)step, (long long)s->cfg->steps, o->walltime, path, STENCIL_STOPPED,
                s->dir, OUTDIR_STOPPED);
    *stop = 1;
    return STENCIL_OK;
  }
  if (agree && !at_end) {
    start_agreement(s, step);
    s->next_agree = next_multiple(step, o->agree_every);
  }
  return STENCIL_OK;
}

const char *outputs_superseded(const struct outputs *s)
{
  return s->aside[0] ? s->aside : NULL;
}

const char *outputs_stop_reason(const struct outputs *s, int64_t *step)
{
  *step = s->stop_step;
  return s->stop_reason;
}

int outputs_end_early(struct outputs *s)
{
  return writer_wait(s);
}

int64_t outputs_next_due(const struct outputs *s, int64_t step)
{
  const struct options *o = s->opt;
  const int64_t ckpt = next_multiple(step, o->checkpoint_every);
  const int64_t snap = s->snap ? next_multiple(step, o->output_every) : INT64_MAX;
  return snap < ckpt ? snap : ckpt;
}

/* ---- the end --------------------------------------------------------------------------- */

void outputs_destroy(struct outputs *s)
{
  if (!s)
    return;
  if (s->req_active) {
    /* Every rank started it at the same step; wait a while, not forever, in case a rank
     * failed (main then aborts the job). */
    const double t0 = MPI_Wtime();
    int done = 0;
    while (!done && MPI_Wtime() - t0 < 30.0) {
      MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
      if (!done) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
      }
    }
  }
  writer_stop(s);
  if (s->nckpt > 0 && !log_quiet())
    log_info0("checkpoints  %d written%s, %.1f MiB each: write %.3f s each (%.1f MB/s), host "
              "copy %.3f s, loop stalled %.3f s each (max %.3f s)\n",
              s->nckpt, s->background ? " in the background" : "", s->bytes / s->nckpt / (1 << 20),
              s->write_s / s->nckpt, s->bytes / fmax(s->write_s, 1e-9) / 1e6, s->copy_s / s->nckpt,
              s->stall_s / s->nckpt, s->max_stall_s);
  snapshot_close(s->snap);
  if (s->handlers)
    signals_restore();
  if (s->agree != MPI_COMM_NULL)
    MPI_Comm_free(&s->agree);
  free(s);
}
