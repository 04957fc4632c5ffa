#pragma once
/* The backend of a run, the device of each rank and its host threads. */
#include <mpi.h>

#include "app/options.h"
#include "kernels/backend.h"

/* The backend of this run and, for cuda, this rank's device: node-local rank modulo the
 * devices visible on the node. Refuses more ranks than GPUs on a node unless
 * --allow-gpu-sharing; auto falls back to cpu then, and when any rank sees no GPU. *shared:
 * cuda, and some node runs more ranks than it has GPUs (the same on every rank). Collective
 * over comm; every rank returns the same status. */
int devices_choose(MPI_Comm comm, const struct options *o, const struct backend_ops **ops,
                   int *device, int *shared);
/* Device backends: rank 0 prints one line per rank, its host and the backend's description.
 * Collective over comm. */
int devices_print(MPI_Comm comm, const struct backend_ops *ops, void *ctx);

/* OpenMP threads of this rank, set with omp_set_num_threads: OMP_NUM_THREADS when set;
 * otherwise the rank's share of the cores it may run on, the CPUs of its affinity mask divided
 * by the ranks of its node with the same mask, at least 1 (a rank bound to cores of its own
 * gets them all; ranks that are not bound share the node's). why: the rule's terms, for the
 * header. Collective over comm. */
int devices_threads(MPI_Comm comm, int *threads, char *why, size_t len);
