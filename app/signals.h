#pragma once
/* Shutdown requests by signal. SIGUSR1, SIGTERM and SIGINT only set a flag: the time loop
 * reads it (signals_pending) and the ranks agree on it with a non-blocking reduction, then
 * write a checkpoint and stop with exit status STENCIL_STOPPED (docs/user/output-format.md).
 * A second SIGTERM or SIGINT while the first is pending ends the process at once. */

/* Install the handlers (process-wide; call once per run). Not collective. */
int signals_install(void);

/* Put back the handlers that were there before signals_install. */
void signals_restore(void);

/* The number of the first shutdown signal received since signals_install, or 0. */
int signals_pending(void);

/* "SIGUSR1", "SIGTERM", "SIGINT" or "signal N". */
const char *signals_name(int sig);
