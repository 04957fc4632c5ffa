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

/* Append item to the comma-separated list buf; once it no longer fits, end the list with
 * "..." (*full then stays set). */
static void list_add(char *buf, size_t len, const char *item, int *full)
{
  const size_t used = strlen(buf);
  if (*full)
    return;
  if (used + strlen(item) + 6 >= len) {
    snprintf(buf + used, len - used, "%s...", used ? "," : "");
    *full = 1;
    return;
  }
  snprintf(buf + used, len - used, "%s%s", used ? "," : "", item);
}

/* Rank 0: the distinct names of the `count` entries of names (NAME_LEN bytes each), in order
 * of first appearance; with counts ("4 x NAME") when `counted`. */
static void distinct(const char *names, int count, int counted, char *out, size_t len)
{
  int full = 0;
  out[0] = 0;
  for (int i = 0; i < count; i++) {
    const char *name = names + (size_t)i * NAME_LEN;
    int seen = 0, n = 0;
    for (int j = 0; j < count && !seen; j++) {
      const int same = strcmp(names + (size_t)j * NAME_LEN, name) == 0;
      seen = same && j < i;
      n += same;
    }
    if (seen || !name[0])
      continue;
    char item[NAME_LEN + 16];
    if (counted)
      snprintf(item, sizeof item, "%d x %s", n, name);
    else
      snprintf(item, sizeof item, "%s", name);
    list_add(out, len, item, &full);
  }
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
