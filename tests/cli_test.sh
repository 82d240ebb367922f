#!/usr/bin/env bash
# CLI contract: bad flags, configs and resume files give one "octet: error:" line naming the culprit and exit non-zero.
set -u
octet=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out rc
  out=$("$octet" "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 0 ]]; then echo "FAIL: octet $* exited 0"; fail=1; return; fi
  if [[ $(printf '%s\n' "$out" | grep -c .) -ne 1 ]]; then echo "FAIL: octet $* printed more than one error line:"; echo "$out"; fail=1; return; fi
  if ! grep -qF -- "$pattern" <<<"$out"; then echo "FAIL: octet $*: expected '$pattern' in: $out"; fail=1; return; fi
  echo "ok: octet $* -> $out"
}
cfg=$src/configs/fashion-mnist/lenet.yaml
expect_error "unknown command 'trian'" trian
expect_error "unknown flag '--bogus'" train "$cfg" --bogus
expect_error "octet train: --set needs a value" train "$cfg" --set
expect_error "nope.yaml: config file not found" train "$tmp/nope.yaml"
expect_error "--set optimizer.lr: optimizer.lr: must be positive" train "$cfg" --set optimizer.lr=-1
expect_error "run.epocs: unknown key" train "$cfg" --set run.epocs=1
printf 'run: {name: x}\ndata: {dataset: synthetic}\nmodel: {layers: [{type: fc, out_features: 10}]}\noptimizer: {lr: 0.1, momentun: 0.9}\n' >"$tmp/bad.yaml"
expect_error "$tmp/bad.yaml:4: optimizer.momentun: unknown key" train "$tmp/bad.yaml"
printf 'not a checkpoint' >"$tmp/ckpt.bin"
sed -i 's/momentun/momentum/' "$tmp/bad.yaml"
expect_error "bad magic at offset 0" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --resume "$tmp/ckpt.bin"
expect_error "compression.method: unknown value 'zip' (known: none, fp16, linear8" train "$tmp/bad.yaml" --set compression.method=zip
expect_error "parallel.hierarchy: two_level needs more than one rank (this run has 1)" train "$tmp/bad.yaml" \
  --set run.out_dir="$tmp/runs" --set parallel.hierarchy=two_level
expect_error "parallel.chunk_mb: must be auto or a number of MB" train "$tmp/bad.yaml" --set parallel.chunk_mb=lots
expect_error "octet bench allreduce: --hierarchy expects flat or two_level, got 'tree'" bench allreduce --hierarchy tree
expect_error "octet bench allreduce: --link expects a rate such as 100mbit" bench allreduce --link fast
expect_error "compression.overrides.fc9: unknown key" train "$tmp/bad.yaml" --set compression.overrides.fc9.method=fp16
mkdir -p "$tmp/tree/train/a" "$tmp/tree/val/a"
cp "$src/tests/data/images/wide.jpg" "$tmp/tree/train/a/x.jpg"
cp "$src/tests/data/images/wide.jpg" "$tmp/tree/val/a/y.jpg"
printf 'broken' >"$tmp/tree/train/a/z.jpg"
img=(--set data.dataset=image_folder --set data.path="$tmp/tree" --set data.image_size=28 --set data.resize=28
     --set model.input=[3,28,28] --set model.layers.6.out_features=1 --set run.out_dir="$tmp/runs" --set data.batch_size=2)
expect_error "$tmp/tree/train/a/z.jpg: not an image OpenCV can decode" train "$cfg" "${img[@]}"
OCTET_OPENCV_MODULE=$tmp/none.so expect_error "image_folder needs octet's OpenCV module" train "$cfg" "${img[@]}" --overwrite
expect_error "octet bench loader: expects one JPEG tree" bench loader
expect_error "--images 3 and --val 20 must each be at least --classes 5" bench jpegs "$tmp/jp" --images 3 --classes 5
# bench jpegs: a colour JPEG tree image_folder reads (every class folder in train/ and val/ holding images).
if out=$("$octet" bench jpegs "$tmp/jp" --images 12 --val 3 --classes 3 --width 64 --height 48 2>&1) &&
  grep -q "12 train + 3 val images of 64x48 in 3 classes" <<<"$out" &&
  [[ $(find "$tmp/jp/train" -name '*.jpg' | wc -l) -eq 12 && $(ls "$tmp/jp/val" | wc -l) -eq 3 ]] &&
  lo=$("$octet" bench loader "$tmp/jp" --images 24 --batch 8 --size 32 2>&1) && grep -q "images=24" <<<"$lo"; then
  echo "ok: bench jpegs writes a tree that bench loader reads: $out"
