#!/usr/bin/env bash
# Experiment: does mixed precision cost accuracy? ResNet-20 (configs/cifar10/resnet20.yaml) on CIFAR-10's binary
# format, N ranks with one codec, once per model.precision on the same epochs and seed; writes a Markdown table of
# each precision's test accuracy after every epoch, its final gap to fp32 and its img/s, to OUT.
# Usage: scripts/experiments/precision_accuracy.sh --data DIR [--ranks 2] [--epochs 4] [--codec dynamic_tree8]
#        [--precisions "fp32 bf16"] [--device cpu|sim|cuda] [--out docs/precision_accuracy.md]
# DIR (or $CIFAR10_DIR): data_batch_1..5.bin and test_batch.bin (scripts/convert_idx.py writes Fashion-MNIST so).
# The recipe's global batch of 128 is kept (data.batch_size = 128 / ranks); lr x0.1 at 50% and 75% of the epochs.
# The CPU runs bf16 on AVX512-BF16/AMX (octet refuses it elsewhere); fp16 and tf32 need --device cuda.
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/../.."
data=${CIFAR10_DIR:-} ranks=2 epochs=4 codec=dynamic_tree8 precisions="fp32 bf16" device=cpu
out=docs/precision_accuracy.md
source scripts/lib.sh
parse_flags precision_accuracy.sh "data ranks epochs codec precisions device out" "$@"
[[ -n $data ]] || { echo "precision_accuracy.sh: no CIFAR-10 folder given: pass --data DIR or set CIFAR10_DIR" >&2; exit 2; }
[[ $data == /* ]] || data=$here/$data
[[ -f $data/test_batch.bin || -f $data/test_batch.bin.gz ]] ||
  { echo "precision_accuracy.sh: $data: no test_batch.bin (want CIFAR-10's binary version)" >&2; exit 2; }
[[ $ranks =~ ^[1-9][0-9]*$ ]] && ((128 % ranks == 0)) ||
  { echo "precision_accuracy.sh: --ranks $ranks: want a divisor of the global batch 128" >&2; exit 2; }
[[ $epochs =~ ^[1-9][0-9]*$ ]] || { echo "precision_accuracy.sh: --epochs $epochs: want a positive integer" >&2; exit 2; }
prepare_run precision-accuracy
trap 'rm -rf "$work" "$out.part"' EXIT
ms=$(awk -v e="$epochs" 'BEGIN { printf "[%g,%g]", 0.5 * e, 0.75 * e }')
rows=() fp32_acc=""
for p in $precisions; do
  echo "== $p: mpirun -np $ranks octet train configs/cifar10/resnet20.yaml ($epochs epochs, $codec, $device)" >&2
  mpirun -np "$ranks" --oversubscribe build/octet train configs/cifar10/resnet20.yaml --set data.path="$data" \
    --set run.threads=1 --set data.batch_size=$((128 / ranks)) --set run.epochs="$epochs" \
    --set "optimizer.schedule.milestones=$ms" --set run.name="r20-$p" --set run.out_dir="$work" \
    --set run.log_every=100 --set run.eval_every=1 --set compression.method="$codec" --set model.precision="$p" \
    --set parallel.device="$device" >"$work/$p.log" 2>&1 || { echo "run $p failed:" >&2; tail -3 "$work/$p.log" >&2; exit 1; }
  s=$work/r20-$p/summary.json
  acc=$(field "$s" test_accuracy)
  [[ $p == fp32 ]] && fp32_acc=$acc
  per_epoch=$(grep -E "^epoch [0-9]+ test loss" "$work/$p.log" | grep -o "accuracy [0-9.]*%" | cut -d' ' -f2 | paste -sd' ')
  gap=$([[ -n $fp32_acc ]] && awk -v a="$acc" -v b="$fp32_acc" 'BEGIN { printf "%+.2f", 100 * (a - b) }' || echo "-")
  rows+=("| $p | $per_epoch | $(awk -v a="$acc" 'BEGIN { printf "%.2f%%", 100 * a }') | $gap | $(field "$s" images_per_s) |")
  echo "   test accuracy $acc" >&2
done
{
  echo "# Mixed precision and accuracy: ResNet-20"
  echo
  echo "\`scripts/experiments/precision_accuracy.sh --ranks $ranks --epochs $epochs --codec $codec --precisions \"$precisions\" --device $device\`"
  echo "on $(nproc) cores, $(date -u +%Y-%m-%d), data: \`$data\`. configs/cifar10/resnet20.yaml, $ranks ranks x batch"
  echo "$((128 / ranks)) (global 128), $epochs epochs, lr x0.1 at epochs $ms, seed 1, the same for every precision."
  echo
  echo "| precision | test accuracy after each epoch | final | vs fp32 (points) | img/s |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out.part"
mv "$out.part" "$out"
echo "wrote $out" >&2
cat "$out"
