#!/usr/bin/env bash
# study_test.sh: the weak- and strong-scaling study scripts without Slurm (mpirun).
#
#   study_test.sh --source DIR --stencil BIN --stencil-input BIN --mpirun MPIRUN
#                 --python PY --workdir DIR
#
# Weak scaling on 1, 2, 4 ranks (fp64) and strong scaling on 1, 2, 3 ranks (fp32 and fp64),
# oversubscribed, CPU backend; tests/slurm/check_study.py then checks every CSV row and
# JSON report (exact L2 norms, rank grids, efficiencies, checksums equal across a strong
# study). A run that fails must fail the study with stencil's own message and append no row;
# a strong run whose final field differs from the study's first run must fail it too.
set -euo pipefail
src="" stencil="" stencil_input="" mpirun=mpirun python=/usr/bin/python3 work=""
while (($# > 0)); do
  case $1 in
  --source) src=$2 ;;
  --stencil) stencil=$2 ;;
  --stencil-input) stencil_input=$2 ;;
  --mpirun) mpirun=$2 ;;
  --python) python=$2 ;;
  --workdir) work=$2 ;;
  *)
    echo "study_test.sh: unknown option $1" >&2
    exit 2
    ;;
  esac
  shift 2
done
[[ -n $src && -n $stencil && -n $stencil_input && -n $work ]] || {
  echo "study_test.sh: usage: see the header of this script" >&2
  exit 2
}
while read -r v; do
  unset "$v"
done < <(compgen -e | grep -E '^SLURM_' || true)
export LAUNCHER=mpirun MPIRUN=$mpirun STENCIL_BIN=$stencil STENCIL_INPUT_BIN=$stencil_input
export STENCIL_BACKEND=cpu PYTHON=$python RUN_TIMEOUT=120 OMP_NUM_THREADS=1
rm -rf "$work"
mkdir -p "$work"
dt=0.04

bash "$src/jobscripts/weak-scaling.sh" --size 10x9x8 --ranks 4,1,2 --steps 12 \
  --input-args "--dt $dt" --workdir "$work/weak" --csv "$work/weak.csv" --series mpi-weak \
  -- --quiet
bash "$src/jobscripts/strong-scaling.sh" --shape 15x11x9 --ranks 1,2,3 --steps 12 \
  --precision fp32,fp64 --input-args "--dt $dt" --workdir "$work/strong" \
  --csv "$work/strong.csv" --series mpi-strong

chk=("$python" "$src/tests/slurm/check_study.py" --steps 12 --dt "$dt" --launcher mpirun)
"${chk[@]}" --csv "$work/weak.csv" --study weak --series mpi-weak --ranks 1,2,4 --size 10x9x8
"${chk[@]}" --csv "$work/strong.csv" --study strong --series mpi-strong --ranks 1,2,3 \
  --shape 15x11x9 --precisions fp32,fp64
# --slabs: every rank count along z, in both studies (4 ranks: 1x1x4, where the default grid
# is 1x2x2), in one work folder.
bash "$src/jobscripts/weak-scaling.sh" --size 10x9x8 --ranks 1,4 --steps 12 --slabs \
  --input-args "--dt $dt" --workdir "$work/slabs" --csv "$work/slabs.csv" --series mpi-slabs
bash "$src/jobscripts/strong-scaling.sh" --shape 15x11x9 --ranks 4 --steps 12 --slabs \
  --input-args "--dt $dt" --workdir "$work/slabs" --csv "$work/slabs.csv" \
  --series mpi-slabs-strong
"${chk[@]}" --csv "$work/slabs.csv" --study weak --series mpi-slabs --ranks 1,4 --size 10x9x8
if [[ $(grep -c ',4,1,1x1x4,' "$work/slabs.csv") != 2 ]]; then
  echo "study_test.sh: FAIL: --slabs did not run 4 ranks as 1x1x4 in both studies:" >&2
  cat "$work/slabs.csv" >&2
  exit 1
fi
# Two series in one work folder keep their own reports.
if [[ $(find "$work/slabs/json" -name '*-p4.json' | wc -l) != 2 ]]; then
  echo "study_test.sh: FAIL: two series in one work folder did not keep two reports:" >&2
  ls "$work/slabs/json" >&2
  exit 1
fi
grep -q ',--quiet,' "$work/weak.csv" || {
  echo "study_test.sh: FAIL: the stencil options after -- are not in the CSV" >&2
  exit 1
}

# A failing run: the study exits 1, shows stencil's message, appends nothing.
rows=$(wc -l <"$work/weak.csv")
set +e
msg=$(bash "$src/jobscripts/weak-scaling.sh" --size 8x8x8 --ranks 1 --steps 2 \
  --workdir "$work/bad" --csv "$work/weak.csv" --series mpi-bad -- --no-such-option 2>&1)
status=$?
set -e
if ((status != 1)) || [[ $msg != *"unknown option --no-such-option"* ]] ||
  [[ $msg != *"1 of 1 runs failed"* ]] || (($(wc -l <"$work/weak.csv") != rows)); then
  echo "study_test.sh: FAIL: a failing run gave status $status and:" >&2
  echo "$msg" >&2
  exit 1
fi
echo "study_test.sh: a failing run is reported (status 1, stencil's message, no row)"

# A strong run whose final field is not the reference's (here another dt, measured against
# the mpi-strong series): its row says so and the study fails.
set +e
msg=$(bash "$src/jobscripts/strong-scaling.sh" --shape 15x11x9 --ranks 2 --steps 12 \
  --input-args "--dt 0.03" --workdir "$work/strong-dt" --csv "$work/strong.csv" \
  --series mpi-strong-dt --baseline-series mpi-strong 2>&1)
status=$?
set -e
if ((status != 1)) || [[ $msg != *"the final field differs from the 1-rank run's"* ]] ||
  ! grep -q ',mpi-strong-dt,.*,differs,' "$work/strong.csv"; then
  echo "study_test.sh: FAIL: a strong run with another field gave status $status and:" >&2
  echo "$msg" >&2
  exit 1
fi
echo "study_test.sh: a strong run with another final field fails the study"
echo "study_test.sh: PASS"
