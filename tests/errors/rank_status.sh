#!/bin/sh
# rank_status.sh DIR PROGRAM [ARGS...]: run PROGRAM as one MPI rank and record its exit status
# in DIR/status.<pid>, so a test sees the status of every rank, not only the one mpiexec
# reports. Open MPI's mpiexec terminates the other ranks as soon as one exits non-zero;
# errors_test.py turns that off for the run that checks every rank's status. A TERM that
# arrives anyway is reported on stderr. SIGUSR1 and SIGINT, which the launcher forwards to
# the whole rank (this shell too), are for the program: the shell outlives them. The status
# file appears whole or not at all (written aside, then renamed): a rank killed while writing
# it must not leave an empty file.
dir=$1
shift
trap 'echo "rank_status.sh: TERM while running $1" >&2' TERM
trap : USR1 INT
"$@"
rc=$?
echo "$rc" >"$dir/.status.$$" && mv "$dir/.status.$$" "$dir/status.$$"
exit "$rc"
