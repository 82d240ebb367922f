#!/usr/bin/env bash
# The GPU check of an unpacked octet-gpu bundle (scripts/gpu/bundle.sh), in one call: the bundled Open MPI runs two
# ranks and the GPU path runs on the simulated device; then, where a GPU is usable, the CUDA parity tests (every layer, the loss head, the optimizers, the copies),
# the GPU training tests (tests/cuda_train_test.sh) and speed figures measured in this same run: LeNet one epoch on
# the GPU vs this machine's CPU cores vs PyTorch on the same GPU (when python3 has torch with CUDA), an AlexNet-shaped
# model on the GPU vs the CPU with every phase's time, and two ranks sharing the GPU with and without compression.
# With --sanitize, compute-sanitizer (from the CUDA toolkit) runs the parity tests under memcheck, the codec cases
# under racecheck and synccheck, and a short two-rank training run (overlap, a lossy codec) under memcheck.
# Usage: check.sh [--out DIR] [--require-gpu] [--sanitize]
#   --out          where check.log and summary.txt go (default: $OUT when set, else ./octet-gpu-check)
#   --require-gpu  fail, instead of reporting the GPU checks as skipped, where no GPU is usable
#   --sanitize     also the compute-sanitizer runs (a few minutes more)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/octet-gpu-check}
require=0
sanitize=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --require-gpu) require=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (known: --out DIR, --require-gpu, --sanitize)" >&2; exit 2 ;;
  esac
