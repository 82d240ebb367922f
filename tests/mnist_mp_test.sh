#!/usr/bin/env bash
# Acceptance: model parallelism for the FC layers with a lossy activation codec still converges on real MNIST:
# LeNet, 4 ranks x batch 16 (the global batch 64 of the single-rank config), 4 sub-batches, dynamic_tree8
# activations and gradients, one epoch -> >= 97% test accuracy (the single-rank bar).
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mnist_setup "$1" "$2"
timeout 600 mpirun -np 4 --oversubscribe --mca mpi_yield_when_idle 1 "$octet" train "$src/configs/mnist/lenet.yaml" \
  --set data.path="$data" --set run.out_dir="$tmp" --set run.epochs=1 --set run.threads=1 --set run.log_every=100 \
  --set data.batch_size=16 --set parallel.model_parallel_fc=true --set parallel.sub_batches=4 \
  --set compression.method=dynamic_tree8 --set compression.activations.method=dynamic_tree8 >"$tmp/log" 2>&1 ||
  { tail -20 "$tmp/log"; echo "FAIL: training run"; exit 1; }
grep -A3 "^model parallelism" "$tmp/log"
acc=$(field "$tmp/mnist-lenet/summary.json" test_accuracy)
ratio=$(field "$tmp/mnist-lenet/summary.json" compression_ratio)
echo "final test accuracy: $acc (bar: 0.97), bytes on the wire vs fp32: x$ratio"
awk -v a="$acc" -v r="$ratio" 'BEGIN { exit !(a >= 0.97 && r > 3) }'
