#include "common/watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"

#define SLOTS 4

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* on CLOCK_MONOTONIC */
  double timeout;
  int started;
  struct slot {
    int armed;
    struct timespec deadline;
    char what[256];
  } slot[SLOTS];
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int before(const struct timespec *a, const struct timespec *b)
{
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Sleeps until the earliest deadline of an armed slot (or until a slot changes); ends the
 * process when one passes while still armed. */
static void *watch(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&wd.lock);
  for (;;) {
    const struct slot *first = NULL;
    for (int i = 0; i < SLOTS; i++)
      if (wd.slot[i].armed && (!first || before(&wd.slot[i].deadline, &first->deadline)))
        first = &wd.slot[i];
    if (!first) {
      pthread_cond_wait(&wd.changed, &wd.lock);
      continue;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!before(&now, &first->deadline)) {
      log_error("%s has not finished within %g s (--io-timeout): the ranks are stuck in it "
                "(a write failed on one of them, or the file system stalled); ending this rank",
                first->what, wd.timeout);
      fflush(stderr);
      fflush(stdout);
      _exit(STENCIL_ERR);
    }
    pthread_cond_timedwait(&wd.changed, &wd.lock, &first->deadline);
  }
  return NULL;
}

void watchdog_init(double seconds)
{
  wd.timeout = seconds > 0 ? seconds : 0;
}

int watchdog_arm(const char *what)
{
  if (wd.timeout <= 0)
    return -1;
  pthread_mutex_lock(&wd.lock);
  if (!wd.started) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd.changed, &ca);
    pthread_condattr_destroy(&ca);
    pthread_t t;
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    wd.started = pthread_create(&t, &ta, watch, NULL) == 0;
    pthread_attr_destroy(&ta);
  }
  int h = -1;
  for (int i = 0; i < SLOTS && h < 0; i++)
    if (!wd.slot[i].armed)
      h = i;
  if (h >= 0 && wd.started) {
    struct slot *s = &wd.slot[h];
    clock_gettime(CLOCK_MONOTONIC, &s->deadline);
    const double t = (double)s->deadline.tv_sec + 1e-9 * (double)s->deadline.tv_nsec + wd.timeout;
    s->deadline.tv_sec = (time_t)t;
    s->deadline.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    snprintf(s->what, sizeof s->what, "%s", what);
    s->armed = 1;
    pthread_cond_signal(&wd.changed);
  } else {
    h = -1;
  }
  pthread_mutex_unlock(&wd.lock);
  return h;
}

void watchdog_disarm(int handle)
{
  if (handle < 0 || handle >= SLOTS)
    return;
  pthread_mutex_lock(&wd.lock);
  wd.slot[handle].armed = 0;
  pthread_cond_signal(&wd.changed);
  pthread_mutex_unlock(&wd.lock);
}
