#!/usr/bin/env bash
# Benchmarks on the test-bed (scripts/netbed.sh): for each host count and link rate, `octet bench allreduce` per
# codec beside dense MPI_Allreduce, and LeNet/Fashion-MNIST training images/s per codec (batch 64 per rank), each
# beside the same measurement on an unshaped link ("none") taken in the same run. Writes Markdown.
# Usage: scripts/bench/netbed_bench.sh [--hosts "2 4"] [--rates "100mbit 1gbit 10gbit"] [--sizes 1M:64M]
#        [--codecs "linear8 dynamic_tree8 qsgd adacomp"] [--train "fp32 dynamic_tree8 adacomp"] [--steps 60]
#        [--epochs 0] [--accuracy "LIST"] [--overlap false] [--out docs/netbed_results.md]
#   --epochs E > 0 also trains E full epochs per training cell and reports the final test accuracy (only for the
#   training names in --accuracy "LIST", when given).
#   Training names: fp32 (codec none, scatter_allgather), fp32-mpi (codec none through MPI's allreduce), qsgdN, or a codec.
# Needs root (network namespaces). Every run is bounded by `timeout`; the bed is taken down on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts_list="2 4" rates="100mbit 1gbit 10gbit" sizes=1M:64M codecs="linear8 dynamic_tree8 qsgd adacomp"
train="fp32 dynamic_tree8 adacomp" steps=60 epochs=0 out=docs/netbed_results.md overlap=false accuracy=""
source scripts/lib.sh
parse_flags netbed_bench.sh "hosts:hosts_list rates sizes codecs train steps epochs accuracy overlap out" "$@"
prepare_run netbed-bench
bed=scripts/netbed.sh
# On any failure the rows measured so far are kept in $out.partial.
finished=0
trap 'bash $bed down; [[ $finished == 1 || ! -f $work/out.md ]] || cp "$work/out.md" "$out.partial"; rm -rf "$work"' EXIT
bash $bed down
tmp_out=$work/out.md
{
  echo "# Compression on a rate-limited test-bed: $hosts_list hosts, $rates, overlap $overlap"  # (a title per run)
  echo
  echo "\`scripts/bench/netbed_bench.sh --hosts \"$hosts_list\" --rates \"$rates\" --train \"$train\" --steps $steps --epochs $epochs${accuracy:+ --accuracy \"$accuracy\"} --overlap $overlap\`, $(date -u +%Y-%m-%d),"
  echo "on one $(nproc)-core machine: each host is a network namespace with one rank (1 thread), Open MPI over TCP"
  echo "through a bridge, tc tbf on both directions of every link; 'none' = the same path unshaped. No added latency"
  echo "(the kernel has no netem). All hosts share the machine's $(nproc) cores, so compute is slower than on real nodes."
} >"$tmp_out"
for H in $hosts_list; do
  bash $bed up "$H" none >/dev/null
  for rate in none $rates; do
    bash $bed rate "$rate"
    echo "== $H hosts, $rate" >&2
    {
      echo
      echo "## $H hosts, links $rate"
      echo
      echo '```'
      timeout 1200 bash $bed mpirun -np "$H" build/octet bench allreduce --min "${sizes%%:*}" --max "${sizes##*:}" \
        --codecs "$(echo $codecs | tr ' ' ',')" 2>&1 | grep -v "^\[" || echo "(allreduce bench failed or timed out)"
      echo '```'
      echo
      echo "| training codec | images/s | vs fp32 same link | vs fp32 unshaped | kB sent/step/rank |$([[ $epochs -gt 0 ]] && echo " test accuracy after $epochs epochs |")"
      echo "|---|---|---|---|---|$([[ $epochs -gt 0 ]] && echo "---|")"
    } >>"$tmp_out"
    for c in $train; do
      run=$work/$H-$rate-$c
      # shellcheck disable=SC2207  # codec_args prints words without spaces inside them
      base=(build/octet train configs/fashion-mnist/lenet.yaml --set run.threads=1 --set run.name=r --set run.out_dir="$run"
        --set run.log_every=100000 --set data.batch_size=64 --set parallel.overlap="$overlap" $(codec_args "$c"))
      timeout 1200 bash $bed mpirun -np "$H" "${base[@]}" --set run.epochs=1 --set run.max_steps="$steps" >"$run.log" 2>&1 ||
        { echo "training $c on $H hosts at $rate failed:" >&2; tail -3 "$run.log" >&2; continue; }
      ips=$(field "$run/r/summary.json" images_per_s)
      sent=$(field "$run/r/summary.json" bytes_sent_per_step)
      acc=""
      if [[ $epochs -gt 0 ]] && [[ -z $accuracy || " $accuracy " == *" $c "* ]]; then
        rm -rf "$run"
        timeout 3600 bash $bed mpirun -np "$H" "${base[@]}" --set run.epochs="$epochs" >"$run.full.log" 2>&1 &&
          acc=$(field "$run/r/summary.json" test_accuracy) || acc="failed"
      fi
      echo "$H $rate $c $ips $sent $acc" >>"$work/train.txt"
      fp32_same=$(awk -v h="$H" -v r="$rate" '$1==h && $2==r && $3=="fp32" {print $4}' "$work/train.txt")
      fp32_none=$(awk -v h="$H" '$1==h && $2=="none" && $3=="fp32" {print $4}' "$work/train.txt")
      awk -v c="$c" -v ips="$ips" -v same="${fp32_same:-0}" -v none="${fp32_none:-0}" -v sent="$sent" -v acc="$acc" -v ep="$epochs" 'BEGIN {
        printf "| %s | %.0f | %s | %s | %.1f |", c, ips, (same > 0 ? sprintf("%.2fx", ips / same) : "-"),
               (none > 0 ? sprintf("%.2fx", ips / none) : "-"), sent / 1000
        if (ep > 0) printf " %s |", ((acc == "failed" || acc == "") ? acc : sprintf("%.2f%%", 100 * acc))
        printf "\n" }' >>"$tmp_out"
    done
  done
  bash $bed down
done
mkdir -p "$(dirname "$out")"
cp "$tmp_out" "$out.tmp" && mv "$out.tmp" "$out" && rm -f "$out.partial"
finished=1
echo "wrote $out" >&2
cat "$out"
