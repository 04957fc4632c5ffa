# shellcheck shell=sh
# Sourced by the GPU test scripts (run_compare.sh, poisson_compare.sh).
#
#   gpu_setup PROBE WORKDIR NPROC
#
# Exits with the probe's status unless it found a GPU (77: skipped; the probe turns that into
# a failure under STENCIL_REQUIRE_GPU=1). Sets ngpu (GPUs visible), share (--allow-gpu-sharing
# when NPROC ranks outnumber them) and transports (the halo transports of NPROC ranks: mpi-host;
# ipc with two or more, nccl too with a GPU each; the CPU emulation of CUDA has no NCCL), makes
# WORKDIR afresh and enters it.
# shellcheck disable=SC2034 # ngpu, share and transports are for the sourcing script
gpu_setup() {
  "$1" --probe
  gs_rc=$?
  [ $gs_rc -eq 0 ] || exit $gs_rc
  ngpu=$("$1" --probe | sed -n 's/.*: \([0-9]*\) CUDA device.*/\1/p')
  rm -rf "$2" && mkdir -p "$2" || exit 1
  cd "$2" || exit 1
  share=""
  [ "$3" -gt "${ngpu:-1}" ] && share=--allow-gpu-sharing
  transports="mpi-host"
  if [ "$3" -gt 1 ]; then
    transports="mpi-host ipc"
    [ "$3" -le "${ngpu:-1}" ] && transports="$transports nccl"
  fi
}
