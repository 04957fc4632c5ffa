#pragma once
#include <mpi.h>

#include "app/options.h"

/* One whole run: input, decomposition, time loop, output, report. Collective over comm;
 * every rank returns the same status. */
int run(MPI_Comm comm, const struct options *o);
