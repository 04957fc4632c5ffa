#!/bin/sh
# shellcheck disable=SC2086 # $mpirun is a command with options: word splitting is meant
# GPU checks and benchmarks in one go, on a machine with NVIDIA GPUs; a table of results is
# printed last.
#
#   tools/gpu-check.sh quick       the gpu test label (STENCIL_REQUIRE_GPU=1, a few at a time),
#                                  then what `sanitize` runs
#   tools/gpu-check.sh sanitize    compute-sanitizer memcheck, racecheck and synccheck on small
#                                  runs of the fused kernels (3D and 2D, every face kind, sources
#                                  read through the faces and applied with them, Poisson with
#                                  residual launches, radius 2 and 4) and of tier 2,
#                                  and the error paths (no GPU, out of device memory, an MPI that
#                                  is not CUDA-aware, ranks sharing a GPU; no kernel image with an
#                                  sm_100-only build)
#   tools/gpu-check.sh sweep       the sweep label (every case of the fused kernels' comparison)
#   tools/gpu-check.sh bench       the benchmarks of docs/benchmarks.md on one GPU (loops of about
#                                  2 s or more); BASELINE=another stencil program: its runs
#                                  alternate with this build's (but for the cases marked
#                                  nobase, where it would take minutes) and the final fields
#                                  must be equal bit for bit; BENCH_CASES=REGEX chooses cases
#   tools/gpu-check.sh study       the scaling studies (jobscripts/weak-scaling.sh, 512^3 per GPU,
#                                  and strong-scaling.sh, 1024^3) on 1, 2, 4, 8 GPUs of the
#                                  machine, fp32 and fp64, --overlap on and off, through mpirun
#                                  as users run them off Slurm; slabs along z and (more than 2
#                                  GPUs) balanced rank grids; the strong study fails a run
#                                  whose final field is not the one-GPU run's (STUDY_RANKS,
#                                  STUDY_KINDS, STUDY_GRIDS, STUDY_PRECISIONS, STUDY_OVERLAP,
#                                  STUDY_TRANSPORTS choose; STUDY_NCCL_P2P=off runs NCCL with
#                                  NCCL_P2P_DISABLE=1, the host-staged path NCCL takes between
#                                  nodes); the CSVs in the logs (jobscripts/plot_scaling.py)
#   tools/gpu-check.sh checkpoint  tests/restart/bench_checkpoint.sh (512^3 fp64, sync and
#                                  background, against dd + fsync on the same disk)
#   tools/gpu-check.sh overlap     two ranks sharing one GPU (--allow-gpu-sharing; with two or
#                                  more GPUs they take one each), 512^3 fp32 split along x, y
#                                  and z, --overlap on and off: the rate and the report's
#                                  overlap line (the share of the exchange hidden, on the
#                                  device's clock); the final fields bit for bit equal
#                                  (OVERLAP_TRANSPORTS: the --halo-transport values to run,
#                                  default auto)
#
# Run from the repository root after building (BUILD, default build-gpu). Logs and JSON
# reports go to $OUT/logs.tgz (default OUT ./gpu-check-out). An optional sm_100-only build
# (SM100, default build-gpu-sm100/app/stencil) is used for the "no kernel image" check. Exit
# status: the number of failed checks (0 = all good).
set -u
mode=${1:-quick}
build=${BUILD:-build-gpu}
sm100=${SM100:-build-gpu-sm100/app/stencil}
top=${OUT:-gpu-check-out}
out=$top/logs
scratch=${SCRATCH:-/dev/shm/stencil-gpu-check}
mkdir -p "$out" "$scratch"
stencil=$build/app/stencil
mkinput=$build/inputs/stencil-input
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 # keep NVLink multicast off (shared hosts)
mpirun="mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH"
fails=0
table=$top/table.txt
: >"$table"

note() { echo "== $*"; }
fail() {
  echo "CHECK FAILED: $*"
  echo "FAILED  $*" >>"$table"
  fails=$((fails + 1))
}
pass() { echo "ok      $*" >>"$table"; }

