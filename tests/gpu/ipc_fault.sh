#!/bin/sh
# shellcheck disable=SC2086 # $options holds several words on purpose
# The ipc transport's set-up failing on one rank of two (the emulation's STENCIL_EMU_FAIL,
# kernels/cuda/emu/emu.h): the run must end with a non-zero status on every rank and a
# message naming the failed call, and not hang (a rank that left before the swap of handles
# would leave its neighbour waiting for them).
#   ipc_fault.sh STENCIL STENCIL_INPUT WORKDIR MPIEXEC...
set -u
stencil=$1 mkinput=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work"
"$mkinput" -o "$work/in.h5" --shape 40x30x20 --steps 4 --initial random:3 >/dev/null || exit 1
fails=0

# expect NAME FAIL MPIEXEC...: a run with STENCIL_EMU_FAIL=FAIL and stencil's $options; each of
# $patterns (separated by ';') must be in its output.
expect() {
  name=$1 fail=$2
  shift 2
  STENCIL_EMU_FAIL=$fail timeout 120 "$@" "$stencil" "$work/in.h5" --backend cuda \
    --allow-gpu-sharing --halo-transport ipc --output-dir "$work/out-$name" --overwrite \
    $options >"$work/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
    echo "FAIL $name: exit status $rc (0: the failure went unnoticed; 124: a hang)"
    fails=$((fails + 1))
  fi
  ifs=$IFS
  IFS=';'
  for p in $patterns; do
    if ! grep -q "$p" "$work/$name.log"; then
      echo "FAIL $name: no message matching '$p'"
      fails=$((fails + 1))
    fi
  done
  IFS=$ifs
  tail -4 "$work/$name.log"
}

# Before the swap (rank 0's handle of its fields, whose z faces go field to field; rank 1's
# of its receive buffers, the x faces packed), and after it (rank 1 opening rank 0's).
options=""
patterns="CUDA call cudaIpcGetMemHandle(&fields;neighbour rank 0 could not set up"
expect before cudaIpcGetMemHandle:0 "$@"
options="--dims 2x1x1"
patterns="CUDA call cudaIpcGetMemHandle(&out;neighbour rank 1 could not set up"
expect packed cudaIpcGetMemHandle:1 "$@"
options=""
patterns="CUDA call cudaIpcOpenMemHandle"
expect after cudaIpcOpenMemHandle:1 "$@"
[ $fails -eq 0 ] && echo "ipc_fault: all cases passed"
exit $fails
