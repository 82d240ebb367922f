#!/usr/bin/env bash
# Speed benchmark: compression.fuse_small on against off in the same run: ResNet-20 (41 of its 59 tensors under
# min_numel, the 18 others dynamic_tree8) on 2 ranks, trained ROUNDS times fused and apart, alternating; the medians of
# the exchange phase (summary.json's communicate_ms: the host's time in the transfers) and of images_per_s give the
# ratios. HOSTS=2 runs the ranks on a netbed of 2 hosts (scripts/netbed.sh, root: TCP between network namespaces,
# links shaped to RATE) instead of this machine's shared memory.
# Usage: scripts/bench/fuse_small_bench.sh   (env: STEPS 100, ROUNDS 6, BATCH 16, HOSTS 0 (local) or 2, RATE 1gbit)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
[[ -x build/octet ]] || bash scripts/build.sh
steps=${STEPS:-100} rounds=${ROUNDS:-6} batch=${BATCH:-16} hosts=${HOSTS:-0} rate=${RATE:-1gbit}
out=$(mktemp -d)
chmod 777 "$out"  # (the netbed's hosts write into it)
launch=(mpirun -np 2)
if ((hosts > 0)); then
  bash scripts/netbed.sh up "$hosts" "$rate" >/dev/null
  trap 'bash scripts/netbed.sh down >/dev/null; rm -rf "$out"' EXIT
  launch=(bash scripts/netbed.sh mpirun -np 2)
else
  trap 'rm -rf "$out"' EXIT
fi
for r in $(seq "$rounds"); do
  for f in true false; do
    "${launch[@]}" "$PWD/build/octet" train "$PWD/configs/cifar10/resnet20.yaml" --set data.dataset=synthetic \
      --set data.synthetic_shape=[3,32,32] --set data.batch_size="$batch" --set run.max_steps="$steps" \
      --set run.eval_every=0 --set compression.method=dynamic_tree8 --set compression.fuse_small=$f \
      --set run.out_dir="$out" --set run.name="r$r-$f" >"$out/log" 2>&1 || { tail -5 "$out/log"; exit 1; }
    field "$out/r$r-$f/summary.json" communicate_ms >>"$out/comm-$f"
    field "$out/r$r-$f/summary.json" images_per_s >>"$out/ips-$f"
  done
done
ca=$(median <"$out/comm-true") cb=$(median <"$out/comm-false") ia=$(median <"$out/ips-true") ib=$(median <"$out/ips-false")
echo "ResNet-20, 2 ranks$( ((hosts > 0)) && echo ", netbed $hosts hosts at $rate" ), batch $batch, $steps steps, medians of $rounds runs each"
printf '%-10s %16s %10s\n' fuse_small communicate_ms img/s
printf '%-10s %16.2f %10.0f\n' true "$ca" "$ia" false "$cb" "$ib"
awk -v a="$ca" -v b="$cb" -v c="$ia" -v d="$ib" 'BEGIN { printf "fused/apart: communicate %.2fx, images/s %.3fx\n", a / b, c / d }'
