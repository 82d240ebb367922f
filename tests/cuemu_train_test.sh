#!/usr/bin/env bash
# GPU training on the CUDA emulator (octet_cuemu: octet with its CUDA files' kernels, launchers, cuDNN and cuBLAS calls
# run on the CPU, tests/cuemu), in every CI run: the invariants tests/cuda_train_test.sh holds on a real GPU, on runs
# short enough for an emulator. LeNet on real MNIST learns on the emulated GPU; 2 ranks with dynamic_tree8 in pipelined
# pieces keep bit-identical replicas (checksum every step); a run resumed on the emulated GPU ends in the uninterrupted
# run's checkpoint; the residual net with batchnorm learns on 2 ranks in fp32 and in bf16 (channels-last 16-bit
# activations: the NHWC kernels) and resumes exactly; overlap ends in the blocking run's checkpoint; synchronized
# batchnorm keeps the replicas identical; a 2-rank step waits for the device 9 times; NCCL (emulated over MPI) moves
# MPI staging's bytes.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mnist_setup "$1" "$2"
lenet=("$src/configs/mnist/lenet.yaml" --set data.path="$data" --set run.log_every=50)
res=("$src/tests/data/residual_net.yaml")
# run NAME NP [args...]: one run on the emulated GPU into $tmp/NAME (its log $tmp/NAME.log); false when it failed.
run() {
  local name=$1 np=$2
  shift 2
  local bind=()
  ((np == 1)) && bind=(--bind-to none)
  ((np > 2)) && bind=(--oversubscribe --bind-to none)  # (more ranks than this machine's 2 cores)
  timeout 600 mpirun -np "$np" "${bind[@]}" "$octet" train "$@" --set run.out_dir="$tmp/$name" --set parallel.device=cuda \
    >"$tmp/$name.log" 2>&1 && return 0
  grep -m1 -E "octet: error|cuemu:" "$tmp/$name.log" || tail -5 "$tmp/$name.log"
  return 1
}
ckpt() { echo "$tmp/$1"/*/checkpoint.bin; }
summary() { echo "$tmp/$1"/*/summary.json; }
# same A B WHAT: the two runs end in the same checkpoint bytes.
same() {
  if cmp -s "$(ckpt "$1")" "$(ckpt "$2")"; then echo "ok: $3 (byte for byte)"; else bad "$3: the checkpoints differ"; fi
}
at_least() {  # at_least NAME BAR WHAT
  local acc
  acc=$(field "$(summary "$1")" test_accuracy)
  if awk -v a="${acc:-0}" -v b="$2" 'BEGIN { exit !(a >= b) }'; then echo "ok: $3: test accuracy $acc"
  else bad "$3: test accuracy ${acc:-none} < $2"; fi
}

# 1. LeNet on the emulated GPU learns real MNIST (the CPU reaches about 95% in these 150 steps), the log names the
#    emulated device, and the step waits for the device only for its late reads.
if run one 1 "${lenet[@]}" --set run.max_steps=150; then
  grep -q "^device: cuda:0 octet CUDA emulator" "$tmp/one.log" || bad "the log does not name the emulated device"
  at_least one 0.93 "LeNet, 150 steps on the emulated GPU"
  # A 1-rank fp32 step waits for the device only for what it reads one step late (the loss, the update's flags, the
  # phase times): 3 host waits a step, none inside forward, backward or the update.
  waits=$(field "$(summary one)" host_waits_per_step)
  awk -v w="${waits:-99}" 'BEGIN { exit !(w <= 3) }' && echo "ok: $waits host waits a step (1 rank, fp32)" ||
    bad "a 1-rank fp32 step waits ${waits:-?} times for the device (more than its 3 late reads)"
else bad "LeNet on the emulated GPU"; fi

# 2. Two ranks, dynamic_tree8 with fc1 in pipelined pieces of 0.1 MB, replicas compared every step.
if run two 2 "${lenet[@]}" --set run.max_steps=40 --set data.batch_size=32 --set parallel.checksum_every=1 \
  --set compression.method=dynamic_tree8 --set parallel.chunk_mb=0.1; then
  grep -q "fc1.weight .* in 14 pipelined pieces" "$tmp/two.log" && echo "ok: 2 emulated GPU ranks, dynamic_tree8 in" \
    "pipelined pieces, replicas bit-identical at every step" || bad "the emulated GPU run's fc1 is not in pieces"
else bad "2 ranks on the emulated GPU with checksums every step"; fi

