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
 * Collective over comm. Use after steps where one rank alone may fail. */
int status_agree(MPI_Comm comm, int status);
