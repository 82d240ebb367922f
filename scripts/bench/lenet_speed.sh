#!/usr/bin/env bash
# Speed benchmark: one epoch of Caffe's LeNet on Fashion-MNIST (batch 64) with octet and with PyTorch
# (Debian's python3-torch, scripts/bench/lenet_torch.py) at 1 and 2 threads, measured in the same run.
# Prints images/s per framework, the octet/PyTorch ratio, and octet's peak resident memory.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install_deps.sh --bench
[[ -x build/octet ]] || bash scripts/build.sh
data=/usr/share/datasets/fashion-mnist
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-8s %-8s %12s %12s %8s %14s\n' threads octet_ips pytorch_ips ratio octet_rss_mb pytorch_rss_mb
for t in 1 2; do
  build/octet train configs/fashion-mnist/lenet.yaml --set run.epochs=1 --set run.threads=$t --set run.out_dir="$out" \
    --set run.name=t$t --set run.log_every=100000 --set run.eval_every=0 >"$out/octet$t.log"
  o_ips=$(grep -o '"images_per_s":[0-9.e+]*' "$out/t$t/summary.json" | cut -d: -f2)
  o_rss=$(grep -o '"peak_rss_mb":[0-9.e+]*' "$out/t$t/summary.json" | cut -d: -f2)
  py=$(OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench/lenet_torch.py "$data" "$t")
  p_ips=$(sed 's/.*"images_per_s": \([0-9.]*\).*/\1/' <<<"$py")
  p_rss=$(sed 's/.*"peak_rss_mb": \([0-9.]*\).*/\1/' <<<"$py")
  ratio=$(awk -v a="$o_ips" -v b="$p_ips" 'BEGIN { printf "%.2f", a / b }')
  printf '%-8s %-8.0f %12.0f %12s %8.1f %14.1f\n' "$t" "$o_ips" "$p_ips" "${ratio}x" "$o_rss" "$p_rss"
done
