#!/bin/sh
# The fused multi-step kernels in whole runs of stencil against the CPU backend, bit for bit
# (label gpu).
#
#   tier3_compare.sh PROBE STENCIL STENCIL_INPUT H5SAME WORKDIR NPROC MPIEXEC...
#
# 1. The command line (no GPU needed): bad --steps-per-launch / --cluster-size / --chunk values, and
#    those options with --backend cpu or --kernel 1|2, exit 2 naming the option.
# 2. For every case below, the CPU backend's run on NPROC ranks is the reference (it runs
#    here without a GPU too), and every `--backend cuda --kernel 3` variant must write the
#    same bytes into final.h5: steps per launch T (0 = the device's choice), cluster sizes, chunks,
#    --agree-every values T does not divide, --kernel auto, and on NPROC > 1 ranks (the first
#    two variants only) splits along x and along y (2D) or z (3D: the launches in parts, the
#    sent planes' shell first, or one launch that signals when they are stored: variants
#    one and shells force the form (--overlap signal / parts), and one must run on every rank
#    of the z split; on the x split of the periodic and Dirichlet-0 cases, every rank that reads
#    its faces through runs in parts by tile, the tiles of the sent x faces first; the ipc
#    exchange of the slab cases must copy the sent planes field to field, that of those x
#    splits pack the x faces (their rows are too short for a copy engine);
#    NPROC > 2: ranks with two shells), and the halo transports (the cases with edge and corner
#    messages). Steps are never a multiple of T.
#    Each run's header must say that the fused kernels ran (or, in the fallback case, why they
#    did not; single: auto runs the single-step tiers), so a silent fallback to tier 2 cannot
#    pass.
#    --cluster-size on a 2D problem, and with a radius above 1, a source term or a Dirichlet
#    face of nonzero value in 3D, is refused (exit 2). Per-case checks:
#      snap  the same snapshot files (steps 0, 7, 14, 21 with --output-every 7), bitwise
#      ckpt  the same checkpoint files (steps 6, 12, 18 with --checkpoint-every 6), bitwise
#      res   Poisson: the same residual history (iterations exactly, norms to 1e-9);
#            d2-poisson-stop converges at iteration 27: inside a launch with T0 and T4 (the
#            launch sums the residuals of the field it starts from and of its own up to the
#            last one, and is redone up to 27), and at the start of one with T3 (the
#            residual of its input: the launch is dropped)
#      nan   an unstable run: both stop with exit 3 at the same step, same message
#      rows  the device's choice (T0, auto) is the 3D warp-row kernel with the faces' ghosts
#            from memory: homogeneous faces (Neumann, Dirichlet 0) mirrored by the driver,
#            periodic wraps copied (x is not a whole number of 16-byte vectors; or radius > 1
#            with a source or a Dirichlet face of nonzero value: one step per launch, the
#            faces filled by the driver)
#      through  ... the warp-row kernel reading those faces and wraps through the faces
#            itself (no ghost fill or wrap copy between launches; with a source term the
#            faces, the wraps copied)
#      faces  ... the warp-row kernel applying the reflecting faces at every level (a
#            Dirichlet face of nonzero value, or a source term where x is not a whole number
#            of 16-byte vectors)
#      waves  on one rank the device's choice (T0) runs a long first chunk of planes, then
#            short ones (the header's "(the first N; ...)"), as an H200 picks for 86 tiles a plane
#      narrow  on one rank T0's last column of tiles is a narrow one (warps in segments)
#      first  ... a narrow column placed first, at x = 0 (the face tiles of a Dirichlet x_lo
#            face of nonzero value)
#      bytile  on one rank T0's whole launches take chunks by tile (an H200's 132 slots for 133
#            tiles a plane: 132 tiles in one chunk, the last one's pieces)
# TIER3_CASES=REGEX runs only the cases it matches (whole names). Prints one PASS or FAIL
# line per comparison. Exit 77 after parts 1 and 2's CPU runs when
# there is no GPU (unless STENCIL_REQUIRE_GPU=1, which the probe turns into a failure).
set -u
probe=$1 stencil=$2 mkinput=$3 h5same=$4 work=$5 np=$6
shift 6
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail=0 pass=0

ok() {
  echo "PASS $1"
  pass=$((pass + 1))
}
bad() {
  echo "FAIL $1"
  fail=$((fail + 1))
}

