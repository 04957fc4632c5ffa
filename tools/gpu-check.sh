#!/bin/sh
# shellcheck disable=SC2086 # $mpirun is a command with options: word splitting is meant
# GPU checks and benchmarks in one go, for the GPU host (through the device tool):
#
#   tools/gpu-check.sh single   on one GPU: the gpu test label (STENCIL_REQUIRE_GPU=1),
#                               compute-sanitizer memcheck on small runs, the error paths
#                               (no GPU, no kernel image, out of device memory, refused
#                               transports and sharing), and tier 1/2 benchmarks of 512^3
#   tools/gpu-check.sh multi    on two GPUs of one node: nvidia-smi topo -m, weak scaling
#                               (512^3 per GPU) and strong scaling (1024x1024x512) with every
#                               transport, --overlap on and off, fp32 and fp64
#   tools/gpu-check.sh tier3    on one GPU: the tier-3 harness (bitwise, memcheck), the gpu
#                               test label, tier 2 against tier 3 on 2D 16384^2 and 3D 512^3
#                               (Dirichlet and periodic), on two GPUs also 512^3 per GPU
#                               split along z with --overlap on and off, then the Poisson
#                               benchmark (TIER3_TESTS=0 / TIER3_POISSON=0 skip the tests /
#                               the Poisson benchmark)
#   tools/gpu-check.sh quick    on one GPU, about a minute: the gpu test label (in parallel,
#                               each step time-capped), compute-sanitizer memcheck and
#                               racecheck of tier 2 on small ragged blocks, then 512^3
#                               fp32/fp64 benchmarks of tier 2 as the driver picks it
#   tools/gpu-check.sh checkpoint  on one GPU: tests/restart/bench_checkpoint.sh (512^3 fp64,
#                               sync and background, against dd + fsync on the same disk)
#   tools/gpu-check.sh study    issue 8's study scripts on 1, 2, 4, 8 GPUs of the machine:
#                               jobscripts/weak-scaling.sh (512^3 per GPU) and
#                               strong-scaling.sh (1024^3), fp32 and fp64, --overlap on and off,
#                               the default transport, through mpirun as users run them off
#                               Slurm, on slabs along z and (more than 2 GPUs) on balanced
#                               rank grids; each strong run's final field compared bit for bit
#                               with the one-GPU run's (STUDY_RANKS, STUDY_KINDS, STUDY_GRIDS,
#                               STUDY_PRECISIONS, STUDY_OVERLAP choose); the CSVs in the logs
#                               (plot them with jobscripts/plot_scaling.py). On 4 H200s weak
#                               took 3.2 min, strong 8.6: under the device tool's 10 minutes
#                               a call, 8 GPUs need strong split (STUDY_PRECISIONS=fp32, fp64)
#   tools/gpu-check.sh chunks   on one GPU: the 2D warp-strip kernel's chunk, the plan's choice
#                               (first) against CHUNKS rows (default 264 390 512 585 682 820
#                               1092 1365), on 16384^2 and 16384 x 8192 (a rank's block on 2
#                               GPUs): heat fp32 and fp64, Poisson fp32 without residuals and
#                               with the residual every iteration (72 runs, about 4 minutes)
#   tools/gpu-check.sh poisson  the Poisson (Jacobi) residual: the gpu_poisson tests,
#                               memcheck/racecheck of tier 3's residual launches, the device
#                               residual against the CPU on more than 2^31 cells, and the
#                               benchmark of issue 7 (2D 16384^2 fp32, 1000 iterations, the
#                               residual never / every 100 / every iteration; on 2 GPUs too
#                               when there are two; BASELINE=another stencil binary: its runs
#                               alternate with this build's, for A/B), then one GPU on the
#                               half block 16384 x 8192 (a rank's block on 2 GPUs);
#                               POISSON_TESTS=0: the benchmark only
#
# Run from the repository root after building (BUILD, default build-gpu) and packing the MPI
# runtime (shared/tools/gpu-bundle), e.g.  .gpu/run sh tools/gpu-check.sh single
# Logs and JSON reports go to $OUT/logs.tgz (default OUT ./gpu-check-out); a table of
# results is printed last. An optional sm_100-only build (SM100, default build-gpu-sm100/app/stencil) is used
# for the "no kernel image" check. Exit status: the number of failed checks (0 = all good).
set -u
mode=${1:-single}
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
  log="$out/$tool-$f.log"
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

