#!/usr/bin/env bash
# Speed benchmark: ResNet-20 training steps (configs/cifar10/resnet20.yaml on synthetic 3x32x32 batches, batch 128)
# with octet and with PyTorch (Debian's python3-torch, scripts/bench/resnet20_torch.py) at 1 and 2 threads, measured
# in the same run: images/s per framework (steps after warm-up) and the octet/PyTorch ratio. Then, per thread count,
# where octet's step goes: a second octet run with oneDNN's verbose timing (ONEDNN_VERBOSE=1) splits each step into
# convolutions, reorders (plain <-> blocked layouts), eltwise (ReLU) and the rest (batchnorm, add, pooling, loss,
# optimizer: octet's own loops), and the convolutions' GFLOP/s (ResNet-20: 242 MFLOP a training image, 31.0 GFLOP a
# step). "bound" is the ratio octet would reach if everything but the convolutions took no time: PyTorch's step time
# over octet's convolution time (PyTorch runs the same oneDNN convolutions).
# Usage: scripts/bench/resnet20_speed.sh   (STEPS=20 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/octet ]] || bash scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${STEPS:-20}
gflop_step=31.0  # 3 x 40.55M multiply-adds x 2 FLOP x 128 images, less the stem's input gradient
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo no AVX-512)"
run() {  # run THREADS NAME [env...]: octet's ResNet-20 on synthetic data
  local t=$1 name=$2
  shift 2
  env "$@" build/octet train configs/cifar10/resnet20.yaml --set data.dataset=synthetic --set data.synthetic_shape=[3,32,32] \
    --set data.synthetic_train=$((128 * (steps + 3))) --set data.synthetic_test=1 --set data.augment.crop_padding=0 \
    --set run.threads="$t" --set run.out_dir="$out" --set run.name="$name" --set run.epochs=1 --set run.warmup_steps=3 \
    --set run.eval_every=0 --set run.log_every=100000 --set run.checkpoint_every=0 >"$out/$name.log" 2>&1
}
printf '%-8s %10s %12s %8s | %9s %9s %9s %9s %9s %8s %7s\n' threads octet_ips pytorch_ips ratio step_ms conv_ms \
  reorder_ms relu_ms rest_ms conv_GF/s bound
for t in 1 2; do
  run "$t" "t$t"
  o_ips=$(grep -o '"images_per_s_steady":[0-9.e+]*' "$out/t$t/summary.json" | cut -d: -f2)
  p_ips=$(OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench/resnet20_torch.py "$t" 128 "$steps" |
    sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
  run "$t" "v$t" ONEDNN_VERBOSE=1
  # oneDNN's exec lines: ...,exec,cpu,<kind>,...,<ms>; every step's share (the 3 warm-up steps included: steps + 3).
  read -r conv reorder relu < <(awk -F, -v n=$((steps + 3)) '$1 ~ /onednn_verbose|dnnl_verbose/ && $2 == "exec" {
      t[$4] += $NF } END { printf "%.1f %.1f %.1f\n", t["convolution"] / n, t["reorder"] / n, t["eltwise"] / n }' \
    "$out/v$t.log")
  step=$(awk -v i="$o_ips" 'BEGIN { printf "%.1f", 128000 / i }')
  awk -v t="$t" -v o="$o_ips" -v p="$p_ips" -v s="$step" -v c="$conv" -v r="$reorder" -v e="$relu" -v g="$gflop_step" \
    'BEGIN { printf "%-8s %10.0f %12.0f %7.2fx | %9.1f %9.1f %9.1f %9.1f %9.1f %8.1f %6.2fx\n", t, o, p, o / p, s, c, r, e,
             s - c - r - e, g / (c / 1000), (128000 / p) / c }'
done
