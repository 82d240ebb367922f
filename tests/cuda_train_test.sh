#!/usr/bin/env bash
# GPU training end to end (exit 77, skipped, where this octet has no usable GPU): LeNet on real MNIST with
# parallel.device: cuda reaches the CPU's 97% bar in one epoch; two ranks sharing one GPU keep bit-identical replicas
# (checksum every step) through a compressed exchange in pipelined pieces, and four as 2 nodes x 2 through the two-level one; a GPU run resumed on the GPU ends in the very checkpoint of the
# uninterrupted run, and a checkpoint moves GPU -> CPU -> GPU; FC model parallelism on the GPU converges; NCCL and MPI
# staging end in the same checkpoint; a residual net with batchnorm learns on 2 ranks and resumes exactly on the GPU;
# gradient buckets exchanged on the communication stream beside backward (parallel.overlap) end in the blocking run's
# checkpoint; synchronized batchnorm exchanges its statistics across GPU ranks deterministically and resumes exactly.
# (Every case but NCCL's also runs on the simulated device in CI: tests/sim_train_test.sh, tests/syncbn_train_test.sh.)
set -u
version=$("$1" version)
if [[ $version != *"CUDA backend built"* || $version == *"; 0 GPUs usable"* ]]; then
  echo "skipping the GPU training tests: $version"
  exit 77
fi
echo "$version"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mnist_setup "$1" "$2"
train() {  # train OUT_DIR [extra args...]: LeNet on real MNIST on the GPU
  local out=$1
  shift
  timeout 600 "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" --set run.out_dir="$out" \
    --set parallel.device=cuda --set run.log_every=100 "$@"
}

# 1. One epoch on the GPU: the CPU's accuracy bar, and the device named in the log (and run.profile's range opened
#    around steps 10-12, a no-op with no profiler attached).
if ! train "$tmp/one" --set run.epochs=1 --set run.profile=true --set run.trace_start=10 --set run.trace_steps=3 \
  >"$tmp/log1" 2>&1; then
  tail -20 "$tmp/log1"; bad "one epoch on the GPU"
else
  acc=$(field "$tmp/one/mnist-lenet/summary.json" test_accuracy)
  ips=$(field "$tmp/one/mnist-lenet/summary.json" images_per_s_steady)
  grep "^device: cuda:" "$tmp/log1" || bad "the log does not name the GPU"
  grep -q "^profile: the CUDA profiler range opens before step 10 (3 steps)" "$tmp/log1" || bad "no run.profile line"
  grep "^done:" "$tmp/log1"
  if awk -v a="$acc" 'BEGIN { exit !(a >= 0.97) }'; then echo "ok: one epoch on the GPU: test accuracy $acc, $ips img/s"
  else bad "one epoch on the GPU: test accuracy $acc < 0.97"; fi
fi

# 2. Two ranks on one GPU (or two), dynamic_tree8 with error feedback, replicas compared every step; fc1 in pipelined
#    pieces of 0.1 MB (encoded on the comm stream while the courier stages the piece before on the staging stream).
if timeout 600 mpirun -np 2 "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" \
  --set run.out_dir="$tmp/two" --set parallel.device=cuda --set run.max_steps=200 --set parallel.checksum_every=1 \
  --set compression.method=dynamic_tree8 --set data.batch_size=32 --set parallel.chunk_mb=0.1 >"$tmp/log2" 2>&1; then
  echo "ok: 2 ranks on the GPU, 200 steps with dynamic_tree8 in pipelined pieces, replicas bit-identical at every step"
  grep -q "fc1.weight .* in 14 pipelined pieces" "$tmp/log2" || bad "the GPU run's fc1 is not in pieces"
  grep "^done:" "$tmp/log2"
else
  tail -20 "$tmp/log2"; bad "2 ranks on the GPU with checksums every step"
fi