else echo "FAIL: bench jpegs: $out $lo"; fail=1; fi
expect_error "$tmp/jp already holds a train/ or val/ folder" bench jpegs "$tmp/jp"
# skip_bad: the run goes on and says, after the epoch, which image the next one stood in for.
if out=$("$octet" train "$cfg" "${img[@]}" --overwrite --set data.skip_bad=true --set run.epochs=1 2>&1) &&
  grep -q "warning: $tmp/tree: stood other images in for 1 unreadable one" <<<"$out" && ! grep -q "warning: warning" <<<"$out"; then
  echo "ok: image_folder with skip_bad trains past an unreadable image and reports it"
else echo "FAIL: image_folder with skip_bad:"; echo "$out"; fail=1; fi
# Mistakes that used to show only at the first step, after the run folder was made (blaming the learning rate), are
# start-up errors naming their cause; a folder such a run left (config.yaml, an empty metrics.jsonl) is no run.
syn=(--set data.dataset=synthetic --set data.synthetic_train=256 --set data.synthetic_test=64 --set run.out_dir="$tmp/late")
expect_error "model.layers[5] (bn): batchnorm of [500] inputs sees 1 value a channel in a training batch of 1 (data.batch_size): batch statistics need at least 2" \
  train "$cfg" "${syn[@]}" --set data.batch_size=1 --set 'model.layers.5={type: batchnorm, name: bn}'
expect_error "data.normalize.std: std 1e-30 (mean 0.286) maps pixels in [0, 1] to values as large as 7.14e+29" train "$cfg" \
  "${syn[@]}" --set data.normalize.std=1e-30
expect_error "data.augment.crop_padding 1000 is not below the images' 28x28" train "$cfg" "${syn[@]}" \
  --set data.augment.crop_padding=1000
[[ -e $tmp/late ]] && { echo "FAIL: a run that failed its start-up checks created its run directory"; fail=1; }
mkdir -p "$tmp/late/fashion-lenet" && cp "$cfg" "$tmp/late/fashion-lenet/config.yaml" && : >"$tmp/late/fashion-lenet/metrics.jsonl"
expect_error "checkpoint.bin: checkpoint not found (that run stopped before its first checkpoint: --resume auto or --overwrite starts it afresh)" \
  train "$cfg" "${syn[@]}" --resume "$tmp/late/fashion-lenet"
if "$octet" train "$cfg" "${syn[@]}" --set run.max_steps=2 >"$tmp/late.log" 2>&1 && [[ -s $tmp/late/fashion-lenet/checkpoint.bin ]]; then
  echo "ok: a folder holding only config.yaml and an empty metrics.jsonl is no run: the corrected run goes ahead"
else echo "FAIL: the leftover of a failed start refuses the corrected run:"; tail -3 "$tmp/late.log"; fail=1; fi
# That run stopped inside its first epoch: another batch size would draw other samples for the batches left.
expect_error "stopped inside an epoch drawing global batches of" train "$cfg" "${syn[@]}" --set run.max_steps=3 \
  --set data.batch_size=16 --resume "$tmp/late/fashion-lenet"
# Nonsense that used to be accepted.
expect_error "octet eval: --out: an empty path" eval "$cfg" --weights "$tmp/late/fashion-lenet" --out ''
octet_path=$(realpath "$octet")
(cd "$tmp" && octet=$octet_path &&
  expect_error "the default is the repository's: run from its root" bench compress --size 1K --reps 1) || fail=1
