# shellcheck shell=sh
# Sourced by the GPU test scripts (run_compare.sh, poisson_compare.sh).
#
#   gpu_setup PROBE WORKDIR NPROC
#
# Exits with the probe's status unless it found a GPU (77: skipped; the probe turns that into
# a failure under STENCIL_REQUIRE_GPU=1). Sets ngpu (GPUs visible) and share
# (--allow-gpu-sharing when NPROC ranks outnumber them), makes WORKDIR afresh and enters it.
# shellcheck disable=SC2034 # ngpu and share are for the sourcing script
gpu_setup() {
  "$1" --probe
  gs_rc=$?
  [ $gs_rc -eq 0 ] || exit $gs_rc
  ngpu=$("$1" --probe | sed -n 's/.*: \([0-9]*\) CUDA device.*/\1/p')
  rm -rf "$2" && mkdir -p "$2" || exit 1
  cd "$2" || exit 1
  share=""
  [ "$3" -gt "${ngpu:-1}" ] && share=--allow-gpu-sharing
}
