#!/usr/bin/env bash
# The cifar10_bin loader on real images: Fashion-MNIST converted into CIFAR-10's binary format
# (scripts/convert_idx.py: padded to 32x32, three planes) trains Caffe's LeNet for one epoch to within a point of the
# same net trained on the same 50,000 images read from the IDX files.
set -u
octet=$1
src=$2
fm=/usr/share/datasets/fashion-mnist
[[ -f $fm/train-images-idx3-ubyte.gz ]] || { echo "FAIL: Fashion-MNIST expected at $fm (Debian's dataset-fashion-mnist)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$src/scripts/convert_idx.py" "$fm" "$tmp/cifar" || { echo "FAIL: convert_idx.py"; exit 1; }
common=(--set run.epochs=1 --set run.log_every=1000 --set run.out_dir="$tmp" --set run.threads=2)
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=idx \
  --set data.train_limit=50000 >"$tmp/idx.log" 2>&1 || { tail "$tmp/idx.log"; echo "FAIL: the IDX run"; exit 1; }
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=cifar \
  --set data.dataset=cifar10_bin --set data.path="$tmp/cifar" --set model.input=[3,32,32] >"$tmp/cifar.log" 2>&1 ||
  { tail "$tmp/cifar.log"; echo "FAIL: the cifar10_bin run"; exit 1; }
grep "^octet: " "$tmp/cifar.log"
a=$(grep -o '"test_accuracy":[0-9.e+-]*' "$tmp/idx/summary.json" | cut -d: -f2)
b=$(grep -o '"test_accuracy":[0-9.e+-]*' "$tmp/cifar/summary.json" | cut -d: -f2)
echo "one epoch of LeNet: IDX 1x28x28 $a, cifar10_bin 3x32x32 $b"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 && b > 0.8) }' ||
  { echo "FAIL: the cifar10_bin run is not within a point of the IDX run"; exit 1; }
echo "ok: within a point"
