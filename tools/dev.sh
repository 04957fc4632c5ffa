#!/usr/bin/env bash
# Set up, build and run stencil on a Debian machine.
#
#   tools/dev.sh example   install what is missing, build, run the bundled 3D example on 2 ranks
#   tools/dev.sh test      install what is missing, build, run the test suite (ctest), then
#                          the gpu label on the CPU emulation of CUDA (a second build)
#   tools/dev.sh build     install what is missing and build only
#
# Environment: BUILD_DIR (default build; the emulation's: BUILD_DIR-emulation), JOBS (default
# nproc), STENCIL_NO_APT=1 to skip apt, STENCIL_NO_EMULATION=1 to skip the emulation's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

packages=(cmake make gcc g++ pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
          python3 python3-h5py python3-numpy petsc-dev shellcheck clang-format
          python3-matplotlib slurm-wlm munge paraview python3-paraview xvfb xauth)

install_deps() {
  [ "${STENCIL_NO_APT:-0}" = 1 ] && return 0
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "dev.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j "$jobs"
}

# The CUDA backend built for the CPU emulation of CUDA (STENCIL_CUDA_EMULATION): the gpu
# label's runs of stencil --backend cuda against the CPU backend, on a machine without a GPU
# (but the Poisson comparisons, which take the emulation 10 minutes a rank count).
emulation_tests() {
  [ "${STENCIL_NO_EMULATION:-0}" = 1 ] && return 0
  local emu="$build-emulation"
  cmake -S . -B "$emu" -DCMAKE_BUILD_TYPE=Release -DSTENCIL_CUDA_EMULATION=ON
  cmake --build "$emu" -j "$jobs"
  STENCIL_REQUIRE_GPU=1 ctest --test-dir "$emu" --output-on-failure -j "$jobs" -L gpu \
    -E '^gpu_poisson_'
}

# Open MPI refuses to run as root and to oversubscribe cores unless told to.
mpi_env() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
}

case "${1:-}" in
  example)
    install_deps; build; mpi_env
    mpirun -n 2 "$build/app/stencil" inputs/heat3d.h5 --output-dir out --overwrite
    ;;
  test)
    install_deps; build; mpi_env
    ctest --test-dir "$build" --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
    emulation_tests
    ;;
  build)
    install_deps; build
    ;;
  *)
    sed -n '2,9p' "$0"; exit 2
    ;;
esac