expect_error "data.normalize.mean: expected a finite number, got '.nan'" train "$cfg" --set data.normalize.mean=.nan
expect_error "optimizer.lr: expected a finite number, got '.inf'" train "$cfg" --set optimizer.lr=.inf
expect_error "run.name: must be a non-empty folder name without '/', not '.' or '..'" train "$cfg" --set run.name=..
expect_error "run.out_dir: must not be empty" train "$cfg" --set 'run.out_dir=""'
expect_error "model.layers[0].name: must not be empty" train "$cfg" --set 'model.layers.0.name=""'
expect_error "parallel.timeout_s: must be > 0 seconds" train "$cfg" --set parallel.timeout_s=0
printf 'run: {name: x}\ndata: {dataset: synthetic}\nmodel: {layers: [{type: fc, out_features: 10}]}\noptimizer:\n  lr: 0.1\n  lr: 0.2\n' >"$tmp/dup.yaml"
expect_error "$tmp/dup.yaml:6: duplicate key 'lr' (first at line 5)" train "$tmp/dup.yaml"
head -c 1100000 /dev/zero | tr '\0' '#' >"$tmp/big.yaml"
expect_error "big.yaml: 1100000 bytes, more than the 1048576 a config file may have" train "$tmp/big.yaml"
{ printf 'run: '; head -c 300 /dev/zero | tr '\0' '['; } >"$tmp/deep.yaml"
expect_error "deep.yaml:1: nesting deeper than 64 levels" train "$tmp/deep.yaml"
printf 'run: {name: x}\ndata: {dataset: synthetic}\nmodel: {layers: [{type: maxpool, kernel: 40}, {type: fc, out_features: 10}]}\noptimizer: {lr: 0.1}\n' >"$tmp/pool.yaml"
expect_error "pool.yaml:3: model.layers[0] (maxpool1): input [1,1,28,28]: maxpool maxpool1: window 40 larger than padded input" train "$tmp/pool.yaml" --set run.out_dir="$tmp/pool"
[[ -e $tmp/pool ]] && { echo "FAIL: a run that failed its start-up checks created its run directory"; fail=1; }
# A GPU run where no GPU can be used says why in one line.
if "$octet" version | grep -q " 0 GPUs usable"; then
  expect_error "parallel.device: cuda, but no CUDA device can be used here: " train "$cfg" --set parallel.device=cuda
fi
# Benchmarks and predict: every bad number names its flag.
expect_error "octet bench compress: --reps expects an integer in [1, 1000000], got '0'" bench compress --reps 0
expect_error "octet bench compress: --device expects cpu, cuda or sim, got 'tpu'" bench compress --device tpu
expect_error "octet bench compress: --codecs expects a comma-separated list without empty items, got ''" bench compress --codecs ""
expect_error "octet bench compress: --size expects a size in bytes" bench compress --size 12Q
expect_error "octet bench compress: --grad-steps expects an integer in [0, 1000000], got 'many'" bench compress --grad-steps many
expect_error "octet bench allreduce: --factor expects an integer in [2, 1048576], got '1'" bench allreduce --factor 1
expect_error "octet bench allreduce: --iters expects an integer in [0, 1000000], got 'x'" bench allreduce --iters x
expect_error "octet predict: --sub-batches expects an integer in [1, 65536], got '0'" predict "$cfg" --ranks 4 --bandwidth 1 --latency 1 --sub-batches 0
printf 'batch: 64\nprofiled_ranks: 0\nlayers:\n  - {name: a, kind: fc, forward_ms: 1}\ncodecs:\n  - {name: none}\n' >"$tmp/prof0.yaml"
expect_error "prof0.yaml:2: profiled_ranks: must be >= 1" predict --profile "$tmp/prof0.yaml" --ranks 4 --bandwidth 1 --latency 1
# Every subcommand answers --help / -h with its usage on stdout and exit 0.
for args in "--help" "train --help" "train -h" "bench --help" "bench compress --help" "bench allreduce -h" "predict --help" "version --help" "model --help"; do
  # shellcheck disable=SC2086
  if out=$("$octet" $args 2>/dev/null) && [[ $out == usage:* ]]; then echo "ok: octet $args prints its usage"
  else echo "FAIL: octet $args: exit $? or no usage on stdout"; fail=1; fi