done
# shellcheck source=env.sh
. "$here/env.sh"
mkdir -p "$out"
log=$out/check.log
sum=$out/summary.txt
: >"$log"
: >"$sum"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "$*" | tee -a "$sum"; }
bad() { say "FAIL: $*"; fail=1; }
field() { grep -o "\"$2\":[0-9.e+-]*" "$1" | cut -d: -f2; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
section() { echo "=== $* ===" >>"$log"; }
cores=$(nproc)

say "octet-gpu $(cat "$here/VERSION") on $(uname -n), $cores cores, $(date -u +%FT%TZ)"
section machine
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$log" | sed 's/^/  /' | tee -a "$sum"
version=$(octet version 2>&1)
say "$version"
ldd "$here/bin/octet" | grep -E "cudnn|cudart|not found" | sed 's/^\s*/  /' | tee -a "$log" | tee -a "$sum"

# 1. The bundle's own Open MPI: two ranks, a compressed exchange, on the CPU.
section "two ranks through the bundled Open MPI"
smoke=(train "$here/configs/mnist/lenet.yaml" --set data.path="$here/datasets/mnist-22k" --set run.out_dir="$tmp/smoke"
  --set run.max_steps=20 --set run.threads=1 --set compression.method=linear8 --set run.log_every=10)
if timeout 300 mpirun -np 2 octet "${smoke[@]}" >>"$log" 2>&1; then say "ok: the bundled Open MPI runs 2 ranks (20 steps, linear8)"
else bad "2 ranks through the bundled Open MPI (see check.log)"; fi

# 1b. The GPU path's host side on the simulated device (no GPU needed): the device parity tests with the CPU twins as
# kernels, guarded memory and queued streams.
section "the simulated device"
if timeout 600 octet_sim_tests >>"$log" 2>&1; then say "ok: the GPU path on the simulated device: $(grep -E '^All tests passed' "$log" | tail -1)"
else bad "the GPU path on the simulated device (octet_sim_tests; see check.log)"; fi

if [[ $version == *"; 0 GPUs usable"* || $version != *"CUDA backend built"* ]]; then
  if [[ $require -eq 1 ]]; then bad "no GPU usable: $version"
  else say "skipped: no GPU usable here, so no parity, GPU training or speed checks"; fi
  exit $fail
fi

# 2. Parity of every CUDA twin with its CPU reference.
section "CUDA parity tests"
if timeout 600 octet_cuda_tests >>"$log" 2>&1; then say "ok: CUDA parity: $(grep -E '^All tests passed' "$log" | tail -1)"
else bad "CUDA parity: $(grep -E '^test cases:' "$log" | tail -1) (see check.log)"; fi

# 2b. compute-sanitizer: memory errors in every kernel of the parity tests, races and barrier misuse in the codecs'
# kernels (shared memory, block reductions), and memcheck over a short training run with overlap on two ranks.
if [[ $sanitize -eq 1 ]]; then
  section "compute-sanitizer"
  cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  if [[ ! -x $cs ]]; then
    bad "--sanitize: compute-sanitizer not found (on PATH or in \$CUDA_HOME/bin)"
  else
    for run in "memcheck|" "racecheck|[codec]" "synccheck|[codec]" "initcheck|[codec]"; do
      tool=${run%%|*} filter=${run#*|}
      if timeout 1200 "$cs" --tool "$tool" --error-exitcode 9 octet_cuda_tests $filter >"$tmp/cs.log" 2>&1; then
        say "ok: compute-sanitizer --tool $tool on the parity tests ${filter:-(all)}: $(grep -E '(ERROR|RACECHECK) SUMMARY' "$tmp/cs.log" | tail -1)"
      else
        bad "compute-sanitizer --tool $tool ${filter:-(all)}: $(grep -E '(ERROR|RACECHECK) SUMMARY|^test cases:' "$tmp/cs.log" | tail -1) (see check.log)"
      fi
      cat "$tmp/cs.log" >>"$log"
    done
    if timeout 1200 mpirun -np 2 "$cs" --tool memcheck --error-exitcode 9 octet train "$here/configs/mnist/lenet.yaml" \
      --set data.path="$here/datasets/mnist-22k" --set run.out_dir="$tmp/cstrain" --set parallel.device=cuda \
      --set run.max_steps=20 --set data.batch_size=32 --set parallel.overlap=true --set parallel.bucket_mb=0.1 \
      --set compression.method=dynamic_tree8 --set parallel.checksum_every=1 --set data.test_limit=1000 \
      >"$tmp/cs.log" 2>&1; then
      say "ok: compute-sanitizer memcheck over 20 training steps on 2 ranks (overlap, dynamic_tree8)"
    else
      bad "compute-sanitizer memcheck over a training run: $(grep -E 'ERROR SUMMARY|octet: error' "$tmp/cs.log" | head -1)"
    fi
    cat "$tmp/cs.log" >>"$log"
  fi
fi

# 3. GPU training end to end.
section "GPU training tests"
if timeout 1500 bash "$here/tests/cuda_train_test.sh" "$here/bin/octet" "$here" >"$tmp/train.log" 2>&1; then
  grep -E "^ok:" "$tmp/train.log" | tee -a "$sum"
else
  grep -E "^(ok|FAIL):" "$tmp/train.log" | tee -a "$sum"
  bad "GPU training tests (see check.log)"
fi
cat "$tmp/train.log" >>"$log"

# 4. Speed, every figure of a ratio measured in this run.
section "speed"
lenet=(train "$here/configs/mnist/lenet.yaml" --set data.path="$here/datasets/mnist-22k" --set run.epochs=1
  --set run.log_every=100000 --set run.eval_every=0)
octet "${lenet[@]}" --set run.out_dir="$tmp/lg" --set parallel.device=cuda >>"$log" 2>&1 || bad "LeNet on the GPU"
octet "${lenet[@]}" --set run.out_dir="$tmp/lc" --set run.threads="$cores" >>"$log" 2>&1 || bad "LeNet on the CPU"
g=$(field "$tmp/lg/mnist-lenet/summary.json" images_per_s)
c=$(field "$tmp/lc/mnist-lenet/summary.json" images_per_s)
say "LeNet, MNIST 22k, batch 64, one epoch: GPU $g img/s, CPU ($cores threads) $c img/s: GPU/CPU x$(ratio "$g" "$c")"
grep "^done:" "$log" | tail -2 | sed 's/^/  /' | tee -a "$sum" >/dev/null
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  py=$(python3 "$here/scripts/bench/lenet_torch.py" "$here/datasets/mnist-22k" "$cores" 64 cuda 2>>"$log")
  echo "$py" >>"$log"
  p=$(sed 's/.*"images_per_s": \([0-9.]*\).*/\1/' <<<"$py")
  say "  PyTorch $(python3 -c 'import torch; print(torch.__version__)') on the same GPU: $p img/s: octet/PyTorch x$(ratio "$g" "$p")"
else
  say "  (no python3 with CUDA-enabled torch here: no PyTorch comparison)"
fi
alex=(train "$here/configs/bench/alexnet_synthetic.yaml" --set data.batch_size=128 --set run.log_every=100000
  --set run.eval_every=0)
octet "${alex[@]}" --set run.out_dir="$tmp/ag" --set parallel.device=cuda --set run.max_steps=300 >>"$log" 2>&1 ||
  bad "AlexNet-shaped on the GPU"
octet "${alex[@]}" --set run.out_dir="$tmp/ac" --set run.threads="$cores" --set run.max_steps=20 >>"$log" 2>&1 ||
  bad "AlexNet-shaped on the CPU"
g=$(field "$tmp/ag/alexnet-synthetic/summary.json" images_per_s_steady)
c=$(field "$tmp/ac/alexnet-synthetic/summary.json" images_per_s_steady)
say "AlexNet-shaped 3x64x64, batch 128: GPU $g img/s, CPU ($cores threads) $c img/s: GPU/CPU x$(ratio "$g" "$c")"
grep "^done:" "$log" | tail -2 | sed 's/^/  /' | tee -a "$sum" >/dev/null
for m in none dynamic_tree8 adacomp; do
  timeout 300 mpirun -np 2 octet "${alex[@]}" --set run.out_dir="$tmp/m$m" --set parallel.device=cuda --set run.max_steps=200 \
    --set compression.method=$m >>"$log" 2>&1 || bad "2 ranks on the GPU with $m"
  ips=$(field "$tmp/m$m/alexnet-synthetic/summary.json" images_per_s_steady)
  [[ $m == none ]] && base=$ips
  say "2 ranks sharing the GPU, AlexNet-shaped, $m: $ips img/s (x$(ratio "$ips" "$base") of none); $(grep '^done:' "$log" | tail -1 | grep -o 'data .* ms/step')"
done
# 5. The codecs on the GPU: encode/decode GB/s against a device-to-device copy in the same run (issue targets: >= 50%,
# the 8-bit types >= 80%), and the compressed allreduce from device buffers over MPI (staged) and NCCL.
section "GPU codecs"
if timeout 600 octet bench compress --device cuda --size 256M --reps 10 >"$tmp/codecs.txt" 2>>"$log"; then
  sed 's/^/  /' "$tmp/codecs.txt" | tee -a "$sum" >/dev/null
  cat "$tmp/codecs.txt" >>"$log"
else bad "octet bench compress --device cuda (see check.log)"; fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
np=$([[ ${gpus:-0} -ge 2 ]] && echo 2 || echo 1)  # NCCL refuses two ranks on one GPU
for via in mpi nccl; do
  if timeout 600 mpirun -np "$np" octet bench allreduce --device cuda --transport $via --min 1M --max 64M --factor 8 \
    >"$tmp/allreduce.txt" 2>>"$log"; then
    sed 's/^/  /' "$tmp/allreduce.txt" | tee -a "$sum" >/dev/null
  else bad "octet bench allreduce --device cuda --transport $via (see check.log)"; fi
done
# The staged exchange in pipelined pieces (piece k encodes on the comm stream while piece k-1 is copied and moves on
# the courier thread) against one piece, 2 ranks sharing the GPU, 64 MB of dynamic_tree8 (issue target: >= 1.3x).
for c in 0 auto; do
  timeout 300 mpirun -np 2 octet bench allreduce --device cuda --transport mpi --min 64M --max 64M \
    --codecs dynamic_tree8 --chunk-mb $c --iters 10 >"$tmp/pieces_$c.txt" 2>>"$log" ||
    bad "octet bench allreduce --device cuda --chunk-mb $c (see check.log)"
done
one=$(awk '$2 == "dynamic_tree8" { print $(NF - 4) }' "$tmp/pieces_0.txt")
piped=$(awk '$2 == "dynamic_tree8" { print $(NF - 4) }' "$tmp/pieces_auto.txt")
say "64 MB dynamic_tree8 staged over MPI, 2 ranks sharing the GPU: one piece ${one:-?} us, pipelined pieces ${piped:-?} us: x$(ratio "${one:-0}" "${piped:-0}")"
[[ $fail -eq 0 ]] && say "all GPU checks passed" || say "some GPU checks FAILED (see $log)"
exit $fail
