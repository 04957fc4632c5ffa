/* sched_getaffinity and CPU_COUNT (Linux). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "app/devices.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error_mpi.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef STENCIL_HAVE_CUDA
static void host_name(char *buf, size_t len)
{
  if (gethostname(buf, len) != 0)
    snprintf(buf, len, "?");
  buf[len - 1] = 0;
}
#endif

int devices_choose(MPI_Comm comm, const struct options *o, const struct backend_ops **ops,
                   int *device, int *shared)
{
  *ops = &backend_cpu;
  *device = 0;
  *shared = 0;
  if (o->backend == BACKEND_CPU)
    return STENCIL_OK;
#ifndef STENCIL_HAVE_CUDA
  if (o->backend == BACKEND_CUDA)
    FAIL0(STENCIL_ERR_USAGE, "--backend cuda: this build has no CUDA backend (configure where "
                             "nvcc is found, or with -DSTENCIL_ENABLE_CUDA=ON); use --backend cpu");
  (void)comm;
  return STENCIL_OK;
#else
  int count = 0, lrank = 0, lsize = 1;
  char why[256], host[128];
  host_name(host, sizeof host);
  CHECK(backend_cuda.devices(&count, why, sizeof why));
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  CHECK_MPI(MPI_Comm_rank(node, &lrank));
  CHECK_MPI(MPI_Comm_size(node, &lsize));
  CHECK_MPI(MPI_Comm_free(&node));
  const int none = count == 0, crowded = lsize > count && !o->allow_gpu_sharing;
  const int mine[3] = {none, crowded, lsize > count}; /* (anywhere: one reduction) */
  int any[3];
  CHECK_MPI(MPI_Allreduce(mine, any, 3, MPI_INT, MPI_MAX, comm));
  const int any_none = any[0], any_crowded = any[1], any_sharing = any[2];
  if (o->backend == BACKEND_AUTO && (any_none || any_crowded)) {
    log_info0("backend      auto: cpu (%s)\n",
              any_none ? "a rank sees no CUDA device" : "more ranks than GPUs on a node");
    return STENCIL_OK;
  }
  int status = STENCIL_OK;
  if (none) {
    if (lrank == 0)
      log_error("--backend cuda: no CUDA device is visible on host %s (%s)", host, why);
    status = STENCIL_ERR;
  } else if (crowded) {
    if (lrank == 0)
      log_error("--backend cuda: %d ranks run on host %s but it has %d GPU%s; start one rank "
                "per GPU, or pass --allow-gpu-sharing to let ranks share them",
                lsize, host, count, count > 1 ? "s" : "");
    status = STENCIL_ERR;
  }
  CHECK(status_agree(comm, status));
  *ops = &backend_cuda;
  *device = lrank % count;
  *shared = any_sharing;
  return STENCIL_OK;
#endif
}

int devices_print(MPI_Comm comm, const struct backend_ops *ops, void *ctx)
{
  if (!ops->caps.device_memory) /* (host backends: the ranks line of the header says it all) */
    return STENCIL_OK;
  enum { LINE = 1024 };
  char mine[LINE], host[64];
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "?");
  host[sizeof host - 1] = 0;
  char desc[LINE - 80]; /* leaves room for the host name */
  ops->describe(ctx, desc, sizeof desc);
  snprintf(mine, sizeof mine, "%s: %s", host, desc);
  int rank = 0, size = 1;
  CHECK_MPI(MPI_Comm_rank(comm, &rank));
  CHECK_MPI(MPI_Comm_size(comm, &size));
  char *all = rank == 0 ? malloc((size_t)LINE * (size_t)size) : NULL;
  if (rank == 0 && !all)
    FAIL(STENCIL_ERR, "out of host memory");
  CHECK_MPI(MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, comm));
  for (int i = 0; rank == 0 && i < size; i++)
    log_info0("device       rank %d -> %s\n", i, all + (size_t)LINE * (size_t)i);
  free(all);
  return STENCIL_OK;
}

int devices_threads(MPI_Comm comm, int *threads, char *why, size_t len)
{
  *threads = 1;
#ifndef _OPENMP
  snprintf(why, len, "built without OpenMP");
  (void)comm;
  return STENCIL_OK;
#else
  const char *env = getenv("OMP_NUM_THREADS");
  if (env && env[0]) {
    *threads = omp_get_max_threads();
    snprintf(why, len, "OMP_NUM_THREADS");
    return STENCIL_OK;
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int cpus = 0;
#ifdef __linux__
  if (sched_getaffinity(0, sizeof mask, &mask) == 0)
    cpus = CPU_COUNT(&mask);
#endif
  if (cpus < 1)
    cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  MPI_Comm node;
  int lsize = 1;
  CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_Comm_size(node, &lsize);
  cpu_set_t *all = malloc(sizeof mask * (size_t)lsize);
  int status = all ? STENCIL_OK : STENCIL_ERR;
  if (all && MPI_Allgather(&mask, (int)sizeof mask, MPI_BYTE, all, (int)sizeof mask, MPI_BYTE,
                           node) != MPI_SUCCESS)
    status = STENCIL_ERR;
  int same = 0;
  for (int i = 0; !status && i < lsize; i++)
    same += memcmp(&all[i], &mask, sizeof mask) == 0;
  free(all);
  MPI_Comm_free(&node);
  if (status)
    FAIL(STENCIL_ERR, "cannot compare the CPU affinity of the ranks of this node");
  *threads = cpus / same > 1 ? cpus / same : 1;
  if (same > 1)
    snprintf(why, len, "%d cores shared by %d ranks of the node", cpus, same);
  else
    snprintf(why, len, "%d core%s of its own", cpus, cpus > 1 ? "s" : "");
  omp_set_num_threads(*threads);
  *threads = omp_get_max_threads(); /* what the parallel regions now get */
  return STENCIL_OK;
#endif
}
