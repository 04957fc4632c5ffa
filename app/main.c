/* stencil: explicit stencil PDE solver over MPI ranks. See --help and README.md. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>

#include "app/options.h"
#include "app/run.h"
#include "common/error_mpi.h"
#include "common/watchdog.h"
#include "io/h5util.h"
#include "stencil_version.h"

static void print_version(void)
{
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0, major = 0, minor = 0;
  unsigned hmaj = 0, hmin = 0, hrel = 0;
  MPI_Get_library_version(mpi, &len);
  MPI_Get_version(&major, &minor);
  H5get_libversion(&hmaj, &hmin, &hrel);
  for (int i = 0; i < len; i++)
    if (mpi[i] == '\n')
      mpi[i] = ' ';
  printf("stencil %s\n", STENCIL_VERSION);
  printf("  MPI:        standard %d.%d, %.*s\n", major, minor, 120, mpi);
  printf("  HDF5:       %u.%u.%u (built with %s, parallel)\n", hmaj, hmin, hrel,
         STENCIL_HDF5_VERSION);
  printf("  CUDA:       %s\n", STENCIL_CUDA_CONFIG);
  printf("  PETSc:      %s\n", STENCIL_PETSC_CONFIG);
  printf("  OpenMP:     %s\n", STENCIL_OPENMP_CONFIG);
  printf("  build:      %s, %s\n", STENCIL_BUILD_TYPE, STENCIL_C_COMPILER);
}

/* --checkpoint-mode background writes checkpoints from a thread that makes MPI calls while
 * the main thread does: that needs MPI_THREAD_MULTIPLE, asked for only then. */
static int wants_thread_multiple(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--checkpoint-mode=background") == 0)
      return 1;
    if (strcmp(argv[i], "--checkpoint-mode") == 0 && i + 1 < argc &&
        strcmp(argv[i + 1], "background") == 0)
      return 1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  int provided = 0, rank = 0, size = 1;
  /* Open MPI 4.1's own MPI-IO component (OMPIO) can drop one rank's part of a collective
   * write now and then (3 ranks split along z, docs/user/output-format.md); ROMIO does not.
   * Prefer ROMIO unless the user chose a component. Other MPIs ignore the variable. */
  setenv("OMPI_MCA_io", "^ompio", 0);
  MPI_Init_thread(&argc, &argv,
                  wants_thread_multiple(argc, argv) ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED,
                  &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm work, agree;
  MPI_Comm_dup(MPI_COMM_WORLD, &work);
  MPI_Comm_dup(MPI_COMM_WORLD, &agree);
  log_init(rank, size, 0);
  h5_quiet();

  struct options opt;
  int status = options_parse(argc, argv, &opt);
  if (status == STENCIL_OK && (opt.help || opt.help_all || opt.help_markdown || opt.version)) {
    if (rank == 0 && opt.help_markdown)
      options_print_markdown();
    else if (rank == 0 && (opt.help || opt.help_all))
      options_print_help(opt.help_all);
    else if (rank == 0)
      print_version();
  } else if (status == STENCIL_OK) {
    log_init(rank, size, opt.quiet);
    watchdog_init(opt.io_timeout);
    status = run(work, &opt);
  }

  /* The final status on a communicator of its own, so that it cannot match a collective
   * another rank is still in; ranks that never arrive (stuck after another rank failed)
   * leave it incomplete: then abort. */
  int agreed = 0;
  status = status_agree_within(agree, status, &agreed);
  if (!agreed) {
    fprintf(stderr, "stencil: [rank %d] error: other ranks did not finish; aborting all ranks\n",
            rank);
    MPI_Abort(MPI_COMM_WORLD, status ? status : STENCIL_ERR);
  }
  if (h5_damaged()) {
    /* A file whose close failed would crash HDF5's clean-up (io/h5util.h): end without it.
     * The launcher sees a rank end without MPI_Finalize and ends the others. */
    fflush(stdout);
    fflush(stderr);
    _exit(status ? status : STENCIL_ERR);
  }
  H5close(); /* while MPI still works, not from MPI_Finalize's callbacks */
  MPI_Comm_free(&work);
  MPI_Comm_free(&agree);
  MPI_Finalize();
  return status;
}
