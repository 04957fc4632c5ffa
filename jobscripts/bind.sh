#!/usr/bin/env bash
# bind.sh PROGRAM [ARGS...]: per-rank wrapper that sets GPU, NUMA and OpenMP binding, then
# execs PROGRAM. The launchers in lib.sh (srun or mpirun) start every rank through it.
#
# Environment (all optional):
#   GPU_BIND        wrapper: give this rank one GPU, CUDA_VISIBLE_DEVICES = the
#                   (local rank mod count)-th of the GPUs visible now, in PCI bus order;
#                   anything else: leave CUDA_VISIBLE_DEVICES as the launcher set it.
#   NUMA_BIND=1     with GPU_BIND=wrapper and numactl present: run on the CPUs and memory
#                   of the NUMA node the rank's GPU is attached to.
#   OMP_NUM_THREADS threads per rank (default: SLURM_CPUS_PER_TASK, else CPUS_PER_RANK,
#                   else 1). When the launcher restricted the rank to a subset of the
#                   CPUs, OMP_PLACES=cores and OMP_PROC_BIND=close are set too (unless
#                   given), so threads stay on the rank's own cores; without a mask they
#                   are left unset, so oversubscribed ranks are not all pinned to core 0.
#   BIND_VERBOSE=1  print one line per rank to stderr: rank, host, CPUs, threads, GPUs.
set -euo pipefail

(($# > 0)) || {
  echo "bind.sh: usage: bind.sh PROGRAM [ARGS...]" >&2
  exit 2
}

rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}}
local_rank=${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PMI_LOCAL_RANK:-0}}}}

prefix=()
numa_node=""
if [[ ${GPU_BIND:-} == wrapper ]]; then
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
  gpus=()
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -ra gpus <<<"$CUDA_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true)
  fi
  if ((${#gpus[@]} == 0)); then
    echo "bind.sh: error: GPU_BIND=wrapper but no GPU is visible on $(hostname)" >&2
    exit 1
  fi
  gpu=${gpus[local_rank % ${#gpus[@]}]}
  gpu=${gpu// /}
  export CUDA_VISIBLE_DEVICES=$gpu
  if [[ ${NUMA_BIND:-0} == 1 ]] && command -v numactl >/dev/null 2>&1 &&
    command -v nvidia-smi >/dev/null 2>&1; then
    # nvidia-smi prints 00000000:1B:00.0; sysfs names it 0000:1b:00.0.
    bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$gpu" 2>/dev/null || true)
    bus=${bus,,}
    bus=${bus: -12}
    if [[ -r /sys/bus/pci/devices/$bus/numa_node ]]; then
      numa_node=$(</sys/bus/pci/devices/"$bus"/numa_node)
      if ((numa_node >= 0)); then
        prefix=(numactl "--cpunodebind=$numa_node" "--membind=$numa_node")
      fi
    fi
  fi
fi

# CPUs this process may run on (nproc alone would report OMP_NUM_THREADS).
allowed=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-${CPUS_PER_RANK:-1}}}
if ((${#prefix[@]} > 0)) || ((allowed < $(nproc --all))); then
  export OMP_PLACES=${OMP_PLACES:-cores}
  export OMP_PROC_BIND=${OMP_PROC_BIND:-close}
fi

if [[ ${BIND_VERBOSE:-0} == 1 ]]; then
  cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  echo "bind: rank $rank local $local_rank host $(hostname -s) cpus $cpus" \
    "omp_threads $OMP_NUM_THREADS gpus ${CUDA_VISIBLE_DEVICES:-all}" \
    "numa ${numa_node:-none}" >&2
fi

exec "${prefix[@]}" "$@"
