#pragma once
/* A minimal harness for the C unit tests (one test program per .c file).
 *
 * EXPECT(cond, fmt, ...) records a failure with its file and line and carries on, so one run
 * lists every broken check; unit_finish() prints the tally and gives the exit status.
 * unit_capture_begin()/unit_capture_end() collect what the code under test prints on stderr,
 * so a test can check that an error message names the right key. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Counters of this test program (the file that includes this header is the whole program). */
static int unit_checks_ = 0;
static int unit_failures_ = 0;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    unit_checks_++;                                                                                \
    if (!(cond)) {                                                                                 \
      unit_failures_++;                                                                            \
      fprintf(stdout, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stdout, __VA_ARGS__);                                                                \
      fputc('\n', stdout);                                                                         \
      fflush(stdout);                                                                              \
    }                                                                                              \
  } while (0)

static inline int unit_finish(const char *name)
{
  printf("%s: %d checks, %d failed\n", name, unit_checks_, unit_failures_);
  fflush(stdout);
  return unit_failures_ ? 1 : 0;
}

/* stderr capture: fd 2 goes to a temporary file until unit_capture_end(). */
struct unit_capture {
  int saved_fd;
  FILE *tmp;
};

static inline void unit_capture_begin(struct unit_capture *c)
{
  fflush(stderr);
  c->tmp = tmpfile();
  c->saved_fd = dup(STDERR_FILENO);
  if (c->tmp && c->saved_fd >= 0)
    dup2(fileno(c->tmp), STDERR_FILENO);
}

/* Restore stderr and copy what was printed into buf (NUL-terminated, truncated to len). */
static inline void unit_capture_end(struct unit_capture *c, char *buf, size_t len)
{
  fflush(stderr);
  buf[0] = '\0';
  if (c->saved_fd >= 0) {
    dup2(c->saved_fd, STDERR_FILENO);
    close(c->saved_fd);
  }
  if (c->tmp) {
    rewind(c->tmp);
    size_t got = fread(buf, 1, len - 1, c->tmp);
    buf[got] = '\0';
    fclose(c->tmp);
  }
}
