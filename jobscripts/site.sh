# shellcheck shell=bash
# ======================================================================================
#  SITE SETTINGS for the stencil job and study scripts: edit this file for your cluster.
# ======================================================================================
# Sourced (through lib.sh) by job.sh, weak-scaling.sh and strong-scaling.sh, on the batch
# node before anything runs. Every setting can also be given in the environment instead
# (sbatch passes the submitting shell's environment on), which wins over the value here.
#
# Account, partition, QOS and time limit are #SBATCH lines and live at the top of each
# *.sbatch file (marked SITE SETTINGS there), or come from the environment variables
# SBATCH_ACCOUNT, SBATCH_PARTITION, SBATCH_QOS, SBATCH_TIMELIMIT that sbatch reads itself.

# ---- software environment -------------------------------------------------------------
# Environment modules to load, in order (empty: load nothing). Example for a Hopper site:
#   STENCIL_MODULES="gcc/12 cuda/12.6 openmpi/4.1 hdf5-parallel/1.14"
: "${STENCIL_MODULES:=}"

# The build folder of stencil (holds app/stencil and inputs/stencil-input).
: "${STENCIL_BUILD:=$STENCIL_ROOT/build}"

# Where studies write inputs, reports, logs and CSV files when --workdir is not given.
# Use a parallel file system that every node sees: rank 0 writes the JSON report there.
: "${STENCIL_SCRATCH:=${SCRATCH:-$PWD}/stencil-runs}"

# Python 3 for the CSV helper (standard library only) and for the plot (needs matplotlib).
: "${PYTHON:=python3}"

# ---- launching ranks ------------------------------------------------------------------
# srun's PMI plugin for your MPI: pmix for Open MPI 4/5 and most MPICH builds with PMIx,
# pmi2 for Cray MPICH / MVAPICH; empty: the site's MpiDefault. List them: srun --mpi=list
: "${SRUN_MPI:=pmix}"
# Extra srun / mpirun options, split on spaces (e.g. SRUN_FLAGS="--network=..." ).
: "${SRUN_FLAGS:=}"
: "${MPIRUN_FLAGS:=}"

# ---- environment of the MPI / GPU stack (examples; uncomment what your site needs) -----
# export UCX_TLS=rc,sm,cuda_copy,cuda_ipc     # Open MPI + UCX with GPU buffers
# export UCX_RNDV_THRESH=8192
# export NCCL_DEBUG=WARN                      # NCCL halo transport
# export NCCL_IB_HCA=mlx5                     # multi-node NCCL over InfiniBand
# export MPICH_GPU_SUPPORT_ENABLED=1          # Cray MPICH, CUDA-aware

# ---- load the modules -----------------------------------------------------------------
if [[ -n $STENCIL_MODULES ]]; then
  if ! type module >/dev/null 2>&1; then
    for init in "${MODULESHOME:-/nonexistent}/init/bash" /etc/profile.d/lmod.sh \
      /etc/profile.d/modules.sh; do
      if [[ -r $init ]]; then
        # shellcheck disable=SC1090
        source "$init"
        break
      fi
    done
  fi
  type module >/dev/null 2>&1 || {
    echo "site.sh: error: STENCIL_MODULES is set but the module command is missing" >&2
    exit 1
  }
  # shellcheck disable=SC2086 # a list of module names
  module load $STENCIL_MODULES
fi
