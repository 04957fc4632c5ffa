#!/bin/sh
# shellcheck disable=SC2086 # $args holds several words on purpose
# The nccl transport's set-up failing on one rank of two (rank 1 started with an
# NCCL_SOCKET_IFNAME that names no interface, so its ncclCommInitRankConfig fails): every rank
# must exit non-zero with a message, and rank 0 must not wait in NCCL's set-up for rank 1.
#   nccl_fault.sh PROBE STENCIL STENCIL_INPUT WORKDIR MPIEXEC_FOR_1_RANK...
# The two programs are joined by mpiexec's ':' (MPMD), so MPIEXEC must be mpiexec / mpirun.
# Exit 77 without a GPU (unless STENCIL_REQUIRE_GPU=1), or where NCCL cannot be loaded.
set -u
probe=$1 stencil=$2 mkinput=$3 work=$4
shift 4
"$probe" --probe
rc=$?
[ $rc -eq 0 ] || exit $rc
rm -rf "$work"
mkdir -p "$work"
"$mkinput" -o "$work/in.h5" --shape 40x30x20 --steps 4 --initial random:3 >/dev/null || exit 1
args="$work/in.h5 --backend cuda --allow-gpu-sharing --halo-transport nccl --output-dir $work/out"
# two programs of one rank each (MPMD): rank 1's environment differs
timeout 120 "$@" "$stencil" $args : -n 1 env NCCL_SOCKET_IFNAME=stencil-no-such-if \
  "$stencil" $args >"$work/run.log" 2>&1
rc=$?
tail -6 "$work/run.log"
if grep -Eq "cannot load libnccl|libnccl.so.2 has no |no NCCL support" "$work/run.log"; then
  echo "nccl_fault: skipped (NCCL cannot be used here)"
  exit 77
fi
fails=0
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
  echo "FAIL: exit status $rc (0: the failure went unnoticed; 124: a hang)"
  fails=$((fails + 1))
fi
for p in "ncclCommInitRankConfig failed on this rank" \
  "rank 1 could not set up its NCCL communicator"; do
  if ! grep -q "$p" "$work/run.log"; then
    echo "FAIL: no message matching '$p'"
    fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ] && echo "nccl_fault: passed"
exit $fails
