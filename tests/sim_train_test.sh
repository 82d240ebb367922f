#!/usr/bin/env bash
# The GPU training cases of cuda_train_test.sh that need no NCCL, on the simulated device (parallel.device: sim) in every
# CI run: the GPU path's orchestration (device buffers, copy/compute/comm/staging streams, staged payloads, device codecs
# with the fused owner step and error feedback, FC model parallelism, overlap, checkpoints moved between devices) with
# the CPU twins as kernels, guarded memory and queued streams. Each sim run must end in the checkpoint bytes of the same
# run on the CPU: LeNet on real MNIST for one epoch (97%); 2 ranks with dynamic_tree8 in pipelined pieces and checksums
# every step; exact resume and a checkpoint moved sim -> CPU -> sim; 4 ranks as 2 nodes x 2 through the two-level
# exchange; powersgd on 2 ranks; FC model parallelism on 4 ranks; a residual net with batchnorm on 2 ranks (its resume,
# and the same bytes with its ReLUs unfused); a channel-blocked net (model.layout; the same bytes in the plain layout);
# overlap with a lossy codec and checksums every step.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mnist_setup "$1" "$2"
lenet=("$src/configs/mnist/lenet.yaml" --set data.path="$data" --set run.log_every=100)
# SIM_CASES="1 4" runs those cases alone (scripts/sim_mutations.sh); every case by default.
want() { [[ -z ${SIM_CASES:-} || " $SIM_CASES " == *" $1 "* ]]; }
# run NAME NP DEVICE [args...]: one run into $tmp/NAME (its log $tmp/NAME.log); false when it failed.
run() {
  local name=$1 np=$2 dev=$3
  shift 3
  local bind=()  # one rank unbound: mpirun would bind it to one core of the two its threads would use
  ((np == 1)) && bind=(--bind-to none)
  timeout 600 mpirun -np "$np" "${bind[@]}" "$octet" train "$@" --set run.out_dir="$tmp/$name" --set parallel.device="$dev" \
    >"$tmp/$name.log" 2>&1 && return 0
  grep -m1 "octet: error" "$tmp/$name.log" || tail -5 "$tmp/$name.log"
  return 1
}
ckpt() { echo "$tmp/$1"/*/checkpoint.bin; }
# same NAME WHAT [np args...]: the run on sim and on the CPU end in the same checkpoint bytes.
same() {
  local name=$1 what=$2 np=$3
  shift 3
  run "${name}_sim" "$np" sim "$@" || { bad "$what on sim"; return 1; }
  run "${name}_cpu" "$np" cpu "$@" || { bad "$what on the CPU"; return 1; }
  if cmp -s "$(ckpt "${name}_sim")" "$(ckpt "${name}_cpu")"; then
    echo "ok: $what: the sim run ends in the CPU run's checkpoint (byte for byte)"
    grep "^done:" "$tmp/${name}_sim.log" | sed 's/, peak RSS.*//'
  else
    bad "$what: the sim and CPU checkpoints differ"
    return 1
  fi
}

# 1. One epoch of LeNet on real MNIST: the CPU's bar, the device named in the log.
if want 1 && same one "one epoch of LeNet" 1 "${lenet[@]}" --set run.epochs=1; then
  grep -q "^device: sim" "$tmp/one_sim.log" || bad "the log does not name the simulated device"
  acc=$(field "$tmp/one_sim/mnist-lenet/summary.json" test_accuracy)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.97) }' && echo "ok: one epoch on sim: test accuracy $acc" ||
    bad "one epoch on sim: test accuracy $acc < 0.97"
fi

# 2. Two ranks, dynamic_tree8 (error feedback, the fused owner step), replicas compared every step; fc1 (400,000
#    values) in pipelined pieces of 0.1 MB, their transfers on the courier thread, staged on the device's own stream.
want 2 && same two "2 ranks, 200 steps of dynamic_tree8 in pipelined pieces with checksums every step" 2 "${lenet[@]}" \
  --set run.max_steps=200 --set parallel.checksum_every=1 --set compression.method=dynamic_tree8 \
  --set data.batch_size=32 --set parallel.chunk_mb=0.1 &&
  { grep -q "fc1.weight .* in 14 pipelined pieces" "$tmp/two_sim.log" || bad "the sim run's fc1 is not in pieces"; }
# ... and octet bench allreduce takes device buffers in pieces too (the GPU bundle's check times them against one).
if want 2; then
  timeout 300 mpirun -np 2 "$octet" bench allreduce --device sim --min 1M --max 1M --codecs dynamic_tree8 \
    --chunk-mb 0.1 --iters 1 >"$tmp/bench_pieces.txt" 2>&1 &&
    grep -q "dynamic_tree8  scatter_allgather x10 " "$tmp/bench_pieces.txt" &&
    echo "ok: octet bench allreduce --device sim runs 1 MB of dynamic_tree8 in 10 pipelined pieces" ||
    { cat "$tmp/bench_pieces.txt"; bad "octet bench allreduce --device sim --chunk-mb 0.1"; }
fi

# 2b. Four ranks as 2 nodes x 2 (parallel.hierarchy: two_level): the node steps and the cross-node exchange on device
#     buffers (fc1's shard in pipelined pieces), replicas compared every step.
want 2 && same two_level "4 ranks as 2 nodes x 2, two-level dynamic_tree8 with checksums every step" 4 "${lenet[@]}" \
  --set run.max_steps=100 --set parallel.checksum_every=1 --set compression.method=dynamic_tree8 \
  --set data.batch_size=16 --set parallel.hierarchy=two_level --set parallel.ranks_per_node=2 --set parallel.chunk_mb=0.1 &&
  { grep -q "fc1.weight .* in 7 pipelined pieces" "$tmp/two_level_sim.log" || bad "the sim run's fc1 shard is not in pieces"; }

