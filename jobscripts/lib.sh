# shellcheck shell=bash
# shellcheck source-path=SCRIPTDIR
# Functions shared by job.sh and the study scripts; sourced, never run.
#
# On sourcing: STENCIL_JOBSCRIPTS is this folder, STENCIL_ROOT the checkout above it (unless
# set), site.sh (SITE SETTINGS) is loaded, and STENCIL_BIN / STENCIL_INPUT_BIN name the
# programs of STENCIL_BUILD, or of PREFIX/bin for an installed copy (each may be set directly
# instead).
#
# Launching (variables, all optional):
#   LAUNCHER        auto (default): srun inside a Slurm allocation, else mpirun;
#                   or srun, mpirun, direct (one rank, no launcher)
#   CPUS_PER_RANK   cores per rank (default: SLURM_CPUS_PER_TASK, else 1)
#   TASKS_PER_NODE  ranks per node for srun (default: SLURM_NTASKS_PER_NODE, else
#                   GPUs per node, else tasks / nodes of the allocation)
#   GPUS_PER_NODE   GPUs per node (default: from SLURM_GPUS_PER_NODE, set by --gpus-per-node;
#                   else SLURM_GPUS_ON_NODE or the count of SLURM_JOB_GPUS, set by --gres;
#                   else 0)
#   GPU_BIND        how a rank gets its GPU (default node when GPUS_PER_NODE > 0, else none):
#                     node     every rank sees all GPUs of its node; stencil picks the
#                              node-local rank's GPU (keeps same-node CUDA IPC possible)
#                     task     srun --gpus-per-task=1 --gpu-bind=closest: Slurm gives each
#                              rank the GPU nearest its cores, and hides the others (so the
#                              ipc halo transport cannot work: refused here, and stencil's
#                              auto picks another)
#                     wrapper  all GPUs given to the step; bind.sh exports one per rank
#                     none     no GPU options (CPU backend, or GPUs not managed by Slurm)
#   GPU_REQUEST     how srun asks for the step's GPUs: gpus (--gpus-per-node, --gpus-per-task)
#                   or gres (--gres=gpu:G, and --gpu-bind=single:1 for task); default gres
#                   when the job was given GPUs by --gres (SLURM_GPUS_PER_NODE unset but
#                   SLURM_GPUS_ON_NODE or SLURM_JOB_GPUS set), else gpus
#   CPU_BIND        srun --cpu-bind value (default cores)
#   NUMA_BIND=1     with GPU_BIND=wrapper: numactl onto the GPU's NUMA node (bind.sh)
#   RUN_TIMEOUT     seconds one launch may take before it is killed (default 0: no limit)
#   MPIRUN          the mpirun program (default mpirun from PATH)
#   SRUN_MPI, SRUN_FLAGS, MPIRUN_FLAGS: see site.sh

STENCIL_JOBSCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${STENCIL_ROOT:=$(cd "$STENCIL_JOBSCRIPTS/.." && pwd)}"
# shellcheck source=site.sh
source "$STENCIL_JOBSCRIPTS/site.sh"
# An installed copy of these scripts (PREFIX/share/stencil/jobscripts) runs PREFIX/bin's
# programs when STENCIL_BUILD holds none.
_stencil_prefix_bin=$(cd "$STENCIL_JOBSCRIPTS/../../.." && pwd)/bin
if [[ ! -x $STENCIL_BUILD/app/stencil && -x $_stencil_prefix_bin/stencil ]]; then
  : "${STENCIL_BIN:=$_stencil_prefix_bin/stencil}"
  : "${STENCIL_INPUT_BIN:=$_stencil_prefix_bin/stencil-input}"
fi
: "${STENCIL_BIN:=$STENCIL_BUILD/app/stencil}"
: "${STENCIL_INPUT_BIN:=$STENCIL_BUILD/inputs/stencil-input}"

STENCIL_SCRIPT_NAME=${STENCIL_SCRIPT_NAME:-$(basename "$0")}
STENCIL_AXES=xyz

