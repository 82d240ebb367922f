#!/usr/bin/env bash
# Mixed precision in training runs (model.precision): LeNet on real MNIST with 2 ranks and dynamic_tree8 in bf16 on the
# CPU (oneDNN's bf16 kernels) ends within a point of fp32; on the simulated device (the GPU path, 16-bit operands
# modelled by rounding) bf16 and tf32 learn, and fp16 with a loss scale far too large overflows: the log shows steps
# skipped on every rank as the scale backs off, summary.json counts them, the run still learns, and a run stopped
# and resumed ends in the checkpoint bytes of the run left alone (the scale and its counters are in the checkpoint).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mnist_setup "$1" "$2"
common=("$src/configs/mnist/lenet.yaml" --set data.path="$data" --set run.log_every=1000 --set
  compression.method=dynamic_tree8 --set parallel.checksum_every=10)
# run NAME DEVICE [args...]: 2 ranks into $tmp/NAME (log $tmp/NAME.log); false when it failed.
run() {
  local name=$1 dev=$2
  shift 2
  timeout 600 mpirun -np 2 "$octet" train "${common[@]}" "$@" --set run.out_dir="$tmp/$name" --set run.name=r \
    --set parallel.device="$dev" >"$tmp/$name.log" 2>&1 && return 0
  grep -m1 "octet: error" "$tmp/$name.log" || tail -5 "$tmp/$name.log"
  return 1
}
acc() { field "$tmp/$1/r/summary.json" test_accuracy; }

# 1. bf16 on the CPU against fp32, one epoch each.
if grep -q -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  if run fp32 cpu --set run.epochs=1 && run bf16 cpu --set run.epochs=1 --set model.precision=bf16; then
    a=$(acc fp32) b=$(acc bf16)
    if awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > 0.9 && b > a - 0.01) }'; then
      echo "ok: CPU bf16 LeNet, 2 ranks, dynamic_tree8: accuracy $b against fp32's $a"
    else
      bad "CPU bf16 accuracy $b against fp32's $a"
    fi
  else
    bad "CPU runs in fp32 and bf16"
  fi
else
  echo "skip: this CPU has no AVX512-BF16 or AMX (bf16 on the CPU is refused; the config tests check that line)"
fi

# 2. bf16 and tf32 on the simulated device.
for p in bf16 tf32; do
  if run "sim_$p" sim --set run.max_steps=40 --set model.precision=$p; then
    a=$(acc "sim_$p")
    awk -v a="$a" 'BEGIN { exit !(a > 0.8) }' && echo "ok: $p on the simulated device learns ($a after 40 steps)" ||
      bad "$p on the simulated device: accuracy $a after 40 steps"
  else
    bad "$p on the simulated device"
  fi
done

# 3. fp16 with an initial scale of 2^24: the loss gradient overflows fp16 until the scale has backed off.
fp16=(--set model.precision=fp16 --set "model.loss_scale={init: 16777216, growth_every: 8}")
if run fp16 sim --set run.max_steps=40 "${fp16[@]}"; then
  n=$(grep -c "step skipped on every rank" "$tmp/fp16.log")
  skipped=$(field "$tmp/fp16/r/summary.json" skipped_steps) scale=$(field "$tmp/fp16/r/summary.json" loss_scale)
  a=$(acc fp16)
  if [[ $n -ge 2 && ${skipped%.*} -ge 2 ]] && grep -q "overflowed on 2 of 2 ranks" "$tmp/fp16.log" &&
    awk -v a="$a" 'BEGIN { exit !(a > 0.8) }'; then
    echo "ok: fp16 overflows skip the step on both ranks ($n lines, summary: $skipped skipped, scale $scale), accuracy $a"
  else
    bad "fp16 overflow: $n skip lines, summary skipped_steps '$skipped', accuracy $a"
    grep -m3 "skipped\|error" "$tmp/fp16.log"
  fi
else
  bad "fp16 on the simulated device"
fi

# 4. fp16 resumed: 20 steps, then on to 40, ends where the run of 40 did (the loss scale grew and backed off in
# between).
if run fp16_a sim --set run.max_steps=20 "${fp16[@]}" &&
  run fp16_a sim --set run.max_steps=40 "${fp16[@]}" --resume "$tmp/fp16_a/r"; then
  if cmp -s "$tmp/fp16/r/checkpoint.bin" "$tmp/fp16_a/r/checkpoint.bin"; then
    echo "ok: fp16 stopped at step 20 and resumed ends in the uninterrupted run's checkpoint bytes"
  else
    bad "fp16 resume: the checkpoints differ"
  fi
else
  bad "fp16 resume runs"
fi
exit $fail
