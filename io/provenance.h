#pragma once
/* Where and how a run made its files: the program's version, the backend, the stepping that
 * ran, the nodes, the GPUs and the date. Written as root attributes of every field file
 * (docs/user/output-format.md) and into the JSON report. */
#include <hdf5.h>
#include <mpi.h>

struct provenance {
  char backend[16];     /* "cpu", "cuda" or "petsc" */
  char kernel[256];     /* the stepping that runs (the header's kernel line) */
  char hosts[512];      /* the nodes in rank order, each once, comma-separated; "..." ends a
                           list longer than fits */
  char gpus[256];       /* "N x NAME" per GPU model, comma-separated; "" without GPUs */
  char date[32];        /* the run's start in UTC, ISO 8601 (2025-01-31T12:00:00Z) */
  char overrides[1024]; /* the command line's --set KEY=VALUE, space-separated; "" if none */
};

/* Fill p on every rank with the same bytes: gpu is this rank's GPU name (NULL: none), sets
 * the nsets --set overrides. Collective over comm. */
int provenance_init(struct provenance *p, MPI_Comm comm, const char *backend, const char *kernel,
                    const char *gpu, const char *const *sets, int nsets);

/* The root attributes code_version, backend, kernel, hosts, gpus, date and overrides of a
 * field file. */
int provenance_write(hid_t file, const struct provenance *p);