stencil_die() {
  echo "$STENCIL_SCRIPT_NAME: error: $*" >&2
  exit 1
}

stencil_usage_error() {
  echo "$STENCIL_SCRIPT_NAME: error: $* (see --help)" >&2
  exit 2
}

stencil_check_programs() {
  local p
  for p in "$@"; do
    [[ -x $p ]] || stencil_die "$p is not an executable: build stencil first, or set" \
      "STENCIL_BUILD (now $STENCIL_BUILD) in jobscripts/site.sh or the environment"
  done
}

# The launcher LAUNCHER selects; auto picks srun inside a Slurm allocation.
stencil_launcher() {
  case ${LAUNCHER:-auto} in
  auto)
    if [[ -n ${SLURM_JOB_ID:-} ]] && command -v srun >/dev/null 2>&1; then
      echo srun
    elif command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
      echo mpirun
    else
      echo direct
    fi
    ;;
  srun | mpirun | direct) echo "$LAUNCHER" ;;
  *) stencil_die "LAUNCHER must be auto, srun, mpirun or direct, not \"$LAUNCHER\"" ;;
  esac
}

stencil_gpus_per_node() {
  local g=${GPUS_PER_NODE:-${SLURM_GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-}}}
  if [[ -z $g && -n ${SLURM_JOB_GPUS:-} ]]; then
    local -a ids
    IFS=, read -ra ids <<<"$SLURM_JOB_GPUS"
    g=${#ids[@]}
  fi
  g=${g##*:} # SLURM_GPUS_PER_NODE may read h100:4
  [[ $g =~ ^[0-9]+$ ]] || g=0
  echo "$g"
}

stencil_gpu_request() {
  local r=${GPU_REQUEST:-}
  if [[ -z $r ]]; then
    if [[ -z ${SLURM_GPUS_PER_NODE:-} && -n ${SLURM_GPUS_ON_NODE:-}${SLURM_JOB_GPUS:-} ]]; then
      r=gres
    else
      r=gpus
    fi
  fi
  [[ $r == gpus || $r == gres ]] || stencil_die "GPU_REQUEST must be gpus or gres, not \"$r\""
  echo "$r"
}

# stencil_check_transport MODE ARGS...: GPU_BIND=task hides each rank's neighbours' GPUs, so
# a --halo-transport ipc among the stencil options cannot work.
stencil_check_transport() {
  local mode=$1 prev="" a
  shift
  [[ $mode == task ]] || return 0
  for a in "$@"; do
    if [[ $a == --halo-transport=ipc || ($prev == --halo-transport && $a == ipc) ]]; then
      stencil_die "GPU_BIND=task gives each rank only its own GPU, so --halo-transport ipc" \
        "(CUDA IPC between the ranks' GPUs) cannot work: use GPU_BIND=node, or another" \
        "transport (auto picks one)"
    fi
    prev=$a
  done
}

stencil_gpu_bind() {
  local mode=${GPU_BIND:-}
  if [[ -z $mode ]]; then
    if (($(stencil_gpus_per_node) > 0)); then mode=node; else mode=none; fi
  fi
  case $mode in
  node | task | wrapper | none) echo "$mode" ;;
  *) stencil_die "GPU_BIND must be node, task, wrapper or none, not \"$mode\"" ;;
  esac
}

stencil_tasks_per_node() {
  local t=${TASKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-}}
  t=${t%%(*} # 4(x2) form
  if ! [[ $t =~ ^[1-9][0-9]*$ ]]; then
    t=$(stencil_gpus_per_node)
    if ((t == 0)); then
      local n=${SLURM_NTASKS:-1} nodes=${SLURM_JOB_NUM_NODES:-1}
      t=$(((n + nodes - 1) / nodes))
    fi
  fi
  echo "$t"
}

