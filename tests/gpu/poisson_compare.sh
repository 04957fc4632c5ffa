#!/bin/sh
# Poisson (Jacobi) runs on the GPU against the CPU backend (label gpu).
#
#   poisson_compare.sh PROBE STENCIL STENCIL_INPUT H5SAME PYTHON WORKDIR NPROC MPIEXEC...
#
# For each input (2D and 3D, orders 2, 4 and 8, fp64 and fp32, Dirichlet faces, and pure
# periodic / Neumann problems whose mean is fixed at the end) the CPU backend on NPROC ranks
# runs a fixed number of Jacobi iterations (--tolerance 0) with the residual every iteration;
# every CUDA variant (kernel tiers 1 and 2 and the driver's choice, --overlap on and off, and
# the residual every 7 iterations) must give
#   - the same final field, bit for bit (h5same): every iteration is the same arithmetic;
#   - the residual history of the JSON report (--report-json) at the same iterations, each norm
#     equal to 1e-12 relative. Bound: the fields agree bit for bit, and both backends' residual()
#     evaluates every term w = u' - u (u' Jacobi's update) in the field's precision in the same
#     order (kernels/backend.h) and squares it in double, so the N terms are the same bits and only the
#     order of their sum differs; N non-negative terms summed in any order are within (N - 1) u
#     of the exact sum (u = 2^-53), so two orders differ by at most about 2 (N - 1) u <= 9.1e-13
#     for N <= 4096 cells (every case here), and the norm sqrt(sum dV) by half that;
#   - the same rhs norm, iteration count and removed mean (exact: they come from equal fields).
# One line per comparison: PASS or FAIL with the reason. Exit 77 without a GPU (unless
# STENCIL_REQUIRE_GPU=1).
set -u
probe=$1 stencil=$2 mkinput=$3 h5same=$4 python=$5 work=$6 np=$7
shift 7
# shellcheck source=SCRIPTDIR/gpu_setup.sh
. "$(dirname "$0")/gpu_setup.sh"
gpu_setup "$probe" "$work" "$np"
fail=0 runs=0
iters=40

# run NAME ARGS...: one run with its JSON report. Its stdin is /dev/null: mpirun forwards
# stdin to rank 0 and would eat the list of cases this loop reads.
run() {
  name=$1
  shift
  if ! "$@" --output-dir "out-$name" --overwrite --quiet --report-json "$name.json" \
    </dev/null >"log-$name" 2>&1; then
    echo "FAIL $name: the run failed:"
    cat "log-$name"
    fail=$((fail + 1))
    return 1
  fi
  return 0
}

# compare CASE VARIANT REFERENCE: fields bit for bit, residual histories to 1e-12.
compare() {
  runs=$((runs + 1))
  if ! "$h5same" "out-$3/final.h5" "out-$1-$2/final.h5" >"diff-$1-$2" 2>&1; then
    echo "FAIL $1 $2: the final field differs from the cpu backend: $(cat "diff-$1-$2")"
    fail=$((fail + 1))
    return
  fi
  if msg=$("$python" - "$3.json" "$1-$2.json" "$iters" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p))["solver"] for p in sys.argv[1:3])
iters = int(sys.argv[3])
ha, hb = a["history"], b["history"]
every = b["residual_every"]
want = [i for i in range(0, iters + 1) if i % every == 0 or i == iters]
if [h[0] for h in hb] != want:
    sys.exit("residual checks at iterations %s, expected %s" % ([h[0] for h in hb], want))
ref = {h[0]: h[1] for h in ha}
worst = 0.0
for it, r in hb:
    if it not in ref:
        sys.exit("no cpu residual at iteration %d" % it)
    rel = abs(r - ref[it]) / ref[it] if ref[it] > 0 else abs(r)
    if not rel <= 1e-12:
        sys.exit("residual at iteration %d: cpu %r cuda %r, relative %.3g > 1e-12"
                 % (it, ref[it], r, rel))
    worst = max(worst, rel)
