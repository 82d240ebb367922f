#!/usr/bin/env bash
# How much communication the overlapped gradient exchange hides: trains the same steps with parallel.overlap false
# and true and compares the communication time each leaves on the step's path (blocking: compress + communicate +
# decompress; overlapped: the wait for the last bucket). Runs on the test-bed (scripts/netbed.sh) with a rate limit,
# or on plain local mpirun with --local. --repeat R runs both paths R times, interleaved, and reports medians.
# Usage: scripts/bench/overlap_bench.sh [--hosts 4] [--rate 1gbit] [--codec none] [--steps 100] [--bucket-mb 1]
#        [--config configs/fashion-mnist/lenet.yaml] [--repeat 1] [--local] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=4 rate=1gbit codec=none steps=100 bucket=1 config=configs/fashion-mnist/lenet.yaml local=0 out="" repeat=1
source scripts/lib.sh
parse_flags overlap_bench.sh "hosts rate codec steps bucket-mb:bucket config repeat local! out" "$@"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "overlap_bench.sh: --repeat must be a positive integer, got '$repeat'" >&2; exit 2; }
prepare_run overlap-bench
launcher "$local" "$hosts" "$rate"
keys="backward_ms images_per_s"
for rep in $(seq "$repeat"); do  # interleaved, so a drift of this machine's speed touches both paths alike
  for ov in false true; do
    timeout 1800 "${launch[@]}" build/octet train "$config" --set run.threads=1 --set run.name="$ov$rep" --set run.out_dir="$work" \
      --set run.log_every=100000 --set run.epochs=1 --set run.max_steps="$steps" --set compression.method="$codec" \
      --set parallel.overlap="$ov" --set parallel.bucket_mb="$bucket" >"$work/$ov.log" 2>&1 ||
      { echo "overlap_bench.sh: run with overlap=$ov failed:" >&2; tail -5 "$work/$ov.log" >&2; exit 1; }
    j=$work/$ov$rep/summary.json
    for k in $keys; do field "$j" "$k" >>"$work/$ov.$k"; done
    # communication work: compress + communicate + decompress (all of it exposed on the blocking path)
    awk -v a="$(field "$j" compress_ms)" -v b="$(field "$j" communicate_ms)" -v c="$(field "$j" decompress_ms)" 'BEGIN { print a + b + c }' >>"$work/$ov.work"
  done
  field "$work/true$rep/summary.json" wait_ms >>"$work/true.exposed"  # overlapped: only the wait is exposed
  awk -v b="$(sed -n "${rep}p" "$work/false.work")" -v o="$(sed -n "${rep}p" "$work/true.exposed")" 'BEGIN { printf "%.1f%%\n", 100 * (1 - o / b) }' >>"$work/hidden"
done
med() { median <"$work/$1"; }
report=$(awk -v bb="$(med false.backward_ms)" -v bw="$(med false.work)" -v be="$(med false.work)" -v bi="$(med false.images_per_s)" \
  -v ob="$(med true.backward_ms)" -v ow="$(med true.work)" -v oe="$(med true.exposed)" -v oi="$(med true.images_per_s)" \
  -v runs="$(paste -sd' ' "$work/hidden")" -v repeat="$repeat" -v where="$where" -v codec="$codec" -v steps="$steps" -v bucket="$bucket" 'BEGIN {
  printf "overlap bench: %s, codec %s, %d steps, bucket_mb %s%s\n", where, codec, steps, bucket, (repeat > 1) ? ", medians of " repeat " interleaved runs" : ""
  printf "%-12s %12s %14s %14s %12s %10s\n", "path", "backward ms", "comm work ms", "exposed ms", "images/s", "hidden"
  printf "%-12s %12.2f %14.2f %14.2f %12.0f %10s\n", "blocking", bb, bw, be, bi, "-"
  printf "%-12s %12.2f %14.2f %14.2f %12.0f %9.1f%%\n", "overlapped", ob, ow, oe, oi, 100 * (1 - oe / be)
  if (repeat > 1) printf "hidden in each run (its own blocking run as the reference): %s\n", runs
  printf "exposed = communication time left on the step path per step (blocking: compress + communicate + decompress;\n"
  printf "overlapped: the wait after backward); hidden = 1 - overlapped exposed / blocking exposed.\n" }')
echo "$report"
if [[ -n $out ]]; then mkdir -p "$(dirname "$out")"; { echo '```'; echo "$report"; echo '```'; } >"$out.tmp" && mv "$out.tmp" "$out"; fi
