#!/usr/bin/env bash
# The reproduction configs train end to end on the data this machine has: Fashion-MNIST written as CIFAR-10 binaries
# (scripts/convert_idx.py) for Caffe's cifar10_quick and He et al.'s ResNet-20/56/110, and as an ImageNet-style JPEG
# tree (--jpeg-tree, decoded by OpenCV, resized to 256 and cropped to 224/227) for Caffe's bvlc_alexnet and
# torchvision's ResNet-18/50 (their last layer cut to the 10 classes); each config as shipped, shortened (fewer images and steps) and on 2 ranks where it has
# batchnorm, with synchronized batchnorm once (parallel.sync_batchnorm). Verdicts: each run ends with finite weights and a summary; the CIFAR
# nets beat chance on the test images.
set -u
octet=$1
src=$2
source "$src/scripts/lib.sh"  # require_fashion, field
require_fashion
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
/usr/bin/python3 "$src/scripts/convert_idx.py" "$fm" "$tmp/cifar" >/dev/null || { echo "FAIL: convert_idx.py"; exit 1; }
/usr/bin/python3 "$src/scripts/convert_idx.py" --jpeg-tree --size 32 --limit-train 256 --limit-test 64 --jobs 1 "$fm" \
  "$tmp/jpeg" >/dev/null || { echo "FAIL: convert_idx.py --jpeg-tree"; exit 1; }
run() {  # run NAME NP CONFIG [args...]: a shortened run; prints its accuracy line
  local name=$1 np=$2 cfg=$3
  shift 3
  local bind=()  # one rank unbound: mpirun would bind it to one core, where its two threads would take turns
  ((np == 1)) && bind=(--bind-to none)
  if ! timeout 900 mpirun -np "$np" "${bind[@]}" --mca mpi_yield_when_idle 1 "$octet" train "$src/configs/$cfg" \
    --set run.out_dir="$tmp/runs" --set run.name="$name" --set run.threads=1 --set run.log_every=1000 "$@" \
    >"$tmp/$name.log" 2>&1; then
    tail -5 "$tmp/$name.log"
    bad "$cfg ($name)"
    return 1
  fi
  grep "^done:" "$tmp/$name.log" | sed "s/^/  $name: /"
}
cifar=(--set data.path="$tmp/cifar" --set run.epochs=1 --set data.test_limit=1000)
# Caffe's cifar10_quick as shipped (gaussian fillers, lr_mult 2 biases, ceil-mode pooling, 0-255 inputs, lr 0.001):
# 100 steps of its batch of 100 (Fashion-MNIST: ~74%).
run quick 1 cifar10/cifar10_quick.yaml "${cifar[@]}" --set data.train_limit=10000 --set run.threads=2 &&
  acc=$(field "$tmp/runs/quick/summary.json" test_accuracy) && awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' &&
  echo "ok: cifar10_quick trains: test accuracy $acc after 100 steps" || bad "cifar10_quick: test accuracy ${acc:-none}"
for n in 20 56 110; do  # 2 ranks x 16; ResNet-20 with synchronized batchnorm on every batchnorm layer
  extra=()
  [[ $n == 20 ]] && extra=(--set parallel.sync_batchnorm=true)
  steps=$([[ $n == 20 ]] && echo 40 || echo 8)
  run resnet$n 2 cifar10/resnet$n.yaml "${cifar[@]}" --set data.train_limit=$((32 * steps)) --set data.batch_size=16 \
    "${extra[@]}" && acc=$(field "$tmp/runs/resnet$n/summary.json" test_accuracy) &&
    echo "ok: ResNet-$n trains on 2 ranks ($steps steps${extra:+, synchronized batchnorm}): test accuracy $acc" ||
    bad "ResNet-$n"
done
awk -v a="$(field "$tmp/runs/resnet20/summary.json" test_accuracy)" 'BEGIN { exit !(a > 0.2) }' ||
  bad "ResNet-20 did not beat chance in 40 steps"
jpeg=(--set data.path="$tmp/jpeg" --set data.decode_threads=1 --set run.max_steps=3 --set data.test_limit=8
  --set data.eval_batch_size=8)
# Caffe's bvlc_alexnet: groups, ceil-mode pooling, LRN, gaussian fillers, lr_mult/decay_mult; 1 rank, batch 8.
run alexnet 1 imagenet/alexnet.yaml "${jpeg[@]}" --set data.batch_size=8 --set run.threads=2 \
  --set model.layers.21.out_features=10 &&
  echo "ok: Caffe's AlexNet trains 3 steps on the JPEG tree"
run resnet18 2 imagenet/resnet18.yaml "${jpeg[@]}" --set data.batch_size=4 --set model.layers.9.out_features=10 &&
  echo "ok: torchvision's ResNet-18 trains 3 steps on 2 ranks on the JPEG tree"
run resnet50 2 imagenet/resnet50.yaml "${jpeg[@]}" --set data.batch_size=2 --set model.layers.9.out_features=10 &&
  echo "ok: torchvision's ResNet-50 trains 3 steps on 2 ranks on the JPEG tree"
[[ $fail -eq 0 ]] && echo "reproduction configs train end to end"
exit $fail
