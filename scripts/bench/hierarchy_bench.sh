#!/usr/bin/env bash
# The exchange on cluster shapes, on the test-bed (scripts/netbed.sh): (1) 4 hosts x 1 rank, flat, the share of the
# wire ideal a SIZE reduction reaches with and without pipelined chunks; (2) 2 hosts x 2 ranks, flat vs two-level per
# codec (time and the two-level/flat speedup, measured in the same run); (3) training images/s on 2 x 2, flat vs
# two-level, LeNet/Fashion-MNIST and the AlexNet-shaped model; (4) with --epochs E > 0, test accuracy after E epochs of
# LeNet/Fashion-MNIST on 4 ranks laid out as 2 nodes x 2 (plain mpirun, parallel.ranks_per_node 2), flat vs two-level
# per codec. Writes Markdown (OUT) and a plot (OUT without .md, _plots/hierarchy.png, when python3-matplotlib is
# there).
# Usage: scripts/bench/hierarchy_bench.sh [--rates "1gbit 100mbit"] [--size 64M] [--codecs "none dynamic_tree8 qsgd4"]
#        [--iters 3] [--train "dynamic_tree8 qsgd4"] [--steps 60] [--epochs 0] [--accuracy "fp32 dynamic_tree8 qsgd4"]
#        [--out docs/hierarchy_results.md]
# Needs root (network namespaces). Every run is bounded by `timeout`; the bed is taken down on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
rates="1gbit 100mbit" size=64M codecs="none dynamic_tree8 qsgd4" iters=3 train="dynamic_tree8 qsgd4" steps=60
epochs=0 accuracy="fp32 dynamic_tree8 qsgd4 adacomp" out=docs/hierarchy_results.md
source scripts/lib.sh
parse_flags hierarchy_bench.sh "rates size codecs iters train steps epochs accuracy out" "$@"
prepare_run hierarchy-bench
bed=scripts/netbed.sh
finished=0
trap 'bash $bed down; [[ $finished == 1 || ! -f $work/out.md ]] || cp "$work/out.md" "$out.partial"; rm -rf "$work"' EXIT
bash $bed down
md=$work/out.md
csv=$work/plot.csv  # section,rate,codec,setting,value
# bench NP RATE ARGS...: octet bench allreduce on the bed, SIZE only, one row per codec (the dense baseline dropped).
bench() {
  local np=$1 rate=$2
  shift 2
  local plain="" bits=8 c
  for c in $codecs; do
    case $c in qsgd*) plain+="${plain:+,}qsgd"; bits=${c#qsgd}; bits=${bits:-8} ;; *) plain+="${plain:+,}$c" ;; esac
  done
  timeout 1800 bash $bed mpirun -np "$np" build/octet bench allreduce --min "$size" --max "$size" --codecs "$plain" \
    --bits "$bits" --iters "$iters" --link "$rate" "$@" 2>&1 | grep -E "^ +[0-9]+ " | grep -v MPI_Allreduce
}
# col ROWS CODEC N: field N of CODEC's row (time us: 4 counting from the codec; wire: the last).
us_of() { awk -v c="$2" '$2 == c { for (i = 3; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' <<<"$1"; }
wire_of() { awk -v c="$2" '$2 == c { print $NF; exit }' <<<"$1"; }
name_of() { case $1 in qsgd*) echo qsgd ;; *) echo "$1" ;; esac; }
{
  echo "# The exchange on cluster shapes: pipelined chunks and the two-level hierarchy"
  echo
  echo "\`scripts/bench/hierarchy_bench.sh --rates \"$rates\" --size $size --codecs \"$codecs\" --iters $iters --train \"$train\" --steps $steps --epochs $epochs\`,"
  echo "$(date -u +%Y-%m-%d), on one $(nproc)-core machine. Each host is a network namespace (Open MPI over TCP through"
  echo "a bridge, tc tbf both ways on its one link); the ranks of a host share its memory (Open MPI's vader) and its"
  echo "core. wire = the bytes a host must send to the other hosts per call / the link rate, over the measured time."
} >"$md"

# 1. Four hosts, one rank each: pipelined chunks against one piece.
bash $bed up 4 none 1 >/dev/null
for rate in $rates; do
  bash $bed rate "$rate"
  echo "== 4 hosts x 1, $rate" >&2
  whole=$(bench 4 "$rate" --chunk-mb 0)
  piped=$(bench 4 "$rate" --chunk-mb auto)
  {
    echo
    echo "## 4 hosts x 1 rank, $rate: $size, flat, one piece vs pipelined chunks (parallel.chunk_mb auto)"
    echo
    echo "| codec | one piece ms | wire | pipelined ms | wire |"
    echo "|---|---|---|---|---|"
    for c in $codecs; do
      n=$(name_of "$c")
      a=$(us_of "$whole" "$n") b=$(us_of "$piped" "$n")
      echo "| $c | $(awk -v t="$a" 'BEGIN { printf "%.1f", t / 1000 }') | $(wire_of "$whole" "$n") | $(awk -v t="$b" 'BEGIN { printf "%.1f", t / 1000 }') | $(wire_of "$piped" "$n") |"
      echo "pipeline,$rate,$c,one piece,$(wire_of "$whole" "$n" | tr -d %)" >>"$csv"
      echo "pipeline,$rate,$c,pipelined,$(wire_of "$piped" "$n" | tr -d %)" >>"$csv"
    done
  } >>"$md"
done
bash $bed down