# expect_error NAME PATTERN COMMAND...: the command must exit non-zero and print PATTERN.
expect_error() {
  name=$1 pattern=$2
  shift 2
  "$@" >"$out/err-$name.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && grep -q "$pattern" "$out/err-$name.log"; then
    pass "error $name (exit $rc): $(grep -m1 "$pattern" "$out/err-$name.log" | cut -c1-150)"
  else
    fail "error $name: exit $rc, expected a message matching '$pattern'"
    tail -5 "$out/err-$name.log"
  fi
}

# sanitize SECONDS TOOL INPUT LABEL ARGS...: compute-sanitizer TOOL on one stencil run of
# INPUT (in $scratch) with ARGS, at most SECONDS; the tool's summary line goes into the table.
sanitize() {
  secs=$1 tool=$2 f=$3 label=$4
  shift 4
  log="$out/$tool-$f-$(echo "$label" | tr ' ' _).log"
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -n "$cs" ] && timeout "$secs" "$cs" --tool "$tool" --error-exitcode 9 "$stencil" \
    "$scratch/$f.h5" --backend cuda "$@" --output-dir "$scratch/out-cs" --overwrite \
    >"$log" 2>&1; then
    pass "$tool $f $label: $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log")"
  else
    fail "$tool $f $label (see $(basename "$log"))"
    tail -5 "$log"
  fi
}

# bitwise NAME FILE REFNAME REF: FILE must hold REF's fields bit for bit (h5same).
bitwise() {
  if "$build/tests/gpu/h5same" "$4" "$2" >"$out/same.log" 2>&1; then
    pass "bitwise: $1 equals $3"
  else
    fail "bitwise: $1 differs from $3: $(head -c 200 "$out/same.log")"
  fi
}

# bench NAME NP INPUT ARGS...: one run of $stencil with a JSON report; adds a table row. The
# output directory is removed unless bench_keep is set. (Its variables are prefixed: sh has
# no locals, and the caller's loop uses name; mpirun would read the loop's input.)
bench() {
  b_name=$1 b_np=$2 b_in=$3
  shift 3
  json=$out/$b_name.json
  if $mpirun -n "$b_np" "$stencil" "$b_in" --output-dir "$scratch/out-$b_name" --overwrite \
    --report-json "$json" --progress 0 "$@" </dev/null >"$out/$b_name.log" 2>&1; then
    python3 - "$json" "$b_name" "$b_np" "$*" >>"$table" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peak = r.get("peak_bandwidth_gb_per_second", 0) or 0
bw = r["bandwidth_gb_per_second"]
of_peak = " (%.1f%% of %.1f)" % (100.0 * bw / peak, peak) if peak else ""
print("%-26s np=%s %9.2f Gpts/s %8.1f GB/s%s  loop %6.3f s  steps %d  %s"
      % (sys.argv[2], sys.argv[3], r["gpts_per_second"], bw, of_peak, r["loop_seconds"],
         r["steps"] - r["first_step"], sys.argv[4]))
PY
    kern=$(sed -n 's/^device .*rank 0 .*kernel \(.*\), PDL.*/\1/p' "$out/$b_name.log" | head -1)
    [ -n "$kern" ] && echo "    kernel: $kern" >>"$table"
    [ -n "${bench_keep:-}" ] || rm -rf "$scratch/out-$b_name"
  else
    fail "bench $b_name: the run failed (see $out/$b_name.log)"
    tail -5 "$out/$b_name.log"
  fi
}

