#!/usr/bin/env bash
# slurm_test.sh: run the job scripts for real on a one-node Slurm started here.
#
#   slurm_test.sh --source DIR --stencil BIN --stencil-input BIN --python PY --workdir DIR
#
# Starts munged, slurmctld and slurmd on localhost (private key, socket, ports, state and
# logs in a scratch folder under /tmp; 2 CPUs declared, whatever the machine has), submits
# three jobs with sbatch on the CPU backend, 2 tasks each:
#   1. hopper-4gpu.sbatch weak   (weak-scaling study on 1 and 2 ranks)
#   2. b200-8gpu.sbatch strong   (strong-scaling study on 1 and 2 ranks, fp32 and fp64)
#   3. hopper-8gpu.sbatch run    (one run on all tasks of the job)
# waits for them (bounded), checks job states, the per-rank binding lines and the CSV/JSON
# results (tests/slurm/check_study.py: exact L2 norms, efficiencies); then
#   4. requeue.sbatch            (SIGUSR1 to the batch shell: checkpoint, exit 4, requeue,
#                                 restart from latest; final field bitwise vs one rank)
# and stops the daemons.
# Exit 77 (skip) only when the Slurm or MUNGE programs are not installed.
set -euo pipefail

LIMIT=${SLURM_TEST_LIMIT:-420} # seconds for the whole test, daemons included
name=slurm_test.sh
src="" stencil="" stencil_input="" python=/usr/bin/python3 work=""
while (($# > 0)); do
  case $1 in
  --source) src=$2 ;;
  --stencil) stencil=$2 ;;
  --stencil-input) stencil_input=$2 ;;
  --python) python=$2 ;;
  --workdir) work=$2 ;;
  *)
    echo "$name: unknown option $1" >&2
    exit 2
    ;;
  esac
  shift 2
done
[[ -n $src && -n $stencil && -n $stencil_input && -n $work ]] || {
  echo "$name: usage: $name --source DIR --stencil BIN --stencil-input BIN --workdir DIR" >&2
  exit 2
}

PATH=$PATH:/usr/sbin:/sbin
for p in munged munge slurmctld slurmd sbatch srun scontrol squeue sinfo scancel; do
  if ! command -v "$p" >/dev/null 2>&1; then
    echo "$name: SKIP: $p not found (Debian: apt install slurm-wlm munge)"
    exit 77
  fi
done

# A Slurm job or site configuration around this test must not leak into it.
while read -r v; do
  unset "$v"
done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_)' || true)

log() { echo "[$name $((SECONDS))s] $*"; }
fail() {
  log "FAIL: $*"
  exit 1
}
left() { echo $((LIMIT - SECONDS)); }

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
# munged wants every folder above its socket to be searchable and not writable by others,
# and socket paths are short (108 bytes): keep the daemons under /tmp.
scratch=$(mktemp -d /tmp/stencil-slurm.XXXXXX)
chmod 711 "$scratch"
pids=()
jobs_submitted=()