# ---- 1. the command line -------------------------------------------------------------------
"$mkinput" -o small.h5 --overwrite --shape 16x12x1 --steps 3 >/dev/null || {
  echo "FAIL stencil-input"
  exit 1
}
usage_in=small.h5
usage() { # name expected-text stencil-options... (on $usage_in)
  name=$1 want=$2
  shift 2
  "$stencil" "$@" "$usage_in" --output-dir out-usage >"log-usage-$name" 2>&1
  rc=$?
  if [ $rc -ne 2 ]; then
    bad "usage $name: exit status $rc, expected 2"
    cat "log-usage-$name"
  elif ! grep -q -- "$want" "log-usage-$name"; then
    bad "usage $name: the message does not say \"$want\""
    cat "log-usage-$name"
  else
    ok "usage $name"
  fi
}
usage steps99 "--steps-per-launch expects 0 (chosen from the device) or 1 to 8 fused steps, got \"99\"" \
  --kernel 3 --steps-per-launch 99
usage steps-neg "--steps-per-launch expects an integer >= 0" --steps-per-launch -1
usage steps-word "--steps-per-launch expects an integer >= 0" --steps-per-launch four
usage cluster-big "--cluster-size 4x8: a thread-block cluster has at most 16 CTAs" --cluster-size 4x8
usage cluster-17 "--cluster-size 17: a thread-block cluster has at most 16 CTAs" --cluster-size 17
usage cluster-form "--cluster-size expects N or 1xN" --cluster-size 2x
usage cluster-zero "--cluster-size expects an integer >= 1" --cluster-size 0x2
usage kernel-4 "--kernel expects one of auto, 1, 2, 3, got \"4\"" --kernel 4
usage chunk-big "--chunk expects 0 (chosen from the device) or 1 to 65536, got \"70000\"" \
  --kernel 3 --chunk 70000
usage cpu-chunk "--chunk applies to the fused kernels of the cuda backend, but --backend cpu" \
  --backend cpu --chunk 8
usage cpu-steps "--steps-per-launch applies to the fused kernels of the cuda backend, but --backend cpu" \
  --backend cpu --steps-per-launch 4
usage tier2-cluster "--cluster-size applies to the fused kernels (--kernel 3), but --kernel 2" \
  --kernel 2 --cluster-size 2

# ---- 2. whole runs ---------------------------------------------------------------------------
gpu=1
"$probe" --probe >probe.log 2>&1
prc=$?
if [ $prc -ne 0 ]; then
  cat probe.log
  [ $prc -eq 77 ] || exit $prc
  gpu=0
fi
if [ $gpu -eq 1 ]; then # refusals of the cuda backend
  "$mkinput" -o hot3d.h5 --overwrite --shape 16x12x10 --steps 3 --bc x_lo=dirichlet:1 >/dev/null
  usage cluster-2d "--cluster-size applies to 3D problems" --backend cuda --kernel 3 \
    --cluster-size 2
  usage_in=hot3d.h5
  usage hot-wall-cluster "--cluster-size: the clustered 3D kernel runs radius-1 stencils with" \
    --backend cuda --kernel 3 --cluster-size 2
fi
ngpu=1
[ $gpu -eq 1 ] && ngpu=$("$probe" --probe | sed -n 's/.*: \([0-9]*\) CUDA device.*/\1/p')
share=""
[ "$np" -gt "${ngpu:-1}" ] && share=--allow-gpu-sharing

# Shell functions share their variables: each uses names of its own (r_, s_, k_, h_).
run() { # name expected-status stencil-arguments...
  r_name=$1 r_want=$2
  shift 2
  "$@" --output-dir "out-$r_name" --overwrite --progress 0 --report-json "out-$r_name.json" \
    >"log-$r_name" 2>&1 </dev/null
  r_rc=$?
  if [ $r_rc -ne "$r_want" ]; then
    bad "$r_name: exit status $r_rc, expected $r_want"
    tail -n 30 "log-$r_name"
    return 1
  fi
  return 0
}