# ctest_label LABEL SECONDS JOBS: one ctest label of the build, JOBS at a time, time-capped;
# one table row per test.
ctest_label() {
  note "ctest -L $1 ($3 at a time, at most $2 s)"
  if STENCIL_REQUIRE_GPU=1 timeout "$2" ctest --test-dir "$build/tests/gpu" -L "$1" -j"$3" \
    --timeout $(($2 - 10)) --output-on-failure >"$out/ctest-$1.log" 2>&1; then
    pass "ctest -L $1: $(grep 'tests passed' "$out/ctest-$1.log")"
  else
    fail "ctest -L $1 (exit $?, 124 = out of time): $(grep 'tests passed' "$out/ctest-$1.log")"
    grep -E "FAIL|Failed|differs|first difference" "$out/ctest-$1.log" | head -20
  fi
  grep -E "Test +#[0-9]+: " "$out/ctest-$1.log" |
    sed -e 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: /    ctest /' -e 's/ \.\.* */ /' -e 's/  */ /g' \
      >>"$table"
}

input() { # FILE stencil-input options...
  f=$1
  shift
  [ -f "$f" ] || "$mkinput" -o "$f" "$@" </dev/null >/dev/null || fail "stencil-input $f"
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >>"$out/nvidia-smi.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
note "$ngpu GPU(s); $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | head -1)"

case "$mode" in
quick | sanitize)
  t0=$(date +%s)
  [ "$mode" = sanitize ] || ctest_label gpu 300 4
  note "compute-sanitizer on small runs"
  input "$scratch/s3.h5" --shape 45x37x29 --steps 9 --initial random:3 --bc x=periodic
  input "$scratch/s2.h5" --shape 301x67x1 --steps 9 --precision fp32 --initial random:4 \
    --bc y=neumann --source random:5
  input "$scratch/sp.h5" --equation poisson --shape 200x90x1 --steps 20 --precision fp32 \
    --source random:3 --bc x=periodic --bc y=dirichlet:0 --tolerance 0
  input "$scratch/s3h.h5" --shape 45x37x29 --steps 9 --initial random:6 --bc x_lo=dirichlet:1 \
    --bc z=neumann
  input "$scratch/s3p.h5" --equation poisson --shape 40x33x27 --steps 12 --precision fp32 \
    --source random:7 --bc y=periodic --tolerance 0
  input "$scratch/s3q.h5" --equation poisson --shape 40x33x27 --steps 12 --source random:15 \
    --bc x=neumann --tolerance 0
  input "$scratch/s3s.h5" --shape 45x37x29 --steps 9 --initial random:11 --source random:12 \
    --bc x_lo=dirichlet:1 --bc y_hi=dirichlet:-0.5 --bc z=neumann
  input "$scratch/s3o4.h5" --order 4 --shape 45x37x29 --steps 6 --initial random:8 --bc x=periodic
  input "$scratch/s3o8.h5" --order 8 --shape 150x37x19 --steps 3 --initial random:13 \
    --source random:14 --bc x_lo=dirichlet:1 --bc y=neumann
  input "$scratch/s2o8.h5" --order 8 --shape 301x67x1 --steps 6 --initial random:9 \
    --source random:10 --bc y_lo=dirichlet:1
  for tool in memcheck racecheck synccheck; do
    sanitize 120 "$tool" s3 "fused" --kernel 3
    sanitize 120 "$tool" s2 "fused" --kernel 3
    sanitize 120 "$tool" sp "fused residuals" --kernel 3 --residual-every 1
    sanitize 120 "$tool" s3h "fused faces" --kernel 3
    sanitize 120 "$tool" s3p "fused source read through residuals" --kernel 3 --residual-every 1
    sanitize 120 "$tool" s3q "fused source read through fp64 residuals" --kernel 3 \
      --residual-every 5
    sanitize 120 "$tool" s3s "fused faces source" --kernel 3
    sanitize 120 "$tool" s3o4 "fused radius 2" --kernel 3
    sanitize 120 "$tool" s2o8 "fused radius 4" --kernel 3
    sanitize 120 "$tool" s3 "tier 2" --kernel 2
    sanitize 120 "$tool" s3o4 "tier 2 radius 2" --kernel 2
    sanitize 120 "$tool" s3o8 "tier 2 radius 4 faces source" --kernel 2
  done
  note "error paths"
  expect_error no-gpu "no CUDA device is visible" env CUDA_VISIBLE_DEVICES= "$stencil" \
    "$scratch/s3.h5" --backend cuda --output-dir "$scratch/e1" --overwrite
  input "$scratch/huge.h5" --shape 8192x8192x4096 --steps 1
  expect_error out-of-memory "out of device memory" "$stencil" "$scratch/huge.h5" --backend cuda \
    --output-dir "$scratch/e2" --overwrite
  if [ -x "$sm100" ]; then
    expect_error no-kernel-image "has no GPU code for device" "$sm100" "$scratch/s3.h5" \
      --backend cuda --output-dir "$scratch/e3" --overwrite
  fi
  expect_error mpi-device "not CUDA-aware" $mpirun -n 2 "$stencil" "$scratch/s3.h5" \
    --backend cuda --allow-gpu-sharing --halo-transport mpi-device --output-dir "$scratch/e4" \
    --overwrite
  if [ "$ngpu" -eq 1 ]; then
    expect_error sharing "allow-gpu-sharing" $mpirun -n 2 "$stencil" "$scratch/s3.h5" \
      --backend cuda --output-dir "$scratch/e5" --overwrite
  fi
  echo "$mode check took $(($(date +%s) - t0)) s" >>"$table"
  ;;
