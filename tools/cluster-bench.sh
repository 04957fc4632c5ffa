#!/usr/bin/env bash
# Tier-3 cluster kernel on one GPU, in one call: bitwise checks, compute-sanitizer runs, the
# bug-injection demonstration and the benchmark; prints a short summary and table last.
#
#   tools/cluster-bench.sh [BIN_DIR] [SECONDS] [WHAT...]
#
# BIN_DIR   holds cluster_check and the bug-injection builds cluster_check_bug1 (every other
#           pipeline step skips its cluster barrier) and cluster_check_bug2 (a CTA reads its
#           neighbour's edge cells one pipeline step early); default build-cluster/bin.
#           Build them with: cmake --build BUILD --target cluster_check cluster_check_bug1
#           cluster_check_bug2 (CUDA builds only), then copy the three programs there.
# SECONDS   benchmark loop length of the headline variants (default 2; the others run a
#           quarter of it, at least 0.3 s).
# WHAT      any of: check sanitize bugs bench (default: all four).
# Every step has a time limit (timeout), so a hung kernel cannot hold the machine.
# Logs: $OUT if set (the device tool's output folder), else ./cluster-logs.
set -uo pipefail
bin=${1:-build-cluster/bin}
secs=${2:-2}
shift $(($# > 2 ? 2 : $#))
what=${*:-check sanitize bugs bench}
out=${OUT:-cluster-logs}
mkdir -p "$out"
summary=()
note() {
  summary+=("$*")
  echo "== $*"
}
has() { [[ " $what " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader 2>&1 | sed 's/^/gpu: /'

# Small cases for the sanitizers: ragged, every kind of face, clusters of 4, N % T != 0.
case3d=(--ndim 3 --n 37 21 13 --prec f32 --bc mixed --T 3 --cluster 2 2 --tile 8 4 --chunk 5
  --steps 7)
case2d=(--ndim 2 --n 301 17 --prec f64 --bc periodic --T 4 --cluster 4 --tile 32 --chunk 6
  --steps 9)

if has check; then
  STENCIL_CLUSTER_POISON=1 timeout 120 "$bin/cluster_check" check 300 2026 >"$out/check.log" 2>&1
  rc=$?
  note "check: $(grep -h 'fixed cases\|random cases' "$out/check.log" | tr '\n' ' ')-> \
$(tail -1 "$out/check.log") [exit $rc]"
fi

if has sanitize; then
  for tool in racecheck synccheck memcheck; do
    for c in 3d 2d; do
      if [ "$c" = 3d ]; then args=("${case3d[@]}"); else args=("${case2d[@]}"); fi
      log="$out/san-$tool-$c.log"
      timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/cluster_check" one "${args[@]}" \
        >"$log" 2>&1
      rc=$?
      note "$tool $c: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log" | tr '\n' ' ')\
$(grep -h '^one:' "$log") [exit $rc]"
    done
  done
fi

if has bugs; then
  for b in 1 2; do
    timeout 60 "$bin/cluster_check_bug$b" check 60 2026 >"$out/bug$b-check.log" 2>&1
    rc=$?
    note "bug $b check: $(grep -c '^FAIL' "$out/bug$b-check.log") failing cases, \
$(grep -c 'cells differ' "$out/bug$b-check.log") with differing cells: \
$(tail -1 "$out/bug$b-check.log") [exit $rc]"
    timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/cluster_check_bug$b" one \
      "${case3d[@]}" >"$out/bug$b-racecheck.log" 2>&1
    rc=$?
    note "bug $b racecheck 3d: $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' \
"$out/bug$b-racecheck.log" | tr '\n' ' ')$(grep -h '^one:' "$out/bug$b-racecheck.log") [exit $rc]"
  done
fi

if has bench; then
  timeout 420 "$bin/cluster_check" bench "$secs" >"$out/bench.log" 2>&1
  note "bench: exit $?"
fi

nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader \
  2>&1 | sed 's/^/gpu after: /'
echo
printf '%s\n' "${summary[@]}"
if has bench; then
  echo
  sed -n '/^problem /,$p' "$out/bench.log"
fi
