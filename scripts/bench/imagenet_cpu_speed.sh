#!/usr/bin/env bash
# Speed benchmark: the ImageNet nets' training steps on the CPU (configs/imagenet/{resnet50,resnet18,alexnet}.yaml on
# synthetic batches at their input size, 1000 classes), octet against PyTorch (Debian's python3-torch running
# scripts/gpu/speed_torch.py's torch-only copies of the same nets with --device cpu), every figure of a row from the
# same run, on every core (run.threads 0, OMP_NUM_THREADS = cores). Columns: images/s per framework (the steps after
# the warm-up), octet/PyTorch; vs_fp32: octet's images/s over its fp32 images/s for the same net; vs_plain: what
# model.layout buys, the row's images/s over those of a model.layout: plain run made in the same script run. Then
# where octet's step goes, from a third octet run with oneDNN's verbose timing (ONEDNN_VERBOSE=1): its convolutions,
# its reorders (layout changes; in bf16 also the fp32 <-> bf16 conversions) and the rest (octet's own loops: batchnorm,
# add, pooling, LRN, loss, optimizer), in ms a step; "bound" is the ratio octet would reach if everything but its
# convolutions took no time (PyTorch's step time over octet's convolution time).
# PyTorch's bf16 is CPU autocast bfloat16 with the model and batch channels_last, its fp32 plain NCHW.
# Usage: scripts/bench/imagenet_cpu_speed.sh   (MODELS="resnet50 resnet18 alexnet", PRECISIONS="fp32 bf16", BATCH=16,
# STEPS=4 timed steps after 2 warm-up ones; bf16 is skipped, with a note, on CPUs without AVX512-BF16 or AMX)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/octet ]] || bash scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${STEPS:-4} batch=${BATCH:-16} warmup=2
cores=$(nproc)
declare -A cfg=([resnet50]=configs/imagenet/resnet50.yaml [resnet18]=configs/imagenet/resnet18.yaml
  [alexnet]=configs/imagenet/alexnet.yaml)
declare -A shape=([resnet50]=3,224,224 [resnet18]=3,224,224 [alexnet]=3,227,227)
for m in ${MODELS:-resnet50 resnet18 alexnet}; do
  [[ -n ${cfg[$m]:-} ]] || { echo "MODELS: unknown model '$m' (known: ${!cfg[*]})" >&2; exit 2; }
done
source scripts/bench/cpu_precisions.sh  # sets precisions (fp32 first; bf16 where the CPU has it)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $cores cores; batch $batch, $steps timed steps after $warmup"
run() {  # run MODEL PRECISION LAYOUT NAME [env...]: octet's net on synthetic data, every core
  local m=$1 p=$2 layout=$3 name=$4
  shift 4
  env "$@" build/octet train "${cfg[$m]}" \
    --set "data={dataset: synthetic, synthetic_shape: [${shape[$m]}], synthetic_classes: 1000, synthetic_train: $((batch * (steps + warmup))), synthetic_test: 1, batch_size: $batch}" \
    --set run.threads=0 --set run.out_dir="$out" --set run.name="$name" --set run.epochs=1 \
    --set run.warmup_steps=$warmup --set run.eval_every=0 --set run.log_every=100000 --set run.checkpoint_every=0 \
    --set model.precision="$p" --set model.layout="$layout" >"$out/$name.log" 2>&1 ||
    { echo "octet failed ($name):" >&2; tail -3 "$out/$name.log" >&2; exit 1; }
}
ips() { grep -o '"images_per_s_steady":[0-9.e+]*' "$out/$1/summary.json" | cut -d: -f2; }
printf '%-9s %-9s %10s %12s %8s %8s %9s | %9s %9s %10s %9s %7s\n' model precision octet_ips pytorch_ips ratio vs_fp32 \
  vs_plain step_ms conv_ms reorder_ms rest_ms bound
for m in ${MODELS:-resnet50 resnet18 alexnet}; do
  fp32_ips=
  for p in "${precisions[@]}"; do
    run "$m" "$p" auto "${m}_$p"
    o_ips=$(ips "${m}_$p")
    run "$m" "$p" plain "${m}_${p}_plain"
    l_ips=$(ips "${m}_${p}_plain")
    [[ $p == fp32 ]] && fp32_ips=$o_ips
    p_ips=$(OMP_NUM_THREADS=$cores /usr/bin/python3 scripts/gpu/speed_torch.py "$m" "$p" "$batch" "$steps" "$warmup" \
      --device cpu 2>/dev/null | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
    run "$m" "$p" auto "${m}_${p}_verbose" ONEDNN_VERBOSE=1
    # oneDNN's exec lines: ...,exec,cpu,<kind>,...,<ms>; a step's share (the warm-up steps included).
    read -r conv reorder < <(awk -F, -v n=$((steps + warmup)) '$1 ~ /onednn_verbose|dnnl_verbose/ && $2 == "exec" {
        t[$4] += $NF } END { printf "%.1f %.1f\n", t["convolution"] / n, t["reorder"] / n }' "$out/${m}_${p}_verbose.log")
    awk -v m="$m" -v pr="$p" -v o="$o_ips" -v l="$l_ips" -v p="$p_ips" -v f="$fp32_ips" -v b="$batch" -v c="$conv" \
      -v r="$reorder" 'BEGIN { v = f == "" ? "-" : sprintf("%.2fx", o / f); s = 1000 * b / o
        printf "%-9s %-9s %10.1f %12.1f %7.2fx %8s %8.2fx | %9.1f %9.1f %10.1f %9.1f %6.2fx\n", m, pr, o, p, o / p, v,
               o / l, s, c, r, s - c - r, (1000 * b / p) / c }'
  done
done
