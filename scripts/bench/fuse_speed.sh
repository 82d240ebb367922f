#!/usr/bin/env bash
# Speed benchmark: a fusion key on against off in the same run, on the CPU: KEY model.fuse (the default) for the conv
# + ReLU pairs of a VGG-style net (configs/bench/vgg_cifar.yaml, 3x3 convolutions in oneDNN's blocked layout, each
# followed by a ReLU), or model.fuse_add for ResNet-20's identity adds taken into the batchnorms before them
# (NETS=resnet20, configs/cifar10/resnet20.yaml); synthetic CIFAR-sized images, trained ROUNDS times with the key on
# and off, alternating (so a drifting machine touches both alike); the medians of images_per_s_steady give the ratio.
# Prints one row per net and thread count.
# Usage: scripts/bench/fuse_speed.sh   (env: KEY model.fuse, NETS vgg_cifar, STEPS 30, ROUNDS 3, THREADS "1 2",
#        PRECISION fp32)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
[[ -x build/octet ]] || bash scripts/build.sh
steps=${STEPS:-30} rounds=${ROUNDS:-3} threads=${THREADS:-1 2} key=${KEY:-model.fuse} nets=${NETS:-vgg_cifar}
precision=${PRECISION:-fp32}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
syn() { echo "data={dataset: synthetic, synthetic_shape: [3,$1,$1], synthetic_classes: 10, synthetic_train: 100000, synthetic_test: 1, batch_size: $2}"; }
declare -A cfg=([vgg_cifar]=configs/bench/vgg_cifar.yaml [resnet20]=configs/cifar10/resnet20.yaml)
declare -A data=([vgg_cifar]="$(syn 32 64)" [resnet20]="$(syn 32 128)")
echo "# $key on against off, model.precision $precision"
printf '%-14s %-7s %10s %12s %10s\n' net threads fused_ips unfused_ips fused/unfused
for net in $nets; do
  for t in $threads; do
    for f in true false; do : >"$out/$f"; done
    for r in $(seq "$rounds"); do
      for f in true false; do
        build/octet train "${cfg[$net]}" --set "${data[$net]}" --set run.max_steps="$steps" --set run.threads="$t" \
          --set "$key=$f" --set model.precision="$precision" --set run.eval_every=0 --set run.checkpoint_every=0 --set run.log_every=100000 \
          --set run.out_dir="$out" --set run.name="$net-$t-$f" --overwrite >"$out/log" 2>&1
        field "$out/$net-$t-$f/summary.json" images_per_s_steady >>"$out/$f"
      done
    done
    a=$(median <"$out/true") b=$(median <"$out/false")
    printf '%-14s %-7s %10.0f %12.0f %10s\n' "$net" "$t" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3fx", a / b }')"
  done
done
