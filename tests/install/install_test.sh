#!/usr/bin/env bash
# install_test.sh --build DIR --workdir DIR -- MPIEXEC -n 2 [FLAGS...]
#
# cmake --install into a fresh prefix; then, without LD_LIBRARY_PATH (the RPATH must find MPI
# and HDF5), the installed stencil on an installed example, and the installed job script on
# the same example: both final fields must equal bit for bit the build tree's run of it.
set -euo pipefail
build="" work=""
while (($# > 0)); do
  case $1 in
  --build) build=$2 && shift 2 ;;
  --workdir) work=$2 && shift 2 ;;
  --) shift && break ;;
  *) echo "install_test.sh: unknown option $1" >&2 && exit 2 ;;
  esac
done
mpi=("$@")
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || fail "cmake --install: $(cat "$work/install.log")"

share=$prefix/share/stencil
for f in bin/stencil bin/stencil-input share/stencil/jobscripts/job.sh \
  share/stencil/jobscripts/requeue.sbatch share/stencil/tools/plot_slice.py; do
  [[ -x $prefix/$f ]] || fail "$prefix/$f is not an installed program"
done
for f in share/stencil/inputs/random3d.h5 share/stencil/inputs/examples.txt \
  share/doc/stencil/LICENSE share/doc/stencil/README.md share/doc/stencil/user/building.md; do
  [[ -f $prefix/$f ]] || fail "$prefix/$f is not installed"
done

example=$share/inputs/random3d.h5
run=(--steps 10 --backend cpu --quiet)
installed=(env -u LD_LIBRARY_PATH)
want=$("$build/app/stencil" --version | head -1)
got=$("${installed[@]}" "$prefix/bin/stencil" --version | head -1)
[[ $got == "$want" ]] || fail "installed stencil --version says \"$got\", the build's \"$want\""
"${mpi[@]}" "$build/app/stencil" "$example" "${run[@]}" --output-dir "$work/build-out" ||
  fail "the build tree's stencil failed on $example"
"${installed[@]}" "${mpi[@]}" "$prefix/bin/stencil" "$example" "${run[@]}" \
  --output-dir "$work/installed-out" || fail "the installed stencil failed on $example"
LAUNCHER=mpirun MPIRUN=${mpi[0]} NP=2 STENCIL_BACKEND=cpu "${installed[@]}" \
  bash "$share/jobscripts/job.sh" run "$example" "${run[@]}" --output-dir "$work/job-out" \
  >"$work/job.log" 2>&1 || fail "the installed job.sh failed: $(cat "$work/job.log")"
grep -q "program $prefix/bin/stencil" "$work/job.log" ||
  fail "the installed job.sh did not run $prefix/bin/stencil: $(head -5 "$work/job.log")"
for out in installed-out job-out; do
  h5diff "$work/build-out/random3d.h5" "$work/$out/random3d.h5" /field /field ||
    fail "$out/random3d.h5 differs from the build tree's run"
done
echo "PASS: installed into $prefix; the installed stencil and job.sh ran $example like the build"