# 2b. What a 2-rank step waits for (dynamic_tree8, one piece): the staged copies (two a compressed tensor: conv2 and
#     fc1), one for the tensors under min_numel together (one fused allreduce), one for every codec op's status
#     together, and the 3 late reads: 9 (31-35 when each codec op, payload header and small tensor waited). With
#     compression.fuse_small false (an allreduce each) the same bytes.
for f in true false; do
  run "fuse$f" 2 "${lenet[@]}" --set run.max_steps=12 --set run.eval_every=0 --set data.batch_size=32 \
    --set compression.method=dynamic_tree8 --set parallel.chunk_mb=0 --set compression.fuse_small=$f ||
    bad "2 emulated GPU ranks, fuse_small=$f"
done
waits=$(field "$(summary fusetrue)" host_waits_per_step)
awk -v w="${waits:-99}" 'BEGIN { exit !(w <= 9) }' && echo "ok: $waits host waits a step (2 ranks, dynamic_tree8)" ||
  bad "a 2-rank dynamic_tree8 step waits ${waits:-?} times for the device (more than 9)"
same fusetrue fusefalse "the small tensors in one allreduce: the bytes of one allreduce each"
# 2c. The NCCL transport (the emulator's NCCL, over MPI: tests/cuemu/nccl.cpp) moves the bytes MPI's host staging
#     moves: the run of 2b over NCCL ends in its checkpoint; and the run of 2 in pipelined pieces (their transfers on
#     the courier thread and the stage stream, ordered by events) ends in that run's checkpoint.
if run tnccl 2 "${lenet[@]}" --set run.max_steps=12 --set run.eval_every=0 --set data.batch_size=32 \
  --set compression.method=dynamic_tree8 --set parallel.chunk_mb=0 --set parallel.transport=nccl; then
  grep -q "transport nccl" "$tmp/tnccl.log" || bad "the NCCL run's log does not name NCCL"
  same fusetrue tnccl "2 emulated GPU ranks over NCCL end in MPI staging's checkpoint"
else bad "2 emulated GPU ranks over NCCL"; fi
if run twonccl 2 "${lenet[@]}" --set run.max_steps=40 --set data.batch_size=32 --set parallel.checksum_every=1 \
  --set compression.method=dynamic_tree8 --set parallel.chunk_mb=0.1 --set parallel.transport=nccl; then
  grep -q "fc1.weight .* in 14 pipelined pieces" "$tmp/twonccl.log" || bad "fc1 over NCCL is not in pieces"
  same two twonccl "2 emulated GPU ranks over NCCL in pipelined pieces end in MPI staging's checkpoint"
else bad "2 emulated GPU ranks over NCCL in pipelined pieces"; fi
# 2d. Two levels (2 nodes x 2 ranks by parallel.ranks_per_node) on 4 emulated GPU ranks: the node and cross-node
#     communicators over NCCL end in MPI staging's checkpoint.
for via in mpi nccl; do
  run "tl$via" 4 "${lenet[@]}" --set run.max_steps=10 --set run.eval_every=0 --set data.batch_size=16 \
    --set compression.method=dynamic_tree8 --set parallel.transport=$via --set parallel.hierarchy=two_level \
    --set parallel.ranks_per_node=2 || bad "two levels on 4 emulated GPU ranks over $via"
done
grep -q "exchange two_level, transport nccl" "$tmp/tlnccl.log" || bad "the two-level NCCL run's topology line"
same tlmpi tlnccl "two levels on 4 emulated GPU ranks: NCCL's node and cross-node exchanges end in MPI staging's checkpoint"

# 3. Resume on the emulated GPU is exact.
run full 1 "${lenet[@]}" --set run.max_steps=20 --set run.eval_every=0 || bad "20 steps"
run half 1 "${lenet[@]}" --set run.max_steps=10 --set run.eval_every=0 || bad "10 steps"
run half 1 "${lenet[@]}" --set run.max_steps=20 --set run.eval_every=0 --resume "$tmp/half/mnist-lenet" || bad "resume"
same full half "10 + 10 steps on the emulated GPU end in the checkpoint of 20 uninterrupted ones"

# 4. The residual net with batchnorm (identity, option A and projection shortcuts) on 2 ranks: fp32 learns and resumes
#    exactly; in bf16 the channel-blocked net keeps activations channels-last in bf16 (the NHWC kernels) and learns.
if run rfull 2 "${res[@]}"; then at_least rfull 0.6 "residual net with batchnorm, 2 emulated GPU ranks"
else bad "the residual net on 2 emulated GPU ranks"; fi
run rhalf 2 "${res[@]}" --set run.max_steps=30 || bad "30 residual steps"
run rhalf 2 "${res[@]}" --resume "$tmp/rhalf/res" || bad "the residual net's resume"
same rfull rhalf "the residual net resumed on the emulated GPU ends in the uninterrupted run's checkpoint"
if run bbf16 2 "$src/tests/data/blocked_net.yaml" --set model.precision=bf16 --set run.max_steps=60; then
  grep -q "nhwc bf16" "$tmp/bbf16.log" || bad "the bf16 net's activations are not channels-last bf16"
  at_least bbf16 0.6 "a residual net in bf16 (channels-last bf16 activations), 2 emulated GPU ranks"
