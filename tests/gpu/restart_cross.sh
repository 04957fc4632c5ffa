#!/bin/sh
# Restart across backends, bit for bit (label gpu):
#
#   restart_cross.sh PROBE STENCIL STENCIL_INPUT H5SAME WORKDIR MPIEXEC_FOR_2_RANKS...
#
# For fp64 and fp32 inputs: the CPU backend's uninterrupted run of N steps is the reference.
# A CPU run checkpointed at step K continued on the GPU to N, and a GPU run (2 ranks)
# checkpointed at K continued on the CPU (1 rank) to N, must both give the same bytes.
# Exit 77 without a GPU (unless STENCIL_REQUIRE_GPU=1).
set -u
probe=$1 stencil=$2 mkinput=$3 h5same=$4 work=$5
shift 5
"$probe" --probe
rc=$?
[ $rc -eq 0 ] || exit $rc
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail=0
run() { # log-name command...
  name=$1
  shift
  if ! "$@" --quiet >"log-$name" 2>&1 </dev/null; then
    echo "FAIL $name: the run failed:"
    cat "log-$name"
    fail=$((fail + 1))
    return 1
  fi
}
for prec in fp64 fp32; do
  c=cross-$prec
  "$mkinput" -o "$c.h5" --shape 41x27x19 --steps 12 --precision "$prec" --initial random:5 \
    --bc x=periodic --bc y_lo=dirichlet:0.5 --bc z=neumann >/dev/null || exit 1
  run "$c-ref" "$stencil" "$c.h5" --backend cpu --output-dir "ref-$prec" || continue
  # CPU to step 5, then the GPU to 12.
  run "$c-cpu5" "$stencil" "$c.h5" --backend cpu --steps 5 --checkpoint-every 5 \
    --output-dir "cpu5-$prec" &&
    run "$c-gpu12" "$stencil" "$c.h5" --backend cuda --restart "cpu5-$prec/checkpoint_0000000005.h5" \
      --output-dir "gpu12-$prec" &&
    { "$h5same" "ref-$prec/final.h5" "gpu12-$prec/final.h5" ||
      { echo "FAIL $prec: cpu checkpoint -> gpu restart differs"; fail=$((fail + 1)); }; }
  # The GPU on 2 ranks to step 5 (the background writer: its buffer is page-locked memory of
  # the CUDA backend), then the CPU on 1 rank to 12.
  run "$c-gpu5" "$@" "$stencil" "$c.h5" --backend cuda --allow-gpu-sharing --steps 5 \
    --checkpoint-every 5 --checkpoint-mode background --output-dir "gpu5-$prec" &&
    run "$c-cpu12" "$stencil" "$c.h5" --backend cpu --restart "gpu5-$prec/checkpoint_0000000005.h5" \
      --output-dir "cpu12-$prec" &&
    { "$h5same" "ref-$prec/final.h5" "cpu12-$prec/final.h5" ||
      { echo "FAIL $prec: gpu checkpoint -> cpu restart differs"; fail=$((fail + 1)); }; }
done
[ $fail -eq 0 ] && echo "restart across backends: fp64 and fp32 bit for bit"
exit $((fail > 0))