# bench NAME NP INPUT ARGS...: one run with a JSON report; adds a table row. The output
# directory is removed unless bench_keep is set.
bench() {
  name=$1 np=$2 input=$3
  shift 3
  json=$out/$name.json
  if $mpirun -n "$np" "$stencil" "$input" --output-dir "$scratch/out-$name" --overwrite \
    --report-json "$json" --progress 0 "$@" >"$out/$name.log" 2>&1; then
    python3 - "$json" "$name" "$np" "$*" >>"$table" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peak = r.get("peak_bandwidth_gb_per_second", 0) or 0
bw = r["bandwidth_gb_per_second"]
pct = 100.0 * bw / peak if peak else 0.0
ph = r["phases_seconds"]
print("%-26s np=%s %9.2f Gpts/s %8.1f GB/s %5.1f%% of %7.1f GB/s  loop %6.3f s  steps %d  %s"
      % (sys.argv[2], sys.argv[3], r["gpts_per_second"], bw, pct, peak, r["loop_seconds"],
         r["steps"] - r["first_step"], sys.argv[4]))
PY
    kern=$(sed -n 's/^device .*rank 0 .*kernel \(.*\), PDL.*/\1/p' "$out/$name.log" | head -1)
    [ -n "$kern" ] && echo "    kernel: $kern" >>"$table"
    [ -n "${bench_keep:-}" ] || rm -rf "$scratch/out-$name"
  else
    fail "bench $name: the run failed (see $out/$name.log)"
    tail -5 "$out/$name.log"
  fi
}

# gpu_tests SECONDS [JOBS]: the gpu label, JOBS at a time (default 6), time-capped; one table
# row per test.
gpu_tests() {
  note "gpu tests (ctest -L gpu, ${2:-6} at a time, at most $1 s)"
  if STENCIL_REQUIRE_GPU=1 timeout "$1" ctest --test-dir "$build/tests/gpu" -L gpu -j"${2:-6}" \
    --timeout $(($1 - 10)) --output-on-failure >"$out/ctest-gpu.log" 2>&1; then
    pass "ctest -L gpu: $(grep 'tests passed' "$out/ctest-gpu.log")"
  else
    fail "ctest -L gpu (exit $?, 124 = out of time): $(grep 'tests passed' "$out/ctest-gpu.log")"
    grep -E "FAIL|Failed|differs|first difference" "$out/ctest-gpu.log" | head -20
  fi
  grep -E "Test +#[0-9]+: " "$out/ctest-gpu.log" |
    sed -e 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: /    ctest /' -e 's/ \.\.* */ /' -e 's/  */ /g' \
      >>"$table"
}

input() { # FILE stencil-input options...
  f=$1
  shift
  [ -f "$f" ] || "$mkinput" -o "$f" "$@" >/dev/null || fail "stencil-input $f"
}

# poisson_input FILE SHAPE ITERATIONS: the Poisson benchmark's input (issue 7): 2D fp32,
# Dirichlet 0 all round, a sine source, no tolerance (the issue's: 16384x16384, 1000).
poisson_input() {
  input "$1" --equation poisson --shape "$2" --precision fp32 --steps "$3" --tolerance 0 \
    --bc all=dirichlet:0 --source sine:1:1,1
}

