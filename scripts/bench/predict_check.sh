#!/usr/bin/env bash
# Checks `octet predict` against measurement: per config, the steady images/s (after run.warmup_steps, as the
# profile leaves out its warm-up steps) of one rank alone and of N ranks per codec
# (data parallel, as `octet train` runs), their ratio (the measured speedup), and the speedup `octet predict`
# predicts from its own profile and a link measured by octet's collectives. Runs on the test-bed (scripts/netbed.sh)
# with a rate limit, or on plain local mpirun with --local.
# The bed's links pass a burst of --burst-ms (0: the 64 KB floor) ms of traffic at once after idling
# (NETBED_BURST_MS), in segments of at most --segment-kb (16) KB (NETBED_SEGMENT_KB): a real NIC has no burst above
# its rate, and with the kernel's 64 KB segments a 1 ms burst (125 KB at 1gbit) was the least that kept ~90% of it.
# Every measurement and prediction runs --repeat (3) times, interleaved; the table has the medians. `octet predict`
# profiles as many steps as each training run measures (30 steps would time LeNet's T_alone over only 0.2 s).
# With --mp K it also trains with the FC layers model parallel (K sub-batches, the codec on activations too) and
# compares with the model-parallel prediction.
# --keep DIR keeps every run's log and summary and each `octet predict` run's profile (--save-profile) in DIR, to
# predict again from them (`octet predict --profile FILE --bandwidth ... --latency ... --skew ...`).
# Usage: scripts/bench/predict_check.sh [--hosts 4] [--rate 1gbit] [--codecs "none dynamic_tree8"] [--mp K] [--burst-ms 0]
#        [--segment-kb 16] [--repeat 3] [--configs "configs/fashion-mnist/lenet.yaml:400 configs/bench/alexnet_synthetic.yaml:120"]
#        [--local] [--out FILE] [--keep DIR]   (each config as PATH:STEPS, the steps of each measured training run)
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=4 rate=1gbit codecs="none dynamic_tree8" local=0 out="" keep="" mp=0 burst_ms=0 segment_kb=16 repeat=3
configs="configs/fashion-mnist/lenet.yaml:400 configs/bench/alexnet_synthetic.yaml:120"
source scripts/lib.sh
parse_flags predict_check.sh "hosts rate codecs mp burst-ms segment-kb repeat configs local! out keep" "$@"
prepare_run predict-check
NETBED_BURST_MS=$burst_ms NETBED_SEGMENT_KB=$segment_kb launcher "$local" "$hosts" "$rate"
run() {  # NAME LOG COMMAND...: runs a bounded command, exits with its log's tail on failure
  local name=$1 log=$2; shift 2
  timeout 1800 "$@" >"$log" 2>&1 || { echo "predict_check.sh: $name failed:" >&2; tail -5 "$log" >&2; exit 1; }
}
modes=dp
if [[ $mp -gt 0 ]]; then modes="dp mp"; fi
rows=""
for entry in $configs; do
  config=${entry%%:*} steps=${entry##*:}
  [[ -f $config && $steps =~ ^[0-9]+$ ]] || { echo "predict_check.sh: bad --configs entry '$entry' (want PATH:STEPS)" >&2; exit 2; }
  name=$(basename "$(dirname "$config")")-$(basename "$config" .yaml)
  common=(--set run.threads=1 --set run.out_dir="$work" --set run.log_every=100000 --set run.epochs=1 --set run.max_steps="$steps")
  for rep in $(seq "$repeat"); do  # repeats interleave all runs, so a drift of this machine's speed touches each alike
    run "$name 1 rank" "$work/$name-1-$rep.log" build/octet train "$config" "${common[@]}" --set run.name="$name-1-$rep"
    field "$work/$name-1-$rep/summary.json" images_per_s_steady >>"$work/$name.one"
    run "$name predict" "$work/$name-predict-$rep.log" "${launch[@]}" build/octet predict "$config" --set run.threads=1 \
      --steps "$steps" --bandwidth measure --latency measure --save-profile "$work/$name-profile-$rep.yaml" --codecs "$(tr ' ' ',' <<<"$codecs")" --sub-batches "$((mp > 0 ? mp : 1))"
    grep "^measured link" "$work/$name-predict-$rep.log" | sed 's/^measured link [^:]*: //' >"$work/$name.link"
    for codec in $codecs; do
      for mode in $modes; do
        extra=() col=5
        if [[ $mode == mp ]]; then
          extra=(--set parallel.model_parallel_fc=true --set parallel.sub_batches="$mp" --set compression.activations.method="$codec")
          col=11
        fi
        awk -v c="$codec" -v col="$col" '$1 == c && $2 ~ /allgather/ { sub("x", "", $col); print $col }' "$work/$name-predict-$rep.log" \
          >>"$work/$name-$codec-$mode.pred"
        # shellcheck disable=SC2046
        run "$name $codec $mode" "$work/$name-$codec-$mode-$rep.log" "${launch[@]}" build/octet train "$config" "${common[@]}" \
          --set run.name="$name-$codec-$mode-$rep" $(codec_args "$codec") "${extra[@]}"
        field "$work/$name-$codec-$mode-$rep/summary.json" images_per_s_steady >>"$work/$name-$codec-$mode.many"
      done
    done
  done
  one=$(median <"$work/$name.one")
  for codec in $codecs; do
    for mode in $modes; do
      [[ $(grep -c . "$work/$name-$codec-$mode.pred") == "$repeat" ]] ||
        { echo "predict_check.sh: no prediction for $codec ($mode) in $work/$name-predict-*.log" >&2; exit 1; }
      many=$(median <"$work/$name-$codec-$mode.many") predicted=$(median <"$work/$name-$codec-$mode.pred")
      runs=$(paste "$work/$name-$codec-$mode.many" "$work/$name.one" | awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / $2 }')
      preds=$(paste -sd' ' "$work/$name-$codec-$mode.pred")
      rows+=$(awk -v n="$name" -v c="$codec" -v mode="$mode" -v one="$one" -v many="$many" -v p="$predicted" -v runs="$runs" \
        -v preds="$preds" -v link="$(cat "$work/$name.link")" 'BEGIN {
        m = many / one
        printf "| %s | %s | %s | %.0f | %.0f | %.2fx (%s) | %.2fx (%s) | %+.1f%% | %s |\n", n, c, mode, one, many, m, runs, p, preds,
          100 * (p - m) / m, link }')$'\n'
    done
  done
done
report="predict check: $where; threads 1 per rank; dp = data parallel (octet train's default, no overlap),
mp = FC layers model parallel with $mp sub-batches (the codec on gradients and activations)
measured speedup = median N-rank images/s / median 1-rank images/s over $repeat runs (steady: after each run's run.warmup_steps, 5 by default;
each run's ratio in brackets);
predicted = the median of $repeat \`octet predict\` runs (dp speedup / mp speedup column; each run's in brackets, in the
order of the measured runs); link = the last run's

| config | codec | mode | 1 rank img/s | $hosts ranks img/s | measured (runs) | predicted | error | link measured by predict |
|---|---|---|---|---|---|---|---|---|
$rows"
echo "$report"
if [[ -n $out ]]; then mkdir -p "$(dirname "$out")"; echo "$report" >"$out.tmp" && mv "$out.tmp" "$out"; fi
