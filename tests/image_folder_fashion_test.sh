#!/usr/bin/env bash
# The image_folder loader on real images: Fashion-MNIST written as an ImageNet-style JPEG tree
# (scripts/convert_idx.py --jpeg-tree: train/<class>/*.JPEG, val/<class>/*.JPEG, RGB 28x28, quality 90) trains Caffe's
# LeNet for two epochs, decoded by OpenCV on two threads, to within a point of the same net trained on the IDX files.
set -u
octet=$1
src=$2
source "$src/scripts/lib.sh"  # require_fashion, field, within_a_point
require_fashion
/usr/bin/python3 "$src/scripts/convert_idx.py" --jpeg-tree --size 28 "$fm" "$tmp/jpeg" || { echo "FAIL: convert_idx.py"; exit 1; }
common=(--set run.epochs=2 --set run.log_every=1000 --set run.out_dir="$tmp" --set run.threads=2)
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=idx >"$tmp/idx.log" 2>&1 ||
  { tail "$tmp/idx.log"; echo "FAIL: the IDX run"; exit 1; }
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=jpeg \
  --set data.dataset=image_folder --set data.path="$tmp/jpeg" --set data.image_size=28 --set data.resize=28 \
  --set data.decode_threads=2 --set model.input=[3,28,28] >"$tmp/jpeg.log" 2>&1 ||
  { tail "$tmp/jpeg.log"; echo "FAIL: the image_folder run"; exit 1; }
grep "^octet: " "$tmp/jpeg.log"
a=$(field "$tmp/idx/summary.json" test_accuracy)
b=$(field "$tmp/jpeg/summary.json" test_accuracy)
echo "two epochs of LeNet: IDX 1x28x28 $a, image_folder JPEG 3x28x28 $b"
within_a_point "$a" "$b" 0.85 ||
  { echo "FAIL: the image_folder run is not within a point of the IDX run"; exit 1; }
echo "ok: within a point"