# poisson_bench: the residual checks and the Poisson benchmark (mode poisson). Each benchmark
# row gives Gpts/s from the JSON report; the row after it the residual checks and their time.
poisson_bench() { # [bench]: the benchmark only
  if [ "${1:-}" != bench ]; then
    note "poisson tests (ctest -R gpu_poisson)"
    if STENCIL_REQUIRE_GPU=1 ctest --test-dir "$build/tests/gpu" -R gpu_poisson --output-on-failure \
      >"$out/ctest-poisson.log" 2>&1; then
      pass "ctest -R gpu_poisson: $(grep 'tests passed' "$out/ctest-poisson.log")"
    else
      fail "ctest -R gpu_poisson: $(grep 'tests passed' "$out/ctest-poisson.log")"
      grep -E "^FAIL|Failed" "$out/ctest-poisson.log" | head -20
    fi
    note "compute-sanitizer on tier 3's residual launches (400 x 90 fp32 Poisson)"
    input "$scratch/p400.h5" --equation poisson --shape 400x90x1 --steps 20 --precision fp32 \
      --source random:3 --bc x=periodic --bc y=dirichlet:0 --tolerance 0
    for tool in memcheck racecheck; do
      sanitize 90 "$tool" p400 "tier 3" --kernel 3 --residual-every 1
    done
    note "residual() against the cpu backend on 50000 x 45000 fp32 cells (64-bit indices)"
    if "$build/tests/gpu/test_gpu_kernels" --residual-large >"$out/residual-large.log" 2>&1; then
      pass "residual-large: $(grep -m1 'relative difference' "$out/residual-large.log" | cut -c19-)"
    else
      fail "residual-large (see residual-large.log)"
      tail -5 "$out/residual-large.log"
    fi
  fi
  note "poisson benchmark: 2D 16384^2 fp32, 1000 Jacobi iterations"
  poisson_input "$scratch/poisson16k.h5" 16384x16384 1000
  for np in 1 2; do
    [ "$np" -le "$ngpu" ] || continue
    # The driver's kernel choice, then tier 2 (one step per launch) for comparison.
    # BASELINE=path/to/another/stencil: its tier 3 as well, alternating with this build's.
    for run in 0:auto 100:auto 1:auto ${BASELINE:+1:base 1:auto 1:base 0:base} 100:2 1:2; do
      every=${run%%:*} k=${run#*:} own=$stencil
      name=poisson16k-np$np-every$every-k$k
      [ -f "$out/$name.json" ] && name=$name-again
      [ "$k" = base ] && stencil=$BASELINE k=auto
      bench "$name" "$np" "$scratch/poisson16k.h5" --backend cuda --kernel "$k" --tolerance 0 \
        --residual-every "$every" --peak-bandwidth measure
      stencil=$own
      [ -f "$out/$name.json" ] && python3 - "$out/$name.json" >>"$table" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["solver"]
print("    residual every %d: %d checks, ||f - L u|| %.6e -> %.6e; checks phase %.3f s (residuals, NaN"
      " checks and the host's waits for the GPU)"
      % (s["residual_every"], len(s["history"]), s["initial_residual"], s["final_residual"],
         r["phases_seconds"].get("checks", 0.0)))
PY
    done
  done
  # the block of a rank on 2 GPUs, on one GPU: what the 2-GPU efficiency can reach
  poisson_input "$scratch/poisson8k.h5" 16384x8192 1000
  for every in 0 1; do
    bench "poisson-half-np1-every$every" 1 "$scratch/poisson8k.h5" --backend cuda --tolerance 0 \
      --residual-every "$every"
  done
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >>"$out/nvidia-smi.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
note "$ngpu GPU(s); $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | head -1)"

case "$mode" in
single)
  gpu_tests 3600 1

  note "compute-sanitizer memcheck"
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  input "$scratch/small3d.h5" --shape 37x29x23 --steps 6 --initial random:3 --bc x=periodic
  input "$scratch/small2d.h5" --shape 67x45x1 --steps 6 --precision fp32 --bc y=neumann
  for kf in 1:small3d 2:small3d 2:small2d; do
    k=${kf%%:*} f=${kf#*:}
    {
      if [ -n "$cs" ] && "$cs" --tool memcheck --leak-check no --error-exitcode 9 "$stencil" \
        "$scratch/$f.h5" --backend cuda --kernel "$k" --output-dir "$scratch/out-cs" --overwrite \
        >"$out/memcheck-$f-k$k.log" 2>&1; then
        pass "memcheck $f kernel $k: $(grep -m1 'ERROR SUMMARY' "$out/memcheck-$f-k$k.log")"
      else
        fail "memcheck $f kernel $k (see memcheck-$f-k$k.log)"
        tail -5 "$out/memcheck-$f-k$k.log"
      fi
    }
  done
  if [ -n "$cs" ] && $mpirun -n 2 "$cs" --tool memcheck --error-exitcode 9 "$stencil" \
    "$scratch/small3d.h5" --backend cuda --allow-gpu-sharing --halo-transport ipc \
    --output-dir "$scratch/out-cs2" --overwrite >"$out/memcheck-np2-ipc.log" 2>&1; then
    pass "memcheck 2 ranks ipc: $(grep -m1 'ERROR SUMMARY' "$out/memcheck-np2-ipc.log")"
  else
    fail "memcheck 2 ranks ipc (see memcheck-np2-ipc.log)"
    tail -5 "$out/memcheck-np2-ipc.log"
  fi

  note "error paths"
  expect_error no-gpu "no CUDA device is visible" env CUDA_VISIBLE_DEVICES= "$stencil" \
    "$scratch/small3d.h5" --backend cuda --output-dir "$scratch/e1" --overwrite
  input "$scratch/huge.h5" --shape 8192x8192x4096 --steps 1
  expect_error out-of-memory "out of device memory" "$stencil" "$scratch/huge.h5" --backend cuda \
    --output-dir "$scratch/e2" --overwrite
  if [ -x "$sm100" ]; then
    expect_error no-kernel-image "has no GPU code for device" "$sm100" "$scratch/small3d.h5" \
      --backend cuda --output-dir "$scratch/e3" --overwrite
    expect_error no-kernel-image-np2 "has no GPU code for device" $mpirun -n 2 "$sm100" \
      "$scratch/small3d.h5" --backend cuda --allow-gpu-sharing --output-dir "$scratch/e3" \
      --overwrite
  else
    fail "no sm_100-only build at $sm100"
  fi
  expect_error mpi-device "not CUDA-aware" $mpirun -n 2 "$stencil" "$scratch/small3d.h5" \
    --backend cuda --allow-gpu-sharing --halo-transport mpi-device --output-dir "$scratch/e4" \
    --overwrite
  if [ "$ngpu" -eq 1 ]; then
    expect_error sharing "allow-gpu-sharing" $mpirun -n 2 "$stencil" "$scratch/small3d.h5" \
      --backend cuda --output-dir "$scratch/e5" --overwrite
  fi

  note "benchmarks (one GPU)"
  input "$scratch/b512-fp32.h5" --shape 512x512x512 --precision fp32 --steps 8000
  input "$scratch/b512-fp64.h5" --shape 512x512x512 --precision fp64 --steps 4000
  bench t2-fp32-512 1 "$scratch/b512-fp32.h5" --backend cuda --kernel 2 --peak-bandwidth measure
  bench t2-fp64-512 1 "$scratch/b512-fp64.h5" --backend cuda --kernel 2 --peak-bandwidth measure
  bench t2-fp32-512-nopdl 1 "$scratch/b512-fp32.h5" --backend cuda --kernel 2 --pdl off \
    --peak-bandwidth measure
  bench t2-fp64-512-nopdl 1 "$scratch/b512-fp64.h5" --backend cuda --kernel 2 --pdl off \
    --peak-bandwidth measure
  bench t1-fp32-512 1 "$scratch/b512-fp32.h5" --backend cuda --kernel 1 --steps 2000 \
    --peak-bandwidth measure
  bench t1-fp64-512 1 "$scratch/b512-fp64.h5" --backend cuda --kernel 1 --steps 1000 \
    --peak-bandwidth measure
  grep -h "^device\|^halo" "$out"/t2-fp*-512.log | sort -u
  ;;
quick)
  t0=$(date +%s)
  gpu_tests 250
  note "compute-sanitizer on tier 2 (ragged 3D and 2D blocks)"
  input "$scratch/small3d.h5" --shape 37x29x23 --steps 6 --initial random:3 --bc x=periodic
  input "$scratch/small2d.h5" --shape 67x45x1 --steps 6 --precision fp32 --bc y=neumann
  for run in memcheck:small3d racecheck:small3d memcheck:small2d; do
    sanitize 60 "${run%%:*}" "${run#*:}" "tier 2" --kernel 2
  done
  note "benchmarks (one GPU, 512^3; loops of 2 s or more)"
  input "$scratch/b512-fp32.h5" --shape 512x512x512 --precision fp32 --steps 9000
  input "$scratch/b512-fp64.h5" --shape 512x512x512 --precision fp64 --steps 4500
  for p in fp32 fp64; do
    bench "t2-$p" 1 "$scratch/b512-$p.h5" --backend cuda --kernel 2 --peak-bandwidth measure
  done
  grep -h "^device" "$out"/t2-fp*.log | sort -u
  echo "quick check took $(($(date +%s) - t0)) s" >>"$table"
  ;;
multi)
  gpu_tests 3600 1 # two GPUs: the nccl cases run too

  note "profile of the tier-2 kernel (ncu, one GPU)"
  ncu=$(command -v ncu)
  for c in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    [ -z "$ncu" ] && [ -x "$c" ] && ncu=$c
  done
  input "$scratch/p-fp32.h5" --shape 512x512x512 --precision fp32 --steps 200
  input "$scratch/p-fp64.h5" --shape 512x512x512 --precision fp64 --steps 200
  for p in fp32 fp64; do
    if [ -n "$ncu" ] && "$ncu" --clock-control none --kernel-name regex:update_ --launch-skip 150 \
      --launch-count 1 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
      "$stencil" "$scratch/p-$p.h5" --backend cuda --output-dir "$scratch/out-p" --overwrite \
      >"$out/ncu-$p.log" 2>&1; then
      echo "ncu $p:"
      grep -E "update_|__" "$out/ncu-$p.log" | sed 's/  */ /g' | head -14
    else
      fail "ncu $p (see ncu-$p.log)"
      tail -3 "$out/ncu-$p.log"
    fi
  done

  note "scaling (two GPUs)"
  input "$scratch/w1-fp32.h5" --shape 512x512x512 --precision fp32 --steps 6000
  input "$scratch/w1-fp64.h5" --shape 512x512x512 --precision fp64 --steps 3000
  input "$scratch/w2-fp32.h5" --shape 512x512x1024 --precision fp32 --steps 6000
  input "$scratch/w2-fp64.h5" --shape 512x512x1024 --precision fp64 --steps 3000
  input "$scratch/s-fp32.h5" --shape 1024x1024x512 --precision fp32 --steps 2000
  input "$scratch/s-fp64.h5" --shape 1024x1024x512 --precision fp64 --steps 1000
  for p in fp32 fp64; do
    bench "weak1-$p" 1 "$scratch/w1-$p.h5" --backend cuda --peak-bandwidth measure
    bench "strong1-$p" 1 "$scratch/s-$p.h5" --backend cuda --peak-bandwidth measure
    for t in ipc nccl mpi-host; do
      for ov in on off; do
        bench "weak2-$p-$t-$ov" 2 "$scratch/w2-$p.h5" --backend cuda --dims 1x1x2 \
          --halo-transport "$t" --overlap "$ov" --peak-bandwidth measure
        bench "strong2-$p-$t-$ov" 2 "$scratch/s-$p.h5" --backend cuda --dims 1x1x2 \
          --halo-transport "$t" --overlap "$ov" --peak-bandwidth measure
      done
    done
  done
  grep -h "^device\|^halo" "$out"/weak2-fp32-*-on.log "$out"/strong2-fp64-*-on.log | sort -u
  ;;
