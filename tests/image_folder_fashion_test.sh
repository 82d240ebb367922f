#!/usr/bin/env bash
# The image_folder loader on real images: Fashion-MNIST written as an ImageNet-style JPEG tree
# (scripts/convert_idx.py --jpeg-tree: train/<class>/*.JPEG, val/<class>/*.JPEG, RGB 28x28, quality 90) trains Caffe's
# LeNet for two epochs, decoded by OpenCV on two threads, to within a point of the same net trained on the IDX files
# (the IDX run is fashion_mnist_lenet_5_epochs's, IDX_RUN: its second epoch, the learning rate being constant, is what
# a two-epoch run gives); then the run's weights through octet eval (its own test accuracy, the classes named by the
# tree's folders) and octet classify (val images of two classes, named and mostly right, through the image_folder run
# and the IDX run). Usage: image_folder_fashion_test.sh OCTET SRC [IDX_RUN] (without it, the IDX run is made here).
set -u
octet=$1
src=$2
source "$src/scripts/lib.sh"  # require_fashion, field, within_a_point
require_fashion
idx=${3:-$tmp/idx}
if [[ ! -f $idx/metrics.jsonl ]]; then
  timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" --set run.epochs=2 --set run.log_every=1000 \
    --set run.out_dir="$(dirname "$idx")" --set run.name="$(basename "$idx")" >"$tmp/idx.log" 2>&1 ||
    { tail "$tmp/idx.log"; echo "FAIL: the IDX run"; exit 1; }
fi
/usr/bin/python3 "$src/scripts/convert_idx.py" --jpeg-tree --size 28 --names fashion "$fm" "$tmp/jpeg" || { echo "FAIL: convert_idx.py"; exit 1; }
common=(--set run.epochs=2 --set run.log_every=1000 --set run.out_dir="$tmp" --set run.threads=2)
jpeg=(--set data.dataset=image_folder --set data.path="$tmp/jpeg" --set data.image_size=28 --set data.resize=28
      --set data.decode_threads=2 --set model.input=[3,28,28])
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=jpeg "${jpeg[@]}" \
  >"$tmp/jpeg.log" 2>&1 ||
  { tail "$tmp/jpeg.log"; echo "FAIL: the image_folder run"; exit 1; }
grep "^octet: " "$tmp/jpeg.log"
a=$(grep '"event":"eval","epoch":2,' "$idx/metrics.jsonl" | grep -o '"test_accuracy":[0-9.]*' | cut -d: -f2)
b=$(field "$tmp/jpeg/summary.json" test_accuracy)
echo "two epochs of LeNet: IDX 1x28x28 $a, image_folder JPEG 3x28x28 $b"
within_a_point "$a" "$b" 0.85 ||
  { echo "FAIL: the image_folder run is not within a point of the IDX run"; exit 1; }
echo "ok: within a point"
# octet eval of the run directory: the run's own test accuracy, each class named by its folder.
"$octet" eval "$src/configs/fashion-mnist/lenet.yaml" "${jpeg[@]}" --weights "$tmp/jpeg" --out "$tmp/eval.json" \
  >"$tmp/eval.log" 2>&1 || { cat "$tmp/eval.log"; echo "FAIL: octet eval"; exit 1; }
/usr/bin/python3 - "$tmp/eval.json" "$b" <<'PY' || { cat "$tmp/eval.log"; echo "FAIL: octet eval's report"; exit 1; }
import json, sys
e = json.load(open(sys.argv[1]))
assert e["count"] == 10000 and round(e["top1"] * 1e4) == round(float(sys.argv[2]) * 1e4), (e["top1"], sys.argv[2])
assert [c["name"] for c in e["per_class"]][9] == "c9_ankle_boot" and len(e["confusion"]) == 10
assert sum(map(sum, e["confusion"])) == 10000 and e["top5"] >= e["top1"]
PY
echo "ok: octet eval gives the run's test accuracy $b, with per-class accuracy and the confusion matrix"
# On two ranks (each its shard of the test split): the same report; and the matrix as a picture.
mpirun -np 2 --oversubscribe "$octet" eval "$src/configs/fashion-mnist/lenet.yaml" "${jpeg[@]}" --set run.threads=1 \
  --weights "$tmp/jpeg" --out "$tmp/eval2.json" >"$tmp/eval2.log" 2>&1 || { cat "$tmp/eval2.log"; echo "FAIL: eval on 2 ranks"; exit 1; }
/usr/bin/python3 - "$tmp/eval.json" "$tmp/eval2.json" <<'PY' || { echo "FAIL: 2 ranks' report differs from 1 rank's"; exit 1; }
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:])
assert two["ranks"] == 2 and one["confusion"] == two["confusion"] and one["top5"] == two["top5"], (one["top1"], two["top1"])
PY
/usr/bin/python3 "$src/scripts/plot.py" --confusion "$tmp/eval.json" --out "$tmp" >/dev/null &&
  [[ $(head -c 4 "$tmp/confusion.png" | tail -c 3) == PNG ]] || { echo "FAIL: plot.py --confusion"; exit 1; }
echo "ok: the same report from 2 ranks, and confusion.png"
# octet classify: ten val images of two classes each; the classes come from the run directory's classes.txt.
mapfile -t boots < <(ls "$tmp/jpeg/val/c9_ankle_boot"/* | head -10)
mapfile -t trousers < <(ls "$tmp/jpeg/val/c1_trouser"/* | head -10)
"$octet" classify "$src/configs/fashion-mnist/lenet.yaml" "${jpeg[@]}" --weights "$tmp/jpeg" --top 3 "${boots[@]}" \
  "${trousers[@]}" >"$tmp/classify.txt" 2>"$tmp/classify.err" || { cat "$tmp/classify.err"; echo "FAIL: classify"; exit 1; }
right=$(( $(grep -c "^  1\. c9_ankle_boot" "$tmp/classify.txt") + $(grep -c "^  1\. c1_trouser" "$tmp/classify.txt") ))
lines=$(grep -c "^  [123]\. c[0-9]_" "$tmp/classify.txt")
head -4 "$tmp/classify.txt"
((lines == 60 && right >= 16)) || { cat "$tmp/classify.txt"; echo "FAIL: classify: $right of 20 right, $lines lines"; exit 1; }
echo "ok: octet classify: $right of 20 val images right, each with its 3 top classes by name"
# Through the IDX run (mnist_idx, 1x28x28): each file decoded, resized whole and made grey; names from data.class_names.
printf '%s\n' tshirt trouser pullover dress coat sandal shirt sneaker bag ankle_boot >"$tmp/names.txt"
"$octet" classify "$src/configs/fashion-mnist/lenet.yaml" --set data.class_names="$tmp/names.txt" --weights "$idx" \
  "${boots[@]}" "${trousers[@]}" >"$tmp/classify_idx.txt" 2>"$tmp/classify_idx.err" ||
  { cat "$tmp/classify_idx.err"; echo "FAIL: classify through the IDX config"; exit 1; }
right=$(( $(grep -c "^  1\. ankle_boot " "$tmp/classify_idx.txt") + $(grep -c "^  1\. trouser " "$tmp/classify_idx.txt") ))
((right >= 16)) || { cat "$tmp/classify_idx.txt"; echo "FAIL: classify through the IDX config: $right of 20 right"; exit 1; }
echo "ok: octet classify through the IDX run: $right of 20 right, named by data.class_names"
