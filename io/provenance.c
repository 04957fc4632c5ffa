#include "io/provenance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error_mpi.h"
#include "io/h5util.h"
#include "stencil_version.h"

enum { NAME_LEN = 64 };

/* Rank 0: the distinct names of the `count` entries of names (NAME_LEN bytes each, "" for
 * none), in order of first appearance and comma-separated, with their counts ("4 x NAME")
 * when `counted`; the first MAX_DISTINCT of them, then "...". */
enum { MAX_DISTINCT = 64 };
static void distinct(const char *names, int count, int counted, char *out, size_t len)
{
  const char *name[MAX_DISTINCT];
  int n[MAX_DISTINCT], found = 0, more = 0;
  for (int i = 0; i < count; i++) {
    const char *x = names + (size_t)i * NAME_LEN;
    int k = 0;
    while (k < found && strcmp(name[k], x) != 0)
      k++;
    if (k < found)
      n[k]++;
    else if (found < MAX_DISTINCT && x[0])
      name[found] = x, n[found++] = 1;
    else
      more |= x[0] != 0;
  }
  out[0] = 0;
  for (int k = 0; k < found; k++) {
    const size_t used = strlen(out);
    if (used + NAME_LEN + 24 >= len) {
      more = 1;
      break;
    }
    if (counted)
      snprintf(out + used, len - used, "%s%d x %s", k ? "," : "", n[k], name[k]);
    else
      snprintf(out + used, len - used, "%s%s", k ? "," : "", name[k]);
  }
  if (more)
    snprintf(out + strlen(out), len - strlen(out), ",...");
}

int provenance_init(struct provenance *p, MPI_Comm comm, const char *backend, const char *kernel,
                    const char *gpu, const char *const *sets, int nsets)
{
  int rank = 0, size = 1;
  CHECK_MPI(MPI_Comm_rank(comm, &rank));
  CHECK_MPI(MPI_Comm_size(comm, &size));
  memset(p, 0, sizeof *p);
  char mine[2][NAME_LEN] = {{0}};
  if (gethostname(mine[0], NAME_LEN) != 0)
    snprintf(mine[0], NAME_LEN, "?");
  mine[0][NAME_LEN - 1] = 0;
  snprintf(mine[1], NAME_LEN, "%s", gpu ? gpu : "");
  char *all = rank == 0 ? malloc(sizeof mine * (size_t)size) : NULL;
  int status = rank == 0 && !all ? STENCIL_ERR : STENCIL_OK;
  CHECK(status_agree(comm, status));
  CHECK_MPI(MPI_Gather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, 0, comm));
  if (rank == 0) {
    /* hosts and GPU names apart: entries of NAME_LEN bytes each */
    char *names = malloc(sizeof mine * (size_t)size);
    if (names) {
      for (int k = 0; k < 2; k++) {
        for (int i = 0; i < size; i++)
          memcpy(names + (size_t)i * NAME_LEN, all + (size_t)(2 * i + k) * NAME_LEN, NAME_LEN);
        if (k == 0)
          distinct(names, size, 0, p->hosts, sizeof p->hosts);
        else
          distinct(names, size, 1, p->gpus, sizeof p->gpus);
      }
    }
    free(names);
    snprintf(p->backend, sizeof p->backend, "%s", backend);
    snprintf(p->kernel, sizeof p->kernel, "%s", kernel);
    for (int i = 0; i < nsets; i++) {
      const size_t used = strlen(p->overrides);
      snprintf(p->overrides + used, sizeof p->overrides - used, "%s%s", i ? " " : "", sets[i]);
    }
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    status = names ? STENCIL_OK : STENCIL_ERR;
  }
  free(all);
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  if (status)
    FAIL0(STENCIL_ERR, "out of host memory");
  CHECK_MPI(MPI_Bcast(p, (int)sizeof *p, MPI_BYTE, 0, comm));
  return STENCIL_OK;
}

int provenance_write(hid_t file, const struct provenance *p)
{
  CHECK(h5_write_string(file, "code_version", STENCIL_VERSION));
  CHECK(h5_write_string(file, "backend", p->backend));
  CHECK(h5_write_string(file, "kernel", p->kernel));
  CHECK(h5_write_string(file, "hosts", p->hosts));
  CHECK(h5_write_string(file, "gpus", p->gpus));
  CHECK(h5_write_string(file, "date", p->date));
  return h5_write_string(file, "overrides", p->overrides);
}
