#pragma once
/* Error handling (PETSc style): every function that can fail returns an int status,
 * 0 on success. CHECK(call) propagates a failure upward and records a traceback line;
 * the place that detects an error prints one message with FAIL()/log_error().
 * Only main() ends the program (MPI_Abort when ranks may disagree). The MPI part (CHECK_MPI,
 * status_agree) is common/error_mpi.h: the backends include no MPI. */
#include <stddef.h>

enum stencil_status {
  STENCIL_OK = 0,
  STENCIL_ERR = 1,         /* any runtime or input error */
  STENCIL_ERR_USAGE = 2,   /* bad command line */
  STENCIL_ERR_NUMERIC = 3, /* non-finite values found in the field */
  STENCIL_STOPPED = 4,     /* stopped early (signal or --walltime) after writing a checkpoint */
};

/* Record one traceback line (printed only when STENCIL_TRACEBACK=1). */
void error_trace(const char *file, int line, const char *func);

/* Print "stencil: error: ..." (prefixed with the rank when size > 1). */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The line log_error would print, into buf (truncated to len); returns its length. */
int log_error_text(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same as log_error, printed by rank 0 only: for errors every rank detects identically. */
void log_error0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warnings and informational output on rank 0 (info is silenced by --quiet). */
void log_warn0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_init(int rank, int size, int quiet);
/* While on, log_error prints without the rank prefix: for work one rank does on behalf of
 * all (reading the input), whose errors concern every rank. */
void log_set_shared(int on);
int log_rank(void);
int log_quiet(void);

#define CHECK(call)                                                                                \
  do {                                                                                             \
    int check_status_ = (call);                                                                    \
    if (check_status_ != STENCIL_OK) {                                                             \
      error_trace(__FILE__, __LINE__, __func__);                                                   \
      return check_status_;                                                                        \
    }                                                                                              \
  } while (0)

/* Detect an error at this place: print the message and return the status. */
#define FAIL(status, ...)                                                                          \
  do {                                                                                             \
    log_error(__VA_ARGS__);                                                                        \
    error_trace(__FILE__, __LINE__, __func__);                                                     \
    return (status);                                                                               \
  } while (0)

#define FAIL0(status, ...)                                                                         \
  do {                                                                                             \
    log_error0(__VA_ARGS__);                                                                       \
    error_trace(__FILE__, __LINE__, __func__);                                                     \
    return (status);                                                                               \
  } while (0)
