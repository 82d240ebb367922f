# Sourced by the CPU speed scripts (resnet20_speed.sh, imagenet_cpu_speed.sh): sets the array `precisions` from
# PRECISIONS (default "fp32 bf16"), fp32 first (vs_fp32 divides by it), bf16 only where the CPU has bf16 instructions
# (a note where it is skipped); exits 2 naming a value that is neither, 0 when nothing is left to run.
for p in ${PRECISIONS:-fp32 bf16}; do
  [[ $p == fp32 || $p == bf16 ]] || { echo "PRECISIONS: $p is not fp32 or bf16" >&2; exit 2; }
done
precisions=()
for p in fp32 bf16; do
  [[ " ${PRECISIONS:-fp32 bf16} " == *" $p "* ]] || continue
  if [[ $p == bf16 ]] && ! grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo; then
    echo "note: skipping bf16 (this CPU has neither AVX512-BF16 nor AMX: no avx512_bf16 or amx_bf16 in /proc/cpuinfo)"
    continue
  fi
  precisions+=("$p")
done
((${#precisions[@]})) || { echo "nothing to run (PRECISIONS=${PRECISIONS:-fp32 bf16})"; exit 0; }
