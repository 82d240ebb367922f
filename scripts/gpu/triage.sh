#!/usr/bin/env bash
# A time-boxed look at a GPU in one device call, for short leases: unpacks the bundle (scripts/gpu/bundle.sh), runs the
# correctness checks side by side (the CUDA parity tests, tests/cuda_train_test.sh, compute-sanitizer memcheck over
# the layout and model cases: about 80 s on an H200), then one at a time the GPU codecs against a device copy
# (bench compress), the staged exchange in pipelined pieces against one piece (2 ranks sharing the GPU), profile.sh
# (where a step's GPU time goes, octet beside PyTorch), speed.sh's rows while the budget lasts, realdata.sh (the JPEG
# loader against synthetic batches) and one row on the CUDA toolkit's own cuDNN. Every log lands under OUT as it goes, so a lease that ends early still
# returns what ran; at the end the logs are packed into OUT/logs.tgz (a device call returns few files) beside
# OUT/summary.txt, which is also printed. One such call took 368 s on an H200 (2026-11-28).
# Usage: scripts/gpu/triage.sh BUNDLE.tar.gz OUT
#   BUDGET     seconds for the whole script; the speed rows take what the checks leave (default 500: a device call of
#              timeout_s 560 or more)
#   MODELS, MODES        speed.sh's first table (default resnet50:64, "fp32 tf32 bf16 fp16")
#   MODELS2, MODES2      a second table while the budget lasts (default "resnet50:256 alexnet:128", bf16; MODELS2=""
#                        skips it)
#   CORRECT=0, CODECS=0  skip the checks or the codec figures
#   MEMCHECK_FILTER      the parity cases memcheck runs (default "[layout],[model]")
#   PROFILE=0            skip profile.sh (where a step's GPU time goes, octet beside PyTorch: ResNet-50 bf16 at 256,
#                        or PROFILE_MODEL/PROFILE_BATCH/PROFILE_MODE), run after the codecs, before the speed rows
#   REALDATA=0           skip realdata.sh (ResNet-50 bf16 at 256 from a JPEG tree against synthetic batches, after the
#                        speed rows)
#   CUDNN_COMPARE=0      skip the last row: ResNet-50 bf16 at 256, octet alone, on the CUDA toolkit's own cuDNN (env.sh
#                        gives octet the machine's newest; this says what that is worth)
set -u
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
t0=$(date +%s)
left() { echo $((${BUDGET:-500} - ($(date +%s) - t0))); }
mkdir -p "$out" && out=$(cd "$out" && pwd)
tar xzf "$tarball" -C /tmp && cd /tmp/octet-gpu && . ./env.sh || exit 1
sum=$out/summary.txt
logs=$out/logs
mkdir -p "$logs"
{
  nvidia-smi -L
  nvidia-smi --query-gpu=driver_version,clocks.max.sm --format=csv,noheader
  octet version
  echo "bundle $(cat VERSION), $(nproc) cores"
} >"$sum" 2>&1
cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
timed() {  # timed NAME LIMIT COMMAND...: the command's output in logs/NAME.log, its rc and seconds in logs/NAME.rc
  local name=$1 limit=$2 t
  shift 2
  t=$(date +%s)
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $(($(date +%s) - t))s" >"$logs/$name.rc"
}
if [[ ${CORRECT:-1} == 1 ]]; then
  timed parity 120 octet_cuda_tests -r compact &
  timed train 170 bash tests/cuda_train_test.sh "$PWD/bin/octet" "$PWD" &
  timed memcheck 120 "$cs" --tool memcheck --print-limit 20 --error-exitcode 9 octet_cuda_tests -r compact \
    "${MEMCHECK_FILTER:-[layout],[model]}" &
  wait
  cat "$logs"/{parity,train,memcheck}.rc >>"$sum"
  grep -E "^test cases|^All tests|failed" "$logs/parity.log" | tail -4 >>"$sum"
  grep -E "^(ok|FAIL)" "$logs/train.log" >>"$sum"
  grep -E "ERROR SUMMARY|^test cases|^All tests" "$logs/memcheck.log" >>"$sum"
