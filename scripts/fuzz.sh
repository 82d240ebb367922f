#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and runs each for --seconds of a core, starting from
# seeds of real payloads: all at once, for --seconds x targets / cores of wall time where the targets outnumber the
# cores. Exit 77 (CTest: skipped) when clang or libFuzzer is missing; 1 when a target finds a crash (its input is kept
# under BUILD/artifacts/).
# Usage: scripts/fuzz.sh [--seconds 300] [--build-dir build-fuzz] [--targets codec_decode,checkpoint,idx,jpeg_header,safetensors]
#                       [--build-only]   (build the targets and stop)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=300
build=build-fuzz
targets=codec_decode,checkpoint,idx,jpeg_header,safetensors
build_only=0
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (known: --seconds, --build-dir, --targets, --build-only)" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds expects a positive integer, got '$seconds'" >&2; exit 2; }
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/t.cpp"
if ! command -v clang++ >/dev/null || ! clang++ -fsanitize=fuzzer,address,undefined "$probe/t.cpp" -o "$probe/t" 2>/dev/null; then
  echo "SKIPPED: clang++ with libFuzzer not found (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
cmake -S fuzz -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
rm -f "$build.configure.log"
cmake --build "$build" -j "$(nproc)" >"$probe/build.log" 2>&1 || { tail -40 "$probe/build.log"; exit 1; }
if ((build_only)); then
  echo "ok: the fuzz targets are built in $build"
  exit 0
fi
mkdir -p "$build/artifacts"
# fuzz_one T: one target for the given time; its verdict line goes to $build/T.verdict (0 or 1 in $build/T.status).
fuzz_one() {
  local t=$1 corpus=$build/corpus/$1
  mkdir -p "$corpus"
  if OCTET_FUZZ_SEEDS=$corpus "$build/fuzz_$t" -max_total_time="$wall" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$t-" "$corpus" >"$build/$t.log" 2>&1; then
    echo "ok: fuzz_$t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/$t.log" | grep -o '[0-9]*$') inputs in ${wall} s, no crash" \
         "($(ls "$corpus" | wc -l) in the corpus)" >"$build/$t.verdict"
    echo 0 >"$build/$t.status"
  else
    { echo "FAIL: fuzz_$t found a crash; input in $build/artifacts/:"
      grep -E "ERROR|SUMMARY|runtime error" "$build/$t.log" | head -5; } >"$build/$t.verdict"
    echo 1 >"$build/$t.status"
  fi
}
# Every target at once (a fuzzer is one process), each for its share of the cores; the verdicts in the targets' order.
count=$(wc -w <<<"${targets//,/ }")
cores=$(nproc)
wall=$seconds
((count > cores)) && wall=$(((seconds * count + cores - 1) / cores))
for t in ${targets//,/ }; do fuzz_one "$t" & done
wait
status=0
for t in ${targets//,/ }; do
  cat "$build/$t.verdict"
  [[ $(cat "$build/$t.status" 2>/dev/null) == 0 ]] || status=1
done
exit $status