for key in ("iterations", "final_iteration", "mean_removed"):
    if a[key] != b[key]:
        sys.exit("%s: cpu %r cuda %r" % (key, a[key], b[key]))
for key in ("rhs_norm", "final_residual"):
    rel = abs(a[key] - b[key]) / a[key] if a[key] > 0 else abs(b[key])
    if not rel <= 1e-12:
        sys.exit("%s: cpu %r cuda %r, relative %.3g" % (key, a[key], b[key], rel))
if not ha[0][1] > 0 or not ha[-1][1] < ha[0][1]:
    sys.exit("the cpu residual did not fall: %r -> %r" % (ha[0][1], ha[-1][1]))
print("%d residuals, max relative difference %.2g, %.3e -> %.3e"
      % (len(hb), worst, hb[0][1], hb[-1][1]))
PY
  ); then
    echo "PASS $1 $2 ($np rank(s)): field bit for bit, $msg"
  else
    echo "FAIL $1 $2 ($np rank(s)): $msg"
    fail=$((fail + 1))
  fi
}

ncases=0
while read -r case opts; do
  [ -n "$case" ] || continue
  ncases=$((ncases + 1))
  # shellcheck disable=SC2086
  "$mkinput" -o "$case.h5" --overwrite --equation poisson --steps $iters --tolerance 0 \
    --residual-every 1 $opts >/dev/null || { echo "FAIL $case: stencil-input"; exit 1; }
  run "$case-cpu" "$@" "$stencil" "$case.h5" --backend cpu || continue
  run "$case-cpu-r7" "$@" "$stencil" "$case.h5" --backend cpu --residual-every 7 || continue
  for v in k1-on k1-off k2-on k2-off auto-on auto-r7; do
    k=${v%%-*} ov=${v#*-} extra=""
    k=${k#k}
    [ "$ov" = r7 ] && ov=on extra="--residual-every 7"
    # shellcheck disable=SC2086
    run "$case-$v" "$@" "$stencil" "$case.h5" --backend cuda --kernel "$k" --overlap "$ov" \
      $extra ${share:+"$share"} || continue
    ref=$case-cpu
    [ -n "$extra" ] && ref=$case-cpu-r7
    compare "$case" "$v" "$ref"
  done
done <<'CASES'
p2-o2-fp64-dirichlet --shape 64x48 --order 2 --bc all=dirichlet:0 --bc x_hi=dirichlet:1 --source random:11 --initial random:3
p2-o4-fp32-periodic --shape 60x44 --order 4 --precision fp32 --bc all=periodic --source sine:1:2,2 --initial random:4
p2-o8-fp64-mixed --shape 57x41 --order 8 --bc x=dirichlet:0.5 --bc y=periodic --source random:12 --initial random:5
p2-o2-fp32-neumann --shape 50x37 --order 2 --precision fp32 --bc all=neumann --source sine:1:2,2 --initial random:6
p3-o2-fp64-periodic --shape 16x14x12 --order 2 --bc all=periodic --source sine:1:2,2,2 --initial random:7
p3-o4-fp32-dirichlet --shape 17x13x11 --order 4 --precision fp32 --bc all=dirichlet:0.25 --source random:13 --initial random:8
p3-o4-fp64-neumann --shape 15x16x14 --order 4 --bc x=periodic --bc y=neumann --bc z=neumann --source sine:1:2,2,2 --initial random:9
p3-o2-fp32-mixed --shape 18x11x13 --order 2 --precision fp32 --bc x=neumann --bc y=periodic --bc z_lo=dirichlet:1 --bc z_hi=neumann --source random:14
CASES
echo "poisson_compare: $ncases cases, $runs comparisons on $np rank(s), $fail failed"
# Every case and variant ran (a program that reads stdin would end the list early).
if [ "$ncases" -ne 8 ] || [ "$runs" -ne 48 ]; then
  echo "FAIL: expected 8 cases and 48 comparisons"
  exit 1
fi
[ "$fail" -eq 0 ]