done
expect_error "unknown benchmark 'sort'" bench sort
# octet model: the expanded net of a config with blocks (torchvision's ResNet-50), its data folder absent; errors.
if out=$("$octet" model "$src/configs/imagenet/resnet50.yaml" 2>&1) && [[ $out == *"total parameters: 25557032"* ]] &&
  grep -q "^  s4b3_add .*\[2048,7,7\] .* + s4b2_relu3  (its sum taken into s4b3_bn3's pass)$" <<<"$out" &&
  [[ $(grep -c " conv " <<<"$out") -eq 49 && $(grep -c "its sum taken into" <<<"$out") -eq 12 ]]; then
  echo "ok: octet model prints ResNet-50 expanded: 49 convolutions (+4 projections), 25557032 parameters, the 12"
  echo "    identity adds' sums taken into the batchnorms before them"
else echo "FAIL: octet model resnet50.yaml"; echo "$out" | tail -5; fail=1; fi
expect_error "octet model needs a config file" model
expect_error "model.layers[0].out_channels: must be positive" model "$src/configs/cifar10/resnet20.yaml" --set model.layers.0.out_channels=0
expect_error "octet bench compress: unknown flag '--sise'" bench compress --sise 4M
expect_error "--bandwidth GB/s (> 0, or 'measure') is required" predict "$cfg" --ranks 4 --latency 10
expect_error "--ranks expects an integer in [2, 1048576], got '1'" predict "$cfg" --ranks 1 --bandwidth 1 --latency 10
expect_error "--latency expects a number in [0, 1e+09], got 'fast'" predict "$cfg" --ranks 4 --bandwidth 1 --latency fast
expect_error "measure needs mpirun with at least 2 ranks" predict "$cfg" --ranks 4 --bandwidth measure --latency 1
expect_error "unknown flag '--rank'" predict "$cfg" --rank 4
expect_error "needs a config file or --profile FILE" predict --ranks 4 --bandwidth 1 --latency 1
expect_error "unknown compression policy 'reckless' (known: aggressive, balanced, lossless)" predict "$cfg" --ranks 4 --bandwidth 1 --latency 1 --plan reckless
expect_error "compression.rank: must be in [1, 1024], got 0" train "$cfg" --set compression.method=powersgd --set compression.rank=0
expect_error "compression.policy: unknown value 'reckless'" train "$cfg" --set compression.method=auto --set compression.policy=reckless
expect_error "unknown compression method 'zip' (known: none" predict "$cfg" --ranks 4 --bandwidth 1 --latency 1 --codecs none,zip
expect_error "--act-bandwidth expects a number in [1e-09, 1e+09], got '0'" predict "$cfg" --ranks 4 --bandwidth 1 --act-bandwidth 0 --latency 1
expect_error "nope.yaml: profile file not found" predict --profile "$tmp/nope.yaml" --ranks 4 --bandwidth 1 --latency 1
# A good run still works and writes its outputs.
if "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.epochs=1 --set data.synthetic_train=256 \
     --set data.synthetic_test=64 --set data.batch_size=32 >"$tmp/log" 2>&1 &&
   [[ -s $tmp/runs/x/summary.json && -s $tmp/runs/x/config.yaml && -s $tmp/runs/x/checkpoint.bin ]]; then
  echo "ok: a small synthetic run writes summary.json, config.yaml and checkpoint.bin"
else
  echo "FAIL: small synthetic run"; cat "$tmp/log"; fail=1
fi
# A fresh run refuses a directory holding an earlier run; --overwrite starts over; --resume of a finished run says so.
before=$(cat "$tmp/runs/x/summary.json" "$tmp/runs/x/checkpoint.bin" | md5sum)
expect_error "already holds a run (checkpoint.bin, summary.json, metrics.jsonl): pass --resume" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" \
  --set run.epochs=1 --set data.synthetic_train=256 --set data.synthetic_test=64 --set data.batch_size=32
