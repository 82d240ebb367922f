#!/usr/bin/env bash
# Experiment: CIFAR-10 (Caffe's cifar10_quick; ResNet-20 with --resnet20), data parallel over N ranks, once per codec;
# writes a Markdown table per network of test accuracy, bytes per step, compression ratios, time per epoch and training
# time to a target test accuracy (scripts/time_to_accuracy.py), and its plots (scripts/plot.py) into a folder beside it
# (OUT without .md, plus _plots/<net>/).
# Usage: scripts/experiments/cifar10_codecs.sh --data DIR [--ranks 4] [--epochs E] [--resnet20] [--nets "quick resnet20"]
#        [--out docs/compression_cifar10.md] [--codecs "fp32 fp16 linear8 ..."]   (names below; qsgdN = qsgd with N bits, powersgdN = powersgd at rank N)
#        [--target ACC]   (test accuracy, a fraction, of the "time to" column, for every net; default per net:
#                          cifar10_quick 0.75, ResNet-20 0.91. The column: training seconds at the first end-of-epoch
#                          evaluation at or above it, evaluation excluded; "not reached" if none)
# DIR (or $CIFAR10_DIR) holds CIFAR-10's binary version: data_batch_1..5.bin and test_batch.bin, raw or .gz
# (scripts/convert_idx.py writes Fashion-MNIST in that format where no CIFAR-10 copy exists).
# Each net keeps its recipe's global batch (cifar10_quick 100, ResNet-20 128): data.batch_size = global / ranks, so the
# rank count must divide it. --epochs shortens the recipe and moves its lr milestones with it (quick: x0.1 at 80% of
# the epochs; ResNet-20: at 50% and 75%); without it each net trains its config's epochs (10 and 160).
set -euo pipefail
here=$PWD  # --data is relative to the caller's folder, --out to the repository root (as the other experiments)
cd "$(dirname "$0")/../.."
data=${CIFAR10_DIR:-} ranks=4 epochs="" out=docs/compression_cifar10.md resnet20="" nets=quick target=""
codecs="fp32 fp16 bf16 fp8_e4m3 fp8_e5m2 linear8 mantissa8 static_tree8 dynamic_tree8 qsgd8 qsgd4 qsgd2 onebit topk adacomp powersgd2"
source scripts/lib.sh
parse_flags cifar10_codecs.sh "data ranks epochs out codecs nets resnet20! target" "$@"
[[ -z $target ]] || check_target cifar10_codecs.sh "$target"
[[ -n $resnet20 && " $nets " != *" resnet20 "* ]] && nets+=" resnet20"
[[ -n $data ]] || { echo "cifar10_codecs.sh: no CIFAR-10 folder given: pass --data DIR or set CIFAR10_DIR" >&2; exit 2; }
[[ $data == /* ]] || data=$here/$data
[[ -d $data ]] || { echo "cifar10_codecs.sh: $data: no such folder (want CIFAR-10's binary version there)" >&2; exit 2; }
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  [[ -f $data/$f.bin || -f $data/$f.bin.gz ]] ||
    { echo "cifar10_codecs.sh: $data: no $f.bin (want CIFAR-10's binary version: data_batch_1..5.bin, test_batch.bin)" >&2; exit 2; }
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "cifar10_codecs.sh: --ranks $ranks: want a positive integer" >&2; exit 2; }
[[ -z $epochs || $epochs =~ ^[1-9][0-9]*$ ]] || { echo "cifar10_codecs.sh: --epochs $epochs: want a positive integer" >&2; exit 2; }
# net -> config, global batch, default epochs, lr milestones as fractions of the epochs, title, default --target.
declare -A cfg=([quick]=configs/cifar10/cifar10_quick.yaml [resnet20]=configs/cifar10/resnet20.yaml)
declare -A gbatch=([quick]=100 [resnet20]=128) dflt_epochs=([quick]=10 [resnet20]=160)
declare -A fracs=([quick]="0.8" [resnet20]="0.5 0.75") title=([quick]="Caffe's cifar10_quick" [resnet20]="ResNet-20")
declare -A dflt_target=([quick]=0.75 [resnet20]=0.91)
for n in $nets; do
  [[ -n ${cfg[$n]:-} ]] || { echo "cifar10_codecs.sh: --nets: unknown net $n (known: quick resnet20)" >&2; exit 2; }
  ((gbatch[$n] % ranks == 0)) ||
    { echo "cifar10_codecs.sh: $ranks ranks do not divide $n's global batch of ${gbatch[$n]} (use a divisor of it)" >&2; exit 2; }
done
prepare_run cifar10-codecs
trap 'rm -rf "$work" "$out.part"' EXIT
mkdir -p "$(dirname "$out")"
plots=${out%.md}_plots
{
  echo "# CIFAR-10: codecs compared"
  echo
  echo "\`scripts/experiments/cifar10_codecs.sh --ranks $ranks${epochs:+ --epochs $epochs} --nets \"$nets\"${target:+ --target $target}\` on $(nproc) cores, $(date -u +%Y-%m-%d),"
  echo "data: \`$data\`. $ranks ranks (mpirun --oversubscribe, 1 thread each), each net at its recipe's global batch"
  echo "(data.batch_size = global / ranks). Tensors under compression.min_numel travel as fp32. Bytes are what one rank"
  echo "hands to MPI per step (gradient payloads); ratios are fp32 bytes / payload bytes of the same exchange, per layer"
  echo "kind over the tensors that go through the codec. Time per epoch is training time only (evaluation excluded)."
} >"$out.part"
for n in $nets; do
  ep=${epochs:-${dflt_epochs[$n]}}
  tgt=${target:-${dflt_target[$n]}}
  bs=$((gbatch[$n] / ranks))
  ms=$(for f in ${fracs[$n]}; do awk -v f="$f" -v e="$ep" 'BEGIN { printf "%g,", f * e }'; done)
  ms="[${ms%,}]"
  rows=()
  fp32_acc=""
  for c in $codecs; do
    # shellcheck disable=SC2207  # codec_args prints words without spaces inside them
    args=($(codec_args "$c"))
    echo "== $n $c: mpirun -np $ranks octet train ${cfg[$n]} (batch $bs/rank, $ep epochs, milestones $ms) ${args[*]}" >&2
    mpirun -np "$ranks" --oversubscribe build/octet train "${cfg[$n]}" --set data.path="$data" --set run.threads=1 \
      --set data.batch_size="$bs" --set run.epochs="$ep" --set "optimizer.schedule.milestones=$ms" \
      --set run.name="$n-$c" --set run.out_dir="$work" --set run.log_every=50 --set run.eval_every=1 "${args[@]}" \
      >"$work/$n-$c.log" 2>&1 || { echo "run $n $c failed:" >&2; tail -5 "$work/$n-$c.log" >&2; exit 1; }
    s=$work/$n-$c/summary.json
    acc=$(field "$s" test_accuracy)
    [[ $c == fp32 ]] && fp32_acc=$acc
    tta=$(time_to_acc "$work/$n-$c" "$tgt")
    rows+=("$c|$acc|$(field "$s" bytes_sent_per_step)|$(field "$s" fp32_bytes_per_step)|$(field "$s" compression_ratio)|$(field "$s" compression_ratio_fc)|$(field "$s" compression_ratio_conv)|$(field "$s" train_seconds)|$(field "$s" images_per_s)|$tta")
    echo "   test accuracy $acc, $(target_title "$tgt"): $tta" >&2
  done
  {
    echo
    echo "## ${title[$n]}"
    echo
    echo "${cfg[$n]}: $ranks ranks x batch $bs (global ${gbatch[$n]}), $ep epochs, lr x0.1 at epochs $ms."
    target_caption "$tgt"
    echo
    codec_table "${fp32_acc:-}" "$ep" "$tgt" "${rows[@]}"
    echo
    for p in loss accuracy bytes phases; do echo "![$n: $p]($(basename "$plots")/$n/$p.png)"; done
  } >>"$out.part"
  runs=()
  for c in $codecs; do runs+=("$work/$n-$c"); done
  mkdir -p "$plots/$n"
  /usr/bin/python3 scripts/plot.py "${runs[@]}" --labels "$(tr ' ' ',' <<<"$codecs" | sed 's/,*$//')" --out "$plots/$n" \
    --title "${title[$n]}, CIFAR-10, $ranks ranks" >&2
done
mv "$out.part" "$out"
echo "wrote $out" >&2
cat "$out"
