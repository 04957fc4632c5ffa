#!/usr/bin/env bash
# CPU backend benchmark: 3D 7-point 256^3 fp64, beside a STREAM-like triad measured
# in the same run (--peak-bandwidth measure). Usage: tools/cpu-bench.sh [BUILD_DIR] [RANKS]
set -euo pipefail
build=${1:-build}
ranks=${2:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/inputs/stencil-input" -o "$work/b.h5" --shape 256x256x256 --steps 100 \
  --initial gaussian:1:128,128,128:20 >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=$(( $(nproc) / ranks ))
for rep in 1 2 3; do
  OMP_NUM_THREADS=$threads OMP_PROC_BIND=close mpirun --oversubscribe -n "$ranks" -x OMP_NUM_THREADS \
    -x OMP_PROC_BIND --bind-to none "$build/app/stencil" "$work/b.h5" --backend cpu \
    --output-dir "$work/out" --overwrite --peak-bandwidth measure --report-json "$work/r$rep.json" \
    | grep -E '^(peak|throughput)'
done
