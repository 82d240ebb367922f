#!/usr/bin/env bash
# Acceptance: configs/fashion-mnist/lenet.yaml (5 epochs on Debian's Fashion-MNIST) reaches >= 89.3% test accuracy.
# Usage: fashion_lenet_test.sh OCTET SRC [RUN_DIR]: with RUN_DIR the run stays there (replaced if present) for the
# tests that read it after (image_folder_fashion compares its own second epoch with this run's).
set -eu
octet=$1
src=$2
if [[ -n ${3:-} ]]; then
  run=$3
  rm -rf "$run"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  run=$tmp/fashion-lenet
fi
"$octet" train "$src/configs/fashion-mnist/lenet.yaml" --set run.out_dir="$(dirname "$run")" \
  --set run.name="$(basename "$run")" --set run.log_every=937
acc=$(grep -o '"test_accuracy":[0-9.e+-]*' "$run/summary.json" | cut -d: -f2)
echo "final test accuracy: $acc (bar: 0.893)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.893) }'