# 2b. Four ranks as 2 nodes x 2 through the two-level exchange (node steps and cross-node payloads from device
#     buffers, staged through page-locked memory), replicas compared every step.
if timeout 600 mpirun -np 4 --mca mpi_yield_when_idle 1 "$octet" train "$src/configs/mnist/lenet.yaml" \
  --set data.path="$data" --set run.out_dir="$tmp/twolevel" --set parallel.device=cuda --set run.max_steps=100 \
  --set parallel.checksum_every=1 --set compression.method=dynamic_tree8 --set data.batch_size=16 \
  --set parallel.hierarchy=two_level --set parallel.ranks_per_node=2 >"$tmp/log2b" 2>&1; then
  echo "ok: 4 ranks on the GPU as 2 nodes x 2, two-level dynamic_tree8, replicas bit-identical at every step"
  grep "^done:" "$tmp/log2b"
else
  tail -20 "$tmp/log2b"; bad "4 ranks on the GPU through the two-level exchange"
fi

# 2c. Two ranks with powersgd at rank 2 from step 20: cuBLAS products and Gram-Schmidt on the comm stream, P and Q
#     staged, replicas compared every step; it learns (the CPU's bar for these 300 steps at batch 32: 90%).
if timeout 600 mpirun -np 2 "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" \
  --set run.out_dir="$tmp/powersgd" --set parallel.device=cuda --set run.max_steps=300 --set parallel.checksum_every=1 \
  --set compression.method=powersgd --set compression.rank=2 --set compression.start_step=20 \
  --set data.batch_size=32 >"$tmp/log2c" 2>&1; then
  acc=$(field "$tmp/powersgd/mnist-lenet/summary.json" test_accuracy)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }' &&
    echo "ok: 2 ranks on the GPU, powersgd rank 2, replicas bit-identical at every step, test accuracy $acc" ||
    bad "powersgd on the GPU: test accuracy $acc < 0.90"
  grep "^done:" "$tmp/log2c"
else
  tail -20 "$tmp/log2c"; bad "2 ranks on the GPU with powersgd"
fi

# 3. Resume on the GPU is exact; a checkpoint moves between devices.
train "$tmp/full" --set run.max_steps=60 >"$tmp/log3a" 2>&1 || { tail "$tmp/log3a"; bad "60 GPU steps"; }
train "$tmp/half" --set run.max_steps=30 >"$tmp/log3b" 2>&1 || { tail "$tmp/log3b"; bad "30 GPU steps"; }
cp "$tmp/half/mnist-lenet/checkpoint.bin" "$tmp/at30.bin"
if ! train "$tmp/half" --set run.max_steps=60 --resume "$tmp/half/mnist-lenet" >"$tmp/log3c" 2>&1; then
  tail "$tmp/log3c"; bad "GPU resume"
elif ! cmp -s "$tmp/full/mnist-lenet/checkpoint.bin" "$tmp/half/mnist-lenet/checkpoint.bin"; then
  bad "30 + 30 GPU steps differ from 60 uninterrupted GPU steps"
else echo "ok: 30 + 30 GPU steps end in the checkpoint of 60 uninterrupted ones (byte for byte)"; fi
"$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" --set run.out_dir="$tmp/cpu" \
  --set run.max_steps=60 --resume "$tmp/at30.bin" >"$tmp/log3d" 2>&1 || { tail "$tmp/log3d"; bad "GPU -> CPU resume"; }
if train "$tmp/cpu" --set run.max_steps=90 --resume "$tmp/cpu/mnist-lenet" >"$tmp/log3e" 2>&1 &&
  grep -q "resumed from .* step 60" "$tmp/log3e"; then
  acc=$(field "$tmp/cpu/mnist-lenet/summary.json" test_accuracy)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' && echo "ok: GPU -> CPU -> GPU resume: test accuracy $acc after 90 steps" ||
    bad "GPU -> CPU -> GPU: test accuracy $acc < 0.85 after 90 steps"
else
  tail "$tmp/log3e"; bad "CPU -> GPU resume"
