#!/usr/bin/env bash
# Fine-tuning with model.init_from and init_skip: ResNet-20 (1x28x28 input) trained for an epoch on 10,000 Fashion-MNIST
# images is the starting point for a 5-class subset (classes 0-4) with a small training set (2,000 images), its fc left
# as initialized (init_skip: [fc]) and a fine-tuning learning rate. After one epoch it must beat what the same net
# reaches from scratch after three; the log lists what was loaded and skipped. Real data: Debian's Fashion-MNIST.
set -u
octet=$1
src=$2
source "$src/scripts/lib.sh"  # require_fashion, field
require_fashion
# Two IDX datasets: 10,000 images of all ten classes (the source task), and classes 0-4 with 2,000 training images (the
# target).
/usr/bin/python3 - "$fm" "$tmp" <<'PY' || { echo "FAIL: writing the class subsets"; exit 1; }
import gzip, os, struct, sys
import numpy as np
src, out = sys.argv[1], sys.argv[2]
def read(stem):
    b = gzip.open(os.path.join(src, stem + ".gz")).read()
    dims = b[3]
    shape = struct.unpack(">" + "I" * dims, b[4:4 + 4 * dims])
    return np.frombuffer(b, np.uint8, offset=4 + 4 * dims).reshape(shape)
def write(d, stem, a):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, stem), "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, a.ndim) + struct.pack(">" + "I" * a.ndim, *a.shape) + a.tobytes())
for split, n_train, classes in (("source", 10000, 10), ("target", 2000, 5)):
    for part, limit in (("train", n_train), ("t10k", 5000)):
        x, y = read(f"{part}-images-idx3-ubyte"), read(f"{part}-labels-idx1-ubyte")
        keep = np.flatnonzero(y < classes)[:limit]
        write(os.path.join(out, split), f"{part}-images-idx3-ubyte", x[keep])
        write(os.path.join(out, split), f"{part}-labels-idx1-ubyte", y[keep])
PY
cat >"$tmp/net.yaml" <<EOF
run: {name: source, seed: 1, epochs: 1, out_dir: $tmp/runs, log_every: 1000, threads: 2}
data: {dataset: mnist_idx, path: $tmp/source, batch_size: 64, eval_batch_size: 1000, normalize: {mean: 0.286, std: 0.353}}
model:
  input: [1, 28, 28]
  blocks:
    basic:
      params: {channels: null, stride: 1, shortcut: identity}
      layers:
        - {type: conv, name: conv1, out_channels: \$channels, kernel: 3, stride: \$stride, padding: 1, bias: false, init: he}
        - {type: batchnorm, name: bn1}
        - {type: relu, name: relu1}
        - {type: conv, name: conv2, out_channels: \$channels, kernel: 3, padding: 1, bias: false, init: he}
        - {type: batchnorm, name: bn2}
        - {type: add, name: add, from: \$in, shortcut: \$shortcut}
        - {type: relu, name: relu2}
  layers:
    - {type: conv, name: conv1, out_channels: 16, kernel: 3, padding: 1, bias: false, init: he}
    - {type: batchnorm, name: bn1}
    - {type: relu, name: relu1}
    - {block: basic, name: s1b, repeat: 3, with: {channels: 16}}
    - {block: basic, name: s2b, repeat: 3, with: {channels: 32}, overrides: {1: {stride: 2, shortcut: pad}}}
    - {block: basic, name: s3b, repeat: 3, with: {channels: 64}, overrides: {1: {stride: 2, shortcut: pad}}}
    - {type: global_avgpool, name: gap}
    - {type: fc, name: fc, out_features: 10}  # (IDX labels are digits 0-9; these tasks use 0-4)
optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4}
EOF
timeout 600 "$octet" train "$tmp/net.yaml" >"$tmp/source.log" 2>&1 || { tail "$tmp/source.log"; echo "FAIL: the source run"; exit 1; }
target=(--set data.path="$tmp/target")
timeout 600 "$octet" train "$tmp/net.yaml" "${target[@]}" --set run.name=scratch --set run.epochs=3 >"$tmp/scratch.log" 2>&1 ||
  { tail "$tmp/scratch.log"; echo "FAIL: the scratch run"; exit 1; }
timeout 600 "$octet" train "$tmp/net.yaml" "${target[@]}" --set run.name=tuned --set model.init_from="$tmp/runs/source" \
  --set model.init_skip=[fc] --set optimizer.lr=0.01 >"$tmp/tuned.log" 2>&1 || { tail "$tmp/tuned.log"; echo "FAIL: the fine-tuning run"; exit 1; }
grep -q "model.init_from: loaded 95 tensors from $tmp/runs/source/checkpoint.bin (step 156); 2 left as initialized: fc.weight, fc.bias" \
  "$tmp/tuned.log" || { grep "init_from" "$tmp/tuned.log"; echo "FAIL: the log does not list what was loaded and skipped"; exit 1; }
src_acc=$(field "$tmp/runs/source/summary.json" test_accuracy)
scratch=$(field "$tmp/runs/scratch/summary.json" test_accuracy)
tuned=$(field "$tmp/runs/tuned/summary.json" test_accuracy)
echo "source task (10,000 images of 10 classes, 1 epoch): $src_acc; target (classes 0-4, 2,000 images): from scratch" \
  "after 3 epochs $scratch, fine-tuned (lr 0.01) after 1 epoch $tuned"
awk -v t="$tuned" -v s="$scratch" 'BEGIN { exit !(t > s) }' ||
  { echo "FAIL: fine-tuning for one epoch did not beat three epochs from scratch"; exit 1; }
echo "ok: fine-tuned from the source run in a third of the steps"
