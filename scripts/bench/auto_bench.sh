#!/usr/bin/env bash
# compression.method auto against every single codec it may choose from, on the test-bed (scripts/netbed.sh) as HOSTS
# hosts x 1 rank with links of each RATE: training images/s (steady state, STEPS steps) of LeNet/Fashion-MNIST and the
# AlexNet-shaped model per codec and for auto (policy POLICY), and auto's images/s over the best single codec's at that
# rate, all measured in the same run. Writes Markdown (OUT) with the plans auto made, and a plot beside it (OUT
# without .md, _plots/auto.png, when python3-matplotlib is there).
# Usage: scripts/bench/auto_bench.sh [--hosts 4] [--rates "100mbit 1gbit none"] [--steps 60] [--policy balanced]
#        [--codecs "fp32 bf16 fp8_e4m3 dynamic_tree8 linear8 qsgd8"] [--out docs/auto_results.md]
# Needs root (network namespaces). Every run is bounded by `timeout`; the bed is taken down on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
hosts=4 rates="100mbit 1gbit none" steps=60 policy=balanced codecs="fp32 bf16 fp8_e4m3 dynamic_tree8 linear8 qsgd8"
out=docs/auto_results.md
source scripts/lib.sh
parse_flags auto_bench.sh "hosts rates steps policy codecs out" "$@"
prepare_run auto-bench
bed=scripts/netbed.sh
trap 'bash $bed down; rm -rf "$work"' EXIT
bash $bed down
bash $bed up "$hosts" none 1 >/dev/null
csv=$work/plot.csv  # model,rate,setting,images/s
{
  echo "# compression.method auto against single codecs on the test-bed"
  echo
  echo "\`scripts/bench/auto_bench.sh --hosts $hosts --rates \"$rates\" --steps $steps --policy $policy --codecs \"$codecs\"\`,"
  echo "$(date -u +%Y-%m-%d), one $(nproc)-core machine ($(lscpu | sed -n 's/^Model name: *//p' | head -1)). $hosts hosts x 1 rank"
  echo "(network namespaces, Open MPI over TCP, tc tbf on each link), one thread per rank. images/s: the steady state"
  echo "of $steps steps (summary.json's images_per_s_steady). auto plans at start-up (link probe, codec speeds on this"
  echo "machine, the predictive model) with \`compression.policy $policy\`; its plan for each run is below the table."
} >"$work/out.md"
# run NAME CONFIG ARGS...: one training run on the bed; prints its steady images/s (0 when it failed).
run() {
  local name=$1 config=$2
  shift 2
  timeout 1800 bash $bed mpirun -np "$hosts" "$PWD/build/octet" train "$PWD/$config" --set run.threads=1 \
    --set run.max_steps="$steps" --set run.epochs=1 --set run.eval_every=0 --set run.name="$name" \
    --set run.out_dir="$work" "$@" >"$work/$name.log" 2>&1 ||
    { echo "training $name failed:" >&2; tail -3 "$work/$name.log" >&2; echo 0; return; }
  field "$work/$name/summary.json" images_per_s_steady
}
plans=""
for rate in $rates; do
  bash $bed rate "$rate"
  {
    echo
    echo "## Links $rate"
    echo
    echo "| model | $(tr ' ' '\n' <<<"$codecs" | paste -sd'|' | sed 's/|/ | /g') | best single | auto | auto / best |"
    echo "|---|$(for _ in $codecs; do printf -- '---|'; done)---|---|---|"
  } >>"$work/out.md"
  for model in "lenet:configs/fashion-mnist/lenet.yaml" "alexnet:configs/bench/alexnet_synthetic.yaml"; do
    m=${model%%:*} row="| $m |" best=0 bestc=""
    for c in $codecs; do
      echo "== $rate $m $c" >&2
      # shellcheck disable=SC2207  # codec_args prints words without spaces inside them
      args=($(codec_args "$c"))
      ips=$(run "$m-$c-$rate" "${model#*:}" "${args[@]}")
      row+=" $(awk -v v="$ips" 'BEGIN { printf "%.0f", v }') |"
      echo "$m,$rate,$c,$ips" >>"$csv"
      if awk -v a="$ips" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$ips bestc=$c; fi
    done
    echo "== $rate $m auto" >&2
    ips=$(run "$m-auto-$rate" "${model#*:}" --set compression.method=auto --set compression.policy="$policy")
    echo "$m,$rate,auto,$ips" >>"$csv"
    row+=" $bestc | $(awk -v v="$ips" 'BEGIN { printf "%.0f", v }') | $(awk -v a="$ips" -v b="$best" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |"
    echo "$row" >>"$work/out.md"
    plans+=$'\n'"### $m, links $rate"$'\n\n```\n'"$(sed -n '/^auto plan/,/^[^ a]/p' "$work/$m-auto-$rate.log" | grep -E '^(auto plan|  )' || true)"$'\n```\n'
  done
done
{
  echo
  echo "## The plans auto made"
  echo "$plans"
  echo "![auto against single codecs]($(basename "${out%.md}")_plots/auto.png)"
} >>"$work/out.md"
cp "$work/out.md" "$out"
plots=${out%.md}_plots
mkdir -p "$plots"
/usr/bin/python3 - "$csv" "$plots/auto.png" <<'PY' || echo "(no plot: python3-matplotlib missing)" >&2
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.reader(open(sys.argv[1])))
models = sorted({r[0] for r in rows})
fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4), squeeze=False)
for ax, m in zip(axes[0], models):
    rates = list(dict.fromkeys(r[1] for r in rows if r[0] == m))
    settings = list(dict.fromkeys(r[2] for r in rows if r[0] == m))
    w = 0.8 / len(settings)
    for k, s in enumerate(settings):
        vals = [next((float(r[3]) for r in rows if r[0] == m and r[1] == rt and r[2] == s), 0) for rt in rates]
        ax.bar([i + k * w for i in range(len(rates))], vals, w, label=s, hatch="//" if s == "auto" else None)
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(rates))], rates)
    ax.set_title(m)
    ax.set_ylabel("images/s")
axes[0][0].legend(fontsize=7)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
PY
echo "wrote $out" >&2
cat "$out"
