#!/usr/bin/env bash
# Time to accuracy (scripts/time_to_accuracy.py, the experiment scripts' "time to" column): known answers on
# hand-written metrics.jsonl files (reached at the 2nd evaluation, at the boundary, never, across a --resume, a cut-off
# last line), the answers on a real 3-epoch run on 2 ranks against its own eval records, one error line and exit 2 for
# bad arguments (the helper's and each experiment script's --target), the column in lib.sh's codec_table, and the
# column in the tables fashion_lenet_codecs.sh and cifar10_codecs.sh write (tiny runs through a wrapped octet).
set -u
source "$(dirname "$0")/lib.sh"
test_setup "$1" "$2"
tta() { /usr/bin/python3 "$src/scripts/time_to_accuracy.py" "$@"; }
# expect WHAT WANT ARGS...: the helper prints WANT (and exits 0) for ARGS.
expect() {
  local what=$1 want=$2 got
  shift 2
  got=$(tta "$@" 2>"$tmp/err") || { bad "$what: exit $? ($(cat "$tmp/err"))"; return; }
  if [[ $got == "$want" ]]; then echo "ok: $what: $got"; else bad "$what: want '$want', got '$got'"; fi
}
# one_error WHAT CODE CMD...: CMD exits CODE with exactly one line on stderr, nothing on stdout.
one_error() {
  local what=$1 code=$2 rc
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq $code && ! -s $tmp/out && $(wc -l <"$tmp/err") -eq 1 ]]; then
    echo "ok: $what: exit $rc: $(cat "$tmp/err")"
  else
    bad "$what: want exit $code and one error line, got exit $rc, stdout '$(cat "$tmp/out")', stderr '$(cat "$tmp/err")'"
  fi
}

# Hand-written runs whose answers are known.
mkdir "$tmp/known"
cat >"$tmp/known/metrics.jsonl" <<'EOF'
{"event":"train","epoch":1,"step":50,"loss":1.2,"accuracy":0.6,"lr":0.01,"images_per_s":900,"train_seconds":5.5}
{"event":"train","epoch":1,"step":100,"loss":0.9,"accuracy":0.75,"lr":0.01,"images_per_s":900,"train_seconds":10.5}
{"event":"eval","epoch":1,"step":100,"test_loss":0.6,"test_accuracy":0.8,"test_top5":0.99,"train_seconds":10.5}
{"event":"train","epoch":2,"step":150,"loss":0.5,"accuracy":0.85,"lr":0.01,"images_per_s":900,"train_seconds":16}
{"event":"train","epoch":2,"step":200,"loss":0.4,"accuracy":0.88,"lr":0.01,"images_per_s":900,"train_seconds":21.25}
{"event":"eval","epoch":2,"step":200,"test_loss":0.4,"test_accuracy":0.885,"test_top5":0.99,"train_seconds":21.25}
{"event":"train","epoch":3,"step":300,"loss":0.3,"accuracy":0.9,"lr":0.01,"images_per_s":900,"train_seconds":31}
{"event":"eval","epoch":3,"step":300,"test_loss":0.35,"test_accuracy":0.87,"test_top5":0.99,"train_seconds":31}
{"event":"summary","steps":300,"ranks":2,"test_loss":0.35,"test_accuracy":0.87,"train_seconds":31,"images_per_s":900}
EOF
expect "reached at the 2nd evaluation" 21.25 "$tmp/known" 0.88
expect "the same, metrics.jsonl named" 21.25 "$tmp/known/metrics.jsonl" 0.88
expect "accuracy equal to the target (the 1st evaluation)" 10.50 "$tmp/known" 0.8
expect "the first evaluation at or above, not the best (0.87 after 0.885)" 21.25 "$tmp/known" 0.87
expect "never reached" "not reached" "$tmp/known" 0.9
expect "a training record's accuracy is no evaluation" "not reached" "$tmp/known" 0.89
# A run continued with --resume: its records restart train_seconds at 0; the first invocation's 12 s count.
cat >"$tmp/resumed.jsonl" <<'EOF'
{"event":"train","epoch":1,"step":100,"loss":0.9,"accuracy":0.75,"train_seconds":12}
{"event":"eval","epoch":1,"step":100,"test_loss":0.6,"test_accuracy":0.8,"train_seconds":12}
{"event":"train","epoch":2,"step":150,"loss":0.5,"accuracy":0.85,"train_seconds":3}
{"event":"train","epoch":2,"step":200,"loss":0.4,"accuracy":0.88,"train_seconds":8}
{"event":"eval","epoch":2,"step":200,"test_loss":0.4,"test_accuracy":0.9,"train_seconds":8}
EOF
expect "across a --resume" 20.00 "$tmp/resumed.jsonl" 0.85
# Only a summary (a run stopped by run.max_steps inside its first epoch): its final evaluation counts.
echo '{"event":"summary","steps":7,"test_accuracy":0.5,"train_seconds":0.75}' >"$tmp/summary_only.jsonl"
expect "the summary's evaluation" 0.75 "$tmp/summary_only.jsonl" 0.5
# A last line cut off by a full disk is skipped with a warning.
{ head -6 "$tmp/known/metrics.jsonl"; printf '{"event":"eval","epoch":3,"st'; } >"$tmp/cut.jsonl"
expect "a cut-off last line" 21.25 "$tmp/cut.jsonl" 0.88
grep -q "^time_to_accuracy.py: warning: .*cut.jsonl:7: the last line is cut off" "$tmp/err" || bad "no warning for the cut-off line"
# Errors: one line each; exit 2 for arguments, 1 for the file.
one_error "no arguments" 2 tta
one_error "one argument" 2 tta "$tmp/known"
one_error "an unknown flag" 2 tta --target 0.88 "$tmp/known"
one_error "a percentage as target" 2 tta "$tmp/known" 88
one_error "a target that is no number" 2 tta "$tmp/known" high
one_error "a folder without metrics.jsonl" 1 tta "$tmp/nothing" 0.5
head -2 "$tmp/known/metrics.jsonl" >"$tmp/no_eval.jsonl"
one_error "no evaluation record" 1 tta "$tmp/no_eval.jsonl" 0.5
{ echo 'garbage'; cat "$tmp/known/metrics.jsonl"; } >"$tmp/broken.jsonl"
one_error "a broken line inside" 1 tta "$tmp/broken.jsonl" 0.5
# Eval records without train_seconds (an older octet's): the first one named, not "no evaluation record".
sed 's/,"train_seconds":[0-9.]*//' "$tmp/known/metrics.jsonl" >"$tmp/untimed.jsonl"
one_error "eval records without train_seconds" 1 tta "$tmp/untimed.jsonl" 0.5
grep -q "^time_to_accuracy.py: error: .*untimed.jsonl:3: eval record has no train_seconds" "$tmp/err" ||
  bad "eval records without train_seconds: the error does not name line 3: $(cat "$tmp/err")"

