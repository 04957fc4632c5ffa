#!/bin/sh
# planted_run.sh STENCIL PLANTED STENCIL_INPUT H5SAME WORKDIR INPUT-OPTIONS...
# The input that `stencil-input INPUT-OPTIONS` writes runs on --backend cpu, then on --backend
# cuda --kernel 2 with STENCIL, whose final field must equal the CPU's and whose header must
# name tier 2 of radius 2 to 4, then with PLANTED, the same program built with one planted bug
# in the backend, whose final field must not (or whose run must fail). Prints PASS when the
# comparison catches the bug, FAIL (exit 1) otherwise.
set -u
stencil=$1 planted=$2 mkinput=$3 h5same=$4 work=$5
shift 5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() {
  echo "FAIL: $1"
  [ -f "${2:-}" ] && tail -n 20 "$2"
  exit 1
}
"$mkinput" -o in.h5 "$@" >log-input 2>&1 || fail "stencil-input $*" log-input
"$stencil" in.h5 --backend cpu --progress 0 --output-dir cpu >log-cpu 2>&1 || fail "the cpu run" log-cpu
"$stencil" in.h5 --backend cuda --kernel 2 --progress 0 --output-dir cuda >log-cuda 2>&1 ||
  fail "the cuda run" log-cuda
grep -q "kernel tier 2 (radius [234]:" log-cuda || fail "the header does not name tier 2 of radius 2 to 4" log-cuda
"$h5same" cpu/final.h5 cuda/final.h5 || fail "the unplanted build differs from the cpu backend"
if "$planted" in.h5 --backend cuda --kernel 2 --progress 0 --output-dir planted >log-planted 2>&1; then
  if "$h5same" cpu/final.h5 planted/final.h5 >/dev/null; then
    fail "the planted bug went unseen: its final field equals the cpu backend's"
  fi
  echo "PASS: the planted build's final field differs from the cpu backend's"
else
  echo "PASS: the planted build's run failed"
  tail -n 3 log-planted
fi
