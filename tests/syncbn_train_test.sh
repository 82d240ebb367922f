#!/usr/bin/env bash
# Synchronized batchnorm end to end (tests/data/residual_net.yaml with sync: true on every batchnorm, the projection's
# included): 2 ranks keep bit-identical replicas at every step and learn; the run is deterministic (twice the same
# checkpoint) and resumes exactly (30 + 30 steps end in the checkpoint of 60); the simulated device's staged path ends
# in the CPU's very checkpoint; synchronizing changes the result (the statistics are the global batch's); and beside
# parallel.overlap (the exchanges then run on the communication thread, in order with the gradient buckets) the run
# ends in the blocking run's checkpoint, on the CPU and on the simulated device.
# Usage: syncbn_train_test.sh OCTET SRC
set -u
octet=$1 src=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
field() { grep -o "\"$2\":[0-9.e+-]*" "$1" | cut -d: -f2; }
sync=(--set model.layers.1.sync=true --set model.layers.4.sync=true --set model.layers.8.sync=true
  --set model.layers.12.shortcut=conv_bn --set "model.layers.12.bn={sync: true}")
res() {  # res OUT_DIR [args...]: the residual net on 2 ranks, replicas compared every step
  local out=$1
  shift
  timeout 300 mpirun -np 2 "$octet" train "$src/tests/data/residual_net.yaml" --set run.out_dir="$out" \
    --set run.threads=1 --set parallel.checksum_every=1 "$@" >"$out.log" 2>&1 || { tail -5 "$out.log"; return 1; }
}
ck() { echo "$1/res/checkpoint.bin"; }

res "$tmp/a" "${sync[@]}" --set run.max_steps=60 || bad "60 synchronized steps on 2 ranks"
acc=$(field "$tmp/a/res/summary.json" test_accuracy)
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.6) }' &&
  echo "ok: 2 ranks, synchronized batchnorm, replicas bit-identical at every step, test accuracy $acc" ||
  bad "synchronized batchnorm did not learn: test accuracy ${acc:-none}"
res "$tmp/b" "${sync[@]}" --set run.max_steps=60 || bad "the second run"
cmp -s "$(ck "$tmp/a")" "$(ck "$tmp/b")" && echo "ok: deterministic: two runs end in the same checkpoint" ||
  bad "two synchronized runs differ"
res "$tmp/h" "${sync[@]}" --set run.max_steps=30 || bad "30 steps"
res "$tmp/h" "${sync[@]}" --set run.max_steps=60 --resume "$tmp/h/res" || bad "the resumed 30 steps"
cmp -s "$(ck "$tmp/a")" "$(ck "$tmp/h")" && echo "ok: 30 + 30 steps end in the checkpoint of 60 (byte for byte)" ||
  bad "the resumed synchronized run differs from the uninterrupted one"
res "$tmp/s" "${sync[@]}" --set run.max_steps=60 --set parallel.device=sim || bad "the simulated device"
cmp -s "$(ck "$tmp/a")" "$(ck "$tmp/s")" &&
  echo "ok: the simulated device (local sums, host exchange, global coefficients) ends in the CPU's checkpoint" ||
  bad "the simulated device's synchronized run differs from the CPU's"
res "$tmp/u" --set model.layers.12.shortcut=conv_bn --set run.max_steps=60 || bad "the unsynchronized run"
cmp -s "$(ck "$tmp/a")" "$(ck "$tmp/u")" && bad "sync: true changed nothing" ||
  echo "ok: synchronizing changes the result (per-rank statistics otherwise)"
for dev in cpu sim; do
  res "$tmp/o$dev" "${sync[@]}" --set run.max_steps=60 --set parallel.overlap=true --set parallel.bucket_mb=0 \
    --set parallel.device=$dev || bad "synchronized batchnorm with overlap ($dev)"
  cmp -s "$(ck "$tmp/a")" "$(ck "$tmp/o$dev")" &&
    echo "ok: with parallel.overlap ($dev: one bucket a tensor) the run ends in the blocking run's checkpoint" ||
    bad "synchronized batchnorm with overlap ($dev) ends elsewhere than the blocking run"
done
[[ $fail -eq 0 ]] && echo "synchronized batchnorm tests passed"
exit $fail