stop_pid() { # stop_pid PID NAME: TERM, wait up to 15 s, then KILL
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 30; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "$2 (pid $pid) ignored SIGTERM; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((${#jobs_submitted[@]} > 0)); then
    timeout 10 scancel "${jobs_submitted[@]}" 2>/dev/null || true
    local i
    for ((i = 0; i < 20; i++)); do
      [[ -z $(timeout 10 squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.5
    done
  fi
  local k
  for ((k = ${#pids[@]} - 1; k >= 0; k--)); do
    stop_pid "${pids[k]%%:*}" "${pids[k]#*:}"
  done
  wait 2>/dev/null || true
  if ((status != 0)); then
    mkdir -p "$work/daemon-logs"
    cp "$scratch"/*.log "$work/daemon-logs/" 2>/dev/null || true
    for f in "$scratch"/*.log; do
      [[ -f $f ]] || continue
      echo "---- last lines of $(basename "$f")"
      tail -n 15 "$f"
    done
    echo "---- daemon logs kept in $work/daemon-logs"
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- MUNGE ------------------------------------------------------------------------------
dd if=/dev/urandom of="$scratch/munge.key" bs=1024 count=1 status=none
chmod 400 "$scratch/munge.key"
sock=$scratch/munge.socket
munged -F --key-file="$scratch/munge.key" --socket="$sock" --pid-file="$scratch/munged.pid" \
  --log-file="$scratch/munged.log" --seed-file="$scratch/munged.seed" \
  >"$scratch/munged.out.log" 2>&1 &
pids+=("$!:munged")
for ((i = 0; i < 40; i++)); do
  [[ -S $sock ]] && break
  kill -0 "$!" 2>/dev/null || fail "munged exited at start"
  sleep 0.25
done
timeout 10 munge -S "$sock" -n | timeout 10 unmunge -S "$sock" >/dev/null ||
  fail "munge/unmunge through $sock failed"
log "munged up ($sock)"

# ---- Slurm configuration ----------------------------------------------------------------
node=$(hostname -s)
read -r ctld_port slurmd_port < <("$python" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
user=$(id -un)
# task/affinity binds ranks to cores; it needs the 2 declared CPUs to exist.
task_plugin=task/affinity
(($(nproc) >= 2)) || task_plugin=task/none
mkdir -p "$scratch/state" "$scratch/spool"
export SLURM_CONF=$scratch/slurm.conf
cat >"$SLURM_CONF" <<EOF
# One-node test cluster written by tests/slurm/slurm_test.sh.
ClusterName=stenciltest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool
SlurmctldPidFile=$scratch/slurmctld.pid
SlurmdPidFile=$scratch/slurmd.pid
SlurmctldLogFile=$scratch/slurmctld.log
SlurmdLogFile=$scratch/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=10 State=UP OverSubscribe=YES
EOF
log "slurm.conf: node $node, ports $ctld_port/$slurmd_port, $task_plugin"

slurmctld -D -c -f "$SLURM_CONF" >"$scratch/slurmctld.out.log" 2>&1 &
pids+=("$!:slurmctld")
slurmd -D -f "$SLURM_CONF" -N "$node" >"$scratch/slurmd.out.log" 2>&1 &
pids+=("$!:slurmd")

state=""
while ((SECONDS < 90 && $(left) > 0)); do
  state=$(timeout 10 sinfo -h -n "$node" -o %T 2>/dev/null || true)
  [[ $state == idle ]] && break
  for p in "${pids[@]}"; do
    kill -0 "${p%%:*}" 2>/dev/null || fail "${p#*:} exited at start"
  done
  sleep 1
done
[[ $state == idle ]] || fail "node $node is \"$state\", not idle: $(timeout 10 scontrol show node "$node" 2>&1 | grep -i reason)"
log "slurmctld and slurmd up, node idle"

# ---- submit -----------------------------------------------------------------------------
export STENCIL_BIN=$stencil STENCIL_INPUT_BIN=$stencil_input STENCIL_BACKEND=cpu PYTHON=$python
export BIND_VERBOSE=1 RUN_TIMEOUT=120 OMP_NUM_THREADS=1
dt=0.05
"$stencil_input" -o "$work/run-input.h5" --shape 20x14x10 --steps 15 --dt $dt >/dev/null

plot=()
"$python" -c 'import matplotlib' 2>/dev/null && plot=(--plot "$work/weak.png")

cd "$work" # the jobs' output files and SLURM_SUBMIT_DIR
sub=(timeout 30 sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0
  --time=4)
weak=$("${sub[@]}" --output="$work/weak-%j.out" "$src/jobscripts/hopper-4gpu.sbatch" weak \
  --size 12x10x8 --ranks 1,2 --steps 20 --input-args "--dt $dt" --workdir "$work/weak" \
  --csv "$work/weak.csv" --series slurm-weak "${plot[@]}")
jobs_submitted+=("$weak")
strong=$("${sub[@]}" --output="$work/strong-%j.out" "$src/jobscripts/b200-8gpu.sbatch" strong \
  --shape 16x12x10 --ranks 2,1 --steps 20 --precision fp32,fp64 --input-args "--dt $dt" \
  --workdir "$work/strong" --csv "$work/strong.csv" --series slurm-strong)
jobs_submitted+=("$strong")
# Submitted by a relative path from a folder without jobscripts/: the job must still find
# the checkout (scontrol show job: Command=).
rel=$(realpath --relative-to="$work" "$src/jobscripts/hopper-8gpu.sbatch")
run=$("${sub[@]}" --output="$work/run-%j.out" "$rel" run \
  "$work/run-input.h5" --output-dir "$work/run-output" --report-json "$work/run.json")
jobs_submitted+=("$run")
log "submitted jobs: weak $weak, strong $strong, run $run"

# ---- wait -------------------------------------------------------------------------------
declare -A final=()
while ((${#final[@]} < ${#jobs_submitted[@]})); do
  (($(left) > 0)) || fail "jobs not finished after ${LIMIT}s: $(timeout 10 squeue 2>&1)"
  for j in "${jobs_submitted[@]}"; do
    [[ -n ${final[$j]:-} ]] && continue
    info=$(timeout 10 scontrol show job -o "$j" 2>/dev/null || true)
    st=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    case $st in
    PENDING | RUNNING | CONFIGURING | COMPLETING | "") ;;
    *)
      final[$j]="$st $(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")"
      log "job $j: ${final[$j]}"
      ;;
    esac
  done
  sleep 1
done

# ---- check ------------------------------------------------------------------------------
status=0
for j in "${jobs_submitted[@]}"; do
  out=$(ls "$work"/*-"$j".out 2>/dev/null || true)
  if [[ ${final[$j]} != "COMPLETED 0:0" ]]; then
    log "job $j ended ${final[$j]}; its output:"
    [[ -n $out ]] && cat "$out"
    status=1
    continue
  fi
  # bind.sh prints one line per rank and launch: 1 + 2 ranks per study precision (in the
  # study's run logs), 2 for the run (in the job output).
  case $j in
  "$weak") bind_files=("$work"/weak/logs/*.log) want=3 ;;
  "$strong") bind_files=("$work"/strong/logs/*.log) want=6 ;;
  *) bind_files=("$out") want=2 ;;
  esac
  nbind=$(cat "${bind_files[@]}" | grep -c '^bind: rank' || true)
  if ((nbind != want)); then
    log "job $j: $nbind binding lines in ${bind_files[*]}, expected $want"
    status=1
  fi
  if [[ $task_plugin == task/affinity ]] &&
    ! grep -q '^bind: rank 1 local 1 host .* cpus 1 ' "${bind_files[@]}"; then
    log "job $j: rank 1 is not bound to CPU 1 (--cpu-bind=cores):"
    grep -h '^bind:' "${bind_files[@]}" || true
    status=1
  fi
done
src_abs=$(cd "$src" && pwd)
grep -q "^   root $src_abs, " "$work/run-$run.out" || {
  log "job $run did not find the checkout $src_abs:"
  head -n 3 "$work/run-$run.out"
  status=1
}
((status == 0)) || fail "a job failed"
grep -h '^bind:' "$work/run-$run.out"

chk=("$python" "$src/tests/slurm/check_study.py" --steps 20 --dt "$dt" --launcher srun)
"${chk[@]}" --csv "$work/weak.csv" --study weak --series slurm-weak --ranks 1,2 --size 12x10x8 ||
  status=1
"${chk[@]}" --csv "$work/strong.csv" --study strong --series slurm-strong --ranks 1,2 \
  --shape 16x12x10 --precisions fp32,fp64 || status=1
"$python" "$src/tests/slurm/check_study.py" --json "$work/run.json" --ranks 2 --shape 20x14x10 \
  --steps 15 --dt $dt || status=1
# The study ran with --plot: the PNG exists when matplotlib is there.
if ((${#plot[@]} > 0)); then
  [[ $(head -c 8 "$work/weak.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
    { log "$work/weak.png is not a PNG" && status=1; }
fi
((status == 0)) || fail "results are wrong (see above)"
log "3 jobs through sbatch/srun, results checked"

# ---- requeue ----------------------------------------------------------------------------
# jobscripts/requeue.sbatch, stopped by SIGUSR1 to its batch shell (what --signal=B:USR1@T
# sends before the time limit; here scancel sends it at once, so the test does not wait for
# a limit): the shell forwards it, the ranks write a checkpoint and exit 4, the shell
# requeues the job, the second start continues with --restart latest and finishes. Its final
# field must equal, bit for bit, an uninterrupted run of the same input on one rank.
nsteps=200000
"$stencil_input" -o "$work/requeue-input.h5" --shape 40x32x24 --steps $nsteps --dt $dt \
  --initial random:3 >/dev/null
rq=$(STENCIL_OUTPUT_DIR=$work/requeue-out "${sub[@]}" --requeue --output="$work/requeue-%j.out" \
  "$src/jobscripts/requeue.sbatch" "$work/requeue-input.h5" --progress 1 --agree-every 5)
jobs_submitted+=("$rq")
log "submitted job $rq (requeue.sbatch, $nsteps steps)"
until grep -q '^step ' "$work/requeue-$rq.out" 2>/dev/null; do
  (($(left) > 0)) || fail "job $rq: no progress line: $(cat "$work/requeue-$rq.out" 2>&1)"
  sleep 0.5
done
timeout 10 scancel --signal=USR1 --batch "$rq" || fail "scancel --signal=USR1 --batch $rq"
log "job $rq: SIGUSR1 sent to its batch shell"
# The reference, meanwhile (one rank, no Slurm).
"$stencil" "$work/requeue-input.h5" --backend cpu --output-dir "$work/requeue-ref" --quiet \
  </dev/null || fail "the reference run of the requeue input failed"
st=""
until [[ $st == COMPLETED || $st == FAILED || $st == CANCELLED || $st == TIMEOUT ]]; do
  (($(left) > 0)) || fail "job $rq not finished after ${LIMIT}s: $(timeout 10 squeue 2>&1)"
  sleep 1
  st=$(timeout 10 scontrol show job -o "$rq" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
done
out=$work/requeue-$rq.out
log "job $rq: $st; its output:"
cat "$out"
[[ $st == COMPLETED ]] || fail "job $rq ended $st"
for want in "start 1 " "SIGUSR1 at " "requeueing job $rq" "start 2 " "run complete"; do
  grep -q "$want" "$out" || fail "job $rq: no \"$want\" in its output"
done
ls "$work"/requeue-out/checkpoint_*.h5 >/dev/null || fail "job $rq left no checkpoint"
h5diff "$work/requeue-ref/final.h5" "$work/requeue-out/final.h5" /field /field ||
  fail "job $rq: the final field differs from the uninterrupted run"
log "PASS: 4 jobs through sbatch/srun, results checked; the requeued run equals the uninterrupted one"
