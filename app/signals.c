#include "app/signals.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "common/error.h"

/* A signal handler cannot be handed a context, so the flag lives here, private to this
 * file; only the handler writes it. */
static volatile sig_atomic_t pending_signal = 0;

static const int handled[] = {SIGUSR1, SIGTERM, SIGINT};
#define NHANDLED ((int)(sizeof handled / sizeof handled[0]))
static struct sigaction previous[NHANDLED];
static int installed = 0;

static void on_signal(int sig)
{
  if (pending_signal != 0 && sig != SIGUSR1) {
    /* Asked twice: stop now, the way the default action would. Both calls are
     * async-signal-safe. */
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