if "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.epochs=1 --set data.synthetic_train=256 --set data.synthetic_test=64 \
     --set data.batch_size=32 --resume "$tmp/runs/x" >"$tmp/fin" 2>&1 && grep -q "the run already finished (epoch 1 of run.epochs 1" "$tmp/fin" &&
   [[ $(cat "$tmp/runs/x/summary.json" "$tmp/runs/x/checkpoint.bin" | md5sum) == "$before" ]]; then
  echo "ok: --resume of a finished run says so and leaves its files alone"
else
  echo "FAIL: --resume of a finished run"; cat "$tmp/fin"; fail=1
fi
if "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.epochs=1 --set data.synthetic_train=256 --set data.synthetic_test=64 \
     --set data.batch_size=32 --set run.threads=4096 --overwrite >"$tmp/ow" 2>&1 && grep -q "warning: run.threads 4096 exceeds the" "$tmp/ow" &&
   [[ $(grep -c '"event":"summary"' "$tmp/runs/x/metrics.jsonl") == 1 ]]; then
  echo "ok: --overwrite starts over (and run.threads above the cores warns)"
else
  echo "FAIL: --overwrite"; cat "$tmp/ow"; fail=1
fi
# Without a launcher, train and eval run as one rank without MPI: under an MCA setting that makes MPI_Init fail (no
# such point-to-point layer), both still work.
small=(--set run.out_dir="$tmp/runs" --set run.epochs=1 --set data.synthetic_train=256 --set data.synthetic_test=64
  --set data.batch_size=32)
if OMPI_MCA_pml=octet_none "$octet" train "$tmp/bad.yaml" "${small[@]}" --set run.name=nompi >"$tmp/nompi" 2>&1 &&
   OMPI_MCA_pml=octet_none "$octet" eval "$tmp/bad.yaml" "${small[@]}" --weights "$tmp/runs/nompi" --out "$tmp/nompi.json" >>"$tmp/nompi" 2>&1; then
  echo "ok: octet train and eval without mpirun start no MPI"
else
  echo "FAIL: octet train or eval without mpirun needs MPI"; tail -5 "$tmp/nompi"; fail=1
fi
# Data parallel through the command line: 2 ranks with a codec, both ranks agree (checksum every step).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# run.threads 0 shares the cores out among unbound ranks: 4 ranks on N cores get max(1, N / 4) threads each; one
# unbound rank gets all N.
cores=$(nproc)
if mpirun -np 4 --oversubscribe --bind-to none "$octet" train "$tmp/bad.yaml" "${small[@]}" --set run.name=t4 \
     --set run.max_steps=2 >"$tmp/t4" 2>&1 && grep -q "4 ranks x batch 32, .*, $(( cores / 4 > 1 ? cores / 4 : 1 )) threads/rank" "$tmp/t4" &&
   mpirun -np 1 --bind-to none "$octet" train "$tmp/bad.yaml" "${small[@]}" --set run.name=t1 --set run.max_steps=2 \
     >"$tmp/t1" 2>&1 && grep -q "1 rank x batch 32, .*, $cores threads/rank" "$tmp/t1"; then
  echo "ok: run.threads 0: the $cores cores shared out among 4 unbound ranks, all of them for one"
else
  echo "FAIL: run.threads 0 among unbound ranks"; grep "threads/rank" "$tmp/t4" "$tmp/t1"; tail -3 "$tmp/t4"; fail=1
fi
if mpirun -np 2 --oversubscribe "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.name=mpi --set run.epochs=1 \
     --set data.synthetic_train=512 --set data.synthetic_test=64 --set data.batch_size=32 --set run.threads=1 \
     --set compression.method=dynamic_tree8 --set compression.min_numel=1 --set parallel.checksum_every=1 >"$tmp/mpilog" 2>&1 &&
   grep -q '"ranks":2' "$tmp/runs/mpi/summary.json" && grep -q '"compression_ratio":' "$tmp/runs/mpi/summary.json"; then
  echo "ok: mpirun -np 2 octet train with dynamic_tree8 gradients"
else
  echo "FAIL: mpirun -np 2 octet train"; cat "$tmp/mpilog"; fail=1
fi
# A config error every rank meets alike is said once, not once per rank.
out=$(mpirun -np 2 --oversubscribe "$octet" train "$cfg" --set optimizer.lr=-1 2>&1)
if [[ $(grep -c "octet: error" <<<"$out") -eq 1 ]] && grep -q "^octet: error: --set optimizer.lr: optimizer.lr: must be positive" <<<"$out"; then
  echo "ok: a config error under mpirun -np 2 is one line"
else echo "FAIL: a config error under mpirun -np 2:"; echo "$out"; fail=1; fi
# A failing rank takes the job down with one error line per rank and a non-zero exit.
if mpirun -np 2 --oversubscribe "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.name=y --resume "$tmp/ckpt.bin" >"$tmp/mpifail" 2>&1; then
  echo "FAIL: mpirun with a bad checkpoint exited 0"; fail=1
elif grep -q "bad magic at offset 0" "$tmp/mpifail"; then
  echo "ok: mpirun with a bad checkpoint fails with the error line"
else
  echo "FAIL: mpirun with a bad checkpoint: unexpected output"; cat "$tmp/mpifail"; fail=1
fi
# octet predict profiles a config, saves the profile, and predicts the same from the saved profile; under mpirun it
# profiles every rank at once and measures the link with its collectives.
if "$octet" predict "$tmp/bad.yaml" --ranks 4 --bandwidth 0.1 --latency 50 --steps 2 --codecs none,linear8,adacomp \
     --save-profile "$tmp/prof.yaml" >"$tmp/pred1" 2>&1 &&
   "$octet" predict --profile "$tmp/prof.yaml" --ranks 4 --bandwidth 0.1 --latency 50 >"$tmp/pred2" 2>&1 &&
   cmp -s "$tmp/pred1" "$tmp/pred2" && grep -q "^linear8 .*x" "$tmp/pred1" && grep -q "^adacomp .*allgather" "$tmp/pred1"; then
  echo "ok: octet predict from a config and from its saved profile print the same table"
else
  echo "FAIL: octet predict round trip"; cat "$tmp/pred1" "$tmp/pred2"; fail=1
fi
# --act-bandwidth moves model parallelism's activation exchanges only: the data-parallel columns stay, the FC penalty falls.
printf '%s\n' 'batch: 64' 'layers:' '  - {name: conv, kind: conv, forward_ms: 4, backward_ms: 8, params: 20000, out_per_sample: 1000}' \
  '  - {name: fc1, kind: fc, forward_ms: 1, backward_ms: 2, params: 10000, in_per_sample: 1000, out_per_sample: 10}' \
  'codecs:' '  - {name: none, ratio_act: 1}' >"$tmp/mp.yaml"
"$octet" predict --profile "$tmp/mp.yaml" --ranks 4 --bandwidth 0.1 --latency 50 >"$tmp/pred4" 2>&1
"$octet" predict --profile "$tmp/mp.yaml" --ranks 4 --bandwidth 0.1 --act-bandwidth 1 --latency 50 >"$tmp/pred5" 2>&1
if grep -q "link 0.1 GB/s (activation exchanges 1 GB/s)" "$tmp/pred5" && grep -q "link 0.1 GB/s (activation exchanges 0.1 GB/s)" "$tmp/pred4" &&
   [[ $(awk '$1 == "none" { print $4, $5, $8 }' "$tmp/pred4") == $(awk '$1 == "none" { print $4, $5, $8 }' "$tmp/pred5") ]] &&
   [[ $(awk 'FNR == 1 { f++ } $1 == "none" { v[f] = $9 } END { print (v[1] > v[2] && v[2] > 0) }' "$tmp/pred4" "$tmp/pred5") == 1 ]]; then
  echo "ok: octet predict --act-bandwidth lowers only the model-parallel FC penalty"
else
  echo "FAIL: octet predict --act-bandwidth"; cat "$tmp/pred4" "$tmp/pred5"; fail=1
fi
if mpirun -np 2 --oversubscribe "$octet" predict "$tmp/bad.yaml" --bandwidth measure --latency measure --steps 2 --codecs none \
     --set run.threads=1 >"$tmp/pred3" 2>&1 && grep -q "^measured link (2 ranks.*activation exchanges ([1-9][0-9]* values): [0-9.e+-]* GB/s" "$tmp/pred3" &&
   grep -q "profiled with 2 ranks sharing the machine" "$tmp/pred3" && [[ $(grep -c "^none " "$tmp/pred3") == 1 ]]; then
  echo "ok: mpirun -np 2 octet predict measures the link and prints once"
else
  echo "FAIL: mpirun -np 2 octet predict"; cat "$tmp/pred3"; fail=1
fi
# Weights in and out: bad files and names get one line.
expect_error "octet export: $tmp/none: no such file or directory" export "$tmp/none"
expect_error "$tmp/ckpt.bin: neither an octet checkpoint" eval "$tmp/bad.yaml" --weights "$tmp/ckpt.bin"
expect_error "model.init_from: $tmp/nothing.safetensors: no such file" train "$tmp/bad.yaml" \
  --set run.out_dir="$tmp/wruns0" --set model.init_from="$tmp/nothing.safetensors"
expect_error "model.init_skip: names layers model.init_from leaves as initialized; no init_from" train "$tmp/bad.yaml" \
  --set model.init_skip=[fc1]
expect_error "model.naming: unknown value 'caffe' (known: octet, torchvision_resnet)" model "$tmp/bad.yaml" \
  --set model.naming=caffe
"$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/wruns" --set run.max_steps=1 --set model.input=[1,28,28] \
  --set data.synthetic_shape=[1,28,28] >/dev/null 2>&1 || { echo "FAIL: a 1-step run for export"; fail=1; }
expect_error "declares no torchvision naming (model.naming: torchvision_resnet" export "$tmp/wruns/x" --names torchvision
expect_error "octet export: --names: unknown value 'caffe' (known: octet, torchvision)" export "$tmp/wruns/x" --names caffe
printf '\x14\x00\x00\x00\x00\x00\x00\x00{"w":{"dtype":"Q4"}}' >"$tmp/q4.safetensors"
expect_error "$tmp/q4.safetensors: tensor 'w': dtype Q4 is not one octet reads" eval "$tmp/bad.yaml" \
  --weights "$tmp/q4.safetensors"
"$octet" export "$tmp/wruns/x" --out "$tmp/w.safetensors" >/dev/null 2>&1 || { echo "FAIL: octet export"; fail=1; }
# The summary's test accuracy goes into the metadata only where the summary is of the checkpoint's step (a run stopped
# after a resume keeps the summary of its last end).
head -c 4096 "$tmp/w.safetensors" | grep -qa '"test_accuracy"' || { echo "FAIL: export left out test_accuracy"; fail=1; }
sed -i 's/"steps":1,/"steps":7,/' "$tmp/wruns/x/summary.json"
"$octet" export "$tmp/wruns/x" --out "$tmp/w7.safetensors" >/dev/null 2>&1 || { echo "FAIL: octet export (7)"; fail=1; }
head -c 4096 "$tmp/w7.safetensors" | grep -qa '"test_accuracy"' &&
  { echo "FAIL: export took the test accuracy of a summary of another step"; fail=1; }
sed 's/out_features: 10/out_features: 5/' "$tmp/bad.yaml" >"$tmp/five.yaml"
expect_error "model.init_from: $tmp/w.safetensors: tensor 'fc1.bias' has shape [10], the model's fc1.bias [5]" \
  train "$tmp/five.yaml" --set run.out_dir="$tmp/wruns2" --set model.init_from="$tmp/w.safetensors" \
  --set model.input=[1,28,28] --set data.synthetic_shape=[1,28,28] --set data.synthetic_classes=5
expect_error "$tmp/ckpt.bin: cannot decode" classify "$tmp/bad.yaml" --set model.input=[1,28,28] \
  --set data.synthetic_shape=[1,28,28] --weights "$tmp/w.safetensors" "$tmp/ckpt.bin"
expect_error "$tmp/none.png: no such image file" classify "$tmp/bad.yaml" --set model.input=[1,28,28] \
  --set data.synthetic_shape=[1,28,28] --weights "$tmp/w.safetensors" "$tmp/none.png"
exit $fail