# Files of one kind (snapshot_ or checkpoint_) in two output directories: same names, same
# bytes, and the names expected.
same_files() { # case variant prefix expected-names
  s_a="out-$1-cpu" s_b="out-$1-$2"
  # shellcheck disable=SC2012 # the names are the run's own, without blanks
  s_la=$(cd "$s_a" && ls "$3"*.h5 2>/dev/null | tr '\n' ' ')
  # shellcheck disable=SC2012
  s_lb=$(cd "$s_b" && ls "$3"*.h5 2>/dev/null | tr '\n' ' ')
  if [ "$s_la" != "$4" ]; then
    bad "$1 $2: the cpu run wrote $3 files \"$s_la\", expected \"$4\""
    return
  fi
  if [ "$s_la" != "$s_lb" ]; then
    bad "$1 $2: $3 files differ: cpu \"$s_la\", fused \"$s_lb\""
    return
  fi
  for s_f in $s_la; do
    if ! "$h5same" "$s_a/$s_f" "$s_b/$s_f"; then
      bad "$1 $2: $s_f differs from the cpu backend's"
      return
    fi
  done
  ok "$1 $2 ${3}files"
}

# "iteration norm" lines of the residual history in a JSON report.
history() {
  tr -d '\n' <"$1" | sed -n 's/.*"history": \[\(\[[^"]*\]\)\].*/\1/p' | sed 's/\], *\[/\n/g' |
    tr -d '[] ' | tr ',' ' '
}

compare() { # case variant checks
  k_c=$1 k_v=$2 k_checks=$3
  case " $k_checks " in
  *" nan "*)
    k_la=$(grep "non-finite values" "log-$k_c-cpu")
    k_lb=$(grep "non-finite values" "log-$k_c-$k_v")
    if [ -z "$k_la" ] || [ "$k_la" != "$k_lb" ]; then
      bad "$k_c $k_v: the NaN/Inf check differs: cpu \"$k_la\", fused \"$k_lb\""
    else
      ok "$k_c $k_v nan-step"
    fi
    return
    ;;
  esac
  if "$h5same" "out-$k_c-cpu/final.h5" "out-$k_c-$k_v/final.h5"; then
    ok "$k_c $k_v"
  else
    bad "$k_c $k_v: final.h5 differs from the cpu backend's"
  fi
  case " $k_checks " in *" snap "*)
    same_files "$k_c" "$k_v" snapshot_ "snapshot_0000000000.h5 snapshot_0000000007.h5 snapshot_0000000014.h5 snapshot_0000000021.h5 "
    ;;
  esac
  case " $k_checks " in *" ckpt "*)
    same_files "$k_c" "$k_v" checkpoint_ "checkpoint_0000000006.h5 checkpoint_0000000012.h5 checkpoint_0000000018.h5 "
    ;;
  esac
  case " $k_checks " in *" res "*)
    history "out-$k_c-cpu.json" >"hist-$k_c-cpu"
    history "out-$k_c-$k_v.json" >"hist-$k_c-$k_v"
    if [ ! -s "hist-$k_c-cpu" ]; then
      bad "$k_c $k_v: no residual history in the cpu run's report"
    elif paste "hist-$k_c-cpu" "hist-$k_c-$k_v" | awk '
        NF != 4 || $1 != $3 { bad = 1 }
        { d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (d > 1e-9 * m) bad = 1 }
        END { exit bad }'; then
      ok "$k_c $k_v residuals ($(awk 'END { print NR }' "hist-$k_c-cpu") checks)"
    else
      bad "$k_c $k_v: the residual history differs (iteration, cpu norm, iteration, fused norm):"
      paste "hist-$k_c-cpu" "hist-$k_c-$k_v"
    fi
    ;;
  esac
}

# The header of a fused run says it ran, with T where it was given; single steps say why.
header() { # case variant expect-fallback T [rows|through: the device's choice]
  h_log="log-$1-$2"
  if [ "$3" != 0 ]; then
    h_why="the fused kernel cannot run"
    [ "$3" = 1 ] || h_why="tier 2 runs"
    if grep -q "kernel       single steps: $h_why" "$h_log"; then
      ok "$1 $2 header ($(sed -n 's/^kernel       single steps: //p' "$h_log"))"
    else
      bad "$1 $2: the header does not say why the single steps run"
      grep "^kernel" "$h_log"
    fi
  elif ! grep -q "kernel       fused" "$h_log"; then
    bad "$1 $2: the header does not say the fused kernel ran"
    grep "^kernel" "$h_log"
  elif [ "$4" -gt 0 ] && ! grep -q "up to T = $4 steps per launch" "$h_log"; then
    bad "$1 $2: the header does not say T = $4"
    grep "^kernel" "$h_log"
  elif [ "$4" = 0 ] && [ -n "${5:-}" ] && ! grep -q "warp rows" "$h_log"; then
    bad "$1 $2: the device's choice is not the warp-row kernel"
    grep "^device" "$h_log"
  elif [ "$4" = 0 ] && [ -n "${5:-}" ]; then
    got=rows
    grep -q "read through in the kernel" "$h_log" && got=through
    grep -q "reflecting faces applied at every level" "$h_log" && got=faces
    if [ "$got" != "${5:-}" ]; then
      bad "$1 $2: the warp-row kernel's faces are read as in '$got', expected '$5'"
      grep "^device" "$h_log"
    fi
  fi
}