fi
echo "after the checks: $(($(date +%s) - t0)) s" >>"$sum"
if [[ ${CODECS:-1} == 1 ]]; then
  timed codecs 70 octet bench compress --device cuda --config '' --size 256M --reps 10
  for c in 0 auto; do
    timed "pieces_$c" 40 mpirun -np 2 octet bench allreduce --device cuda --transport mpi --min 64M --max 64M \
      --codecs dynamic_tree8 --chunk-mb "$c" --iters 10
  done
  cat "$logs"/codecs.rc "$logs"/pieces_*.rc >>"$sum"
  grep -E "^[a-z0-9_]+ +[0-9]" "$logs/codecs.log" >>"$sum"
  for c in 0 auto; do grep "dynamic_tree8" "$logs/pieces_$c.log" | sed "s/^/chunk-mb $c: /" >>"$sum"; done
fi
echo "after the codecs: $(($(date +%s) - t0)) s" >>"$sum"
if [[ ${PROFILE:-1} == 1 && $(left) -gt 150 ]]; then
  MODEL=${PROFILE_MODEL:-resnet50} BATCH=${PROFILE_BATCH:-256} MODE=${PROFILE_MODE:-bf16} LIMIT=100 \
    timed profile 220 ./profile.sh "$logs/profile"
  cat "$logs/profile.rc" >>"$sum"
  sed -n '/^| category/,$p' "$logs/profile/kernels.md" >>"$sum" 2>/dev/null
  rm -f "$logs"/profile/*.nsys-rep "$logs"/profile/*.sqlite
fi
echo "after the profile: $(($(date +%s) - t0)) s" >>"$sum"
# What the speed rows leave for the stages after them.
reserve=$(( (${REALDATA:-1} == 1 ? 90 : 0) + (${CUDNN_COMPARE:-1} == 1 ? 40 : 0) ))
speed_left() { echo $(($(left) - reserve)); }
if [[ $(speed_left) -gt 30 ]]; then
  STEPS=20 WARMUP=5 LIMIT=45 MODELS="${MODELS:-resnet50:64}" MODES="${MODES:-fp32 tf32 bf16 fp16}" \
    timeout "$(speed_left)" ./speed.sh "$logs/speed" >/dev/null 2>&1
  models2=${MODELS2-resnet50:256 alexnet:128}
  if [[ -n $models2 && $(speed_left) -gt 30 ]]; then
    STEPS=20 WARMUP=5 LIMIT=45 MODELS="$models2" MODES="${MODES2:-bf16}" timeout "$(speed_left)" ./speed.sh \
      "$logs/speed2" >/dev/null 2>&1
  fi
  grep -h "^|" "$logs/speed/speed.md" "$logs/speed2/speed.md" >>"$sum" 2>/dev/null
fi
if [[ ${REALDATA:-1} == 1 && $(left) -gt 60 ]]; then
  timed realdata $(($(left) - (${CUDNN_COMPARE:-1} == 1 ? 40 : 5))) ./realdata.sh "$logs/realdata"
  cat "$logs/realdata.rc" >>"$sum"
  grep -E "^\| |^octet jpegs" "$logs/realdata/realdata.md" >>"$sum" 2>/dev/null
fi
machine_cudnn=${CUDA_HOME:-/usr/local/cuda}/lib64
if [[ ${CUDNN_COMPARE:-1} == 1 && -e $machine_cudnn/libcudnn.so.9 && $(left) -gt 40 ]]; then
  echo "octet on $machine_cudnn's cuDNN:" >>"$sum"
  CUDNN_LIB_DIR=$machine_cudnn TORCH=0 STEPS=20 WARMUP=5 LIMIT=45 MODELS=resnet50:256 MODES=bf16 \
    timeout "$(left)" ./speed.sh "$logs/speed_machine_cudnn" >/dev/null 2>&1
  grep -h "^| resnet50" "$logs/speed_machine_cudnn/speed.md" >>"$sum" 2>/dev/null
fi
echo "end: $(($(date +%s) - t0)) s" >>"$sum"
cat "$sum"
(cd "$out" && tar czf logs.tgz logs && rm -rf logs)
