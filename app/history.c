#include "app/history.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error_mpi.h"
#include "io/config.h"

#define HISTORY_HEADER "step,time,l2,max_abs,integral\n"

struct history {
  int rank;
  FILE *f; /* rank 0 */
  char path[CONFIG_PATH_MAX + 64];
  double dt, cell_volume;
  int64_t last; /* the step of the last row */
  int failed;   /* a write failed (errno in err) */
  int err;
};

/* The rows of the file `from` before step `before` into f (NULL: count the rows from
 * `before` on into *later). A missing file has none. */
static int scan_rows(const char *from, int64_t before, FILE *f, int64_t *later)
{
  FILE *in = fopen(from, "r");
  if (!in)
    return errno == ENOENT ? STENCIL_OK : STENCIL_ERR;
  char line[512];
  while (fgets(line, sizeof line, in)) {
    char *end = NULL;
    const long long step = strtoll(line, &end, 10);
    if (end == line || *end != ',')
      continue; /* the header */
    if (step < before && f)
      fputs(line, f);
    else if (step >= before && later)
      (*later)++;
  }
  const int bad = ferror(in);
  fclose(in);
  return bad ? STENCIL_ERR : STENCIL_OK;
}

int history_past(const char *dir, int64_t step)
{
  char path[CONFIG_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, HISTORY_FILE);
  int64_t later = 0;
  scan_rows(path, step + 1, NULL, &later);
  return later > 0;
}

/* Rank 0: write the header (and the earlier rows) under a temporary name, then rename, so the
 * earlier history is never lost half-copied; keep the file open to append. */
static int start_file(struct history *h, const char *aside, int64_t restart_step)
{
  char tmp[sizeof h->path + 16];
  snprintf(tmp, sizeof tmp, "%s.partial", h->path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  int status = fputs(HISTORY_HEADER, f) < 0 ? STENCIL_ERR : STENCIL_OK;
  if (!status && restart_step >= 0) {
    char old[CONFIG_PATH_MAX + 200];
    snprintf(old, sizeof old, "%s/%s", aside ? aside : ".", HISTORY_FILE);
    status = scan_rows(aside && access(old, F_OK) == 0 ? old : h->path, restart_step, f, NULL);
  }
  if (!status)
    status = fflush(f) == 0 && fsync(fileno(f)) == 0 ? STENCIL_OK : STENCIL_ERR;
  if (!status && rename(tmp, h->path) != 0)
    status = STENCIL_ERR;
  if (status) {
    const int e = errno;
    fclose(f);
    unlink(tmp);
    FAIL(STENCIL_ERR, "cannot write %s: %s", h->path, strerror(e));
  }
  h->f = f;
  return STENCIL_OK;
}

int history_open(struct history **out, MPI_Comm comm, const char *dir, const char *aside,
                 int64_t restart_step, double dt, double cell_volume)
{
  struct history *h = calloc(1, sizeof *h);
  if (!h)
    FAIL(STENCIL_ERR, "out of host memory");
  *out = h;
  h->dt = dt;
  h->cell_volume = cell_volume;
  h->last = -1;
  CHECK_MPI(MPI_Comm_rank(comm, &h->rank));
  snprintf(h->path, sizeof h->path, "%s/%s", dir, HISTORY_FILE);
  int status = h->rank == 0 ? start_file(h, aside, restart_step) : STENCIL_OK;
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  return status;
}

void history_add(struct history *h, int64_t step, const struct norms *g)
{
  if (!h || h->rank != 0 || step <= h->last || h->failed)
    return;
  h->last = step;
  const double l2 = sqrt(g->sumsq * h->cell_volume);
  if (fprintf(h->f, "%lld,%.17g,%.17g,%.17g,%.17g\n", (long long)step, (double)step * h->dt, l2,
              g->maxabs, g->sum * h->cell_volume) < 0 ||
      fflush(h->f) != 0) {
    h->failed = 1;
    h->err = errno;
  }
}

int history_close(struct history *h)
{
  if (!h)
    return STENCIL_OK;
  int status = STENCIL_OK;
  if (h->f && (fclose(h->f) != 0 || h->failed)) {
    log_error("cannot write %s: %s", h->path, strerror(h->failed ? h->err : errno));
    status = STENCIL_ERR;
  }
  free(h);
  return status;
}
