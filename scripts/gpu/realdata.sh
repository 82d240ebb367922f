#!/usr/bin/env bash
# Does the JPEG loader keep up with the GPU? One net trained twice in one run on the same GPU: from synthetic batches,
# then from a JPEG tree through image_folder (decode, random-resized crop, flip, normalization on decode_threads = the
# machine's cores), with the tree made here by `octet bench jpegs` (colour 500x375 files of about ImageNet's average
# size, so about its decode cost; the tree is read from the page cache). Prints both images/s, their ratio (the issue's
# bar: real >= 90% of synthetic) and the loader's own images/s on as many threads (`octet bench loader`), which say
# whether the loader or the GPU sets the pace.
# Usage: realdata.sh OUT   (in an unpacked octet-gpu bundle; here: scripts/gpu/realdata.sh OUT)
#   MODEL (resnet50), BATCH (256), MODE (bf16), STEPS timed (20), WARMUP (5), LIMIT s a run (120), THREADS (nproc),
#   OCTET_SET extra settings for both runs (KEY=VALUE ...), DETERMINISTIC (false), WIDTH x HEIGHT of the JPEGs
#   (500 x 375); the tree has 1000 classes (the nets' outputs), so 1000 images at least
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu/common.sh
. "$here/common.sh"
case ${1:-} in -h|--help|"") sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; [[ -n ${1:-} ]]; exit $? ;; esac
out=$1
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
model=${MODEL:-resnet50} batch=${BATCH:-256} mode=${MODE:-bf16} steps=${STEPS:-20} warmup=${WARMUP:-5}
limit=${LIMIT:-120} threads=${THREADS:-$(nproc)} deterministic=${DETERMINISTIC:-false}
for v in batch steps warmup limit threads; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "realdata.sh: ${v^^}='${!v}' is not a positive whole number" >&2; exit 2; }
done
[[ -n ${cfg[$model]:-} && $model != lenet ]] ||
  { echo "realdata.sh: unknown MODEL '$model' (known: resnet50 resnet18 alexnet)" >&2; exit 2; }
side=${shape[$model]##*,}
octet=$(find_octet)
[[ -n $octet ]] || { echo "realdata.sh: no octet binary (OCTET, PATH, build-gpu/, build/)" >&2; exit 2; }
device=${DEVICE:-cuda}  # (sim or cpu: a smoke test of this script without a GPU)
extra=()
for kv in ${OCTET_SET:-}; do extra+=(--set "$kv"); done
images=$((batch * (steps + warmup)))
tree=$out/tree
rm -rf "$tree"
folders=${classes[$model]}  # (the config's last layer: a class folder each, one image at least in train/ and val/)
images=$((images < folders ? folders : images))
"$octet" bench jpegs "$tree" --images "$images" --val "$folders" --classes "$folders" --width "${WIDTH:-500}" \
  --height "${HEIGHT:-375}" | tee "$out/realdata.md" || exit 1
run() {  # run NAME DATA_SET...: images_per_s_steady of one training run, or "fail"
  local name=$1
  shift
  timeout -k 10 "$limit" "$octet" train "$root/${cfg[$model]}" "$@" --set data.batch_size="$batch" \
    --set model.precision="$mode" --set parallel.device="$device" --set parallel.deterministic="$deterministic" \
    --set run.out_dir="$out/runs" --set run.name="$name" --set run.epochs=1 --set run.max_steps=$((steps + warmup)) \
    --set run.warmup_steps="$warmup" \
    --set run.eval_every=0 --set run.checkpoint_every=0 --set run.log_every=100000 "${extra[@]}" \
    >"$out/$name.log" 2>&1
  local v
  v=$(num "$out/runs/$name/summary.json" images_per_s_steady)
  [[ -n $v ]] && printf "%.0f\n" "$v" || echo fail
}
synthetic=$(run synthetic --set "data={dataset: synthetic, synthetic_shape: [3,$side,$side], synthetic_classes: $folders, synthetic_train: $images, synthetic_test: 1, batch_size: $batch}")
real=$(run jpeg --set data.path="$tree" --set data.decode_threads="$threads" --set data.image_size="$side")
loader=$("$octet" bench loader "$tree" --threads "$threads" --images "$images" --batch "$batch" --size "$side" |
  grep -o "images_per_s=[0-9]*" | cut -d= -f2)
ratio=$(awk -v a="$real" -v b="$synthetic" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "-" }')
{
  echo ""
  echo "$model batch $batch $mode on $device ($(nvidia-smi -L 2>/dev/null | head -1)), $threads decode threads, $steps steps after $warmup:"
  echo ""
  echo "| data | octet img/s |"
  echo "|---|---:|"
  echo "| synthetic | $synthetic |"
  echo "| JPEG tree (image_folder) | $real |"
  echo "| real / synthetic | $ratio |"
  echo "| the loader alone (bench loader, $threads threads) | ${loader:-fail} |"
} | tee -a "$out/realdata.md"
rm -rf "$tree" "$out/runs"
