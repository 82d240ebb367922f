#!/usr/bin/env bash
# GPU training speed, octet vs PyTorch on the same GPU in one run: the reproduction nets (ResNet-50 at batch 64 and
# 256, ResNet-18 at 64, Caffe's AlexNet at 128, LeNet at 64) in each precision (model.precision: fp32 with TF32 off on
# both sides, tf32, bf16, fp16), on synthetic data at each net's input size. octet: `octet train CONFIG` with the data
# section swapped for synthetic data, images_per_s_steady and peak_device_mb from the run's summary.json; PyTorch:
# speed_torch.py (torch-only copies of the same nets; batch made once on the GPU). Both time STEPS steps after WARMUP.
# Prints a markdown table (images/s, octet/PyTorch ratio, peak device MiB) and writes it to OUT row by row, so a lease
# that ends early keeps the rows done. Each run is under its own time limit: a failed run reads "fail", one past the
# limit "timeout", and the table goes on. Every run's log is kept in OUT's folder (speed-logs/); failures' tails are
# appended to OUT. About 5 minutes on an H100 with the defaults.
# Usage: speed.sh [OUT]   (in an unpacked octet-gpu bundle: ./speed.sh OUT_DIR; here: scripts/gpu/speed.sh OUT_DIR)
#   OUT       a .md file, or a folder for speed.md and speed-logs/ (default: ./speed.md)
#   STEPS     timed steps a run (default 30)         WARMUP  untimed steps before them (default 5)
#   LIMIT     seconds a run, octet or PyTorch (default 90)
#   MODELS    NAME or NAME:BATCH entries, NAME one of resnet50 resnet18 alexnet lenet (default
#             "resnet50:64 resnet50:256 resnet18:64 alexnet:128 lenet:64"; a bare NAME: those batches; resnet18:256
#             on request, about a minute more)
#   MODES     a subset of "fp32 tf32 bf16 fp16" (default all four)
#   OCTET     the octet binary (default: octet on PATH, else build-gpu/octet or build/octet of the source tree)
#   PYTHON    a python3 with CUDA-enabled torch (default: the first of python3, /opt/torch/.venv/bin/python3 with it)
#   OCTET_SET extra octet settings, space-separated KEY=VALUE (e.g. "model.activations=fp32": a bf16 model's
#             activations in fp32 NCHW, as before channels-last bf16 ones)
#   TORCH=0   no PyTorch column (octet alone, e.g. again with CUDNN_LIB_DIR naming another cuDNN)
#   DETERMINISTIC  octet's parallel.deterministic (default false: cuDNN's fastest algorithms by timing, as PyTorch's
#             cudnn.benchmark; true: the deterministic ones octet takes by default)
set -uo pipefail
extra=()
for kv in ${OCTET_SET:-}; do extra+=(--set "$kv"); done
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu/common.sh
. "$here/common.sh"
case ${1:-} in -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
arg=${1:-./speed.md}
if [[ $arg == *.md ]]; then md=$arg dir=$(dirname "$arg"); else dir=$arg md=$arg/speed.md; fi
logs=$dir/speed-logs
mkdir -p "$dir" "$logs" || exit 1
steps=${STEPS:-30} warmup=${WARMUP:-5} limit=${LIMIT:-90} deterministic=${DETERMINISTIC:-false}
[[ $deterministic =~ ^(true|false)$ ]] || { echo "speed.sh: DETERMINISTIC='$deterministic' is not true or false" >&2; exit 2; }
models=${MODELS:-resnet50:64 resnet50:256 resnet18:64 alexnet:128 lenet:64}
modes=${MODES:-fp32 tf32 bf16 fp16}
torch_device=${TORCH_DEVICE:-cuda}  # (cpu: a smoke test of this script without a GPU)
for v in steps warmup limit; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "speed.sh: ${v^^}='${!v}' is not a whole number" >&2; exit 2; }
done
[[ $steps -ge 1 ]] || { echo "speed.sh: STEPS must be >= 1" >&2; exit 2; }

octet=$(find_octet)
[[ -n $octet ]] || echo "speed.sh: no octet binary (OCTET, PATH, build-gpu/, build/): the octet cells will read fail" >&2
py=""
[[ ${TORCH:-1} == 0 ]] || py=$(find_torch_python "$torch_device")

