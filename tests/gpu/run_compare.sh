#!/bin/sh
# Whole runs on the GPU against the CPU backend, bit for bit (label gpu).
#
#   run_compare.sh PROBE STENCIL STENCIL_INPUT H5SAME WORKDIR NPROC MPIEXEC...
#
# For each input (fp64 and fp32, 2D and 3D, Dirichlet, Neumann and periodic faces, ragged
# sizes) the CPU backend's final field on NPROC ranks is the reference, and every CUDA
# variant (kernel tiers, --overlap on/off, the halo transports, two decompositions) must give
# the same bytes. The y split of the fp32 periodic case sends its y faces and edges along x as
# ipc field boxes and its other edges and corners packed, in one exchange. Exit 77 without a
# GPU (unless STENCIL_REQUIRE_GPU=1).
set -u
probe=$1 stencil=$2 mkinput=$3 h5same=$4 work=$5 np=$6
shift 6
# shellcheck source=SCRIPTDIR/gpu_setup.sh
. "$(dirname "$0")/gpu_setup.sh"
gpu_setup "$probe" "$work" "$np"
fail=0 runs=0
run() { # name backend-args...
  name=$1
  shift
  # </dev/null: mpirun forwards stdin to rank 0 and would eat the rest of the case list.
  if ! "$@" --output-dir "out-$name" --overwrite --quiet >"log-$name" 2>&1 </dev/null; then
    echo "FAIL $name: the run failed:"
    cat "log-$name"
    fail=$((fail + 1))
    return 1
  fi
  return 0
}
compare() { # case variant
  runs=$((runs + 1))
  if ! "$h5same" "out-$1-cpu/final.h5" "out-$1-$2/final.h5"; then
    echo "FAIL $1 $2: differs from the cpu backend"
    fail=$((fail + 1))
  fi
}
cases=0
while read -r case opts; do
  [ -n "$case" ] || continue
  cases=$((cases + 1))
  # shellcheck disable=SC2086
  "$mkinput" -o "$case.h5" --overwrite $opts >/dev/null || { echo "FAIL $case: stencil-input"; exit 1; }
  run "$case-cpu" "$@" "$stencil" "$case.h5" --backend cpu || continue
  for k in 1 2; do
    for ov in on off; do
      for t in $transports; do
        v="k$k-$ov-$t"
        run "$case-$v" "$@" "$stencil" "$case.h5" --backend cuda --kernel $k --overlap $ov \
          --halo-transport "$t" ${share:+"$share"} && compare "$case" "$v"
      done
    done
  done
  if [ "$np" -gt 1 ]; then
    for d in 2x1x1 1x2x1; do
      v="dims$d"
      run "$case-$v" "$@" "$stencil" "$case.h5" --backend cuda --dims "$d" ${share:+"$share"} &&
        compare "$case" "$v"
    done
    # ipc of the fused run split along y: the y faces and the edges along x (2 + 4 messages,
    # rows of 72 cells) copied from field to field, the edges along z and the corners (4 + 8,
    # rows of 4 cells) packed, in one exchange (the header says so: no --quiet).
    case "$case $transports" in "d3-fp32-periodic "*ipc*)
      v=boxes
      if "$@" "$stencil" "$case.h5" --backend cuda --dims 1x2x1 --halo-transport ipc \
        ${share:+"$share"} --output-dir "out-$case-$v" --overwrite >"log-$case-$v" 2>&1 </dev/null; then
        compare "$case" "$v"
        grep -q "^halo .* 18 messages of .*; 6 copied from field to field by copy engines, the others (rows under" \
          "log-$case-$v" || { echo "FAIL $case $v: not 6 of 18 messages field boxes:"; \
          grep "^halo\|^kernel" "log-$case-$v"; fail=$((fail + 1)); }
      else
        echo "FAIL $case-$v: the run failed:"; cat "log-$case-$v"; fail=$((fail + 1))
      fi
      ;;
    esac
    # --overlap auto (the default) is off where the ranks share a GPU, and says so
    if [ "$cases" -eq 1 ] && "$@" "$stencil" "$case.h5" --backend cuda ${share:+"$share"} \
      --output-dir "out-$case-auto" --overwrite >"log-$case-auto" 2>&1 </dev/null; then
      said=$(grep -c "^overlap      off: ranks share a GPU" "log-$case-auto")
      [ "$said" = "$([ -n "$share" ] && echo 1 || echo 0)" ] ||
        { echo "FAIL $case: --overlap auto with share='$share' printed $said header lines"; fail=$((fail + 1)); }
    elif [ "$cases" -eq 1 ]; then
      echo "FAIL $case-auto: the run failed:"; cat "log-$case-auto"; fail=$((fail + 1))
    fi
  fi
done <<'CASES'
d3-fp64-dirichlet --shape 45x37x29 --steps 7 --initial random:5 --bc all=dirichlet:0.5
d3-fp32-periodic --shape 72x33x27 --steps 6 --precision fp32 --initial random:6 --bc all=periodic
d3-fp64-mixed --shape 31x26x35 --steps 5 --initial random:7 --bc x=neumann --bc y=periodic --bc z_lo=dirichlet:1 --bc z_hi=neumann
d2-fp64-dirichlet --shape 97x61x1 --steps 9 --initial random:8 --bc all=dirichlet:0.25
d2-fp32-periodic --shape 64x50x1 --steps 8 --precision fp32 --initial random:9 --bc x=periodic --bc y=neumann
CASES
echo "run_compare: $cases cases, $runs comparisons on $np rank(s), $fail failed"
[ "$cases" -eq 5 ] || { echo "FAIL: $cases of the 5 cases ran"; exit 1; }
[ "$fail" -eq 0 ]