sweep)
  ctest_label sweep 580 4
  ;;
bench)
  # name | stencil-input options | steps | stencil options | nobase (np2-*: two ranks on one
  # GPU)
  while IFS='|' read -r name mk steps opts nobase; do
    [ -n "$name" ] || continue
    [ -z "${BENCH_CASES:-}" ] || echo "$name" | grep -Eq "^($BENCH_CASES)\$" || continue
    # shellcheck disable=SC2086
    input "$scratch/$name.h5" $mk --steps "$steps"
    np=1
    case $name in np2-*) np=2 ;; esac
    base=${BASELINE:-}
    [ -z "$nobase" ] || base=""
    for rep in 1 2; do
      if [ -n "$base" ]; then
        own=$stencil stencil=$BASELINE bench_keep=1
        # shellcheck disable=SC2086
        bench "$name-base-$rep" $np "$scratch/$name.h5" --backend cuda $opts
        stencil=$own
      fi
      bench_keep=${base:+1}
      # shellcheck disable=SC2086
      bench "$name-$rep" $np "$scratch/$name.h5" --backend cuda $opts
    done
    if [ -n "$base" ]; then
      for f in "$scratch/out-$name-base-1"/*.h5; do
        bitwise "$name" "$scratch/out-$name-1/${f##*/}" "the baseline" "$f"
      done
      rm -rf "$scratch/out-$name"-*
    fi
  done <<'CASES'
