#pragma once
/* Small HDF5 helpers: typed attribute access with messages that name the file and key. */
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error_mpi.h"

/* Print the HDF5 error stack (once) and fail with a message naming the call. */
#define CHECK_HDF5(call, ...)                                                                      \
  do {                                                                                             \
    if ((call) < 0) {                                                                              \
      h5_print_stack();                                                                            \
      FAIL(STENCIL_ERR, __VA_ARGS__);                                                              \
    }                                                                                              \
  } while (0)

void h5_print_stack(void);
/* The system's reason for the failure now on HDF5's error stack (call right after the failed
 * HDF5 call): MPI-IO's error string or errno's text, "" when the stack names none. */
void h5_error_reason(char *buf, size_t len);

/* Silence HDF5's automatic error printing; errors are reported by the callers. */
void h5_quiet(void);

/* Does attribute `name` exist on loc? Returns 1, 0, or <0 on error. */
int h5_has_attr(hid_t loc, const char *name);

/* Readers: fail with "<file>: <key>: ..." when missing, of the wrong class, or of the
 * wrong size. Arrays accept between nmin and nmax elements; *count receives the number. */
int h5_read_string(hid_t loc, const char *name, char *buf, size_t len, const char *file,
                   const char *key);
int h5_read_int64s(hid_t loc, const char *name, int64_t *out, int nmin, int nmax, int *count,
                   const char *file, const char *key);
int h5_read_doubles(hid_t loc, const char *name, double *out, int nmin, int nmax, int *count,
                    const char *file, const char *key);

/* Writers (create or replace the attribute). */
int h5_write_string(hid_t loc, const char *name, const char *value);
int h5_write_int64s(hid_t loc, const char *name, const int64_t *v, int n);
int h5_write_doubles(hid_t loc, const char *name, const double *v, int n);

/* H5Fclose that remembers a failure. HDF5 1.10 keeps a file whose close failed (a write
 * refused by the file system) half destroyed in its tables, and its own clean-up (H5close,
 * or MPI_Finalize's callback) then crashes on it: after h5_damaged() says so, main ends the
 * process without either. */
int h5_close_file(hid_t file);
int h5_damaged(void);
