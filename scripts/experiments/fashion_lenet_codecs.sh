#!/usr/bin/env bash
# Experiment: LeNet on Fashion-MNIST, data parallel over N ranks, once per codec; writes a Markdown table of test
# accuracy, bytes per step, compression ratios, time per epoch and training time to a target test accuracy
# (scripts/time_to_accuracy.py), and its plots (scripts/plot.py: loss and accuracy against step and time, bytes per
# step, phase times) into a folder beside it (OUT without .md, plus _plots/).
# Usage: scripts/experiments/fashion_lenet_codecs.sh [--ranks 4] [--epochs 5] [--out docs/compression_fashion_lenet.md]
#        [--codecs "fp32 fp16 linear8 ..."]   (names below; qsgdN = qsgd with N bits, powersgdN = powersgd at rank N)
#        [--target 0.88]   (test accuracy, a fraction, of the "time to" column: training seconds at the first
#                           end-of-epoch evaluation at or above it, evaluation excluded; "not reached" if none)
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=4 epochs=5 out=docs/compression_fashion_lenet.md target=0.88
codecs="fp32 fp16 bf16 fp8_e4m3 fp8_e5m2 linear8 mantissa8 static_tree8 dynamic_tree8 qsgd8 qsgd4 qsgd2 onebit topk adacomp powersgd2"
source scripts/lib.sh
parse_flags fashion_lenet_codecs.sh "ranks epochs out codecs target" "$@"
check_target fashion_lenet_codecs.sh "$target"
prepare_run fashion-lenet-codecs
trap 'rm -rf "$work"' EXIT
rows=()
fp32_acc=""
for c in $codecs; do
  # shellcheck disable=SC2207  # codec_args prints words without spaces inside them
  args=($(codec_args "$c"))
  echo "== $c: mpirun -np $ranks octet train configs/fashion-mnist/lenet.yaml ${args[*]}" >&2
  mpirun -np "$ranks" --oversubscribe build/octet train configs/fashion-mnist/lenet.yaml --set run.threads=1 \
    --set run.epochs="$epochs" --set run.name="$c" --set run.out_dir="$work" --set run.log_every=50 \
    --set run.eval_every=1 "${args[@]}" \
    >"$work/$c.log" 2>&1 || { echo "run $c failed:" >&2; tail -5 "$work/$c.log" >&2; exit 1; }
  s=$work/$c/summary.json
  acc=$(field "$s" test_accuracy)
  [[ $c == fp32 ]] && fp32_acc=$acc
  tta=$(time_to_acc "$work/$c" "$target")
  rows+=("$c|$acc|$(field "$s" bytes_sent_per_step)|$(field "$s" fp32_bytes_per_step)|$(field "$s" compression_ratio)|$(field "$s" compression_ratio_fc)|$(field "$s" compression_ratio_conv)|$(field "$s" train_seconds)|$(field "$s" images_per_s)|$tta")
  echo "   test accuracy $acc, $(target_title "$target"): $tta" >&2
done
{
  echo "# LeNet on Fashion-MNIST, $ranks ranks, $epochs epochs: $codecs"  # (a title per comparison)
  echo
  echo "\`scripts/experiments/fashion_lenet_codecs.sh --ranks $ranks --epochs $epochs --target $target\` on $(nproc) cores, $(date -u +%Y-%m-%d)."
  echo "$ranks ranks (mpirun --oversubscribe, 1 thread each) x batch 64, $epochs epochs, configs/fashion-mnist/lenet.yaml,"
  echo "tensors under compression.min_numel (10000 values: conv1 and the biases) travel as fp32. Bytes are what one rank"
  echo "hands to MPI per step (gradient payloads); ratios are fp32 bytes / payload bytes of the same exchange, per layer"
  echo "kind over the tensors that go through the codec. Time per epoch is training time only (evaluation excluded)."
  target_caption "$target"
  echo
  codec_table "${fp32_acc:-}" "$epochs" "$target" "${rows[@]}"
  echo
  echo "![loss against step and time]($(basename "${out%.md}")_plots/loss.png)"
  echo "![test accuracy against step and time]($(basename "${out%.md}")_plots/accuracy.png)"
  echo "![bytes per step]($(basename "${out%.md}")_plots/bytes.png)"
  echo "![phase times per step]($(basename "${out%.md}")_plots/phases.png)"
} >"$out"
echo "wrote $out" >&2
plots=${out%.md}_plots
mkdir -p "$plots"
runs=()
for c in $codecs; do runs+=("$work/$c"); done
/usr/bin/python3 scripts/plot.py "${runs[@]}" --labels "$(tr ' ' ',' <<<"$codecs" | sed 's/,*$//')" --out "$plots" \
  --title "LeNet, Fashion-MNIST, $ranks ranks" >&2
cat "$out"