3d-fp32|--shape 512x512x512 --precision fp32|18000||
3d-fp64|--shape 512x512x512 --precision fp64|9000||
3d-fp32-hot|--shape 512x512x512 --precision fp32 --bc x_lo=dirichlet:1|16000||nobase
3d-fp32-hot-tier2|--shape 512x512x512 --precision fp32 --bc x_lo=dirichlet:1|6000|--kernel 2|nobase
3d-fp64-hot|--shape 512x512x512 --precision fp64 --bc x_lo=dirichlet:1|8000||nobase
3d-fp64-hot-tier2|--shape 512x512x512 --precision fp64 --bc x_lo=dirichlet:1|3000|--kernel 2|nobase
3d-fp32-src|--shape 512x512x512 --precision fp32 --source random:1|8000||nobase
3d-fp64-src|--shape 512x512x512 --precision fp64 --source random:1|8000||nobase
3d-fp32-src-tier2|--shape 512x512x512 --precision fp32 --source random:1|4000|--kernel 2|nobase
3d-fp64-src-tier2|--shape 512x512x512 --precision fp64 --source random:1|4000|--kernel 2|nobase
3d-poisson-fp32|--equation poisson --shape 512x512x512 --precision fp32 --source random:1 --tolerance 0|8000||nobase
3d-poisson-fp32-tier2|--equation poisson --shape 512x512x512 --precision fp32 --source random:1 --tolerance 0|4000|--kernel 2|nobase
3d-fp64-src-hot|--shape 512x512x512 --precision fp64 --source random:1 --bc x_lo=dirichlet:1|4000||nobase
3d-fp64-src-yhot|--shape 512x512x512 --precision fp64 --source random:1 --bc y_lo=dirichlet:1|4000||nobase
3d-fp64-src-yhot-tier2|--shape 512x512x512 --precision fp64 --source random:1 --bc y_lo=dirichlet:1|2000|--kernel 2|nobase
3d-fp64-src-zhot|--shape 512x512x512 --precision fp64 --source random:1 --bc z_lo=dirichlet:1|4000||nobase
3d-poisson-fp32-hot|--equation poisson --shape 512x512x512 --precision fp32 --source random:1 --bc x_lo=dirichlet:1 --tolerance 0|4000||nobase
3d-poisson-fp64|--equation poisson --shape 512x512x512 --precision fp64 --source random:1 --tolerance 0|8000||nobase
3d-poisson-fp64-tier2|--equation poisson --shape 512x512x512 --precision fp64 --source random:1 --tolerance 0|4000|--kernel 2|nobase
3d-o4-fp32|--shape 512x512x512 --precision fp32 --order 4|12000||nobase
3d-o4-fp64|--shape 512x512x512 --precision fp64 --order 4|6000||nobase
3d-o4-fp32-src|--shape 512x512x512 --precision fp32 --order 4 --source random:1|6000||nobase
3d-o4-fp32-src-tier2|--shape 512x512x512 --precision fp32 --order 4 --source random:1|4000|--kernel 2|nobase
3d-o4-fp64-src|--shape 512x512x512 --precision fp64 --order 4 --source random:1|3000||nobase
3d-o4-fp64-src-tier2|--shape 512x512x512 --precision fp64 --order 4 --source random:1|2500|--kernel 2|nobase
3d-o4-poisson-fp32|--equation poisson --shape 512x512x512 --precision fp32 --order 4 --source random:1 --tolerance 0|6000||nobase
3d-o4-poisson-fp32-tier2|--equation poisson --shape 512x512x512 --precision fp32 --order 4 --source random:1 --tolerance 0|4000|--kernel 2|nobase
3d-o4-fp32-hot|--shape 512x512x512 --precision fp32 --order 4 --bc x_lo=dirichlet:1|6000||nobase
3d-o4-fp32-hot-tier2|--shape 512x512x512 --precision fp32 --order 4 --bc x_lo=dirichlet:1|3000|--kernel 2|nobase
3d-o4-fp32-yhot|--shape 512x512x512 --precision fp32 --order 4 --bc y_lo=dirichlet:1|6000||nobase
3d-o4-fp32-zhot|--shape 512x512x512 --precision fp32 --order 4 --bc z_lo=dirichlet:1|6000||nobase
3d-o4-fp64-hot|--shape 512x512x512 --precision fp64 --order 4 --bc x_lo=dirichlet:1|3500||nobase
3d-o4-fp64-hot-tier2|--shape 512x512x512 --precision fp64 --order 4 --bc x_lo=dirichlet:1|2000|--kernel 2|nobase
3d-o6-fp32|--shape 512x512x512 --precision fp32 --order 6|6000||nobase
3d-o6-fp32-tier2|--shape 512x512x512 --precision fp32 --order 6|5000|--kernel 2|nobase
3d-o6-fp64|--shape 512x512x512 --precision fp64 --order 6|3000||nobase
3d-o6-fp64-fused|--shape 512x512x512 --precision fp64 --order 6|3000|--kernel 3|nobase
3d-o8-fp32|--shape 512x512x512 --precision fp32 --order 8|5000||nobase
3d-o8-fp32-fused|--shape 512x512x512 --precision fp32 --order 8|5000|--kernel 3|nobase
3d-o8-fp64|--shape 512x512x512 --precision fp64 --order 8|3500||nobase
3d-o8-fp64-fused|--shape 512x512x512 --precision fp64 --order 8|3500|--kernel 3|nobase
3d-o8-fp32-src-hot|--shape 512x512x512 --precision fp32 --order 8 --source random:1 --bc x_lo=dirichlet:1|4000||nobase
3d-o8-fp32-src-hot-fused|--shape 512x512x512 --precision fp32 --order 8 --source random:1 --bc x_lo=dirichlet:1|2500|--kernel 3|nobase
3d-o8-fp64-src-hot|--shape 512x512x512 --precision fp64 --order 8 --source random:1 --bc x_lo=dirichlet:1|2000||nobase
3d-o8-fp64-src-hot-fused|--shape 512x512x512 --precision fp64 --order 8 --source random:1 --bc x_lo=dirichlet:1|1200|--kernel 3|nobase
2d-fp32|--shape 16384x16384x1 --precision fp32|17000||
2d-fp64|--shape 16384x16384x1 --precision fp64|9000||
2d-o4-fp32|--shape 16384x16384x1 --precision fp32 --order 4|11000||nobase
2d-o4-fp64|--shape 16384x16384x1 --precision fp64 --order 4|6500||nobase
2d-o8-fp32|--shape 16384x16384x1 --precision fp32 --order 8|6000||nobase
poisson-fp32|--equation poisson --shape 16384x16384x1 --precision fp32 --source sine:1:1,1 --tolerance 0|6000|--residual-every 1|
np2-3d-fp32|--shape 512x512x512 --precision fp32|6000|--allow-gpu-sharing|
CASES
  grep -h "^kernel\|^device" "$out"/*-1.log | sort -u | cut -c1-200
  ;;
study)
  # Rank counts 1, 2, 4, 8 up to the GPUs of the machine (STUDY_RANKS=1,2,3,4 chooses);
  # STUDY_KINDS="weak strong", STUDY_PRECISIONS=fp32,fp64, STUDY_OVERLAP=on,off,
  # STUDY_TRANSPORTS (--halo-transport values, default auto's choice) and STUDY_GRIDS choose
  # the rest; STUDY_NCCL_P2P=off exports NCCL_P2P_DISABLE=1 to the ranks (series -nop2p).
  # Grids: slabs along z (--slabs, 1x1xN), the fewest and contiguous messages; on more than
  # 2 GPUs also the balanced grids (1x2x2, 2x2x2), which send along x and y too (the fused
  # kernels' launches in parts by tile); STUDY_GRIDS may name axes to split too (yz: 8 GPUs
  # as 1x2x4, no x faces). They run only where they differ from the slabs
  # (more than 2 ranks), with efficiencies against the slabs' one-GPU run (--baseline-series).
  ranks=${STUDY_RANKS:-}
  if [ -z "$ranks" ]; then
    n=1
    while [ "$n" -le "$ngpu" ]; do ranks=$ranks${ranks:+,}$n n=$((n * 2)); done
  fi
  grids=${STUDY_GRIDS:-slabs}
  [ -n "${STUDY_GRIDS:-}" ] || [ "$ngpu" -le 2 ] || grids="slabs balanced"
  flags="--bind-to none" sfx=""
  if [ "${STUDY_NCCL_P2P:-on}" = off ]; then
    export NCCL_P2P_DISABLE=1
    flags="$flags -x NCCL_P2P_DISABLE" sfx=-nop2p
  fi
  for kind in ${STUDY_KINDS:-weak strong}; do
    # steps for loops of >= 2 s on one GPU with the fused kernels (auto in 3D, Dirichlet 0)
    case $kind in
    weak) size="--size 512x512x512 --steps 12000" ;;
    *) size="--shape 1024x1024x1024 --steps 1500" ;;
    esac
    for grid in $grids; do
      series=$kind-gpu-$grid$sfx slabs=--slabs r=$ranks base=""
      if [ "$grid" != slabs ]; then
        slabs="" base="--baseline-series $kind-gpu-slabs$sfx"
        [ "$grid" = balanced ] || slabs="--split $grid"
        r=$(echo "$ranks" | tr , '\n' | awk '$1 > 2' | paste -sd, -)
        [ -n "$r" ] || continue
      fi
      note "$kind-scaling study on ranks $r, $grid grids (jobscripts/$kind-scaling.sh, mpirun)"
      if STENCIL_BIN=$stencil STENCIL_INPUT_BIN=$mkinput MPIRUN_FLAGS="$flags" \
        bash "jobscripts/$kind-scaling.sh" $size --ranks "$r" --backend cuda \
        ${STUDY_TRANSPORTS:+--transport "$STUDY_TRANSPORTS"} \
        --precision "${STUDY_PRECISIONS:-fp32,fp64}" --overlap "${STUDY_OVERLAP:-on,off}" \
        --workdir "$scratch/$series" --csv "$out/$kind-scaling.csv" --series "$series" $base \
        $slabs -- --peak-bandwidth measure >"$out/study-$series.log" 2>&1; then
        pass "$kind-scaling study, $grid grids"
      else
        fail "$kind-scaling study, $grid grids (see study-$series.log)"
        tail -5 "$out/study-$series.log"
      fi
    done
    [ -f "$out/$kind-scaling.csv" ] && cat "$out/$kind-scaling.csv" >>"$table"
  done
  ;;
overlap)
  note "overlap logic: 2 ranks on one GPU, 512^3 fp32, splits along x, y, z, overlap on/off"
  input "$scratch/ov.h5" --shape 512x512x512 --precision fp32 --steps 2000 --bc all=dirichlet:0
  bench_keep=1 first=""
  for t in ${OVERLAP_TRANSPORTS:-auto}; do
    for d in 2x1x1 1x2x1 1x1x2; do
      for o in on off; do
        name=overlap-$t-$d-$o
        bench "$name" 2 "$scratch/ov.h5" --backend cuda --allow-gpu-sharing --dims "$d" \
          --overlap "$o" --halo-transport "$t"
        grep -h "^overlap\|^halo" "$out/$name.log" | sed "s/^/    /" >>"$table"
        if [ -z "$first" ]; then
          first=$name
        else
          bitwise "$name" "$scratch/out-$name/final.h5" "$first" "$scratch/out-$first/final.h5"
          rm -rf "$scratch/out-$name"
        fi
      done
    done
  done
  ;;
checkpoint)
  note "checkpoint benchmark: 512^3 fp64 on one GPU, against dd + fsync"
  echo "scratch disk: $(df -h "${TMPDIR:-/tmp}" | tail -1)" >>"$table"
  for c in "sync 300 100" "background 300 100" "background 15000 5000"; do
    set -- $c
    log="$out/ckpt-$1-$3.log"
    if bash tests/restart/bench_checkpoint.sh --build "$build" --np 1 --mode "$1" --steps "$2" \
      --every "$3" -- --backend cuda >"$log" 2>&1; then
      grep -h "^checkpoints\|^plain\|^ratio\|^loop time" "$log" | sed "s/^/ckpt $1 every $3: /" >>"$table"
    else
      fail "checkpoint benchmark $1 every $3 (see $(basename "$log"))"
      tail -5 "$log"
    fi
  done
  ;;
*)
  sed -n '3,/^set -u/p' "$0" | grep '^#'
  exit 2
  ;;
esac
rm -rf "$scratch"
tar -C "$out" -czf "$top/logs.tgz" . && rm -rf "$out"
echo
echo "== results ($mode, $(date -u +%Y-%m-%dT%H:%MZ), $fails failed)"
cat "$top/table.txt"
exit "$fails"