# t0_header CHECK PATTERN WHAT: where the case's checks name CHECK, the one-rank T0 run's
# header must match PATTERN (the run of the loop below: $c, $name, $checks, $np)
t0_header() {
  [ "$name $np" = "T0 1" ] || return 0
  case " $checks " in *" $1 "*)
    grep -q "$2" "log-$c-$name" ||
      bad "$c $name: the header shows no $3: $(grep '^device' "log-$c-$name")"
    ;;
  esac
}

# name | stencil-input options | options of every run | fused variants | checks
# Variants: tokens joined by +: T<n> --steps-per-launch n (T0: the device's choice), c<spec>
# --cluster-size, k<n> --chunk n, a<n> --agree-every n, auto --kernel auto, one / shells
# --overlap signal / parts (the form of a z split's launches), fallback (the fused kernels
# cannot run it), single (auto runs the single-step tiers: tier 2 is faster).
cases=$(
  cat <<'CASES'
d2-fp64-dir|--shape 333x77x1 --steps 23 --initial random:1 --bc all=dirichlet:0.5||T0 T1 T2 T3 T4 T8 T4+a5 auto|
d2-fp32-per|--shape 333x77x1 --steps 23 --precision fp32 --initial random:2 --bc all=periodic||T0 T3 T4 T7 T7+k9|
d2-fp64-neu|--shape 130x45x1 --steps 23 --initial random:3 --bc all=neumann||T0 T4|
d2-fp32-mixed|--shape 333x77x1 --steps 23 --precision fp32 --initial random:4 --bc x=periodic --bc y_lo=dirichlet:1 --bc y_hi=neumann||T0 T4 T5 T6+k5|
d2-fp64-source|--shape 201x67x1 --steps 23 --initial random:5 --source random:6 --bc x=periodic --bc y_lo=dirichlet:0.25 --bc y_hi=neumann||T0 T3 T4|
d2-fp32-chunks|--shape 1000x300x1 --steps 23 --precision fp32 --initial random:34 --bc x_lo=dirichlet:0.5 --bc x_hi=neumann --bc y=dirichlet:0.25||T0 T8+k16 T5+k11|
d2-fp32-source|--shape 190x61x1 --steps 23 --precision fp32 --initial random:7 --source random:8 --bc all=periodic||T0 T8|
d2-poisson|--equation poisson --shape 97x61x1 --steps 40 --source random:9 --bc all=dirichlet:0 --tolerance 0|--residual-every 3|T0 T4|res
d2-poisson-wide32|--equation poisson --shape 400x90x1 --steps 30 --precision fp32 --source random:18 --initial random:19 --bc x=periodic --bc y=dirichlet:0 --tolerance 0|--residual-every 1|T0 T4|res
d2-poisson-wide64|--equation poisson --shape 400x90x1 --steps 30 --source random:20 --initial random:21 --bc x=periodic --bc y=dirichlet:0 --tolerance 0|--residual-every 1|T0 T4|res
d2-poisson-stop|--equation poisson --shape 400x90x1 --steps 60 --precision fp32 --source random:23 --initial random:24 --bc x=periodic --bc y=dirichlet:0 --tolerance 0.6458|--residual-every 1|T0 T4 T3|res
d2-outputs|--shape 150x64x1 --steps 23 --initial random:10 --bc all=dirichlet:0|--check-every 5 --output-every 7 --checkpoint-every 6|T0 T4|snap ckpt
d2-nan|--shape 64x48x1 --steps 200 --precision fp32 --dt 0.5 --initial random:11|--allow-unstable --check-every 5|T3 T4|nan
d3-fp64-dir|--shape 45x37x29 --steps 23 --initial random:12 --bc all=dirichlet:0.5||T0 T1 T2 T3 auto|faces
d3-fp32-hot|--shape 72x37x29 --steps 23 --precision fp32 --initial random:40 --bc all=dirichlet:0 --bc x_lo=dirichlet:1||T0 T1 T3 T4 auto|faces
d3-fp32-hotfirst|--shape 152x37x29 --steps 23 --precision fp32 --initial random:61 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc y_lo=neumann||T0 T4 T3|faces first
d3-fp64-hotfirst|--shape 128x37x29 --steps 23 --initial random:62 --bc all=neumann --bc x_lo=dirichlet:0.75 --bc z_hi=dirichlet:0||T0 T4|faces first
d3-fp32-zwalls|--shape 64x40x45 --steps 23 --precision fp32 --initial random:75 --bc z_lo=dirichlet:1 --bc z_hi=dirichlet:-0.5 --bc x=neumann||T0 T4+k7 T3|faces
d3-fp64-hot6|--shape 46x37x29 --steps 23 --initial random:41 --bc x_lo=dirichlet:1 --bc x_hi=dirichlet:-0.5 --bc y_lo=dirichlet:0.25 --bc y_hi=dirichlet:2 --bc z_lo=dirichlet:-1 --bc z_hi=dirichlet:0.75||T0 T2 T4|faces
d3-fp32-source-dir|--shape 40x33x27 --steps 23 --precision fp32 --initial random:42 --source random:43 --bc all=dirichlet:0.5 --bc z=neumann||T0 T3 auto|faces
d3-poisson|--equation poisson --shape 40x33x27 --steps 30 --source random:44 --bc all=dirichlet:0 --tolerance 0|--residual-every 3|T0 T3 T2 T1 auto|res through
d3-poisson-xwrap|--equation poisson --shape 40x33x27 --steps 20 --precision fp32 --source random:66 --bc x=periodic --bc y=dirichlet:0 --bc z=dirichlet:0 --tolerance 0|--residual-every 4|T0 T2|res through
d3-poisson-t4|--equation poisson --shape 40x33x27 --steps 30 --source random:87 --bc all=neumann --bc z=dirichlet:0 --tolerance 0|--residual-every 7|T0 auto|res through
d3-poisson-hot|--equation poisson --shape 151x37x40 --steps 30 --source random:63 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --tolerance 0|--residual-every 2|T0 T3 T2 auto+single|res faces
d3-fp32-source-hot|--shape 136x37x29 --steps 23 --precision fp32 --initial random:80 --source random:81 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc y_hi=neumann||T0 T4 T3 auto|faces
d3-fp64-source-hot|--shape 68x37x29 --steps 23 --initial random:85 --source random:86 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc y_hi=neumann --bc z_hi=dirichlet:0.5||T0 T4 T3 auto|faces
d3-fp32-source-hot6|--shape 64x37x45 --steps 23 --precision fp32 --initial random:82 --source random:83 --bc x_lo=dirichlet:1 --bc x_hi=dirichlet:-0.5 --bc y_lo=dirichlet:0.25 --bc y_hi=neumann --bc z_lo=dirichlet:-1 --bc z_hi=dirichlet:0.75||T0 T4+k7 T2|faces
d3-poisson-fp32-hot|--equation poisson --shape 152x37x40 --steps 30 --precision fp32 --source random:84 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc z=neumann --tolerance 0|--residual-every 5|T0 T3 auto|res faces
d3-poisson-fp32|--equation poisson --shape 44x37x29 --steps 30 --precision fp32 --source random:58 --bc x=neumann --bc y=dirichlet:0 --bc z=periodic --tolerance 0|--residual-every 2|T0 T3 T2+k5 auto|res through
d3-fp32-source-mix0|--shape 48x37x29 --steps 23 --precision fp32 --initial random:56 --source random:57 --bc x=dirichlet:0 --bc y=neumann --bc z_lo=neumann --bc z_hi=dirichlet:0||T0 T2 T3 T3+k7 auto|through
d3-fp32-source-rag|--shape 45x37x29 --steps 23 --precision fp32 --initial random:59 --source random:60 --bc all=dirichlet:0||T0 T3 T2|faces
d3-poisson-o4|--equation poisson --order 4 --shape 40x33x27 --steps 20 --precision fp32 --source random:45 --bc x=periodic --bc y=dirichlet:0 --bc z=neumann --tolerance 0|--residual-every 1|T0 T1 auto|res through
d2-o4-dir|--order 4 --shape 333x77x1 --steps 23 --initial random:46 --bc all=dirichlet:0.5||T0 T2 T3 auto|
d2-o6-per|--order 6 --shape 201x67x1 --steps 23 --initial random:47 --bc all=periodic||T0 T3|
d2-o8-mixed|--order 8 --shape 201x67x1 --steps 23 --precision fp32 --initial random:48 --source random:49 --bc x=periodic --bc y_lo=dirichlet:1 --bc y_hi=neumann||T0 T2|
d2-poisson-o8|--equation poisson --order 8 --shape 120x90x1 --steps 30 --source random:50 --bc all=dirichlet:0 --tolerance 0|--residual-every 2|T0 T2|res
d3-o4-dir0|--order 4 --shape 72x37x29 --steps 23 --precision fp32 --initial random:51 --bc all=dirichlet:0||T0 T1 T2 auto|through
d3-o4-source|--order 4 --shape 48x37x29 --steps 23 --initial random:64 --source random:65 --bc all=dirichlet:0 --bc y=neumann||T0 T1 auto|through
d3-o4-hot6|--order 4 --shape 64x37x45 --steps 23 --precision fp32 --initial random:66 --bc x_lo=dirichlet:1 --bc x_hi=dirichlet:-0.5 --bc y_lo=dirichlet:0.25 --bc y_hi=neumann --bc z_lo=dirichlet:-1 --bc z_hi=dirichlet:0.75||T0 T1 auto|faces
d3-o4-hotwall|--order 4 --shape 72x37x29 --steps 23 --initial random:67 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc y_hi=neumann --bc z=periodic||T0 T1 auto|faces
d3-o4-hot|--order 4 --shape 45x37x29 --steps 23 --initial random:52 --bc all=dirichlet:0 --bc x_lo=dirichlet:1 --bc z=neumann||T0 T1 auto+single|rows
d3-o6-mixed|--order 6 --shape 45x37x29 --steps 23 --precision fp32 --initial random:53 --source random:54 --bc x=periodic --bc y=dirichlet:0.5 --bc z=neumann||T0 auto+single|rows
d3-o6-dir0|--order 6 --shape 48x37x29 --steps 23 --initial random:59 --bc all=dirichlet:0 --bc y=neumann||T0 auto+single|through
d3-o8-per|--order 8 --shape 40x33x27 --steps 23 --initial random:55 --bc all=periodic||T0 auto+single|through
d3-o8-hot6|--order 8 --shape 46x37x29 --steps 23 --initial random:56 --source random:57 --bc x_lo=dirichlet:1 --bc x_hi=dirichlet:-0.5 --bc y_lo=dirichlet:0.25 --bc y_hi=dirichlet:2 --bc z_lo=dirichlet:-1 --bc z_hi=dirichlet:0.75||T0 auto+single|rows
d3-fp32-per|--shape 40x33x27 --steps 23 --precision fp32 --initial random:13 --bc all=periodic||T0 T3 T4 T4+c1x4|through
d3-fp64-per|--shape 45x37x29 --steps 23 --initial random:25 --bc all=periodic||T0 T1 T2 T3 T4 auto T3+k7|rows
d3-fp64-mixed|--shape 31x26x35 --steps 23 --initial random:14 --bc x=neumann --bc y=periodic --bc z_lo=dirichlet:1 --bc z_hi=neumann||T0 T4 auto|faces
d3-fp32-neu|--shape 45x37x29 --steps 23 --precision fp32 --initial random:15 --bc all=neumann||T0 T4|rows
d3-fp32-dir0|--shape 40x33x27 --steps 23 --precision fp32 --initial sine:1:2,3,1 --bc all=dirichlet:0||T0 T3 T4 auto T4+k5|through
d3-fp64-mix0|--shape 32x26x35 --steps 23 --initial random:26 --bc x=neumann --bc y=periodic --bc z=dirichlet:0||T0 T2 T4 auto|through
d3-fp64-dir0-wide|--shape 200x37x21 --steps 23 --initial random:31 --bc all=dirichlet:0||T0 T1 T2 T3|through
d3-fp32-deep|--shape 40x24x60 --steps 23 --precision fp32 --initial random:32 --bc all=dirichlet:0||T0 T4+k7|through
d3-fp32-waves|--shape 512x480x96 --steps 9 --precision fp32 --initial random:33 --bc all=dirichlet:0||T0 T4+k20|through waves narrow
d3-fp64-bytile|--shape 392x456x64 --steps 9 --initial random:39 --bc all=dirichlet:0||T0 T4+k16|through bytile
d3-fp32-gauss|--shape 48x40x36 --steps 23 --precision fp32 --initial gaussian:1:0.3,0.5,0.6:0.04 --bc all=dirichlet:0||T0|through
d3-fp32-clu|--shape 256x40x30 --steps 23 --precision fp32 --initial random:27 --bc all=dirichlet:0||T0 T4+c1x2 T4+c1x3 T3+c2 T1+c1x4 T4+c1|through
d3-fp64-clu|--shape 128x37x29 --steps 23 --initial random:28 --bc all=periodic||T0 T4+c1x3 T2+c1x5 T3+k7+c2|through
d3-fp32-clu-mix|--shape 256x33x20 --steps 23 --precision fp32 --initial random:29 --bc x_lo=dirichlet:0 --bc x_hi=neumann --bc y=periodic --bc z=dirichlet:0||T0 T4+c1x4 T2+c2 T4+c1x3|through
d3-fp64-clu-neu|--shape 384x20x12 --steps 23 --initial random:30 --bc all=neumann||T0 T4+c1x2 T4+c1x6 T3+c1x4|through
d3-fp64-cols|--shape 180x130x17 --steps 23 --initial random:35 --bc all=neumann||T0 T4 T3 T2|through narrow
d3-fp32-cols|--shape 252x200x19 --steps 23 --precision fp32 --initial random:36 --bc x=periodic --bc y=dirichlet:0 --bc z=neumann||T0 T4 T2+k5|through narrow
d3-fp64-slab|--shape 200x136x60 --steps 22 --initial random:37 --bc x=neumann --bc z=periodic||T0+one T0+shells T3+one|through
d3-fp32-slab|--shape 256x200x80 --steps 21 --precision fp32 --initial random:38 --bc all=dirichlet:0||T0+one T0+shells|through
d3-source|--shape 30x20x16 --steps 9 --initial random:16 --source random:17 --bc all=periodic||T0 T2 T3|
CASES
)

