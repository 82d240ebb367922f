#!/usr/bin/env bash
# Speed benchmark: ResNet-20 training steps (configs/cifar10/resnet20.yaml on synthetic 3x32x32 batches, batch 128)
# with octet and with PyTorch (Debian's python3-torch, scripts/bench/resnet20_torch.py) at 1 and 2 threads and in each
# precision (model.precision fp32, and bf16 where the CPU has AVX512-BF16 or AMX), measured in the same run: images/s
# per framework (steps after warm-up) and the octet/PyTorch ratio. The precision column is both frameworks': octet with
# --set model.precision=P, PyTorch fp32, or for bf16 its forward pass and loss under CPU autocast (bfloat16). vs_fp32
# is octet's own mixed-precision speed-up: its images/s in that row's precision over its fp32 images/s at the same
# thread count (1.00x on the fp32 rows; "-" when fp32 is not in PRECISIONS). vs_unfused is what model.fuse buys: the
# row's images/s over those of a run with model.fuse: false (each ReLU a pass of its own) in the same script run;
# vs_plain is what model.layout buys: the row's images/s over those of a run with model.layout: plain (every activation
# plain NCHW, reordered around each blocked convolution) in the same script run; vs_f32acts is what model.activations
# buys a bf16 row: its images/s over those of a run with model.activations: fp32 (activations and their gradients
# fp32 between layers, converted to bf16 around each convolution) in the same script run ("-" on fp32 rows).
# Then, per row, where octet's step goes: a
# second octet run with oneDNN's verbose timing (ONEDNN_VERBOSE=1) splits each step into convolutions, reorders
# (plain <-> blocked layouts; in bf16 the conversions of the batch and the weights), eltwise (ReLU) and the
# rest (batchnorm, add, pooling, loss, optimizer: octet's own loops, on bf16 activations in bf16), and the
# convolutions' GFLOP/s (ResNet-20: 242 MFLOP a training image, 31.0 GFLOP a step). "bound" is the ratio octet would
# reach if everything but the convolutions took no time: PyTorch's step time (same precision) over octet's convolution
# time (PyTorch runs the same oneDNN convolutions).
# Usage: scripts/bench/resnet20_speed.sh   (STEPS=20, PRECISIONS="fp32 bf16" by default; bf16 is skipped, with a
# note, on CPUs without AVX512-BF16 or AMX)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/octet ]] || bash scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${STEPS:-20}
gflop_step=31.0  # 3 x 40.55M multiply-adds x 2 FLOP x 128 images, less the stem's input gradient
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo no AVX-512)"
source scripts/bench/cpu_precisions.sh  # sets precisions (fp32 first; bf16 where the CPU has it)
run() {  # run THREADS PRECISION FUSE LAYOUT ACTIVATIONS NAME [env...]: octet's ResNet-20 on synthetic data
  local t=$1 p=$2 fuse=$3 layout=$4 acts=$5 name=$6
  shift 6
  env "$@" build/octet train configs/cifar10/resnet20.yaml --set data.dataset=synthetic --set data.synthetic_shape=[3,32,32] \
    --set data.synthetic_train=$((128 * (steps + 3))) --set data.synthetic_test=1 --set data.augment.crop_padding=0 \
    --set run.threads="$t" --set run.out_dir="$out" --set run.name="$name" --set run.epochs=1 --set run.warmup_steps=3 \
    --set run.eval_every=0 --set run.log_every=100000 --set run.checkpoint_every=0 --set model.precision="$p" \
    --set model.fuse="$fuse" --set model.layout="$layout" --set model.activations="$acts" >"$out/$name.log" 2>&1
}
ips() { grep -o '"images_per_s_steady":[0-9.e+]*' "$out/$1/summary.json" | cut -d: -f2; }
printf '%-8s %-9s %10s %12s %8s %8s %10s %9s %10s | %9s %9s %9s %9s %9s %8s %7s\n' threads precision octet_ips \
  pytorch_ips ratio vs_fp32 vs_unfused vs_plain vs_f32acts step_ms conv_ms reorder_ms relu_ms rest_ms conv_GF/s bound
for t in 1 2; do
  fp32_ips=
  for p in "${precisions[@]}"; do
    run "$t" "$p" true auto auto "t${t}_$p"
    o_ips=$(ips "t${t}_$p")
    run "$t" "$p" false auto auto "u${t}_$p"
    u_ips=$(ips "u${t}_$p")
    run "$t" "$p" true plain auto "l${t}_$p"
    l_ips=$(ips "l${t}_$p")
    a_ips=
    if [[ $p != fp32 ]]; then
      run "$t" "$p" true auto fp32 "a${t}_$p"
      a_ips=$(ips "a${t}_$p")
    fi
    if [[ $p == fp32 ]]; then fp32_ips=$o_ips; fi
    p_ips=$(OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench/resnet20_torch.py "$t" 128 "$steps" "$p" |
      sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
    run "$t" "$p" true auto auto "v${t}_$p" ONEDNN_VERBOSE=1
    # oneDNN's exec lines: ...,exec,cpu,<kind>,...,<ms>; every step's share (the 3 warm-up steps included: steps + 3).
    read -r conv reorder relu < <(awk -F, -v n=$((steps + 3)) '$1 ~ /onednn_verbose|dnnl_verbose/ && $2 == "exec" {
        t[$4] += $NF } END { printf "%.1f %.1f %.1f\n", t["convolution"] / n, t["reorder"] / n, t["eltwise"] / n }' \
      "$out/v${t}_$p.log")
    step=$(awk -v i="$o_ips" 'BEGIN { printf "%.1f", 128000 / i }')
    awk -v t="$t" -v pr="$p" -v o="$o_ips" -v u="$u_ips" -v l="$l_ips" -v a="$a_ips" -v p="$p_ips" -v f="$fp32_ips" \
      -v s="$step" -v c="$conv" -v r="$reorder" -v e="$relu" -v g="$gflop_step" 'BEGIN {
        v = f == "" ? "-" : sprintf("%.2fx", o / f); w = a == "" ? "-" : sprintf("%.2fx", o / a)
        printf "%-8s %-9s %10.0f %12.0f %7.2fx %8s %9.2fx %8.2fx %10s | %9.1f %9.1f %9.1f %9.1f %9.1f %8.1f %6.2fx\n", t,
               pr, o, p, o / p, v, o / u, o / l, w, s, c, r, e, s - c - r - e, g / (c / 1000), (128000 / p) / c }'
  done
done
