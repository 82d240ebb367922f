#!/usr/bin/env bash
# Acceptance: configs/fashion-mnist/lenet.yaml (5 epochs on Debian's Fashion-MNIST) reaches >= 89.3% test accuracy.
set -eu
octet=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$octet" train "$src/configs/fashion-mnist/lenet.yaml" --set run.out_dir="$tmp" --set run.log_every=937
acc=$(grep -o '"test_accuracy":[0-9.e+-]*' "$tmp/fashion-lenet/summary.json" | cut -d: -f2)
echo "final test accuracy: $acc (bar: 0.893)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.893) }'
