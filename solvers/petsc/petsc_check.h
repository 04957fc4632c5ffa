#pragma once
/* CHECK_PETSC: the project's error convention around PETSc calls. PETSc's own error
 * handler has already printed its traceback; this adds the call that failed and returns
 * STENCIL_ERR up the project's traceback. */
#include <petscsys.h>

#include "common/error.h"

#define CHECK_PETSC(call)                                                                          \
  do {                                                                                             \
    PetscErrorCode check_petsc_ = (call);                                                          \
    if (check_petsc_ != 0)                                                                         \
      FAIL(STENCIL_ERR, "PETSc call %s failed (error code %d)", #call, (int)check_petsc_);         \
  } while (0)
