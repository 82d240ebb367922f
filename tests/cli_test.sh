#!/usr/bin/env bash
# CLI contract: bad flags, configs and resume files give one "octet: error:" line naming the culprit and exit non-zero.
set -u
octet=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out rc
  out=$("$octet" "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 0 ]]; then echo "FAIL: octet $* exited 0"; fail=1; return; fi
  if [[ $(printf '%s\n' "$out" | grep -c .) -ne 1 ]]; then echo "FAIL: octet $* printed more than one error line:"; echo "$out"; fail=1; return; fi
  if ! grep -qF -- "$pattern" <<<"$out"; then echo "FAIL: octet $*: expected '$pattern' in: $out"; fail=1; return; fi
  echo "ok: octet $* -> $out"
}
cfg=$src/configs/fashion-mnist/lenet.yaml
expect_error "unknown command 'trian'" trian
expect_error "unknown flag '--bogus'" train "$cfg" --bogus
expect_error "flag --set needs a value" train "$cfg" --set
expect_error "nope.yaml: config file not found" train "$tmp/nope.yaml"
expect_error "--set optimizer.lr: optimizer.lr: must be positive" train "$cfg" --set optimizer.lr=-1
expect_error "run.epocs: unknown key" train "$cfg" --set run.epocs=1
printf 'run: {name: x}\ndata: {dataset: synthetic}\nmodel: {layers: [{type: fc, out_features: 10}]}\noptimizer: {lr: 0.1, momentun: 0.9}\n' >"$tmp/bad.yaml"
expect_error "$tmp/bad.yaml:4: optimizer.momentun: unknown key" train "$tmp/bad.yaml"
printf 'not a checkpoint' >"$tmp/ckpt.bin"
sed -i 's/momentun/momentum/' "$tmp/bad.yaml"
expect_error "bad magic at offset 0" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --resume "$tmp/ckpt.bin"
expect_error "compression.method: unknown value 'zip' (known: none, fp16, linear8" train "$tmp/bad.yaml" --set compression.method=zip
expect_error "compression.overrides.fc9: unknown key" train "$tmp/bad.yaml" --set compression.overrides.fc9.method=fp16
expect_error "unknown benchmark 'sort'" bench sort
expect_error "octet bench: unknown argument '--sise'" bench compress --sise 4M
expect_error "--bandwidth GB/s (> 0, or 'measure') is required" predict "$cfg" --ranks 4 --latency 10
expect_error "--ranks expects an integer >= 2, got '1'" predict "$cfg" --ranks 1 --bandwidth 1 --latency 10
expect_error "--latency expects a number, got 'fast'" predict "$cfg" --ranks 4 --bandwidth 1 --latency fast
expect_error "measure needs mpirun with at least 2 ranks" predict "$cfg" --ranks 4 --bandwidth measure --latency 1
expect_error "unknown flag '--rank'" predict "$cfg" --rank 4
expect_error "needs a config file or --profile FILE" predict --ranks 4 --bandwidth 1 --latency 1
expect_error "unknown compression method 'zip' (known: none" predict "$cfg" --ranks 4 --bandwidth 1 --latency 1 --codecs none,zip
expect_error "--act-bandwidth expects GB/s > 0" predict "$cfg" --ranks 4 --bandwidth 1 --act-bandwidth 0 --latency 1
expect_error "nope.yaml: profile file not found" predict --profile "$tmp/nope.yaml" --ranks 4 --bandwidth 1 --latency 1
# A good run still works and writes its outputs.
if "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.epochs=1 --set data.synthetic_train=256 \
     --set data.synthetic_test=64 --set data.batch_size=32 >"$tmp/log" 2>&1 &&
   [[ -s $tmp/runs/x/summary.json && -s $tmp/runs/x/config.yaml && -s $tmp/runs/x/checkpoint.bin ]]; then
  echo "ok: a small synthetic run writes summary.json, config.yaml and checkpoint.bin"
else
  echo "FAIL: small synthetic run"; cat "$tmp/log"; fail=1
fi
# Data parallel through the command line: 2 ranks with a codec, both ranks agree (checksum every step).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if mpirun -np 2 --oversubscribe "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --set run.name=mpi --set run.epochs=1 \
     --set data.synthetic_train=512 --set data.synthetic_test=64 --set data.batch_size=32 --set run.threads=1 \
     --set compression.method=dynamic_tree8 --set compression.min_numel=1 --set parallel.checksum_every=1 >"$tmp/mpilog" 2>&1 &&
   grep -q '"ranks":2' "$tmp/runs/mpi/summary.json" && grep -q '"compression_ratio":' "$tmp/runs/mpi/summary.json"; then
  echo "ok: mpirun -np 2 octet train with dynamic_tree8 gradients"