# Why NP ranks do not fit the Slurm allocation srun would start them in (nothing if they do).
stencil_too_many_ranks() {
  local np=$1
  if [[ $(stencil_launcher) == srun && -n ${SLURM_NTASKS:-} ]] && ((np > SLURM_NTASKS)); then
    echo "$np ranks asked for, but the allocation has $SLURM_NTASKS tasks (sbatch -N/--ntasks-per-node)"
  fi
}

# The command prefix that starts NP ranks, into the array named by $2.
stencil_launch_prefix() {
  local np=$1
  local -n out=$2
  local launcher cpr gpus mode request
  launcher=$(stencil_launcher) || exit 1
  cpr=${CPUS_PER_RANK:-${SLURM_CPUS_PER_TASK:-1}}
  gpus=$(stencil_gpus_per_node)
  mode=$(stencil_gpu_bind) || exit 1
  request=$(stencil_gpu_request) || exit 1
  local -a extra=()
  out=()
  case $launcher in
  srun)
    [[ -n ${SLURM_JOB_ID:-} ]] || stencil_die "LAUNCHER=srun outside a Slurm allocation"
    local short
    short=$(stencil_too_many_ranks "$np")
    [[ -z $short ]] || stencil_die "$short"
    local tpn nodes
    tpn=$(stencil_tasks_per_node)
    ((tpn > np)) && tpn=$np
    nodes=$(((np + tpn - 1) / tpn))
    out=(srun "--ntasks=$np" "--nodes=$nodes" "--ntasks-per-node=$tpn" "--cpus-per-task=$cpr"
      "--cpu-bind=${CPU_BIND:-cores}" --exact --kill-on-bad-exit=1)
    [[ -n ${SRUN_MPI:-} ]] && out+=("--mpi=$SRUN_MPI")
    case $mode/$request in
    node/gpus | wrapper/gpus) out+=("--gpus-per-node=$gpus") ;;
    node/gres | wrapper/gres) out+=("--gres=gpu:$gpus") ;;
    task/gpus) out+=(--gpus-per-task=1 --gpu-bind=closest) ;;
    task/gres) out+=("--gres=gpu:$gpus" --gpu-bind=single:1) ;;
    none/*) ;;
    esac
    read -ra extra <<<"${SRUN_FLAGS:-}"
    ;;
  mpirun)
    out=("${MPIRUN:-mpirun}" -n "$np")
    # Open MPI refuses more ranks than cores unless told.
    if ((np > $(nproc --all))) && "${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI"; then
      out+=(--oversubscribe)
    fi
    read -ra extra <<<"${MPIRUN_FLAGS:-}"
    ;;
  direct)
    ((np == 1)) || stencil_die "LAUNCHER=direct runs one rank only, $np asked for"
    ;;
  esac
  out+=("${extra[@]}")
  if [[ ${RUN_TIMEOUT:-0} != 0 ]]; then
    out=(timeout --kill-after=30 "$RUN_TIMEOUT" "${out[@]}")
  fi
  # bind.sh must see GPU_BIND (wrapper mode) and the thread count.
  export GPU_BIND=$mode CPUS_PER_RANK=$cpr
  out+=(bash "$STENCIL_JOBSCRIPTS/bind.sh")
}

# stencil_launch NP PROGRAM [ARGS...]: run PROGRAM on NP ranks.
stencil_launch() {
  local np=$1
  shift
  local -a pre
  stencil_launch_prefix "$np" pre
  "${pre[@]}" "$@"
}

# stencil_dims NP NDIM [AXES]: a PxQxR rank grid with P*Q*R = NP, split along the AXES
# (letters of xyz; default all of the problem's) as evenly as the prime factors allow: each
# factor, largest first, multiplies the axis of AXES with the fewest ranks so far; ties go to
# the slowest axis (z in 3D, y in 2D), whose faces are contiguous in memory.
stencil_dims() {
  local np=$1 ndim=$2 axes=${3:-xyz} f=2 a best
  local -a factors=() d=(1 1 1) on=()
  for ((a = 0; a < ndim; a++)); do
    [[ $axes == *"${STENCIL_AXES:a:1}"* ]] && on+=("$a")
  done
  ((${#on[@]} > 0)) || stencil_die "no axis of a ${ndim}D problem in \"$axes\""
  ((np >= 1)) || stencil_die "rank count must be >= 1, got $np"
  while ((np > 1)); do
    if ((np % f == 0)); then
      factors=("$f" "${factors[@]}")
      np=$((np / f))
    else
      f=$((f + 1))
    fi
  done
  for f in "${factors[@]}"; do
    best=${on[-1]}
    for ((a = ${#on[@]} - 2; a >= 0; a--)); do
      ((d[on[a]] < d[best])) && best=${on[a]}
    done
    d[best]=$((d[best] * f))
  done
  echo "${d[0]}x${d[1]}x${d[2]}"
}

# Split "AxBxC" (or "AxB") into three integers, C = 1 for two.
stencil_parse_shape() {
  local s=$1 what=$2
  local -n res=$3
  local -a p
  IFS=x read -ra p <<<"$s"
  ((${#p[@]} == 2)) && p+=(1)
  if ((${#p[@]} != 3)) || ! [[ ${p[0]} =~ ^[1-9][0-9]*$ && ${p[1]} =~ ^[1-9][0-9]*$ &&
    ${p[2]} =~ ^[1-9][0-9]*$ ]]; then
    stencil_usage_error "$what expects NXxNYxNZ (or NXxNY), got \"$s\""
  fi
  # shellcheck disable=SC2034 # res names the caller's array
  res=("${p[@]}")
}

stencil_study_help() {
  local mode=$1 size_opt size_help default_size
  if [[ $mode == weak ]]; then
    size_opt="--size NXxNYxNZ   cells per rank (NXxNY for 2D); the global grid is this times"
    size_help="                   the rank grid, which is chosen here and passed as --dims"
    default_size=64x64x64
  else
    size_opt="--shape NXxNYxNZ  global cells (NXxNY for 2D), the same for every rank count;"
    size_help="                   stencil chooses the rank grid"
    default_size=128x128x128
  fi
  cat <<EOF
Usage: $STENCIL_SCRIPT_NAME [options] [-- STENCIL_OPTIONS...]

$mode-scaling study: for each precision, transport, overlap setting and rank count, write
an input with stencil-input, run stencil with --report-json through srun (inside a Slurm
allocation) or mpirun (outside one), and append one CSV row per run (see README.md).

  $size_opt
  $size_help                                                   [$default_size]
  --ranks LIST       rank counts, comma-separated; run in increasing order   [1,2,4,8]
  --steps N          time steps per run                                       [100]
  --precision LIST   fp64, fp32 or fp32,fp64                                  [fp64]
  --backend B        cpu, cuda or auto                 [\$STENCIL_BACKEND or auto]
  --overlap LIST     on, off or on,off: passed as --overlap; default leaves it out
                                                                          [default]
  --transport LIST   halo transports (auto, mpi-host, mpi-device, ipc, nccl), passed as
                     --halo-transport; default leaves it out                  [default]
  --slabs            every rank count as slabs along the last axis (--dims 1x1xN, 2D
                     1xN): the fewest messages, contiguous (--split z, 2D --split y)
  --split AXES       split only these axes (letters of xyz), as evenly as the rank
                     count allows, e.g. yz: 8 ranks make 1x2x4, no x faces, whose
                     narrow rows the GPU transports pack (passed as --dims)    [xyz]
  --input-args STR   more stencil-input options, e.g. "--dt 0.05 --bc all=periodic"
  --workdir DIR      inputs, reports, logs              [\$STENCIL_SCRATCH/SERIES]
  --csv FILE         CSV to append to                 [WORKDIR/../$mode-scaling.csv]
  --series NAME      name of this study in the CSV (efficiency is relative to the
                     smallest run of the same series, problem, steps, precision,
                     backend, transport, overlap and stencil options)
                                                        [$mode-JOBID or $mode-DATE]
  --baseline-series NAME  efficiency relative to the smallest run of this series or of
                     NAME's in the same CSV (e.g. rank grids of another shape against
                     the same one-rank run)                                   [none]
  --plot FILE.png    plot the whole CSV at the end (needs matplotlib in \$PYTHON)
  --keep-output      keep each run's final field (removed by default: it can be large)
  --print-only       print the commands instead of running them
  --help             this text

Everything after -- is passed to stencil, after \$STENCIL_ARGS (default empty), e.g.
  -- --check-every 0
Environment: LAUNCHER, GPU_BIND, CPUS_PER_RANK, RUN_TIMEOUT, ... (lib.sh); site.sh.
Exit status: 0 if every run succeeded, 1 if any failed (the others still run), 2 usage.
EOF
}

# stencil_study MODE ARGS...: the weak (MODE=weak) or strong (MODE=strong) scaling study.
stencil_study() {
  local mode=$1
  shift
  local size="" ranks_list=1,2,4,8 steps=100 precisions=fp64 backend=${STENCIL_BACKEND:-auto}
  local overlaps=default transports=default input_args="" workdir="" csv="" series=""
  local plot="" keep=0 print_only=0 split="" baseline=""
  [[ $mode == weak ]] && size=64x64x64 || size=128x128x128
  local -a user_args=()
  while (($# > 0)); do
    case $1 in
    --size | --shape | --ranks | --steps | --precision | --backend | --overlap | --transport | \
      --workdir | --csv | --series | --baseline-series | --plot | --split)
      [[ $# -ge 2 && -n $2 ]] || stencil_usage_error "$1 needs a value"
      ;;
    --input-args) (($# >= 2)) || stencil_usage_error "$1 needs a value" ;;
    esac
    case $1 in
    --size | --shape)
      [[ ($1 == --size && $mode == weak) || ($1 == --shape && $mode == strong) ]] ||
        stencil_usage_error "$1 is not an option of the $mode-scaling study"
      size=$2
      shift 2
      ;;
    --ranks) ranks_list=$2 && shift 2 ;;
    --steps) steps=$2 && shift 2 ;;
    --precision) precisions=$2 && shift 2 ;;
    --backend) backend=$2 && shift 2 ;;
    --overlap) overlaps=$2 && shift 2 ;;
    --transport) transports=$2 && shift 2 ;;
    --input-args) input_args=$2 && shift 2 ;;
    --workdir) workdir=$2 && shift 2 ;;
    --csv) csv=$2 && shift 2 ;;
    --series) series=$2 && shift 2 ;;
    --baseline-series) baseline=$2 && shift 2 ;;
    --plot) plot=$2 && shift 2 ;;
    --keep-output) keep=1 && shift ;;
    --slabs) split=last && shift ;;
    --split) split=$2 && shift 2 ;;
    --print-only) print_only=1 && shift ;;
    -h | --help)
      stencil_study_help "$mode"
      return 0
      ;;
    --)
      shift
      user_args=("$@")
      break
      ;;
    *) stencil_usage_error "unknown option \"$1\"" ;;
    esac
  done

  # ---- validate --------------------------------------------------------------------------
  local -a shape ranks prec_list ov_list tr_list stencil_args=() extra_input=()
  stencil_parse_shape "$size" "--$([[ $mode == weak ]] && echo size || echo shape)" shape
  local ndim=3
  ((shape[2] == 1)) && ndim=2
  [[ $split != last ]] || split=${STENCIL_AXES:ndim-1:1}
  [[ -z $split || $split =~ ^[${STENCIL_AXES:0:ndim}]+$ ]] ||
    stencil_usage_error "--split expects axes of the ${ndim}D problem (letters of ${STENCIL_AXES:0:ndim}), got \"$split\""
  [[ $steps =~ ^[0-9]+$ ]] || stencil_usage_error "--steps expects an integer, got \"$steps\""
  IFS=, read -ra ranks <<<"$ranks_list"
  ((${#ranks[@]} > 0)) || stencil_usage_error "--ranks is empty"
  local p
  for p in "${ranks[@]}"; do
    [[ $p =~ ^[1-9][0-9]*$ ]] || stencil_usage_error "--ranks expects positive integers, got \"$p\""
  done
  mapfile -t ranks < <(printf '%s\n' "${ranks[@]}" | sort -n -u)
  IFS=, read -ra prec_list <<<"$precisions"
  for p in "${prec_list[@]}"; do
    [[ $p == fp32 || $p == fp64 ]] || stencil_usage_error "--precision expects fp32 or fp64, got \"$p\""
  done
  IFS=, read -ra ov_list <<<"$overlaps"
  for p in "${ov_list[@]}"; do
    [[ $p == on || $p == off || $p == default ]] ||
      stencil_usage_error "--overlap expects on, off or default, got \"$p\""
  done
  IFS=, read -ra tr_list <<<"$transports"
  local gpu_mode
  gpu_mode=$(stencil_gpu_bind) || exit 1
  for p in "${tr_list[@]}"; do
    [[ $p =~ ^(auto|mpi-host|mpi-device|ipc|nccl|default)$ ]] ||
      stencil_usage_error "--transport expects auto, mpi-host, mpi-device, ipc, nccl or default, got \"$p\""
    stencil_check_transport "$gpu_mode" --halo-transport "$p"
  done
  read -ra stencil_args <<<"${STENCIL_ARGS:-}"
  stencil_args+=("${user_args[@]}")
  stencil_check_transport "$gpu_mode" "${stencil_args[@]}"
  read -ra extra_input <<<"$input_args"
  ((print_only)) || stencil_check_programs "$STENCIL_BIN" "$STENCIL_INPUT_BIN"

  local stamp
  stamp=${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}
  [[ -n $series ]] || series=$mode-$stamp
  [[ -n $workdir ]] || workdir=$STENCIL_SCRATCH/$series
  if ((!print_only)); then
    mkdir -p "$workdir"/{inputs,json,logs,output}
    workdir=$(cd "$workdir" && pwd)
  fi
  [[ -n $csv ]] || csv=$(dirname "$workdir")/$mode-scaling.csv
  if ((!print_only)); then
    mkdir -p "$(dirname "$csv")"
    "$PYTHON" "$STENCIL_JOBSCRIPTS/study_csv.py" --csv "$csv" --check || exit 1
  fi
  local launcher
  launcher=$(stencil_launcher) || exit 1
  local per_rank="-"
  [[ $mode == weak ]] && per_rank=${shape[0]}x${shape[1]}x${shape[2]}

  echo "== $mode-scaling study \"$series\": ranks ${ranks[*]}, $([[ $mode == weak ]] &&
    echo "per rank" || echo global) ${shape[0]}x${shape[1]}x${shape[2]}, steps $steps," \
    "precision ${prec_list[*]}, backend $backend, overlap ${ov_list[*]}," \
    "transport ${tr_list[*]}, launcher $launcher"
  echo "   workdir $workdir"
  echo "   csv     $csv"

  # ---- run -------------------------------------------------------------------------------
  local prec ov tr np dims gshape tag input json log outdir short failed=0 nruns=0
  local -a d gen cmd launch_pre run_args
  local -A made=() # inputs written by this invocation (strong scaling reuses them)
  for prec in "${prec_list[@]}"; do
    for tr in "${tr_list[@]}"; do
      for ov in "${ov_list[@]}"; do
        for np in "${ranks[@]}"; do
          nruns=$((nruns + 1))
          run_args=(--backend "$backend")
          [[ $tr == default ]] || run_args+=(--halo-transport "$tr")
          [[ $ov == default ]] || run_args+=(--overlap "$ov")
          dims=$(stencil_dims "$np" "$ndim" "$split")
          if [[ $mode == weak ]]; then
            IFS=x read -ra d <<<"$dims"
            gshape=$((shape[0] * d[0]))x$((shape[1] * d[1]))x$((shape[2] * d[2]))
            run_args+=(--dims "$dims")
          else
            gshape=${shape[0]}x${shape[1]}x${shape[2]}
            [[ -z $split ]] || run_args+=(--dims "$dims")
          fi
          tag=$prec-$tr-$ov-p$np
          input=$workdir/inputs/$series-$gshape-$prec.h5
          json=$workdir/json/$series-$tag.json
          log=$workdir/logs/$series-$tag.log
          outdir=$workdir/output/$series-$tag
          short=$(stencil_too_many_ranks "$np")
          if [[ -n $short ]]; then
            echo "-- $tag: $short" >&2
            failed=$((failed + 1))
            continue
          fi
          gen=("$STENCIL_INPUT_BIN" -o "$input" --overwrite --shape "$gshape"
            --precision "$prec" --steps "$steps" "${extra_input[@]}")
          cmd=("$STENCIL_BIN" "${run_args[@]}" "${stencil_args[@]}" --output-dir "$outdir"
            --overwrite --report-json "$json" --progress 0 "$input")
          stencil_launch_prefix "$np" launch_pre
          if ((print_only)); then
            if [[ -z ${made[$input]:-} ]]; then
              printf '%q ' "${gen[@]}"
              echo
              made[$input]=1
            fi
            printf '%q ' "${launch_pre[@]}" "${cmd[@]}"
            echo
            continue
          fi
          rm -f "$json"
          : >"$log"
          if [[ -z ${made[$input]:-} ]]; then
            if ! "${gen[@]}" >>"$log" 2>&1; then
              echo "-- $tag: stencil-input failed (log $log):" >&2
              tail -n 20 "$log" >&2
              failed=$((failed + 1))
              continue
            fi
            made[$input]=1
          fi
          if ! "${launch_pre[@]}" "${cmd[@]}" >>"$log" 2>&1 || [[ ! -s $json ]]; then
            echo "-- $tag: stencil failed on $np ranks (log $log):" >&2
            tail -n 30 "$log" >&2
            failed=$((failed + 1))
            continue
          fi
          ((keep)) || rm -rf "$outdir"
          "$PYTHON" "$STENCIL_JOBSCRIPTS/study_csv.py" --csv "$csv" --json "$json" \
            --study "$mode" --series "$series" ${baseline:+--baseline-series "$baseline"} \
            --per-rank "$per_rank" --transport "$tr" \
            --overlap "$ov" --launcher "$launcher" --nodes "$(stencil_nodes_of "$np")" \
            --stencil-args="${stencil_args[*]}" || {
            echo "-- $tag: failed to append its row to $csv or its final field differs (above)" >&2
            failed=$((failed + 1))
          }
        done
      done
    done
  done
  ((print_only)) && return $((failed > 0))
  local status=0
  if ((failed > 0)); then
    echo "$STENCIL_SCRIPT_NAME: $failed of $nruns runs failed (see above)" >&2
    status=1
  else
    echo "== $nruns runs done; rows appended to $csv"
  fi
  if [[ -n $plot ]] && ! "$PYTHON" "$STENCIL_JOBSCRIPTS/plot_scaling.py" "$csv" -o "$plot"; then
    echo "$STENCIL_SCRIPT_NAME: the plot failed (PYTHON=$PYTHON)" >&2
    status=1
  fi
  return "$status"
}

# Nodes a launch of NP ranks spans (1 outside Slurm).
stencil_nodes_of() {
  local np=$1 tpn
  if [[ $(stencil_launcher) == srun ]]; then
    tpn=$(stencil_tasks_per_node)
    ((tpn > np)) && tpn=$np
    echo $(((np + tpn - 1) / tpn))
  else
    echo 1
  fi
}
