#!/usr/bin/env bash
# Where a training step's GPU time goes, octet beside PyTorch on the same GPU in one run: each side trains one net
# (synthetic data, as speed.sh) under a profiler that records only the steps bracketed by the CUDA profiler API (octet's
# run.profile over run.trace_start/trace_steps; speed_torch.py --profile over its timed steps), and kernels.py sums the
# kernels by category (batchnorm, convolution/GEMM, pooling, casts, elementwise, loss, optimizer) into one table, then
# each side's costliest kernels. nsys when found (kernel times as they ran), else ncu (kernels one at a time, caches
# and clocks left alone, also the DRAM bytes each moved, so GB/s a category). About a minute for ResNet-50.
# Usage: profile.sh OUT   (in an unpacked octet-gpu bundle; here: scripts/gpu/profile.sh OUT)
#   MODEL (resnet50), BATCH (256), MODE (bf16), STEPS profiled (2), WARMUP before them (5), LIMIT s a side (240),
#   PROFILER (nsys or ncu: the first found), OCTET_SET extra octet settings (KEY=VALUE ...), DETERMINISTIC (false)
# Writes OUT/kernels.md (the table), each side's CSV and log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu/common.sh
. "$here/common.sh"
case ${1:-} in -h|--help|"") sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; [[ -n ${1:-} ]]; exit $? ;; esac
out=$1
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
model=${MODEL:-resnet50} batch=${BATCH:-256} mode=${MODE:-bf16} steps=${STEPS:-2} warmup=${WARMUP:-5}
limit=${LIMIT:-240} deterministic=${DETERMINISTIC:-false}
for v in batch steps warmup limit; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "profile.sh: ${v^^}='${!v}' is not a positive whole number" >&2; exit 2; }
done
[[ -n ${cfg[$model]:-} ]] || { echo "profile.sh: unknown MODEL '$model' (known: ${!cfg[*]})" >&2; exit 2; }
[[ $mode =~ ^(fp32|tf32|bf16|fp16)$ ]] || { echo "profile.sh: unknown MODE '$mode' (fp32 tf32 bf16 fp16)" >&2; exit 2; }

find_tool() {  # find_tool NAME: on PATH, in the CUDA toolkit, or in an Nsight install
  local c
  for c in "$(command -v "$1" 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/$1" /usr/local/cuda/bin/"$1" \
    /opt/nvidia/nsight-systems/*/bin/"$1" /opt/nvidia/nsight-compute/*/"$1" /usr/local/cuda/nsight-compute*/"$1"; do
    [[ -n $c && -x $c ]] && { echo "$c"; return 0; }
  done
  return 1
}
tool=${PROFILER:-}
if [[ -z $tool ]]; then
  if find_tool nsys >/dev/null; then tool=nsys; elif find_tool ncu >/dev/null; then tool=ncu; fi
fi
[[ $tool =~ ^(nsys|ncu)$ ]] || { echo "profile.sh: no nsys or ncu found (PROFILER='$tool')" >&2; exit 2; }
bin=$(find_tool "$tool") || { echo "profile.sh: $tool not found" >&2; exit 2; }

py=$(find_torch_python)
octet=$(find_octet)
[[ -n $octet ]] || { echo "profile.sh: no octet binary (OCTET, PATH, build-gpu/, build/)" >&2; exit 2; }
extra=()
for kv in ${OCTET_SET:-}; do extra+=(--set "$kv"); done

# profiled LABEL ENV COMMAND...: the command under the profiler (itself under ENV: "env", or "env -u LD_LIBRARY_PATH"
# for PyTorch, whose wheels find their own libraries), its kernels into OUT/LABEL_kern.csv.
profiled() {
  local label=$1 rc envs
  read -r -a envs <<<"$2"
  shift 2
  if [[ $tool == nsys ]]; then
    timeout -k 10 "$limit" "${envs[@]}" "$bin" profile -t cuda --capture-range=cudaProfilerApi --capture-range-end=stop \
      -o "$out/$label" -f true "$@" >"$out/$label.log" 2>&1
    rc=$?
    "$bin" stats -r cuda_gpu_kern_sum -f csv -o "$out/$label" "$out/$label.nsys-rep" >>"$out/$label.log" 2>&1 ||
      "$bin" stats -r gpukernsum -f csv -o "$out/$label" "$out/$label.nsys-rep" >>"$out/$label.log" 2>&1
    mv "$out/$label"_*kern*sum*.csv "$out/${label}_kern.csv" 2>/dev/null
    rm -f "$out/$label.nsys-rep" "$out/$label.sqlite"
  else
    timeout -k 10 "$limit" "${envs[@]}" "$bin" --profile-from-start off --csv --print-units base --cache-control none \
      --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      --log-file "$out/${label}_kern.csv" "$@" >"$out/$label.log" 2>&1
    rc=$?
  fi
  echo "$label: $tool rc=$rc" >>"$out/kernels.md"
}

: >"$out/kernels.md"
sides=()
profiled octet env "$octet" train "$root/${cfg[$model]}" \
  --set "data={dataset: synthetic, synthetic_shape: [${shape[$model]}], synthetic_classes: ${classes[$model]}, synthetic_train: $((batch * (steps + warmup + 1))), synthetic_test: 1, batch_size: $batch}" \
  --set model.precision="$mode" --set parallel.device=cuda --set parallel.deterministic="$deterministic" \
  --set run.out_dir="$out/runs" --set run.epochs=1 --set run.eval_every=0 --set run.checkpoint_every=0 \
  --set run.profile=true --set run.trace_start="$warmup" --set run.trace_steps="$steps" "${extra[@]}"
[[ -s $out/octet_kern.csv ]] && sides+=("octet=$out/octet_kern.csv")
if [[ -n $py ]]; then
  profiled pytorch "env -u LD_LIBRARY_PATH" "$py" "$here/speed_torch.py" "$model" "$mode" "$batch" "$steps" "$warmup" \
    --profile
  [[ -s $out/pytorch_kern.csv ]] && sides+=("pytorch=$out/pytorch_kern.csv")
fi
{
  echo ""
  echo "$model batch $batch $mode, $steps steps after $warmup, $tool; $(nvidia-smi -L 2>/dev/null | head -1)"
  echo ""
  if [[ ${#sides[@]} -gt 0 ]]; then python3 "$here/kernels.py" --steps "$steps" "${sides[@]}" 2>&1
  else echo "no kernel report: see $out/*.log"; fi
} >>"$out/kernels.md"
cat "$out/kernels.md"