# Each net's default batches (its config, input shape and classes: common.sh).
declare -A batches=([resnet50]="64 256" [resnet18]="64" [alexnet]="128" [lenet]="64")
runs=()  # NAME:BATCH
for e in ${models//,/ }; do
  m=${e%%:*}
  [[ -n ${cfg[$m]:-} ]] || { echo "speed.sh: unknown model '$m' in MODELS (known: resnet50 resnet18 alexnet lenet)" >&2; exit 2; }
  if [[ $e == *:* ]]; then
    [[ ${e#*:} =~ ^[1-9][0-9]*$ ]] || { echo "speed.sh: '$e' in MODELS: the batch is not a positive number" >&2; exit 2; }
    runs+=("$e")
  else
    for b in ${batches[$m]}; do runs+=("$m:$b"); done
  fi
done
for mode in ${modes//,/ }; do
  [[ $mode =~ ^(fp32|tf32|bf16|fp16)$ ]] || { echo "speed.sh: unknown mode '$mode' in MODES (known: fp32 tf32 bf16 fp16)" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=$tmp/failures.txt
: >"$failures"
t_start=$(date +%s)
emit() { echo "$*" | tee -a "$md"; }
fmt() { awk -v v="$1" -v d="${2:-0}" 'BEGIN { if (v ~ /^[0-9.e+-]+$/) printf "%.*f", d, v; else printf "%s", v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.e+-]+$/ && b ~ /^[0-9.e+-]+$/ && b > 0) printf "%.2f", a / b; else print "-" }'; }
failed() {  # failed RC LOG LABEL: the cell's word, the log's tail kept for the failures section
  local w=fail
  [[ $1 -eq 124 || $1 -eq 137 ]] && w=timeout
  { echo "### $3: $w (rc $1; $(basename "$2"))"; echo '```'; tail -n 15 "$2" 2>/dev/null; echo '```'; } >>"$failures"
  echo "$w"
}

gpu=$(nvidia-smi -L 2>/dev/null | head -1)
tv=$([[ -n $py ]] && "${torch_env[@]}" "$py" -c 'import torch; print(torch.__version__, "(CUDA", torch.version.cuda, "cuDNN",
  str(torch.backends.cudnn.version()) + ")")' 2>/dev/null)
ov=$([[ -n $octet ]] && "$octet" version 2>&1 | head -1)
: >"$md"
emit "# octet vs PyTorch: training speed on one GPU"
emit ""
emit "GPU: ${gpu:-none found (nvidia-smi -L)}; octet: ${ov:-none}$([[ -f $root/VERSION ]] && echo " (bundle $(cat "$root/VERSION"))");" \
  "PyTorch: ${tv:-none with CUDA (no PyTorch column)}; $(date -u +%FT%TZ); $(uname -n)"
emit ""
emit "Synthetic data; images/s over $steps timed steps after $warmup warm-up steps; ratio = octet/PyTorch; peak MiB:" \
  "octet's peak_device_mb (device tensors and workspaces), PyTorch's max_memory_allocated. PyTorch runs with" \
  "cudnn.benchmark, channels_last and autocast for bf16/fp16 (fp16 with a GradScaler); octet with" \
  "parallel.deterministic: $deterministic. Limit $limit s a run."
emit ""
emit "| model | batch | mode | octet img/s | PyTorch img/s | ratio | octet peak MiB | torch peak MiB |"
emit "|---|---:|---|---:|---:|---:|---:|---:|"

for r in "${runs[@]}"; do
  m=${r%%:*} b=${r#*:}
  for mode in ${modes//,/ }; do
    name=$m-b$b-$mode
    # octet: the config's data section replaced whole (an image_folder section's keys, image_size, resize,
    # random_resized_crop..., are unknown keys to a synthetic one); one epoch of exactly WARMUP + STEPS batches.
    o_ips=fail o_mem=-
    olog=$logs/$name.octet.log
    if [[ -n $octet ]]; then
      timeout -k 10 "$limit" "$octet" train "$root/${cfg[$m]}" \
        --set "data={dataset: synthetic, synthetic_shape: [${shape[$m]}], synthetic_classes: ${classes[$m]}, synthetic_train: $((b * (steps + warmup))), synthetic_test: 1, batch_size: $b}" \
        --set model.precision="$mode" --set parallel.device=cuda --set parallel.deterministic="$deterministic" \
        --set run.out_dir="$tmp" --set run.name="$name" \
        --set run.epochs=1 --set run.warmup_steps="$warmup" --set run.eval_every=0 --set run.log_every=100000 \
        --set run.checkpoint_every=0 "${extra[@]}" >"$olog" 2>&1
      rc=$?
      sj=$tmp/$name/summary.json
      v=$(num "$sj" images_per_s_steady)
      if [[ $rc -eq 0 && -n $v ]]; then
        o_ips=$(fmt "$v")
        mb=$(num "$sj" peak_device_mb)
        [[ -z $mb ]] && mb=$(num "$sj" peak_device_bytes) && [[ -n $mb ]] && mb=$(awk -v b="$mb" 'BEGIN { print b / 1048576 }')
        o_mem=$(fmt "${mb:--}")
      else
        [[ $rc -eq 0 ]] && rc=1 && echo "(exit 0 but no images_per_s_steady in $sj)" >>"$olog"
        o_ips=$(failed "$rc" "$olog" "$name octet")
      fi
    fi
    # PyTorch: the same net, batch, mode, steps.
    p_ips=n/a p_mem=-
    if [[ -n $py ]]; then
      pj=$logs/$name.torch.json plog=$logs/$name.torch.log
      targs=()
      [[ $torch_device == cpu ]] && targs=(--device cpu)
      timeout -k 10 "$limit" "${torch_env[@]}" "$py" "$here/speed_torch.py" "$m" "$mode" "$b" "$steps" "$warmup" "${targs[@]}" \
        >"$pj" 2>"$plog"
      rc=$?
      v=$(num "$pj" images_per_s)
      if [[ $rc -eq 0 && -n $v ]]; then
        p_ips=$(fmt "$v")
        p_mem=$(fmt "$(num "$pj" peak_mem_mib)")
        p_mem=${p_mem:--}
      else
        [[ $rc -eq 0 ]] && rc=1
        cat "$pj" >>"$plog" 2>/dev/null
        p_ips=$(failed "$rc" "$plog" "$name PyTorch")
      fi
    fi
    emit "| $m | $b | $mode | $o_ips | $p_ips | $(ratio "$o_ips" "$p_ips") | $o_mem | $p_mem |"
  done
done

emit ""
emit "Total $(( $(date +%s) - t_start )) s. Logs: $logs"
if [[ -s $failures ]]; then
  emit ""
  emit "## Failures (the logs' last lines)"
  emit ""
  tee -a "$md" <"$failures"
fi
exit 0