# 2c. Two ranks with powersgd at rank 2 from step 20 (fp32 before): the products, Gram-Schmidt and error feedback on
#     device buffers, P and Q staged through the transport, replicas compared every step.
want 2 && same powersgd "2 ranks, powersgd rank 2 from step 20 with checksums every step" 2 "${lenet[@]}" \
  --set run.max_steps=100 --set parallel.checksum_every=1 --set compression.method=powersgd \
  --set compression.rank=2 --set compression.start_step=20 --set data.batch_size=32

# 3. Resume on sim is exact; a checkpoint moves sim -> CPU -> sim.
if ! want 3; then
  :
elif run full 1 sim "${lenet[@]}" --set run.max_steps=60 && run half 1 sim "${lenet[@]}" --set run.max_steps=30; then
  cp "$(ckpt half)" "$tmp/at30.bin"
  if run half 1 sim "${lenet[@]}" --set run.max_steps=60 --resume "$tmp/half/mnist-lenet" &&
    cmp -s "$(ckpt full)" "$(ckpt half)"; then
    echo "ok: 30 + 30 sim steps end in the checkpoint of 60 uninterrupted ones (byte for byte)"
  else bad "sim resume: 30 + 30 steps differ from 60"; fi
  if run moved 1 cpu "${lenet[@]}" --set run.max_steps=60 --resume "$tmp/at30.bin" &&
    cmp -s "$(ckpt moved)" "$(ckpt full)" &&
    run moved 1 sim "${lenet[@]}" --set run.max_steps=90 --resume "$tmp/moved/mnist-lenet" &&
    run full 1 sim "${lenet[@]}" --set run.max_steps=90 --resume "$tmp/full/mnist-lenet" &&
    cmp -s "$(ckpt moved)" "$(ckpt full)"; then
    echo "ok: a checkpoint moved sim -> CPU -> sim ends where the run that stayed on sim does (step 90)"
  else bad "sim -> CPU -> sim"; fi
else
  bad "60 and 30 sim steps"
fi

# 4. FC model parallelism: 4 ranks x batch 16, 4 sub-batches, lossy activations.
want 4 && same mp "FC model parallelism on 4 ranks, dynamic_tree8 activations" 4 "${lenet[@]}" --set run.max_steps=150 \
  --set data.batch_size=16 --set parallel.model_parallel_fc=true --set parallel.sub_batches=4 --set run.threads=1 \
  --set compression.method=dynamic_tree8 --set compression.activations.method=dynamic_tree8

# 5. Batchnorm and residual blocks (identity, option A, projection) on 2 ranks with dynamic_tree8, and their resume.
if want 5 && same res "a residual net with batchnorm on 2 ranks" 2 "$src/tests/data/residual_net.yaml"; then
  acc=$(field "$tmp/res_sim/res/summary.json" test_accuracy)
  awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.6) }' || bad "the residual net on sim: test accuracy ${acc:-none} < 0.6"
  if run rhalf 2 sim "$src/tests/data/residual_net.yaml" --set run.max_steps=30 && run rhalf 2 sim "$src/tests/data/residual_net.yaml" --resume "$tmp/rhalf/res" &&
    cmp -s "$(ckpt rhalf)" "$(ckpt res_sim)"; then
    echo "ok: the residual net resumed on sim ends in the uninterrupted run's checkpoint (running statistics included)"
  else bad "the residual net's resumed sim run differs from the uninterrupted one"; fi
  # model.fuse (on by default: bn1+r1, a1+r2, a2+r3 run as one pass each) changes no bit of the run.
  grep -q "r2 .*(fused into a1)" <("$octet" model "$src/tests/data/residual_net.yaml") || bad "octet model shows no fused ReLU"
  if run unfused 2 cpu "$src/tests/data/residual_net.yaml" --set model.fuse=false && cmp -s "$(ckpt unfused)" "$(ckpt res_cpu)"; then
    echo "ok: the residual net with model.fuse=false ends in the fused run's checkpoint (byte for byte)"
  else bad "model.fuse=false changes the residual net's checkpoint"; fi
fi

# 5b. model.layout: a net whose activations stay channel-blocked from layer to layer (synchronized batchnorm, identity
#     and option A adds, pooling) on 2 ranks: the sim run ends in the CPU run's checkpoint, and the plain layout in the
#     same bytes.
if want 5 && same blk "a channel-blocked residual net with synchronized batchnorm on 2 ranks" 2 \
  "$src/tests/data/blocked_net.yaml"; then
  grep -q "a2 .* nChw[0-9]*c .* + r2" <("$octet" model "$src/tests/data/blocked_net.yaml") ||
    bad "octet model shows no channel-blocked layer"
  if run blkplain 2 cpu "$src/tests/data/blocked_net.yaml" --set model.layout=plain &&
    cmp -s "$(ckpt blkplain)" "$(ckpt blk_cpu)"; then
    echo "ok: the channel-blocked net with model.layout=plain ends in the blocked run's checkpoint (byte for byte)"
  else bad "model.layout=plain changes the channel-blocked net's checkpoint"; fi
fi

# 6. Overlap: buckets exchanged on the communication thread (its own stream) beside backward, a lossy codec with error
# feedback, replicas compared every step.
want 6 && same ov "overlap with qsgd 4-bit and error feedback, checksums every step" 2 "${lenet[@]}" --set run.max_steps=150 \
  --set data.batch_size=32 --set parallel.overlap=true --set parallel.bucket_mb=0.1 --set parallel.checksum_every=1 \
  --set compression.method=qsgd --set compression.bits=4 --set compression.error_feedback=true
exit $fail
