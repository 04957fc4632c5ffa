#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# job.sh: the body of every *.sbatch script (they only hold the #SBATCH lines).
#
#   job.sh run INPUT.h5 [STENCIL_OPTIONS...]   one stencil run on all tasks of the job
#   job.sh weak [weak-scaling.sh options]      a weak-scaling study inside the job
#   job.sh strong [strong-scaling.sh options]  a strong-scaling study inside the job
#   job.sh                                      run $STENCIL_INPUT (same as: run $STENCIL_INPUT)
#
# "run" passes --backend $STENCIL_BACKEND (the GPU *.sbatch scripts default it to cuda) and
# $STENCIL_ARGS (e.g. "--halo-transport auto --overlap on") before the given options. It
# prints a header (allocation, binding, GPU topology, stencil --version) first.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

header() {
  echo "== stencil job ${SLURM_JOB_ID:-(no Slurm)} on ${SLURM_JOB_NODELIST:-$(hostname -s)}," \
    "$(date '+%Y-%m-%d %H:%M:%S %Z')"
  echo "   nodes ${SLURM_JOB_NUM_NODES:-1}, tasks ${SLURM_NTASKS:-?}," \
    "tasks/node $(stencil_tasks_per_node), cpus/task ${CPUS_PER_RANK:-${SLURM_CPUS_PER_TASK:-1}}," \
    "gpus/node $(stencil_gpus_per_node), GPU_BIND $(stencil_gpu_bind)," \
    "GPU_REQUEST $(stencil_gpu_request)," \
    "launcher $(stencil_launcher)"
  echo "   root $STENCIL_ROOT, program $STENCIL_BIN, backend ${STENCIL_BACKEND:-auto}," \
    "STENCIL_ARGS \"${STENCIL_ARGS:-}\""
  if [[ -x $STENCIL_BIN ]]; then
    "$STENCIL_BIN" --version | sed 's/^/   /'
  fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "== nvidia-smi topo -m"
    nvidia-smi topo -m || true
  fi
}

action=${1:-run}
(($# > 0)) && shift
case $action in
run)
  input=${1:-${STENCIL_INPUT:-}}
  (($# > 0)) && shift
  [[ -n $input ]] || stencil_usage_error "run needs an input file (or set STENCIL_INPUT)"
  [[ -r $input ]] || stencil_die "cannot read the input $input"
  stencil_check_programs "$STENCIL_BIN"
  header
  read -ra args <<<"${STENCIL_ARGS:-}"
  stencil_check_transport "$(stencil_gpu_bind)" "${args[@]}" "$@"
  np=${SLURM_NTASKS:-${NP:-1}}
  echo "== stencil on $np ranks: $input"
  stencil_launch "$np" "$STENCIL_BIN" --backend "${STENCIL_BACKEND:-auto}" "${args[@]}" \
    "$@" "$input"
  ;;
weak | strong)
  header
  STENCIL_SCRIPT_NAME=$action-scaling.sh
  stencil_study "$action" "$@"
  ;;
-h | --help)
  sed -n '3,12p' "$0"
  ;;
*)
  stencil_usage_error "unknown command \"$action\": expected run, weak or strong"
  ;;
esac
