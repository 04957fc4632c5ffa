#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2030,SC2031
# (SC2016: single quotes expanded by the child sh; SC2030/1: subshell-only exports on purpose)
# lib_test.sh SOURCE_DIR: unit checks of jobscripts/lib.sh and bind.sh without Slurm or MPI:
# rank grids (stencil_dims), the srun / mpirun command lines built for a faked allocation
# (node counts, GPU and CPU binding flags, timeouts, refusals), and bind.sh's GPU pick and
# OpenMP settings.
set -euo pipefail
src=${1:?usage: lib_test.sh SOURCE_DIR}
# shellcheck source=../../jobscripts/lib.sh
source "$src/jobscripts/lib.sh"
set +e # the checks below report every failure, not only the first
failures=0
expect() { # expect WHAT GOT WANT
  if [[ $2 == "$3" ]]; then
    echo "ok   $1: $2"
  else
    echo "FAIL $1: got \"$2\", expected \"$3\""
    failures=$((failures + 1))
  fi
}

# ---- rank grids -------------------------------------------------------------------------
for c in "1 3 1x1x1" "2 3 1x1x2" "4 3 1x2x2" "8 3 2x2x2" "6 3 1x2x3" "12 3 2x2x3" "16 3 2x2x4" \
  "7 3 1x1x7" "64 3 4x4x4" "2 2 1x2x1" "4 2 2x2x1" "8 2 2x4x1" "6 2 2x3x1"; do
  read -r np nd want <<<"$c"
  expect "stencil_dims $np ${nd}D" "$(stencil_dims "$np" "$nd")" "$want"
done
# Only some axes (--split, --slabs).
for c in "8 3 yz 1x2x4" "4 3 yz 1x2x2" "16 3 yz 1x4x4" "6 3 xy 2x3x1" "8 3 z 1x1x8" \
  "12 3 xz 4x1x3" "4 2 y 1x4x1" "6 2 xy 2x3x1"; do
  read -r np nd axes want <<<"$c"
  expect "stencil_dims $np ${nd}D $axes" "$(stencil_dims "$np" "$nd" "$axes")" "$want"
done

# ---- srun lines in a faked 2-node allocation of 8 GPUs, 14 cores per rank --------------
bind=$STENCIL_JOBSCRIPTS/bind.sh
srun_line() { # srun_line NP: the prefix as one string, in a subshell
  (
    local -a pre
    export SLURM_JOB_ID=42 SLURM_NTASKS=16 SLURM_NTASKS_PER_NODE=8 SLURM_JOB_NUM_NODES=2
    export SLURM_CPUS_PER_TASK=14 SLURM_GPUS_PER_NODE=h100:8 LAUNCHER=srun SRUN_MPI=pmix
    unset GPUS_PER_NODE TASKS_PER_NODE CPUS_PER_RANK
    stencil_launch_prefix "$1" pre
    echo "${pre[*]}"
  )
}
base="--cpus-per-task=14 --cpu-bind=cores --exact --kill-on-bad-exit=1 --mpi=pmix"
unset GPU_BIND
expect "srun 12 ranks, GPU_BIND default" "$(srun_line 12)" \
  "srun --ntasks=12 --nodes=2 --ntasks-per-node=8 $base --gpus-per-node=8 bash $bind"
expect "srun 4 ranks" "$(srun_line 4)" \
  "srun --ntasks=4 --nodes=1 --ntasks-per-node=4 $base --gpus-per-node=8 bash $bind"
expect "srun GPU_BIND=task" "$(GPU_BIND=task srun_line 8)" \
  "srun --ntasks=8 --nodes=1 --ntasks-per-node=8 $base --gpus-per-task=1 --gpu-bind=closest bash $bind"
expect "srun GPU_BIND=none" "$(GPU_BIND=none srun_line 1)" \
  "srun --ntasks=1 --nodes=1 --ntasks-per-node=1 $base bash $bind"
expect "srun RUN_TIMEOUT, SRUN_FLAGS" "$(RUN_TIMEOUT=60 SRUN_FLAGS="--network=x -v" GPU_BIND=none srun_line 2)" \
  "timeout --kill-after=30 60 srun --ntasks=2 --nodes=1 --ntasks-per-node=2 $base --network=x -v bash $bind"
