#pragma once
/* Error handling for MPI calls (common/error.h for the rest). */
#include <mpi.h>

#include "common/error.h"

#define CHECK_MPI(call)                                                                            \
  do {                                                                                             \
    int check_mpi_ = (call);                                                                       \
    if (check_mpi_ != MPI_SUCCESS) {                                                               \
      char check_mpi_msg_[MPI_MAX_ERROR_STRING];                                                   \
      int check_mpi_len_ = 0;                                                                      \
      MPI_Error_string(check_mpi_, check_mpi_msg_, &check_mpi_len_);                               \
      FAIL(STENCIL_ERR, "MPI call %s failed: %s", #call, check_mpi_msg_);                          \
    }                                                                                              \
  } while (0)

/* Make every rank agree on a status: returns the largest status of any rank.
 * Collective over comm. Use after steps where one rank alone may fail. A rank whose own
 * status is an error waits for the others at most as status_agree_within does (they may be
 * stuck in a collective or a message it will never join), then returns its own status; main
 * then ends the job. */
int status_agree(MPI_Comm comm, int status);

/* The agreement of status_agree (a nonblocking reduction: every agreement on comm is one),
 * waiting at most STENCIL_ABORT_TIMEOUT seconds (default 30) for the other ranks: *agreed = 1
 * and the largest status where they all arrived, else *agreed = 0 and status (at once once an
 * earlier agreement was left incomplete). */
int status_agree_within(MPI_Comm comm, int status, int *agreed);