# 2-3. Two hosts of two ranks: flat vs two levels, the reduction and training.
bash $bed up 2 none 2 >/dev/null
for rate in $rates; do
  bash $bed rate "$rate"
  echo "== 2 hosts x 2, $rate" >&2
  flat=$(bench 4 "$rate" --hierarchy flat)
  two=$(bench 4 "$rate" --hierarchy two_level)
  {
    echo
    echo "## 2 hosts x 2 ranks, $rate: $size, flat vs two-level (both pipelined)"
    echo
    echo "| codec | flat ms | wire | two-level ms | wire | two-level / flat |"
    echo "|---|---|---|---|---|---|"
    for c in $codecs; do
      n=$(name_of "$c")
      a=$(us_of "$flat" "$n") b=$(us_of "$two" "$n")
      x=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
      echo "| $c | $(awk -v t="$a" 'BEGIN { printf "%.1f", t / 1000 }') | $(wire_of "$flat" "$n") | $(awk -v t="$b" 'BEGIN { printf "%.1f", t / 1000 }') | $(wire_of "$two" "$n") | ${x}x |"
      echo "hierarchy,$rate,$c,speedup,$x" >>"$csv"
    done
    echo
    echo "| training (2 x 2, $steps steps) | codec | flat images/s | two-level images/s | two-level / flat |"
    echo "|---|---|---|---|---|"
  } >>"$md"
  for model in "lenet:configs/fashion-mnist/lenet.yaml" "alexnet:configs/bench/alexnet_synthetic.yaml"; do
    for c in $train; do
      # shellcheck disable=SC2207  # codec_args prints words without spaces inside them
      args=($(codec_args "$c"))
      ips=()
      for h in flat two_level; do
        name="${model%%:*}-$c-$h-$rate"
        timeout 1800 bash $bed mpirun -np 4 "$PWD/build/octet" train "$PWD/${model#*:}" --set run.threads=1 \
          --set run.max_steps="$steps" --set run.epochs=1 --set run.eval_every=0 --set run.name="$name" \
          --set run.out_dir="$work" --set parallel.hierarchy=$h "${args[@]}" >"$work/$name.log" 2>&1 ||
          { echo "training $name failed:" >&2; tail -3 "$work/$name.log" >&2; }
        ips+=("$(field "$work/$name/summary.json" images_per_s_steady 2>/dev/null || echo 0)")
      done
      x=$(awk -v a="${ips[0]:-0}" -v b="${ips[1]:-0}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
      echo "| ${model%%:*} | $c | ${ips[0]} | ${ips[1]} | ${x}x |" >>"$md"
    done
  done
done
bash $bed down

# 4. Accuracy: 4 ranks as 2 nodes x 2 on this machine, flat vs two levels.
if [[ $epochs -gt 0 ]]; then
  {
    echo
    echo "## Accuracy: LeNet/Fashion-MNIST, 4 ranks as 2 nodes x 2 (parallel.ranks_per_node 2), $epochs epochs"
    echo
    echo "| codec | flat test accuracy | two-level test accuracy | difference (points) |"
    echo "|---|---|---|---|"
  } >>"$md"
  for c in $accuracy; do
    # shellcheck disable=SC2207
    args=($(codec_args "$c"))
    acc=()
    for h in flat two_level; do
      name="acc-$c-$h"
      timeout 3600 mpirun -np 4 --oversubscribe build/octet train configs/fashion-mnist/lenet.yaml --set run.threads=1 \
        --set run.epochs="$epochs" --set run.name="$name" --set run.out_dir="$work" --set run.log_every=200 \
        --set parallel.ranks_per_node=2 --set parallel.hierarchy=$h "${args[@]}" >"$work/$name.log" 2>&1 ||
        { echo "training $name failed:" >&2; tail -3 "$work/$name.log" >&2; }
      acc+=("$(field "$work/$name/summary.json" test_accuracy)")
    done
    d=$(awk -v a="${acc[0]}" -v b="${acc[1]}" 'BEGIN { printf "%+.2f", 100 * (b - a) }')
    echo "| $c | ${acc[0]} | ${acc[1]} | $d |" >>"$md"
    echo "   $c: flat ${acc[0]}, two-level ${acc[1]}" >&2
  done
fi

# The plot: wire share with and without pipelining, and the two-level speedups.
plots="${out%.md}_plots"
py=""
for p in /usr/bin/python3 python3; do "$p" -c "import matplotlib" 2>/dev/null && { py=$p; break; }; done
if [[ -n $py ]]; then
  mkdir -p "$plots"
  "$py" - "$csv" "$plots/hierarchy.png" <<'EOF'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.reader(open(sys.argv[1])))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, section, title, ylabel in ((axes[0], "pipeline", "4 hosts x 1: share of the wire ideal", "% of wire"),
                                   (axes[1], "hierarchy", "2 hosts x 2: two-level / flat", "speedup")):
    sel = [r for r in rows if r[0] == section]
    labels = sorted({(r[1], r[2]) for r in sel}, key=lambda k: (k[0], k[1]))
    settings = sorted({r[3] for r in sel})
    w = 0.8 / max(1, len(settings))
    for i, s in enumerate(settings):
        vals = [next((float(r[4]) for r in sel if (r[1], r[2]) == k and r[3] == s), 0.0) for k in labels]
        ax.bar([j + i * w for j in range(len(labels))], vals, w, label=s)
    ax.set_xticks([j + w * (len(settings) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels([f"{c}\n{r}" for r, c in labels], fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if section == "pipeline":
        ax.axhline(90, color="grey", linestyle="--", linewidth=1)
        ax.legend()
    else:
        ax.axhline(1.6, color="grey", linestyle="--", linewidth=1)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
EOF
  echo >>"$md"
  echo "![wire share and two-level speedups]($(basename "$plots")/hierarchy.png)" >>"$md"
else
  echo "(no plot: python3-matplotlib is not installed; scripts/install_deps.sh installs it)" >&2
fi
cp "$md" "$out"
finished=1
echo "wrote $out" >&2