msg=$(srun_line 20 2>&1)
expect "srun 20 ranks in 16 tasks refused" "$?:$msg" \
  "1:$STENCIL_SCRIPT_NAME: error: 20 ranks asked for, but the allocation has 16 tasks (sbatch -N/--ntasks-per-node)"
msg=$(GPU_BIND=closest srun_line 2 2>&1)
expect "bad GPU_BIND refused" "$?:$msg" \
  "1:$STENCIL_SCRIPT_NAME: error: GPU_BIND must be node, task, wrapper or none, not \"closest\""

# A site that allocates GPUs with --gres=gpu:4: no SLURM_GPUS_PER_NODE, but SLURM_JOB_GPUS (or
# SLURM_GPUS_ON_NODE); the steps ask with --gres too.
gres_line() { # gres_line NP VARIABLE=VALUE: as srun_line in a --gres allocation
  (
    local -a pre
    export SLURM_JOB_ID=42 SLURM_NTASKS=8 SLURM_NTASKS_PER_NODE=4 SLURM_JOB_NUM_NODES=2
    export SLURM_CPUS_PER_TASK=14 LAUNCHER=srun SRUN_MPI=pmix
    export "${2?}"
    unset GPUS_PER_NODE TASKS_PER_NODE CPUS_PER_RANK SLURM_GPUS_PER_NODE
    stencil_launch_prefix "$1" pre
    echo "${pre[*]}"
  )
}
expect "srun, --gres allocation (SLURM_JOB_GPUS)" "$(gres_line 8 SLURM_JOB_GPUS=0,1,2,3)" \
  "srun --ntasks=8 --nodes=2 --ntasks-per-node=4 $base --gres=gpu:4 bash $bind"
expect "srun, --gres allocation (SLURM_GPUS_ON_NODE), GPU_BIND=task" \
  "$(GPU_BIND=task gres_line 4 SLURM_GPUS_ON_NODE=4)" \
  "srun --ntasks=4 --nodes=1 --ntasks-per-node=4 $base --gres=gpu:4 --gpu-bind=single:1 bash $bind"
expect "srun GPU_REQUEST=gres" "$(GPU_REQUEST=gres srun_line 4)" \
  "srun --ntasks=4 --nodes=1 --ntasks-per-node=4 $base --gres=gpu:8 bash $bind"
msg=$(GPU_REQUEST=tres srun_line 2 2>&1)
expect "bad GPU_REQUEST refused" "$?:$msg" \
  "1:$STENCIL_SCRIPT_NAME: error: GPU_REQUEST must be gpus or gres, not \"tres\""

# GPU_BIND=task hides the neighbours' GPUs: the ipc transport is refused, the others are not.
for args in "--halo-transport ipc" "--overlap on --halo-transport=ipc"; do
  # shellcheck disable=SC2086 # the options, split
  msg=$(stencil_check_transport task $args 2>&1)
  expect "GPU_BIND=task with $args refused" "$?:${msg%%:*}" "1:$STENCIL_SCRIPT_NAME"
done
msg=$(stencil_check_transport task --halo-transport nccl 2>&1 && stencil_check_transport node \
  --halo-transport ipc 2>&1)
expect "GPU_BIND=task with nccl, node with ipc" "$?:$msg" "0:"

# ---- mpirun lines (a fake Open MPI mpirun) ----------------------------------------------
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
printf '#!/bin/sh\necho "mpirun (Open MPI) 4.1.4"\n' >"$fake/mpirun"
chmod +x "$fake/mpirun"
mpirun_line() {
  (
    local -a pre
    unset SLURM_JOB_ID
    export LAUNCHER=auto MPIRUN=$fake/mpirun GPU_BIND=none
    stencil_launch_prefix "$1" pre
    echo "${pre[*]}"
  )
}
many=$(($(nproc --all) + 1))
expect "mpirun 1 rank" "$(mpirun_line 1)" "$fake/mpirun -n 1 bash $bind"
expect "mpirun $many ranks oversubscribed" "$(mpirun_line "$many")" \
  "$fake/mpirun -n $many --oversubscribe bash $bind"

