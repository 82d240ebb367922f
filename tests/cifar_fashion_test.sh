#!/usr/bin/env bash
# The cifar10_bin loader on real images: Fashion-MNIST converted into CIFAR-10's binary format
# (scripts/convert_idx.py: padded to 32x32, three planes) trains Caffe's LeNet for one epoch to within a point of the
# same net trained on the same 50,000 images read from the IDX files; then configs/cifar10/resnet20.yaml (batchnorm,
# option-A residual blocks, crop + flip, per-channel normalization) trains data-parallel on 4 ranks with dynamic_tree8
# on the same batches for 60 steps and beats chance clearly.
set -u
octet=$1
src=$2
source "$src/scripts/lib.sh"  # require_fashion, field, within_a_point
require_fashion
/usr/bin/python3 "$src/scripts/convert_idx.py" "$fm" "$tmp/cifar" || { echo "FAIL: convert_idx.py"; exit 1; }
common=(--set run.epochs=1 --set run.log_every=1000 --set run.out_dir="$tmp" --set run.threads=2)
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=idx \
  --set data.train_limit=50000 >"$tmp/idx.log" 2>&1 || { tail "$tmp/idx.log"; echo "FAIL: the IDX run"; exit 1; }
timeout 600 "$octet" train "$src/configs/fashion-mnist/lenet.yaml" "${common[@]}" --set run.name=cifar \
  --set data.dataset=cifar10_bin --set data.path="$tmp/cifar" --set model.input=[3,32,32] >"$tmp/cifar.log" 2>&1 ||
  { tail "$tmp/cifar.log"; echo "FAIL: the cifar10_bin run"; exit 1; }
grep "^octet: " "$tmp/cifar.log"
a=$(field "$tmp/idx/summary.json" test_accuracy)
b=$(field "$tmp/cifar/summary.json" test_accuracy)
echo "one epoch of LeNet: IDX 1x28x28 $a, cifar10_bin 3x32x32 $b"
within_a_point "$a" "$b" 0.8 ||
  { echo "FAIL: the cifar10_bin run is not within a point of the IDX run"; exit 1; }
echo "ok: within a point"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 600 mpirun -np 4 --oversubscribe --mca mpi_yield_when_idle 1 "$octet" train "$src/configs/cifar10/resnet20.yaml" \
  --set data.path="$tmp/cifar" --set run.out_dir="$tmp" --set run.name=resnet20 --set run.threads=1 \
  --set data.batch_size=32 --set run.max_steps=60 --set run.log_every=20 --set data.test_limit=2000 \
  --set parallel.checksum_every=20 --set compression.method=dynamic_tree8 >"$tmp/resnet.log" 2>&1 ||
  { tail -20 "$tmp/resnet.log"; echo "FAIL: the ResNet-20 run"; exit 1; }
grep "^epoch" "$tmp/resnet.log"
acc=$(field "$tmp/resnet20/summary.json" test_accuracy)
ratio=$(field "$tmp/resnet20/summary.json" compression_ratio)
echo "ResNet-20, 4 ranks x 32, dynamic_tree8, 60 steps: test accuracy $acc (bar 0.4), bytes vs fp32 x$ratio"
awk -v a="$acc" -v r="$ratio" 'BEGIN { exit !(a >= 0.4 && r > 3) }' || { echo "FAIL: ResNet-20 did not learn"; exit 1; }
