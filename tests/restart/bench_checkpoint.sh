#!/usr/bin/env bash
# bench_checkpoint.sh: cost of checkpoints in a real run, against a plain sequential write of
# the same size (dd with fsync) to the same directory, measured in the same invocation.
#
#   bench_checkpoint.sh --build DIR [--np 2] [--shape 512x512x512] [--steps 300]
#                       [--every 100] [--workdir DIR] [--mode sync|background]
#                       [-- more stencil options]
#
# Prints stencil's per-checkpoint lines (size, write time and bandwidth, host copy, loop stall)
# and summary, then the dd baseline and the ratios the checkpoint goals are stated in:
#   stall / host copy            (goal <= 1.1, reachable only with background writing)
#   checkpoint write bandwidth / plain write + fsync bandwidth   (goal >= 0.8)
set -euo pipefail
build="" np=2 shape=512x512x512 steps=300 every=100 work=${TMPDIR:-/tmp}/stencil-bench mode=""
while (($# > 0)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  --np) np=$2; shift 2 ;;
  --shape) shape=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --every) every=$2; shift 2 ;;
  --workdir) work=$2; shift 2 ;;
  --mode) mode=$2; shift 2 ;;
  --) shift; break ;;
  *) echo "bench_checkpoint.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $build ]] || { echo "bench_checkpoint.sh: --build DIR is required" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$work"
inp=$work/bench-$shape.h5
[[ -f $inp ]] || "$build/inputs/stencil-input" -o "$inp" --shape "$shape" --initial random:1 \
  --steps "$steps" >/dev/null
out=$work/out
rm -rf "$out"
extra=()
[[ -n $mode ]] && extra+=(--checkpoint-mode "$mode")
echo "== $(date -Is) $(hostname), $(nproc --all) cores; stencil $shape fp64 on $np ranks, $steps steps," \
  "checkpoint every $every${mode:+, mode $mode}"
log=$work/run.log
# The baseline: a sequential write of the same size, including its fsync, to the same
# directory, three times just before and three times just after the run (the disk of a shared
# machine varies); the median of the six is what the checkpoints are compared with. Like a
# checkpoint, each plain write makes a new file next to the earlier ones; they are removed
# after each set of three. (Rewriting blocks that were freed a moment before, as `dd; rm` in a
# loop does, was twice as fast on the dev VM's virtual disk as writing new ones, and no
# checkpoint gets that: it is written while the previous one still exists.)
read -r nx ny nz < <(tr 'x' ' ' <<<"$shape")
count=$(awk -v x="$nx" -v y="$ny" -v z="${nz:-1}" 'BEGIN { printf "%d", x * y * z * 8 / 1048576 + 0.5 }')
plain() {
  local t0 t1
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$work/dd$1.bin" bs=1M count="$count" conv=fsync status=none
  t1=$(date +%s.%N)
  awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", t1 - t0 }'
}
plain_set() {
  for i in 1 2 3; do dd_times+=("$(plain "$i")"); done
  rm -f "$work"/dd[123].bin
}
dd_times=()
plain_set
mpirun -n "$np" "$build/app/stencil" "$inp" --output-dir "$out" --steps "$steps" \
  --checkpoint-every "$every" --keep-checkpoints 1 --check-every 0 --progress 0 \
  "${extra[@]}" "$@" | tee "$log"
summary=$(grep '^checkpoints ' "$log")
# "checkpoints  N written, X MiB each: write W s each (B MB/s), host copy C s, loop stalled S s each"
bw=$(sed -n 's/.*(\([0-9.]*\) MB\/s).*/\1/p' <<<"$summary")
copy=$(sed -n 's/.*host copy \([0-9.]*\) s.*/\1/p' <<<"$summary")
stall=$(sed -n 's/.*loop stalled \([0-9.]*\) s each.*/\1/p' <<<"$summary")
plain_set
rm -rf "$out"
awk -v m="$count" -v times="${dd_times[*]}" -v bw="$bw" -v copy="$copy" -v stall="$stall" '
function bw_of(t) { return m * 1048576 / t / 1e6 }
BEGIN {
  n = split(times, t, " ")
  for (i = 1; i <= n; i++)          # insertion sort, for the median
    for (j = i; j > 1 && t[j] < t[j - 1]; j--) { x = t[j]; t[j] = t[j - 1]; t[j - 1] = x }
  med = (t[int((n + 1) / 2)] + t[int(n / 2) + 1]) / 2
  printf "plain write  %d MiB with dd + fsync, 3 before and 3 after the run: %.1f .. %.1f MB/s, median %.1f MB/s\n", m, bw_of(t[n]), bw_of(t[1]), bw_of(med)
  printf "ratio        checkpoint write bandwidth / median plain write = %.1f / %.1f = %.2f (goal >= 0.8)\n", bw, bw_of(med), bw / bw_of(med)
  printf "ratio        loop stall / host copy = %.3f / %.3f s = %.1f (goal <= 1.1)\n", stall, copy,
         (copy > 0 ? stall / copy : 0)
}'
