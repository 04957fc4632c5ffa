#include "app/signals.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

/* A signal handler cannot be handed a context, so the flag lives here, private to this
 * file; only the handler writes it. */
static volatile sig_atomic_t pending_signal = 0;

static const int handled[] = {SIGUSR1, SIGTERM, SIGINT};
#define NHANDLED ((int)(sizeof handled / sizeof handled[0]))
static struct sigaction previous[NHANDLED];
static int installed = 0;

/* What a second SIGTERM or SIGINT prints (formatted at install: the handler may only call
 * async-signal-safe functions). */
static char second_text[2][256];
static int second_len[2];

static void on_signal(int sig)
{
  if (pending_signal != 0 && sig != SIGUSR1) {
    /* Asked twice: say so, then stop now, the way the default action would. write, signal and
     * raise are async-signal-safe. */
    const int i = sig == SIGINT;
    const ssize_t n = write(STDERR_FILENO, second_text[i], (size_t)second_len[i]);
    (void)n; /* a closed stderr changes nothing */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (pending_signal == 0)
    pending_signal = sig;
}

int signals_install(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  pending_signal = 0;
  for (int i = 0; i < 2; i++)
    second_len[i] =
        log_error_text(second_text[i], sizeof second_text[i],
                       "a second %s: ending at once, without the checkpoint (one being written "
                       "stays a .partial, which no restart reads)",
                       signals_name(i ? SIGINT : SIGTERM));
  for (int i = 0; i < NHANDLED; i++)
    if (sigaction(handled[i], &sa, &previous[i]) != 0)
      FAIL(STENCIL_ERR, "cannot install the handler for %s: %s", signals_name(handled[i]),
           strerror(errno));
  installed = 1;
  return STENCIL_OK;
}

void signals_restore(void)
{
  if (!installed)
    return;
  for (int i = 0; i < NHANDLED; i++)
    sigaction(handled[i], &previous[i], NULL);
  installed = 0;
}

int signals_pending(void)
{
  return (int)pending_signal;
}

const char *signals_name(int sig)
{
  switch (sig) {
  case SIGUSR1: return "SIGUSR1";
  case SIGTERM: return "SIGTERM";
  case SIGINT: return "SIGINT";
  default: return "a signal";
  }
}
