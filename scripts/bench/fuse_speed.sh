#!/usr/bin/env bash
# Speed benchmark: model.fuse on against off in the same run, on the CPU, for the conv + ReLU pairs: a VGG-style net
# (configs/bench/vgg_cifar.yaml, 3x3 convolutions in oneDNN's blocked layout, each followed by a ReLU) on synthetic
# CIFAR-sized images, trained ROUNDS times fused and unfused, alternating (so a drifting machine touches both alike);
# the medians of images_per_s_steady give the ratio. Prints one row per thread count.
# Usage: scripts/bench/fuse_speed.sh   (env: STEPS 30, ROUNDS 3, THREADS "1 2")
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
[[ -x build/octet ]] || bash scripts/build.sh
steps=${STEPS:-30} rounds=${ROUNDS:-3} threads=${THREADS:-1 2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
syn() { echo "data={dataset: synthetic, synthetic_shape: [3,$1,$1], synthetic_classes: 10, synthetic_train: 100000, synthetic_test: 1, batch_size: $2}"; }
declare -A cfg=([vgg_cifar]=configs/bench/vgg_cifar.yaml)
declare -A data=([vgg_cifar]="$(syn 32 64)")
printf '%-14s %-7s %10s %12s %10s\n' net threads fused_ips unfused_ips fused/unfused
for net in vgg_cifar; do
  for t in $threads; do
    for f in true false; do : >"$out/$f"; done
    for r in $(seq "$rounds"); do
      for f in true false; do
        build/octet train "${cfg[$net]}" --set "${data[$net]}" --set run.max_steps="$steps" --set run.threads="$t" \
          --set model.fuse=$f --set run.eval_every=0 --set run.checkpoint_every=0 --set run.log_every=100000 \
          --set run.out_dir="$out" --set run.name="$net-$t-$f" --overwrite >"$out/log" 2>&1
        field "$out/$net-$t-$f/summary.json" images_per_s_steady >>"$out/$f"
      done
    done
    a=$(median <"$out/true") b=$(median <"$out/false")
    printf '%-14s %-7s %10.0f %12.0f %10s\n' "$net" "$t" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3fx", a / b }')"
  done
done