else
  echo "FAIL: mpirun -np 2 octet train"; cat "$tmp/mpilog"; fail=1
fi
# A failing rank takes the job down with one error line per rank and a non-zero exit.
if mpirun -np 2 --oversubscribe "$octet" train "$tmp/bad.yaml" --set run.out_dir="$tmp/runs" --resume "$tmp/ckpt.bin" >"$tmp/mpifail" 2>&1; then
  echo "FAIL: mpirun with a bad checkpoint exited 0"; fail=1
elif grep -q "bad magic at offset 0" "$tmp/mpifail"; then
  echo "ok: mpirun with a bad checkpoint fails with the error line"
else
  echo "FAIL: mpirun with a bad checkpoint: unexpected output"; cat "$tmp/mpifail"; fail=1
fi
# octet predict profiles a config, saves the profile, and predicts the same from the saved profile; under mpirun it
# profiles every rank at once and measures the link with its collectives.
if "$octet" predict "$tmp/bad.yaml" --ranks 4 --bandwidth 0.1 --latency 50 --steps 2 --codecs none,linear8,adacomp \
     --save-profile "$tmp/prof.yaml" >"$tmp/pred1" 2>&1 &&
   "$octet" predict --profile "$tmp/prof.yaml" --ranks 4 --bandwidth 0.1 --latency 50 >"$tmp/pred2" 2>&1 &&
   cmp -s "$tmp/pred1" "$tmp/pred2" && grep -q "^linear8 .*x" "$tmp/pred1" && grep -q "^adacomp .*allgather" "$tmp/pred1"; then
  echo "ok: octet predict from a config and from its saved profile print the same table"
else
  echo "FAIL: octet predict round trip"; cat "$tmp/pred1" "$tmp/pred2"; fail=1
fi
# --act-bandwidth moves model parallelism's activation exchanges only: the data-parallel columns stay, the FC penalty falls.
printf '%s\n' 'batch: 64' 'layers:' '  - {name: conv, kind: conv, forward_ms: 4, backward_ms: 8, params: 20000, out_per_sample: 1000}' \
  '  - {name: fc1, kind: fc, forward_ms: 1, backward_ms: 2, params: 10000, in_per_sample: 1000, out_per_sample: 10}' \
  'codecs:' '  - {name: none, ratio_act: 1}' >"$tmp/mp.yaml"
"$octet" predict --profile "$tmp/mp.yaml" --ranks 4 --bandwidth 0.1 --latency 50 >"$tmp/pred4" 2>&1
"$octet" predict --profile "$tmp/mp.yaml" --ranks 4 --bandwidth 0.1 --act-bandwidth 1 --latency 50 >"$tmp/pred5" 2>&1
if grep -q "link 0.1 GB/s (activation exchanges 1 GB/s)" "$tmp/pred5" && grep -q "link 0.1 GB/s (activation exchanges 0.1 GB/s)" "$tmp/pred4" &&
   [[ $(awk '$1 == "none" { print $4, $5, $8 }' "$tmp/pred4") == $(awk '$1 == "none" { print $4, $5, $8 }' "$tmp/pred5") ]] &&
   [[ $(awk 'FNR == 1 { f++ } $1 == "none" { v[f] = $9 } END { print (v[1] > v[2] && v[2] > 0) }' "$tmp/pred4" "$tmp/pred5") == 1 ]]; then
  echo "ok: octet predict --act-bandwidth lowers only the model-parallel FC penalty"
else
  echo "FAIL: octet predict --act-bandwidth"; cat "$tmp/pred4" "$tmp/pred5"; fail=1
fi
if mpirun -np 2 --oversubscribe "$octet" predict "$tmp/bad.yaml" --bandwidth measure --latency measure --steps 2 --codecs none \
     --set run.threads=1 >"$tmp/pred3" 2>&1 && grep -q "^measured link (2 ranks.*activation exchanges ([1-9][0-9]* values): [0-9.e+-]* GB/s" "$tmp/pred3" &&
   grep -q "profiled with 2 ranks sharing the machine" "$tmp/pred3" && [[ $(grep -c "^none " "$tmp/pred3") == 1 ]]; then
  echo "ok: mpirun -np 2 octet predict measures the link and prints once"
else
  echo "FAIL: mpirun -np 2 octet predict"; cat "$tmp/pred3"; fail=1
fi
exit $fail
