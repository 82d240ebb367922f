#!/usr/bin/env bash
# A time-boxed first look at a GPU for a short device lease: unpacks the bundle (scripts/gpu/bundle.sh) and runs, most
# telling first, the CUDA parity tests, the GPU training tests, compute-sanitizer memcheck over the parity tests and
# one LeNet epoch GPU vs CPU, each section under its own limit, every log written to OUT as it goes (so a lease that
# ends early still returns what ran). check.sh is the full check; this is for when device minutes are few.
# Usage: scripts/gpu/triage.sh BUNDLE.tar.gz OUT [SECONDS_PER_SECTION...]  (limits: parity train sanitize speed)
set -u
tarball=$1 out=$2
lp=${3:-120} lt=${4:-180} ls=${5:-90} lsp=${6:-60}
mkdir -p "$out"
tar xzf "$tarball" -C /tmp && cd /tmp/octet-gpu && . ./env.sh
sum=$out/summary.txt
{ date -u +%FT%TZ; nproc; nvidia-smi -L; octet version; } >"$sum" 2>&1
t0=$(date +%s)
timeout "$lp" octet_cuda_tests -r compact >"$out/parity.log" 2>&1; echo "parity rc=$? $(( $(date +%s) - t0 ))s" >>"$sum"
tail -3 "$out/parity.log" >>"$sum"
t0=$(date +%s)
timeout "$lt" bash tests/cuda_train_test.sh "$PWD/bin/octet" "$PWD" >"$out/train.log" 2>&1
echo "train rc=$? $(( $(date +%s) - t0 ))s" >>"$sum"; grep -E "^(ok|FAIL)" "$out/train.log" >>"$sum"
t0=$(date +%s)
cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
timeout "$ls" "$cs" --tool memcheck --print-limit 30 --error-exitcode 9 octet_cuda_tests -r compact >"$out/memcheck.log" 2>&1
echo "memcheck rc=$? $(( $(date +%s) - t0 ))s" >>"$sum"; grep -E "ERROR SUMMARY|^test cases|^All tests" "$out/memcheck.log" >>"$sum"
t0=$(date +%s)
lenet=(train configs/mnist/lenet.yaml --set data.path=datasets/mnist-22k --set run.epochs=1 --set run.log_every=100000
  --set run.eval_every=0)
timeout "$lsp" octet "${lenet[@]}" --set run.out_dir=/tmp/lg --set parallel.device=cuda >"$out/speed.log" 2>&1
echo "lenet gpu rc=$? $(( $(date +%s) - t0 ))s" >>"$sum"; grep "^done:" "$out/speed.log" >>"$sum"
timeout "$lsp" octet "${lenet[@]}" --set run.out_dir=/tmp/lc --set run.threads="$(nproc)" >>"$out/speed.log" 2>&1
echo "lenet cpu rc=$?" >>"$sum"; grep "^done:" "$out/speed.log" | tail -1 >>"$sum"
# The reproduction nets on the GPU, synthetic data at their input sizes: grouped convolutions and ceil-mode pooling
# (Caffe's AlexNet), conv_bn projections and bottlenecks (ResNet-50), synchronized batchnorm on 2 ranks (ResNet-18).
t0=$(date +%s)
syn() { echo "data={dataset: synthetic, synthetic_shape: [3,$1,$1], synthetic_classes: 10, synthetic_train: 4096, synthetic_test: 64, batch_size: $2}"; }
gpu=(--set parallel.device=cuda --set run.max_steps=60 --set run.log_every=100000 --set run.eval_every=0)
timeout "$lsp" octet train configs/imagenet/alexnet.yaml "${gpu[@]}" --set "$(syn 227 128)" \
  --set model.layers.21.out_features=10 --set run.out_dir=/tmp/ra >"$out/repro.log" 2>&1
echo "alexnet (groups) gpu rc=$? $(( $(date +%s) - t0 ))s $(grep '^done:' "$out/repro.log" | tail -1)" >>"$sum"
timeout "$lsp" octet train configs/imagenet/resnet50.yaml "${gpu[@]}" --set "$(syn 224 64)" \
  --set model.layers.9.out_features=10 --set run.out_dir=/tmp/r50 >>"$out/repro.log" 2>&1
echo "resnet50 gpu rc=$? $(( $(date +%s) - t0 ))s $(grep '^done:' "$out/repro.log" | tail -1)" >>"$sum"
timeout "$lsp" mpirun -np 2 octet train configs/imagenet/resnet18.yaml "${gpu[@]}" --set "$(syn 224 32)" \
  --set model.layers.9.out_features=10 --set parallel.sync_batchnorm=true --set parallel.checksum_every=1 \
  --set run.out_dir=/tmp/r18 >>"$out/repro.log" 2>&1
echo "resnet18 sync-bn 2 ranks gpu rc=$? $(( $(date +%s) - t0 ))s $(grep '^done:' "$out/repro.log" | tail -1)" >>"$sum"
cat "$sum"