# ---- bind.sh ----------------------------------------------------------------------------
line=$(env -u OMP_NUM_THREADS -u OMP_PLACES GPU_BIND=wrapper CUDA_VISIBLE_DEVICES=3,5,7 \
  SLURM_LOCALID=4 SLURM_PROCID=12 SLURM_CPUS_PER_TASK=6 BIND_VERBOSE=1 \
  bash "$bind" sh -c 'echo "$CUDA_VISIBLE_DEVICES $OMP_NUM_THREADS $CUDA_DEVICE_ORDER"' 2>/dev/null)
expect "bind.sh wrapper: local rank 4 of GPUs 3,5,7" "$line" "5 6 PCI_BUS_ID"
line=$(env GPU_BIND=wrapper CUDA_VISIBLE_DEVICES=3,5,7 SLURM_LOCALID=4 BIND_VERBOSE=1 \
  bash "$bind" true 2>&1)
expect "bind.sh verbose line" "${line%% cpus *}" "bind: rank 0 local 4 host $(hostname -s)"
line=$(env CUDA_VISIBLE_DEVICES=1,2 GPU_BIND=node bash "$bind" sh -c 'echo $CUDA_VISIBLE_DEVICES')
expect "bind.sh node mode keeps the GPUs" "$line" "1,2"
line=$(env -u OMP_PLACES -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK -u CPUS_PER_RANK \
  bash "$bind" sh -c 'echo "${OMP_NUM_THREADS}:${OMP_PLACES:-unset}"')
expect "bind.sh without a CPU mask" "$line" "1:unset"
if (($(nproc --all) > 1)) && command -v taskset >/dev/null 2>&1; then
  line=$(env -u OMP_PLACES -u OMP_PROC_BIND taskset -c 0 bash "$bind" \
    sh -c 'echo "${OMP_PLACES:-unset} ${OMP_PROC_BIND:-unset}"')
  expect "bind.sh in a 1-CPU mask" "$line" "cores close"
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  msg=$(env -u CUDA_VISIBLE_DEVICES GPU_BIND=wrapper bash "$bind" true 2>&1)
  expect "bind.sh wrapper without GPUs" "$?:$msg" \
    "1:bind.sh: error: GPU_BIND=wrapper but no GPU is visible on $(hostname)"
fi
msg=$(bash "$bind" 2>&1)
expect "bind.sh without a program" "$?:$msg" "2:bind.sh: usage: bind.sh PROGRAM [ARGS...]"

# ---- study option errors ----------------------------------------------------------------
msg=$(bash "$src/jobscripts/weak-scaling.sh" --shape 8x8x8 2>&1)
expect "weak-scaling.sh --shape refused" "$?:$msg" \
  "2:weak-scaling.sh: error: --shape is not an option of the weak-scaling study (see --help)"
msg=$(bash "$src/jobscripts/strong-scaling.sh" --ranks 1,x --print-only 2>&1)
expect "strong-scaling.sh bad --ranks" "$?:$msg" \
  "2:strong-scaling.sh: error: --ranks expects positive integers, got \"x\" (see --help)"
msg=$(bash "$src/jobscripts/weak-scaling.sh" --size 8x8x0 --print-only 2>&1)
expect "weak-scaling.sh bad --size" "$?:$msg" \
  "2:weak-scaling.sh: error: --size expects NXxNYxNZ (or NXxNY), got \"8x8x0\" (see --help)"
msg=$(bash "$src/jobscripts/weak-scaling.sh" --size 8x8 --split z --print-only 2>&1)
expect "weak-scaling.sh --split z in 2D" "$?:$msg" \
  "2:weak-scaling.sh: error: --split expects axes of the 2D problem (letters of xy), got \"z\" (see --help)"
msg=$(bash "$src/jobscripts/weak-scaling.sh" --print-only --ranks 2 --size 2>&1)
expect "weak-scaling.sh --size without a value" "$?:$msg" \
  "2:weak-scaling.sh: error: --size needs a value (see --help)"
msg=$(bash "$src/jobscripts/strong-scaling.sh" --print-only --split "" 2>&1)
expect "strong-scaling.sh --split \"\"" "$?:$msg" \
  "2:strong-scaling.sh: error: --split needs a value (see --help)"
