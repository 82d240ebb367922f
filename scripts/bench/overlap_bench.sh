#!/usr/bin/env bash
# How much communication the overlapped gradient exchange hides: trains the same steps with parallel.overlap false
# and true and compares the communication time each leaves on the step's path (blocking: compress + communicate +
# decompress; overlapped: the wait for the last bucket). Runs on the test-bed (scripts/netbed.sh) with a rate limit,
# or on plain local mpirun with --local.
# Usage: scripts/bench/overlap_bench.sh [--hosts 4] [--rate 1gbit] [--codec none] [--steps 100] [--bucket-mb 1]
#        [--config configs/fashion-mnist/lenet.yaml] [--local] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=4 rate=1gbit codec=none steps=100 bucket=1 config=configs/fashion-mnist/lenet.yaml local=0 out=""
source scripts/lib.sh
parse_flags overlap_bench.sh "hosts rate codec steps bucket-mb:bucket config local! out" "$@"
prepare_run overlap-bench
launcher "$local" "$hosts" "$rate"
for ov in false true; do
  timeout 1800 "${launch[@]}" build/octet train "$config" --set run.threads=1 --set run.name="$ov" --set run.out_dir="$work" \
    --set run.log_every=100000 --set run.epochs=1 --set run.max_steps="$steps" --set compression.method="$codec" \
    --set parallel.overlap="$ov" --set parallel.bucket_mb="$bucket" >"$work/$ov.log" 2>&1 ||
    { echo "overlap_bench.sh: run with overlap=$ov failed:" >&2; tail -5 "$work/$ov.log" >&2; exit 1; }
done
b=$work/false/summary.json o=$work/true/summary.json
report=$(awk -v bc="$(field $b compress_ms)" -v bm="$(field $b communicate_ms)" -v bd="$(field $b decompress_ms)" \
  -v ow="$(field $o wait_ms)" -v oc="$(field $o compress_ms)" -v om="$(field $o communicate_ms)" -v od="$(field $o decompress_ms)" \
  -v bb="$(field $b backward_ms)" -v ob="$(field $o backward_ms)" -v bi="$(field $b images_per_s)" -v oi="$(field $o images_per_s)" \
  -v where="$where" -v codec="$codec" -v steps="$steps" -v bucket="$bucket" 'BEGIN {
  exposed = bc + bm + bd
  printf "overlap bench: %s, codec %s, %d steps, bucket_mb %s\n", where, codec, steps, bucket
  printf "%-12s %12s %14s %14s %12s %10s\n", "path", "backward ms", "comm work ms", "exposed ms", "images/s", "hidden"
  printf "%-12s %12.2f %14.2f %14.2f %12.0f %10s\n", "blocking", bb, exposed, exposed, bi, "-"
  printf "%-12s %12.2f %14.2f %14.2f %12.0f %9.1f%%\n", "overlapped", ob, oc + om + od, ow, oi, 100 * (1 - ow / exposed)
  printf "exposed = communication time left on the step path per step (blocking: compress + communicate + decompress;\n"
  printf "overlapped: the wait after backward); hidden = 1 - overlapped exposed / blocking exposed.\n" }')
echo "$report"
if [[ -n $out ]]; then mkdir -p "$(dirname "$out")"; { echo '```'; echo "$report"; echo '```'; } >"$out.tmp" && mv "$out.tmp" "$out"; fi