poisson)
  if [ "${POISSON_TESTS:-1}" = 0 ]; then poisson_bench bench; else poisson_bench; fi
  ;;
study)
  # Rank counts 1, 2, 4, 8 up to the GPUs of the machine (STUDY_RANKS=1,2,3,4 chooses);
  # STUDY_KINDS="weak strong", STUDY_PRECISIONS=fp32,fp64, STUDY_OVERLAP=on,off and
  # STUDY_GRIDS choose the rest.
  # Grids: slabs along z (--slabs, 1x1xN), where tier 3 hides the exchange behind split
  # launches; on more than 2 GPUs also the balanced grids (1x2x2, 2x2x2), which send along
  # x and y too, where it does not. They run only where they differ from the slabs (more
  # than 2 ranks), with efficiencies against the slabs' one-GPU run (--baseline-series).
  ranks=${STUDY_RANKS:-}
  if [ -z "$ranks" ]; then
    n=1
    while [ "$n" -le "$ngpu" ]; do ranks=$ranks${ranks:+,}$n n=$((n * 2)); done
  fi
  grids=${STUDY_GRIDS:-slabs}
  [ -n "${STUDY_GRIDS:-}" ] || [ "$ngpu" -le 2 ] || grids="slabs balanced"
  for kind in ${STUDY_KINDS:-weak strong}; do
    # steps for loops of >= 2 s on one GPU with tier 3, which auto runs in 3D (Dirichlet 0)
    case $kind in
    weak) size="--size 512x512x512 --steps 12000" keep="" ;;
    *) size="--shape 1024x1024x1024 --steps 1500" keep=--keep-output ;;
    esac
    for grid in $grids; do
      series=$kind-gpu-$grid slabs=--slabs r=$ranks base=""
      if [ "$grid" != slabs ]; then
        slabs="" base="--baseline-series $kind-gpu-slabs"
        r=$(echo "$ranks" | tr , '\n' | awk '$1 > 2' | paste -sd, -)
        [ -n "$r" ] || continue
      fi
      note "$kind-scaling study on ranks $r, $grid grids (jobscripts/$kind-scaling.sh, mpirun)"
      if STENCIL_BIN=$stencil STENCIL_INPUT_BIN=$mkinput MPIRUN_FLAGS="--bind-to none" \
        bash "jobscripts/$kind-scaling.sh" $size --ranks "$r" --backend cuda \
        --precision "${STUDY_PRECISIONS:-fp32,fp64}" --overlap "${STUDY_OVERLAP:-on,off}" \
        --workdir "$scratch/$series" --csv "$out/$kind-scaling.csv" --series "$series" $base \
        $slabs $keep -- --peak-bandwidth measure >"$out/study-$series.log" 2>&1; then
        pass "$kind-scaling study, $grid grids"
      else
        fail "$kind-scaling study, $grid grids (see study-$series.log)"
        tail -5 "$out/study-$series.log"
      fi
    done
    # Strong scaling solves one problem: every run's final field must equal the one-GPU
    # run's bit for bit (run tags PRECISION-TRANSPORT-OVERLAP-pN, jobscripts/lib.sh).
    for f in "$scratch/$kind"-gpu-slabs/output/*-p1/final.h5; do
      [ -f "$f" ] || continue
      t=$(basename "$(dirname "$f")")
      t=${t%-p1}
      for g in "$scratch/$kind"-gpu-*/output/"$t"-p*/final.h5; do
        [ "$g" = "$f" ] && continue
        bitwise "$(echo "$g" | awk -F/ '{print $(NF-3) "/" $(NF-1)}')" "$g" "$t-p1" "$f"
      done
    done
    rm -rf "$scratch/$kind"-gpu-*/output
    [ -f "$out/$kind-scaling.csv" ] && cat "$out/$kind-scaling.csv" >>"$table"
  done
  ;;
