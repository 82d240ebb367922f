#!/usr/bin/env bash
# Experiment: octet's powersgd against PyTorch DDP's PowerSGD hook (scripts/bench/ddp_powersgd.py, Debian's
# python3-torch over gloo), LeNet on Fashion-MNIST, the same net, optimizer, batch per rank and rank count, each run
# launched by the same mpirun: (1) on this machine (loopback), EPOCHS epochs per setting and seed (run.seed; the
# torch script's seed), test accuracy (the mean over the seeds, and each), images/s and training time to a target
# test accuracy (the first seed's); (2) on the test-bed (scripts/netbed.sh) as 2 hosts x 2 ranks with links of each
# RATE, BED_EPOCHS epochs, images/s (the ratio measured in the same run) and time to the target. Settings: fp32 (both
# frameworks' plain allreduce) and each PowerSGD rank. Writes Markdown (OUT).
# Usage: scripts/experiments/powersgd_ddp.sh [--ranks 4] [--epochs 5] [--settings "fp32 1 2 4"] [--seeds "1"]
#        [--start-step 100] [--rates "100mbit"] [--bed-epochs 1] [--out docs/powersgd_ddp.md] [--target 0.88]
# --target: the test accuracy (a fraction) of the "time to" columns: training seconds at the first end-of-epoch test
# evaluation at or above it, evaluation excluded (scripts/time_to_accuracy.py; the torch script evaluates each epoch
# outside its timed part); "not reached" if none.
# The bed part needs root (network namespaces); --rates "" skips it. Every run is bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=4 epochs=5 settings="fp32 1 2 4" seeds=1 start_step=100 rates=100mbit bed_epochs=1 out=docs/powersgd_ddp.md
target=0.88
source scripts/lib.sh
parse_flags powersgd_ddp.sh "ranks epochs settings seeds start-step rates bed-epochs out target" "$@"
check_target powersgd_ddp.sh "$target"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
  { echo "powersgd_ddp.sh: needs Debian's python3-torch (scripts/install_deps.sh --bench)" >&2; exit 2; }
require_fashion
prepare_run powersgd-ddp
bed=scripts/netbed.sh
trap 'bash $bed down >/dev/null 2>&1 || true; rm -rf "$work" "$tmp"' EXIT
psgd_args() { [[ $1 == fp32 ]] && echo "--set compression.method=none" ||
  echo "--set compression.method=powersgd --set compression.rank=$1 --set compression.start_step=$start_step"; }
pq_rank() { [[ $1 == fp32 ]] && echo 0 || echo "$1"; }
# octet_run TAG EPOCHS SETTING SEED LAUNCH...: prints "accuracy images/s time-to-target" (time_to_acc's answer).
octet_run() {
  local tag=$1 ep=$2 s=$3 seed=$4
  shift 4
  # shellcheck disable=SC2046  # psgd_args prints words without spaces inside them
  timeout 3600 "$@" build/octet train configs/fashion-mnist/lenet.yaml --set run.threads=1 --set run.epochs="$ep" \
    --set run.seed="$seed" --set run.name="$tag" --set run.out_dir="$work" --set run.eval_every=1 $(psgd_args "$s") \
    >"$work/$tag.log" 2>&1 || { echo "octet $tag failed:" >&2; tail -5 "$work/$tag.log" >&2; exit 1; }
  local tta
  tta=$(time_to_acc "$work/$tag" "$target")
  echo "$(field "$work/$tag/summary.json" test_accuracy) $(field "$work/$tag/summary.json" images_per_s) $tta"
}
# ddp_run TAG EPOCHS SETTING SEED MASTER IFACE LAUNCH...: prints "accuracy images/s time-to-target".
ddp_run() {
  local tag=$1 ep=$2 s=$3 seed=$4 master=$5 iface=$6
  shift 6
  MASTER_ADDR=$master MASTER_PORT=$((29500 + RANDOM % 400)) GLOO_SOCKET_IFNAME=$iface timeout 3600 "$@" \
    -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME /usr/bin/python3 scripts/bench/ddp_powersgd.py "$fm" "$ep" \
    "$(pq_rank "$s")" "$start_step" 2 "$seed" >"$work/$tag.log" 2>&1 ||
    { echo "ddp $tag failed:" >&2; grep -v '^ ' "$work/$tag.log" | tail -5 >&2; exit 1; }
  local j tta
  j=$(grep '^{' "$work/$tag.log" | tail -1)
  grep '^{"event": "eval"' "$work/$tag.log" >"$work/$tag.jsonl" || true
  tta=$(time_to_acc "$work/$tag.jsonl" "$target")
  echo "$(grep -o '"test_accuracy": [0-9.e-]*' <<<"$j" | cut -d' ' -f2) $(grep -o '"images_per_s": [0-9.e+-]*' <<<"$j" | cut -d' ' -f2) $tta"
}
torch_version=$(/usr/bin/python3 -c "import torch; print(torch.__version__)")
{
  echo "# PowerSGD: octet against PyTorch DDP's PowerSGD hook"
  echo
  echo "\`scripts/experiments/powersgd_ddp.sh --ranks $ranks --epochs $epochs --settings \"$settings\" --start-step $start_step --rates \"$rates\" --bed-epochs $bed_epochs --target $target\`,"
  echo "$(date -u +%Y-%m-%d), one $(nproc)-core machine ($(lscpu | sed -n 's/^Model name: *//p' | head -1)). LeNet (configs/fashion-mnist/lenet.yaml: SGD lr 0.01,"
  echo "momentum 0.9, batch 64 per rank, standardized inputs) on Fashion-MNIST; octet with \`run.threads 1\`, PyTorch $torch_version"
  echo "(Debian's python3-torch, gloo, one thread per rank, one DDP bucket) running the same net: DDP's PowerSGDState(rank,"
  echo "start_powerSGD_iter $start_step, min_compression_rate 2, error feedback, warm start), octet's \`compression.method: powersgd\`"
  echo "with the same rank, start_step and min_compression_rate. Both shard one shuffled order per epoch across the ranks"
  echo "(each its own order). Both launched by the same mpirun. images/s: training only."
  target_caption "$target" "training seconds (octet: rank 0's steps with their data loading; DDP: its epochs from barrier
to barrier; evaluation excluded in both)"
  echo
  echo "## $ranks ranks on this machine (loopback), $epochs epochs, seeds $seeds (accuracy: the mean, then each seed's)"
  echo
  echo "| setting | octet accuracy | DDP accuracy | difference (points) | octet images/s | DDP images/s | octet / DDP | octet $(target_title "$target") | DDP $(target_title "$target") |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >"$work/out.md"
