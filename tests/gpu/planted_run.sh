#!/bin/sh
# planted_run.sh STENCIL PLANTED STENCIL_INPUT H5SAME WORKDIR HEADER INPUT-OPTIONS...
# The input that `stencil-input INPUT-OPTIONS` writes runs on --backend cpu, then as
# `$PLANTED_LAUNCH STENCIL --backend cuda $PLANTED_OPTIONS` (default: no launcher, --kernel 2),
# whose final field must equal the CPU's and whose header must match HEADER (a grep pattern),
# then the same with PLANTED, the program built with one planted bug, whose final field must
# not (or whose run must fail). Prints PASS when the comparison catches the bug, FAIL (exit 1)
# otherwise.
set -u
stencil=$1 planted=$2 mkinput=$3 h5same=$4 work=$5 header=$6
shift 6
launch=${PLANTED_LAUNCH:-}
options=${PLANTED_OPTIONS:---kernel 2}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() {
  echo "FAIL: $1"
  [ -f "${2:-}" ] && tail -n 20 "$2"
  exit 1
}
# run PROGRAM NAME: the cuda run of PROGRAM into NAME/, its log log-NAME.
run() {
  # shellcheck disable=SC2086 # the launcher and the options are words
  $launch "$1" in.h5 --backend cuda $options --progress 0 --output-dir "$2" >"log-$2" 2>&1 </dev/null
}
"$mkinput" -o in.h5 "$@" >log-input 2>&1 || fail "stencil-input $*" log-input
"$stencil" in.h5 --backend cpu --progress 0 --output-dir cpu >log-cpu 2>&1 || fail "the cpu run" log-cpu
run "$stencil" cuda || fail "the cuda run" log-cuda
grep -q -- "$header" log-cuda || fail "the header does not say \"$header\"" log-cuda
"$h5same" cpu/final.h5 cuda/final.h5 || fail "the unplanted build differs from the cpu backend"
if run "$planted" planted; then
  if "$h5same" cpu/final.h5 planted/final.h5 >/dev/null; then
    fail "the planted bug went unseen: its final field equals the cpu backend's"
  fi
  echo "PASS: the planted build's final field differs from the cpu backend's"
else
  echo "PASS: the planted build's run failed"
  tail -n 3 log-planted
fi
