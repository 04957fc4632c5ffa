#pragma once
/* A bound on collective file I/O. A write that fails on one rank inside parallel HDF5 can
 * leave the ranks in different collective calls, each waiting for the others for ever. The
 * file writers arm the watchdog around such work; if it is still armed after the timeout
 * (--io-timeout), a thread of this process prints one message naming the work and ends the
 * process with STENCIL_ERR. The launcher then ends the other ranks (mpirun does at once; with
 * srun each rank stuck in the same write ends by its own watchdog). No MPI here. */

/* Set the timeout in seconds (0: never fire). Call once, before any arm; not thread-safe. */
void watchdog_init(double seconds);

/* Arm for `what` (a phrase such as "the write of out/final.h5"; copied). Returns a handle
 * for watchdog_disarm, or -1 when off. Thread-safe: the background checkpoint writer and
 * the main thread may each hold one. */
int watchdog_arm(const char *what);

/* Disarm what watchdog_arm returned (-1: nothing). */
void watchdog_disarm(int handle);