msg=$(bash "$src/jobscripts/weak-scaling.sh" --size 8x8 --split yz --print-only 2>&1)
expect "weak-scaling.sh --split yz in 2D" "$?:$msg" \
  "2:weak-scaling.sh: error: --split expects axes of the 2D problem (letters of xy), got \"yz\" (see --help)"
msg=$(bash "$src/jobscripts/weak-scaling.sh" --print-only --transport , 2>&1)
expect "weak-scaling.sh --transport ," "$?:$msg" \
  "2:weak-scaling.sh: error: --transport expects auto, mpi-host, mpi-device, ipc, nccl or default, got \"\" (see --help)"
# A rank count the allocation cannot start fails its own runs, not the study's others.
err=$(mktemp)
lines=$(
  export SLURM_JOB_ID=42 SLURM_NTASKS=16 SLURM_NTASKS_PER_NODE=8 SLURM_JOB_NUM_NODES=2
  export LAUNCHER=srun GPU_BIND=none
  bash "$src/jobscripts/strong-scaling.sh" --print-only --ranks 8,20 2>"$err"
  echo "status $?"
)
expect "strong-scaling.sh 20 ranks in 16 tasks: refused" "$(<"$err")" \
  "-- fp64-default-default-p20: 20 ranks asked for, but the allocation has 16 tasks (sbatch -N/--ntasks-per-node)"
expect "strong-scaling.sh 20 ranks in 16 tasks: 8 run, status 1" \
  "$(grep -c -- '--ntasks=8 ' <<<"$lines") $(tail -1 <<<"$lines")" "1 status 1"
rm -f "$err"
# --split passes the grid as --dims in both studies; --slabs is the last axis alone.
for c in "strong --shape 16x16x16 --split yz:--dims 1x2x4" "weak --size 8x8x8 --split yz:--dims 1x2x4" \
  "strong --shape 16x16x16 --slabs:--dims 1x1x8" "weak --size 8x8 --slabs:--dims 1x8x1" \
  "strong --shape 16x16x16:"; do
  IFS=: read -r args want <<<"$c"
  read -ra a <<<"$args"
  line=$(STENCIL_BIN=/bin/true STENCIL_INPUT_BIN=/bin/true LAUNCHER=mpirun MPIRUN=mpirun \
    bash "$src/jobscripts/${a[0]}-scaling.sh" "${a[@]:1}" --ranks 8 --print-only 2>&1 |
    grep -o -- "--dims [0-9x]*" || true)
  expect "${a[0]}-scaling.sh ${a[*]:1} on 8 ranks" "$line" "$want"
done
msg=$(bash "$src/jobscripts/job.sh" frobnicate 2>&1)
expect "job.sh unknown command" "$?:$msg" \
  "2:job.sh: error: unknown command \"frobnicate\": expected run, weak or strong (see --help)"

# requeue.sbatch: a launcher that exits 0 without running the ranks (here: a "stencil" that
# does nothing) must not read as a complete run.
rq=$(mktemp -d)
msg=$(STENCIL_BIN=/bin/true LAUNCHER=direct NP=1 STENCIL_OUTPUT_DIR="$rq/out" \
  bash "$src/jobscripts/requeue.sbatch" "$rq/in.h5" --quiet 2>&1 >/dev/null)
expect "requeue.sbatch, no output written" "$?:$msg" \
  "1:requeue.sbatch: error: the launcher exited 0 but this start wrote no .h5 file in $rq/out: the ranks did not run (see the launcher's messages above); not requeueing"
# It means GPUs: it asks Slurm for them and runs with --backend cuda unless told otherwise.
line=$(STENCIL_BIN=/bin/true LAUNCHER=direct NP=1 STENCIL_OUTPUT_DIR="$rq/out" \
  bash "$src/jobscripts/requeue.sbatch" "$rq/in.h5" 2>/dev/null | head -1)
expect "requeue.sbatch runs --backend cuda" "$(grep -c -- "--backend cuda --output-dir" <<<"$line")" 1
expect "requeue.sbatch asks for GPUs" "$(grep -c '^#SBATCH --gpus-per-node=' \
  "$src/jobscripts/requeue.sbatch")" 1
rm -rf "$rq"

if ((failures > 0)); then
  echo "lib_test.sh: $failures checks failed"
  exit 1
fi
echo "lib_test.sh: all checks passed"