# A real run: LeNet on 1280 MNIST images, 3 epochs of 10 steps on 2 ranks, an evaluation (500 images) per epoch.
timeout 300 mpirun -np 2 "$octet" train "$src/configs/mnist/lenet.yaml" --set data.path="$src/datasets/mnist-22k" \
  --set run.out_dir="$tmp" --set run.name=real --set run.threads=1 --set run.epochs=3 --set run.eval_every=1 \
  --set run.log_every=5 --set data.train_limit=1280 --set data.test_limit=500 --set compression.method=dynamic_tree8 \
  >"$tmp/log" 2>&1 || { tail -5 "$tmp/log"; bad "the real run"; }
# Its eval records, "accuracy seconds" a line, read here without the helper.
grep '"event":"eval"' "$tmp/real/metrics.jsonl" |
  sed 's/.*"test_accuracy":\([0-9.e+-]*\).*"train_seconds":\([0-9.e+-]*\).*/\1 \2/' >"$tmp/evals"
if [[ $(wc -l <"$tmp/evals") -ne 3 ]]; then
  bad "the real run: want 3 eval records, got $(wc -l <"$tmp/evals")"
else
  first=$(awk 'NR == 1 { printf "%.2f", $2 }' "$tmp/evals")
  best=$(awk '$1 > b { b = $1 } END { print b }' "$tmp/evals")
  at_best=$(awk -v b="$best" '$1 == b { printf "%.2f", $2; exit }' "$tmp/evals")
  expect "real run: target 0, the 1st evaluation" "$first" "$tmp/real" 0
  expect "real run: its best accuracy $best, first reached" "$at_best" "$tmp/real" "$best"
  awk -v b="$best" 'BEGIN { exit !(b < 1) }' && expect "real run: target 1" "not reached" "$tmp/real" 1
  awk 'NR > 1 && $2 <= p { exit 1 } { p = $2 }' "$tmp/evals" || bad "real run: train_seconds does not grow across evaluations"
  last=$(awk 'END { print $2 }' "$tmp/evals")
  [[ $last == $(grep -o '"train_seconds":[0-9.e+-]*' "$tmp/real/summary.json" | cut -d: -f2) ]] ||
    bad "real run: the last evaluation's train_seconds is not summary.json's"
fi