# Decompositions and transports of the fused runs on NPROC ranks (the first: MPI's choice).
# The CPU emulation runs auto's choice alone (ipc), for time.
splits=default
transports=""
if [ "$np" -gt 1 ] && ! grep -q "CPU emulation" probe.log; then
  transports="mpi-host ipc"
  [ "$np" -le "${ngpu:-1}" ] && transports="$transports nccl"
fi

# (The loop runs in a pipeline's subshell: a shell error there, under set -u, would end it
# early without a FAIL line, so it must reach its last line.)
echo "$cases" | {
  while IFS='|' read -r c mk common variants checks; do
    [ -n "$c" ] || continue
    [ -z "${TIER3_CASES:-}" ] || echo "$c" | grep -Eq "^($TIER3_CASES)\$" || continue
    # shellcheck disable=SC2086
    "$mkinput" -o "$c.h5" --overwrite $mk >/dev/null </dev/null || {
      bad "$c: stencil-input $mk"
      continue
    }
    want=0
    case " $checks " in *" nan "*) want=3 ;; esac
    # shellcheck disable=SC2086
    run "$c-cpu" $want "$@" "$stencil" "$c.h5" --backend cpu $common || continue
    [ $gpu -eq 1 ] || continue
    if [ "$np" -gt 1 ]; then
      case $c in
      d2-*) splits="default ${np}x1 1x${np}" ;;
      *) splits="default ${np}x1x1 1x1x${np}" ;;
      esac
    fi
    nv=0
    for v in $variants; do
      nv=$((nv + 1))
      # On several ranks the first two variants (the one-rank run covers the rest).
      [ "$np" -eq 1 ] || [ $nv -le 2 ] || continue
      for d in $splits; do
        # Other decompositions for the first two variants of a case (the device's T and one more).
        [ "$d" = default ] || [ $nv -le 2 ] || continue
        # (--overlap on: ranks sharing a GPU would turn auto's off)
        opts="--kernel 3 --overlap on" T=0 fb=0 name=$v
        for t in $(echo "$v" | tr '+' ' '); do
          case $t in
          T0) ;;
          T*) opts="$opts --steps-per-launch ${t#T}" T=${t#T} ;;
          c*) opts="$opts --cluster-size ${t#c}" ;;
          k*) opts="$opts --chunk ${t#k}" ;;
          auto) opts="$opts --kernel auto" ;;
          a*) opts="$opts --agree-every ${t#a}" ;;
          one) opts="$opts --overlap signal" ;;
          shells) opts="$opts --overlap parts" ;;
          fallback) fb=1 ;;
          single) fb=2 ;;
          esac
        done
        if [ "$d" != default ]; then
          opts="$opts --dims $d"
          name="$v-dims$d"
        fi
        # shellcheck disable=SC2086
        run "$c-$name" $want "$@" "$stencil" "$c.h5" --backend cuda $opts $common \
          ${share:+"$share"} || continue
        case "$v $d" in *one*" 1x1x$np")
          [ "$(grep -c 'launches in parts: one launch signalling' "log-$c-$name")" = "$np" ] ||
            bad "$c $name: not one signalled launch on every rank: $(grep '^device' "log-$c-$name")"
          ;;
        esac
        # Blocks that send across x faces, reading their other faces through: in parts by tile
        # (fused runs).
        case "$fb $c $d" in "0 d3-fp32-per ${np}x1x1" | "0 d3-o8-per ${np}x1x1" | "0 d3-fp32-dir0 ${np}x1x1")
          through=$(grep -c 'read through in the kernel' "log-$c-$name")
          [ "$through" -gt 0 ] &&
            [ "$(grep -c 'launches in parts: the tiles of the sent x and y faces first' "log-$c-$name")" = "$through" ] ||
            bad "$c $name: not in parts by tile on every rank that reads its faces through: $(grep '^device' "log-$c-$name")"
          ;;
        esac
        # ipc (auto's choice here) copies the slabs' z faces from field to field, and packs the
        # x faces (rows of 4 cells) of the x splits.
        case "$fb $c $d $transports" in *-slab" 1x1x"*ipc*)
          grep -q "; the sent cells copied from field to field by copy engines" "log-$c-$name" ||
            bad "$c $name: the ipc exchange does not copy the sent planes field to field"
          ;;
        "0 d3-fp32-per ${np}x1x1 "*ipc* | "0 d3-fp32-dir0 ${np}x1x1 "*ipc*)
          ! grep -q "copied from field to field" "log-$c-$name" ||
            bad "$c $name: the ipc exchange copies x faces as field boxes"
          ;;
        esac
        # (the faces' reading depends on the split: checked on MPI's choice)
        kind=""
        [ "$d" != default ] || kind=$(echo " $checks " | grep -o ' rows \| through \| faces ' | tr -d ' ')
        header "$c" "$name" $fb "$T" "$kind"
        # one rank: 86 tiles a plane fill an H200's 132 multiprocessors best with a long
        # first chunk (cl_wave_chunks)
        t0_header waves "planes (the first [0-9]*;" "longer first chunk"
        t0_header narrow "(the last column: warps of [0-9]* segments" "narrow column"
        t0_header first "(the first column: warps of [0-9]* segments" "narrow first column"
        t0_header bytile "whole launches by tile" "chunks by tile"
        compare "$c" "$name" "$checks"
      done
    done
    # Every transport moves the edge and corner messages of the deep halo.
    for t in $transports; do
      case "$checks $variants" in *nan* | *fallback*) continue ;; esac
      case $c in *-per | *-mixed | *-mix0 | *-source) ;; *) continue ;; esac # cases with edge messages
      name="T0-$t"
      # shellcheck disable=SC2086
      run "$c-$name" $want "$@" "$stencil" "$c.h5" --backend cuda --kernel 3 --halo-transport "$t" \
        $common ${share:+"$share"} || continue
      header "$c" "$name" 0 0
      compare "$c" "$name" "$checks"
    done
  done
  echo "tier3_compare: every case ran"
} 2>&1 | tee results.log
pass=$((pass + $(grep -c '^PASS' results.log)))
fail=$((fail + $(grep -c '^FAIL' results.log)))
if ! grep -q '^tier3_compare: every case ran' results.log; then
  echo "FAIL the case loop stopped early (the error above)"
  fail=$((fail + 1))
fi
echo "tier3_compare: $pass passed, $fail failed on $np rank(s)$([ $gpu -eq 1 ] || echo ', no GPU: fused runs skipped')"
[ "$fail" -eq 0 ] || exit 1
[ $gpu -eq 1 ] || exit 77
[ "$pass" -gt 0 ]