fi

# 4. FC model parallelism on the GPU: 4 ranks x batch 16, 4 sub-batches, lossy activations (the CPU's acceptance run).
if timeout 600 mpirun -np 4 --mca mpi_yield_when_idle 1 "$octet" train "$src/configs/mnist/lenet.yaml" \
  --set data.path="$data" --set run.out_dir="$tmp/mp" --set parallel.device=cuda --set run.epochs=1 \
  --set run.log_every=100 --set data.batch_size=16 --set parallel.model_parallel_fc=true --set parallel.sub_batches=4 \
  --set compression.method=dynamic_tree8 --set compression.activations.method=dynamic_tree8 >"$tmp/log4" 2>&1; then
  acc=$(field "$tmp/mp/mnist-lenet/summary.json" test_accuracy)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.97) }' && echo "ok: FC model parallelism on the GPU, 4 ranks: test accuracy $acc" ||
    bad "FC model parallelism on the GPU: test accuracy $acc < 0.97"
else
  tail -20 "$tmp/log4"; bad "FC model parallelism on the GPU"
fi
# 5. NCCL moves the same payload bytes as MPI's host staging: the same run over both transports ends in the same
# checkpoint, byte for byte (2 ranks on 2 GPUs; with one GPU, where NCCL refuses two ranks, 1 rank: its allgather to
# itself goes through the same codecs and NCCL's code path).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ranks=$([[ ${gpus:-0} -ge 2 ]] && echo 2 || echo 1)
for via in mpi nccl; do
  timeout 600 mpirun -np "$ranks" "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" \
    --set run.out_dir="$tmp/t$via" --set parallel.device=cuda --set run.max_steps=100 --set parallel.checksum_every=1 \
    --set compression.method=dynamic_tree8 --set parallel.transport=$via >"$tmp/log5$via" 2>&1 ||
    { tail -20 "$tmp/log5$via"; bad "$ranks rank(s) on the GPU over $via"; }
done
if cmp -s "$tmp/tmpi/mnist-lenet/checkpoint.bin" "$tmp/tnccl/mnist-lenet/checkpoint.bin"; then
  echo "ok: $ranks rank(s), dynamic_tree8 on the GPU: NCCL and MPI staging end in the same checkpoint (byte for byte)"
else bad "NCCL and MPI staging end in different checkpoints ($ranks rank(s))"; fi

# 6. Batchnorm and residual blocks (identity, option A, projection) on the GPU: 2 ranks with dynamic_tree8 learn the
# synthetic classes with replicas compared every 10 steps; stopped at step 30 and resumed, the run ends in the
# uninterrupted run's checkpoint (running statistics included).
res() {
  timeout 600 mpirun -np 2 "$octet" train "$src/tests/data/residual_net.yaml" --set parallel.device=cuda \
    --set run.out_dir="$1" "${@:2}"
}
res "$tmp/rfull" >"$tmp/log6a" 2>&1 || { tail -20 "$tmp/log6a"; bad "the residual net on 2 GPU ranks"; }
acc=$(field "$tmp/rfull/res/summary.json" test_accuracy)
if awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.6) }'; then echo "ok: residual net with batchnorm, 2 GPU ranks: test accuracy $acc"
else bad "residual net on the GPU: test accuracy ${acc:-none} < 0.6"; fi
res "$tmp/rhalf" --set run.max_steps=30 >"$tmp/log6b" 2>&1 || { tail "$tmp/log6b"; bad "30 residual steps"; }
res "$tmp/rhalf" --resume "$tmp/rhalf/res" >"$tmp/log6c" 2>&1 || { tail "$tmp/log6c"; bad "residual resume"; }
if cmp -s "$tmp/rfull/res/checkpoint.bin" "$tmp/rhalf/res/checkpoint.bin"; then
  echo "ok: the residual net resumed on the GPU ends in the uninterrupted run's checkpoint (byte for byte)"