# lib.sh: the wrapper, and codec_table's column (title from the target; seconds to one decimal or "not reached").
(
  source "$src/scripts/lib.sh"
  cd /
  [[ $(time_to_acc "$tmp/known" 0.88) == 21.25 ]] || echo "FAIL: lib.sh time_to_acc from another folder"
  codec_table "" 5 0.88 "fp32|0.89|2587100|2587100|1|||62.5|4783|21.25" "qsgd2|0.86|200000|2587100|12.9|13|10|50|5000|not reached"
) >"$tmp/table"
grep FAIL "$tmp/table" && fail=1
head -1 "$tmp/table" | grep -q "| images/s | time to 88% (s) |$" || bad "codec_table: no 'time to 88% (s)' column: $(head -1 "$tmp/table")"
grep -q "^| fp32 | 89.00% .* | 21.2 |$" "$tmp/table" || bad "codec_table: fp32's time: $(grep fp32 "$tmp/table")"
grep -q "^| qsgd2 | .* | not reached |$" "$tmp/table" || bad "codec_table: qsgd2's 'not reached': $(grep qsgd2 "$tmp/table")"
[[ $(awk -F'|' '{ print NF }' "$tmp/table" | sort -u | wc -l) -eq 1 ]] || bad "codec_table: rows of different widths"
[[ $fail -eq 0 ]] && echo "ok: codec_table's time column"

# The experiment scripts: --target in the usage text, a bad one refused before anything runs.
for s in fashion_lenet_codecs cifar10_codecs powersgd_ddp; do
  grep -q "^#.*--target" "$src/scripts/experiments/$s.sh" || bad "$s.sh: --target not in its usage text"
  one_error "$s.sh --target 88" 2 bash "$src/scripts/experiments/$s.sh" --target 88
  one_error "$s.sh --target without a value" 2 bash "$src/scripts/experiments/$s.sh" --target
done
# The scripts end to end, in a copy of scripts/ whose build/octet is this octet on 1280 training and 500 test images:
# LeNet on Fashion-MNIST (2 codecs, --target 0: every cell a time, the one the script reported), cifar10_quick on
# random CIFAR-10 batches (its default target 75%: "not reached").
tree=$tmp/tree
mkdir -p "$tree/build" "$tmp/cifar"
cp -r "$src/scripts" "$tree/"
ln -s "$src/configs" "$tree/configs"
printf '#!/bin/sh\nexec "%s" "$@" --set data.train_limit=1280 --set data.test_limit=500\n' "$octet" >"$tree/build/octet"
chmod +x "$tree/build/octet"
if [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  if timeout 300 bash "$tree/scripts/experiments/fashion_lenet_codecs.sh" --ranks 2 --epochs 2 --codecs "fp32 qsgd2" \
    --target 0 --out "$tmp/fashion.md" >/dev/null 2>"$tmp/fashion.err"; then
    grep -q "^| codec | .* | images/s | time to 0% (s) |$" "$tmp/fashion.md" || bad "fashion_lenet_codecs.sh: no time column"
    grep -q "^Time to 0%: rank 0's training seconds" "$tmp/fashion.md" || bad "fashion_lenet_codecs.sh: no caption for it"
    for c in fp32 qsgd2; do
      said=$(sed -n "/^== $c:/{n;s/.*time to 0% (s): //p}" "$tmp/fashion.err")
      cell=$(grep "^| $c |" "$tmp/fashion.md" | awk -F' [|] ' '{ print $NF }' | tr -d ' |')
      [[ $said =~ ^[0-9]+\.[0-9]+$ && $cell == $(awk -v s="$said" 'BEGIN { printf "%.1f", s }') ]] &&
        echo "ok: fashion_lenet_codecs.sh: $c: time to 0% $said s, cell $cell" ||
        bad "fashion_lenet_codecs.sh: $c: reported '$said', table cell '$cell'"
    done
  else
    tail -5 "$tmp/fashion.err"; bad "fashion_lenet_codecs.sh"
  fi
else
  echo "note: no Fashion-MNIST at /usr/share/datasets/fashion-mnist: fashion_lenet_codecs.sh not run"
fi
/usr/bin/python3 -c "
import os, sys
for n in ['data_batch_1', 'data_batch_2', 'data_batch_3', 'data_batch_4', 'data_batch_5', 'test_batch']:
    with open(os.path.join(sys.argv[1], n + '.bin'), 'wb') as f:
        for i in range(300): f.write(bytes([i % 10]) + os.urandom(3072))" "$tmp/cifar"
if timeout 300 bash "$tree/scripts/experiments/cifar10_codecs.sh" --data "$tmp/cifar" --ranks 2 --epochs 2 --codecs fp32 \
  --out "$tmp/cifar.md" >/dev/null 2>"$tmp/cifar.err"; then
  if grep -q "^| codec | .* | images/s | time to 75% (s) |$" "$tmp/cifar.md" && grep -q "^Time to 75%: " "$tmp/cifar.md" &&
    grep -q "^| fp32 | .* | not reached |$" "$tmp/cifar.md"; then
    echo "ok: cifar10_codecs.sh: quick's default target 75%, not reached on random images"
  else
    cat "$tmp/cifar.md"; bad "cifar10_codecs.sh: the time column"
  fi
else
  tail -5 "$tmp/cifar.err"; bad "cifar10_codecs.sh"
fi
[[ $fail -eq 0 ]] && echo "time to accuracy tests passed"
exit $fail
