#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# weak-scaling.sh [options] [-- STENCIL_OPTIONS]: the weak-scaling study (--help for options).
#
# Runs stencil for each rank count of --ranks through srun inside a Slurm allocation (e.g.
# from a *.sbatch job: sbatch jobscripts/hopper-8gpu.sbatch weak ...) or mpirun outside one,
# and appends one CSV row per run (jobscripts/README.md). The logic lives in lib.sh.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stencil_study weak "$@"
