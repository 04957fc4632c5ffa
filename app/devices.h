#pragma once
/* The backend of a run and the device of each rank. */
#include <mpi.h>

#include "app/options.h"
#include "kernels/backend.h"

/* The backend of this run and, for cuda, this rank's device: node-local rank modulo the
 * devices visible on the node. Refuses more ranks than GPUs on a node unless
 * --allow-gpu-sharing; auto falls back to cpu then, and when any rank sees no GPU.
 * Collective over comm; every rank returns the same status. */
int devices_choose(MPI_Comm comm, const struct options *o, const struct backend_ops **ops,
                   int *device);
/* Device backends: rank 0 prints one line per rank, its host and the backend's description.
 * Collective over comm. */
int devices_print(MPI_Comm comm, const struct backend_ops *ops, void *ctx);