checkpoint)
  note "checkpoint benchmark (issue 5): 512^3 fp64 on one GPU, against dd + fsync"
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
tier3)
  t0=$(date +%s)
  cc=$build/tests/gpu/fused_check
  note "tier 3 harness: fused kernels against a one-step kernel, bitwise"
  if timeout 200 "$cc" check 300 2026 >"$out/fused-check.log" 2>&1; then
    pass "fused_check: $(grep -h 'fixed cases\|random cases' "$out/fused-check.log" | tr '\n' ' ')"
  else
    fail "fused_check: $(tail -1 "$out/fused-check.log")"
    grep -E "^FAIL" "$out/fused-check.log" | head -10
  fi
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  for c in "2 301 17 f64 mixed" "2 250 40 f32 periodic" "3 45 37 29 f32 periodic"; do
    set -- $c
    nd=$1
    shift
    if [ "$nd" = 3 ]; then n="$1 $2 $3" prec=$4 bc=$5; else n="$1 $2" prec=$3 bc=$4; fi
    log="$out/memcheck-strip-${nd}d-$prec.log"
    if [ -n "$cs" ] && timeout 90 "$cs" --tool memcheck --error-exitcode 9 "$cc" one --ndim "$nd" \
      --n $n --prec "$prec" --bc "$bc" --T 4 --chunk 7 --steps 9 >"$log" 2>&1; then
      pass "memcheck strip ${nd}D $prec $bc: $(grep -m1 'ERROR SUMMARY' "$log") $(grep -h '^one:' "$log")"
    else
      fail "memcheck strip ${nd}D $prec $bc (see $(basename "$log"))"
      tail -4 "$log"
    fi
  done
  [ "${TIER3_TESTS:-1}" = 1 ] && gpu_tests 360
  note "benchmarks, tier 2 against tier 3 (one GPU; loops of about 2 s)"
  input "$scratch/h2-fp32.h5" --shape 16384x16384x1 --precision fp32 --steps 1000
  input "$scratch/h2-fp64.h5" --shape 16384x16384x1 --precision fp64 --steps 1000
  input "$scratch/h3-fp32.h5" --shape 512x512x512 --precision fp32 --steps 1000
  input "$scratch/h3-fp64.h5" --shape 512x512x512 --precision fp64 --steps 1000
  input "$scratch/h3p-fp32.h5" --shape 512x512x512 --precision fp32 --steps 1000 --bc all=periodic
  input "$scratch/h3p-fp64.h5" --shape 512x512x512 --precision fp64 --steps 1000 --bc all=periodic
  bench t2-2d-fp32 1 "$scratch/h2-fp32.h5" --backend cuda --kernel 2 --steps 3000 --peak-bandwidth measure
  bench t3-2d-fp32 1 "$scratch/h2-fp32.h5" --backend cuda --kernel 3 --steps 12000 --peak-bandwidth measure
  bench t2-2d-fp64 1 "$scratch/h2-fp64.h5" --backend cuda --kernel 2 --steps 1600 --peak-bandwidth measure
  bench t3-2d-fp64 1 "$scratch/h2-fp64.h5" --backend cuda --kernel 3 --steps 7200 --peak-bandwidth measure
  bench t2-3d-fp32 1 "$scratch/h3-fp32.h5" --backend cuda --kernel 2 --steps 5000 --peak-bandwidth measure
  bench t3-3d-fp32 1 "$scratch/h3-fp32.h5" --backend cuda --kernel 3 --steps 16000 --peak-bandwidth measure
  bench t2-3d-fp64 1 "$scratch/h3-fp64.h5" --backend cuda --kernel 2 --steps 3000 --peak-bandwidth measure
  bench t3-3d-fp64 1 "$scratch/h3-fp64.h5" --backend cuda --kernel 3 --steps 6000 --peak-bandwidth measure
  # the clustered form (DSMEM; docs/cluster-kernel.md, "Clusters and DSMEM"), spanning the 512
  # columns: 8 CTAs of 64 in fp64, 4 of 128 in fp32
  bench t3-3d-fp64-c8x1 1 "$scratch/h3-fp64.h5" --backend cuda --kernel 3 --cluster-size 8x1 --steps 6000
  bench t3-3d-fp32-c4x2 1 "$scratch/h3-fp32.h5" --backend cuda --kernel 3 --cluster-size 4x2 --steps 12000
  bench t2-3dp-fp32 1 "$scratch/h3p-fp32.h5" --backend cuda --kernel 2 --steps 6000 --peak-bandwidth measure
  bench t3-3dp-fp32 1 "$scratch/h3p-fp32.h5" --backend cuda --kernel 3 --steps 16000 --peak-bandwidth measure
  bench t2-3dp-fp64 1 "$scratch/h3p-fp64.h5" --backend cuda --kernel 2 --steps 3000 --peak-bandwidth measure
  bench t3-3dp-fp64 1 "$scratch/h3p-fp64.h5" --backend cuda --kernel 3 --steps 5000 --peak-bandwidth measure
  if [ "$ngpu" -ge 2 ]; then # 512^3 per GPU split along z: tier 3's launches in parts or not
    input "$scratch/w3-fp32.h5" --shape 512x512x1024 --precision fp32 --steps 1000
    input "$scratch/w3-fp64.h5" --shape 512x512x1024 --precision fp64 --steps 1000
    for ov in on off; do
      bench "t3-3d-fp32-np2-$ov" 2 "$scratch/w3-fp32.h5" --backend cuda --kernel 3 --steps 16000 --overlap "$ov"
      bench "t3-3d-fp64-np2-$ov" 2 "$scratch/w3-fp64.h5" --backend cuda --kernel 3 --steps 6000 --overlap "$ov"
    done
  fi
  grep -h "^kernel\|^device" "$out"/t3-*.log | sort -u
  [ "${TIER3_POISSON:-1}" = 1 ] && poisson_bench bench
  echo "tier 3 check took $(($(date +%s) - t0)) s" >>"$table"
  ;;
chunks)
  # docs/cluster-kernel.md, "Chunks from a launch's timeline": the runs of its sweeps
  for shape in 16384x16384 16384x8192; do
    ny=${shape#*x}
    input "$scratch/ch-heat32-$ny.h5" --shape "$shape" --precision fp32 --steps 4800 --initial sine:1:1,1
    input "$scratch/ch-heat64-$ny.h5" --shape "$shape" --precision fp64 --steps 2400 --initial sine:1:1,1
    poisson_input "$scratch/ch-poisson-$ny.h5" "$shape" 4000
    for run in heat32: heat64: poisson:0 poisson:1; do
      f=${run%%:*} every=${run#*:}
      for c in 0 ${CHUNKS:-264 390 512 585 682 820 1092 1365}; do
        bench "chunks-$f${every:+-every$every}-$ny-c$c" 1 "$scratch/ch-$f-$ny.h5" --backend cuda \
          --kernel 3 --chunk "$c" ${every:+--residual-every "$every"}
      done
    done
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
