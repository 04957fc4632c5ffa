/* LD_PRELOAD interposer for the fault tests: one MPI_Waitall of one rank returns an error
 * after its messages have completed, as a failed transfer would. The rank leaves the loop with
 * that error while the other ranks go on to the next exchange and wait there for its messages.
 *
 *   FAILMPI_RANK   the rank whose call fails (OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID;
 *                  required: otherwise nothing fails)
 *   FAILMPI_AFTER  calls of MPI_Waitall that succeed before the one that fails (default 0)
 *
 * Through the MPI profiling interface (PMPI_Waitall does the work). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static long failmpi_left = -2; /* -2: not read yet; -1: never fail */

static void failmpi_init(void)
{
  const char *r = getenv("FAILMPI_RANK");
  const char *me = getenv("OMPI_COMM_WORLD_RANK");
  if (!me)
    me = getenv("PMI_RANK");
  if (!me)
    me = getenv("SLURM_PROCID");
  const char *a = getenv("FAILMPI_AFTER");
  failmpi_left = r && me && strcmp(r, me) == 0 ? (a ? atol(a) : 0) : -1;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
  if (failmpi_left == -2)
    failmpi_init();
  const int rc = PMPI_Waitall(count, reqs, statuses);
  if (rc != MPI_SUCCESS || failmpi_left < 0)
    return rc;
  return failmpi_left-- == 0 ? MPI_ERR_OTHER : rc;
}
