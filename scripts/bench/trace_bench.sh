#!/usr/bin/env bash
# What tracing costs: LeNet on MNIST, 2 ranks with overlap and dynamic_tree8, 200 steps, run alternately with tracing
# off and with every step after the first 5 traced (the worst case: run.trace_steps covers the whole run), 3 times
# each; prints the median steady images/s of each and their ratio, measured in this run. Off, a span costs one
# relaxed atomic load, so "off" is the cost of the instrumentation itself. Then `octet bench trace` (ns per span off
# and on, beside an empty loop) times the spans a step records: the bound that training-run noise cannot show.
# Usage: scripts/bench/trace_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run() {  # run NAME [--trace...]
  local name=$1
  shift
  mpirun -np 2 "$build/octet" train configs/mnist/lenet.yaml --set data.path=datasets/mnist-22k --set run.threads=1 \
    --set run.max_steps=200 --set run.log_every=1000 --set parallel.overlap=true --set compression.method=dynamic_tree8 \
    --set run.out_dir="$out" --set run.name="$name" --set run.trace_steps=195 "$@" >"$out/$name.log" 2>&1
  grep -o '"images_per_s_steady":[0-9.e+]*' "$out/$name/summary.json" | cut -d: -f2
}
off=() on=()
for i in 1 2 3; do
  off+=("$(run off$i)")
  on+=("$(run on$i --trace)")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
o=$(median "${off[@]}") t=$(median "${on[@]}")
echo "tracing off: ${off[*]} img/s (median $o)"
echo "tracing on:  ${on[*]} img/s (median $t), trace.json $(du -h "$out/on1/trace.json" | cut -f1) for 195 steps x 2 ranks"
awk -v o="$o" -v t="$t" 'BEGIN { printf "on/off: %.3f (tracing every step costs %.1f%%)\n", t / o, 100 * (1 - t / o) }'
"$build/octet" bench trace | tee "$out/spans.txt"
per_step=$(grep -o '"ph":"X"' "$out/on1/trace.json" | wc -l)
awk -v n="$per_step" -v o="$o" -v f="$out/spans.txt" 'BEGIN {
  while ((getline l < f) > 0) { split(l, a, " "); ns[a[1]] = a[2] }
  spans = n / 195 / 2; step_ns = 1e9 * 128 / o  # 2 ranks x batch 64 per step
  printf "%.0f spans per step and rank; a step takes %.2f ms: recording them costs %.4f%% of it, off %.5f%%\n",
         spans, step_ns / 1e6, 100 * spans * ns["on"] / step_ns, 100 * spans * (ns["off"] > ns["empty"] ? ns["off"] - ns["empty"] : 0) / step_ns }'
