#!/usr/bin/env bash
# Speed benchmark: ResNet-20 training steps (configs/cifar10/resnet20.yaml on synthetic 3x32x32 batches, batch 128)
# with octet and with PyTorch (Debian's python3-torch, scripts/bench/resnet20_torch.py) at 1 and 2 threads, measured
# in the same run: images/s per framework (steps after warm-up) and the octet/PyTorch ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/octet ]] || bash scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${STEPS:-20}
printf '%-8s %10s %12s %8s\n' threads octet_ips pytorch_ips ratio
for t in 1 2; do
  build/octet train configs/cifar10/resnet20.yaml --set data.dataset=synthetic --set data.synthetic_shape=[3,32,32] \
    --set data.synthetic_train=$((128 * (steps + 3))) --set data.synthetic_test=128 --set data.augment.crop_padding=0 \
    --set run.threads=$t --set run.out_dir="$out" --set run.name=t$t --set run.epochs=1 --set run.warmup_steps=3 \
    --set run.log_every=100000 --set run.checkpoint_every=0 >"$out/octet$t.log"
  o_ips=$(grep -o '"images_per_s_steady":[0-9.e+]*' "$out/t$t/summary.json" | cut -d: -f2)
  p_ips=$(OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench/resnet20_torch.py "$t" 128 "$steps" |
    sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
  printf '%-8s %10.0f %12.0f %7.2fx\n' "$t" "$o_ips" "$p_ips" "$(awk -v a="$o_ips" -v b="$p_ips" 'BEGIN { print a / b }')"
done