local_launch=(mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1)
for s in $settings; do
  oas="" das="" oi="" di="" ot="" dt=""
  for seed in $seeds; do
    echo "== loopback, $s, seed $seed: octet" >&2
    read -r oa i t < <(octet_run "octet-$s-$seed" "$epochs" "$s" "$seed" "${local_launch[@]}")
    oas+=" $oa" oi=${oi:-$i} ot=${ot:-$(tta_cell "$t")}
    echo "   $oa, $i images/s, $(target_title "$target") $t; DDP" >&2
    read -r da i t < <(ddp_run "ddp-$s-$seed" "$epochs" "$s" "$seed" 127.0.0.1 lo "${local_launch[@]}")
    das+=" $da" di=${di:-$i} dt=${dt:-$(tta_cell "$t")}
    echo "   $da, $i images/s, $(target_title "$target") $t" >&2
  done
  awk -v s="$s" -v oas="$oas" -v das="$das" -v oi="$oi" -v di="$di" -v ot="$ot" -v dt="$dt" 'BEGIN {
    no = split(oas, o, " "); nd = split(das, d, " "); mo = 0; md = 0; lo = ""; ld = ""
    for (k = 1; k <= no; k++) { mo += o[k] / no; lo = lo sprintf("%s%.2f", k > 1 ? ", " : "", 100 * o[k]) }
    for (k = 1; k <= nd; k++) { md += d[k] / nd; ld = ld sprintf("%s%.2f", k > 1 ? ", " : "", 100 * d[k]) }
    printf "| %s | %.2f%% (%s) | %.2f%% (%s) | %+.2f | %.0f | %.0f | %.2fx | %s | %s |\n", s == "fp32" ? "fp32" : "powersgd rank " s,
      100 * mo, lo, 100 * md, ld, 100 * (mo - md), oi, di, oi / di, ot, dt }' >>"$work/out.md"
done
for rate in $rates; do
  bash $bed down >/dev/null
  bash $bed up 2 "$rate" 2 >/dev/null
  {
    echo
    echo "## 2 hosts x 2 ranks on the test-bed, links $rate, $bed_epochs epoch(s)"
    echo
    echo "| setting | octet accuracy | DDP accuracy | octet images/s | DDP images/s | octet / DDP | octet $(target_title "$target") | DDP $(target_title "$target") |"
    echo "|---|---|---|---|---|---|---|---|"
  } >>"$work/out.md"
  for s in $settings; do
    echo "== bed $rate, $s" >&2
    read -r oa oi ot < <(octet_run "bed-octet-$rate-$s" "$bed_epochs" "$s" 1 bash $bed mpirun -np 4)
    read -r da di dt < <(ddp_run "bed-ddp-$rate-$s" "$bed_epochs" "$s" 1 10.213.77.1 eth0 bash $bed mpirun -np 4)
    echo "   octet $oi, DDP $di images/s; $(target_title "$target"): octet $ot, DDP $dt" >&2
    awk -v s="$s" -v oa="$oa" -v da="$da" -v oi="$oi" -v di="$di" -v ot="$(tta_cell "$ot")" -v dt="$(tta_cell "$dt")" 'BEGIN {
      printf "| %s | %.2f%% | %.2f%% | %.0f | %.0f | %.2fx | %s | %s |\n", s == "fp32" ? "fp32" : "powersgd rank " s,
        100 * oa, 100 * da, oi, di, oi / di, ot, dt }' >>"$work/out.md"
  done
  bash $bed down >/dev/null
done
cp "$work/out.md" "$out"
echo "wrote $out" >&2
cat "$out"
