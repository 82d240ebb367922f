#!/usr/bin/env bash
# A trace of an overlapped run on the test-bed: LeNet on Fashion-MNIST, N hosts with rate-limited links,
# parallel.overlap with per-layer buckets, run.trace over 20 steps; prints scripts/trace_summary.py's table (how much
# of each rank's bucket exchanges lay under backward) and keeps trace.json where --keep says.
# Usage: scripts/bench/trace_netbed.sh [--hosts 4] [--rate 1gbit] [--codec none] [--keep DIR] [--local]
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=4 rate=1gbit codec=none keep="" local=0
source scripts/lib.sh
parse_flags trace_netbed.sh "hosts rate codec keep local!" "$@"
prepare_run trace-netbed
launcher "$local" "$hosts" "$rate"
timeout 1800 "${launch[@]}" build/octet train configs/fashion-mnist/lenet.yaml --set run.threads=1 --set run.name=traced \
  --set run.out_dir="$work" --set run.log_every=100000 --set run.max_steps=40 --set compression.method="$codec" \
  --set parallel.overlap=true --set parallel.bucket_mb=0 --trace --set run.trace_start=10 --set run.trace_steps=20 \
  >"$work/log" 2>&1 || { echo "trace_netbed.sh: the run failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
echo "LeNet, Fashion-MNIST, $where, codec $codec, overlap with per-layer buckets, steps 10..29 traced:"
/usr/bin/python3 scripts/trace_summary.py "$work/traced/trace.json"
grep "^done:" "$work/log"