else bad "the residual net's resumed GPU run differs from the uninterrupted one"; fi

# 7. Overlap on the GPU: buckets reduced on the comm stream while backward runs on the compute stream (events between
# them), a lossy codec with error feedback, replicas compared every step; the same bytes as the blocking exchange.
for mode in false true; do
  timeout 600 mpirun -np 2 "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$data" \
    --set run.out_dir="$tmp/ov$mode" --set parallel.device=cuda --set run.max_steps=150 --set data.batch_size=32 \
    --set parallel.overlap=$mode --set parallel.bucket_mb=0.1 --set parallel.checksum_every=1 \
    --set compression.method=qsgd --set compression.bits=4 --set compression.error_feedback=true >"$tmp/log7$mode" 2>&1 ||
    { tail -20 "$tmp/log7$mode"; bad "2 GPU ranks, overlap=$mode"; }
done
if cmp -s "$tmp/ovfalse/mnist-lenet/checkpoint.bin" "$tmp/ovtrue/mnist-lenet/checkpoint.bin"; then
  echo "ok: overlap on the GPU (qsgd 4-bit, error feedback, 2 ranks) ends in the blocking run's checkpoint"
else bad "overlap on the GPU ends elsewhere than the blocking exchange"; fi

# 8. Synchronized batchnorm on the GPU (every batchnorm and a conv_bn projection with sync: true): per-channel sums to
# the host, across the ranks, back for the coefficients; replicas compared every step; resumed at step 30, the run
# ends in the uninterrupted run's checkpoint; twice, in the same one; with overlap (the exchanges on the
# communication thread), in the blocking run's.
sbn=(--set model.layers.1.sync=true --set model.layers.4.sync=true --set model.layers.8.sync=true
  --set model.layers.12.shortcut=conv_bn --set "model.layers.12.bn={sync: true}" --set parallel.checksum_every=1
  --set run.max_steps=60)
res "$tmp/sfull" "${sbn[@]}" >"$tmp/log8a" 2>&1 || { tail -20 "$tmp/log8a"; bad "synchronized batchnorm on 2 GPU ranks"; }
res "$tmp/sagain" "${sbn[@]}" >"$tmp/log8b" 2>&1 || { tail "$tmp/log8b"; bad "the second synchronized run"; }
res "$tmp/shalf" "${sbn[@]}" --set run.max_steps=30 >"$tmp/log8c" 2>&1 || { tail "$tmp/log8c"; bad "30 synced steps"; }
res "$tmp/shalf" "${sbn[@]}" --resume "$tmp/shalf/res" >"$tmp/log8d" 2>&1 || { tail "$tmp/log8d"; bad "synced resume"; }
res "$tmp/sover" "${sbn[@]}" --set parallel.overlap=true --set parallel.bucket_mb=0 >"$tmp/log8e" 2>&1 ||
  { tail "$tmp/log8e"; bad "synchronized batchnorm with overlap on 2 GPU ranks"; }
cmp -s "$tmp/sfull/res/checkpoint.bin" "$tmp/sover/res/checkpoint.bin" &&
  echo "ok: synchronized batchnorm with overlap on the GPU ends in the blocking run's checkpoint" ||
  bad "synchronized batchnorm with overlap on the GPU ends elsewhere than the blocking run"
acc=$(field "$tmp/sfull/res/summary.json" test_accuracy)
if cmp -s "$tmp/sfull/res/checkpoint.bin" "$tmp/shalf/res/checkpoint.bin" &&
  cmp -s "$tmp/sfull/res/checkpoint.bin" "$tmp/sagain/res/checkpoint.bin" && awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.6) }'; then
  echo "ok: synchronized batchnorm on 2 GPU ranks: replicas bit-identical, deterministic, resumed exactly, test accuracy $acc"
else bad "synchronized batchnorm on the GPU: accuracy ${acc:-none}, or the repeated/resumed checkpoints differ"; fi
exit $fail