else bad "a residual net in bf16 on 2 emulated GPU ranks"; fi

# 5. Overlap: buckets reduced on the comm stream beside backward, qsgd 4-bit with error feedback, the blocking run's
#    bytes.
for mode in false true; do
  run "ov$mode" 2 "${lenet[@]}" --set run.max_steps=30 --set run.eval_every=0 --set data.batch_size=32 \
    --set parallel.overlap=$mode --set parallel.bucket_mb=0.1 --set parallel.checksum_every=1 \
    --set compression.method=qsgd --set compression.bits=4 --set compression.error_feedback=true ||
    bad "2 emulated GPU ranks, overlap=$mode"
done
same ovfalse ovtrue "overlap on the emulated GPU (qsgd 4-bit, error feedback, 2 ranks) ends in the blocking run's checkpoint"

# 6. Synchronized batchnorm across 2 emulated GPU ranks, replicas compared every step, twice: the same bytes.
sbn=(--set model.layers.1.sync=true --set model.layers.4.sync=true --set model.layers.8.sync=true
  --set parallel.checksum_every=1 --set run.max_steps=30)
run sync1 2 "${res[@]}" "${sbn[@]}" || bad "synchronized batchnorm on 2 emulated GPU ranks"
run sync2 2 "${res[@]}" "${sbn[@]}" || bad "the second synchronized run"
same sync1 sync2 "synchronized batchnorm on 2 emulated GPU ranks: replicas bit-identical, and deterministic"
# 7. fp16 with dynamic loss scaling on 2 emulated GPU ranks: channels-last fp16 activations, the scale's overflow vote,
#    replicas compared every step.
if run bfp16 2 "$src/tests/data/blocked_net.yaml" --set model.precision=fp16 --set run.max_steps=20 \
  --set parallel.checksum_every=1; then
  grep -q "nhwc fp16" "$tmp/bfp16.log" || bad "the fp16 net's activations are not channels-last fp16"
  at_least bfp16 0.5 "a residual net in fp16 with loss scaling, 2 emulated GPU ranks, replicas bit-identical"
else bad "a residual net in fp16 on 2 emulated GPU ranks"; fi

# 8. The GPU benchmarks' code paths (their timings mean nothing here): every codec encoding and decoding device
#    buffers, and the allreduce through the staged exchange in pipelined pieces on 2 ranks.
if timeout 300 "$octet" bench compress --device cuda --size 1M --reps 1 --config "" >"$tmp/bc.log" 2>&1 &&
  [[ $(grep -cE "^(none|fp16|linear8|mantissa8|static_tree8|dynamic_tree8|qsgd|onebit|topk|adacomp|bf16|fp8_e4m3|fp8_e5m2) " \
    "$tmp/bc.log") == 13 ]]; then
  echo "ok: octet bench compress --device cuda: the 13 codecs on the emulated GPU"
else tail -5 "$tmp/bc.log"; bad "octet bench compress --device cuda"; fi
if timeout 300 mpirun -np 2 "$octet" bench allreduce --device cuda --min 256K --max 1M --iters 2 --chunk-mb 0.25 \
  --codecs none,dynamic_tree8,qsgd,adacomp >"$tmp/ba.log" 2>&1 && grep -q "dynamic_tree8" "$tmp/ba.log" &&
  awk '$2 ~ /^(dynamic_tree8|qsgd|adacomp)$/ { n++; if (!($(NF-1) > 0 && $NF > 0)) bad = 1 } END { exit bad || n != 6 }' \
    "$tmp/ba.log"; then
  echo "ok: octet bench allreduce --device cuda: 2 ranks, pipelined pieces, on the emulated GPU (encode and decode timed"
  echo "    on the device)"
else tail -5 "$tmp/ba.log"; bad "octet bench allreduce --device cuda on 2 ranks"; fi
if timeout 300 mpirun -np 2 "$octet" bench allreduce --device cuda --transport nccl --min 1M --max 1M --iters 2 \
  --chunk-mb 0.25 --codecs dynamic_tree8,adacomp >"$tmp/bn.log" 2>&1 && grep -q "dynamic_tree8 .*x4 " "$tmp/bn.log" &&
  grep -q "adacomp .*x4 " "$tmp/bn.log"; then
  echo "ok: octet bench allreduce --device cuda --transport nccl: 2 ranks, pipelined pieces over the emulator's NCCL"
else tail -5 "$tmp/bn.log"; bad "octet bench allreduce over NCCL on 2 emulated GPU ranks"; fi
exit $fail
