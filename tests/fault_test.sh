#!/usr/bin/env bash
# Faults under mpirun: one rank's error takes the whole job down within seconds with its one line (an unwritable
# run.out_dir; a full disk at a mid-run checkpoint, which keeps the previous checkpoint whole), and a stopped peer
# ends in an error naming the collective and the step after parallel.timeout_s instead of a hang; a SIGUSR1 (Slurm's
# stop request) stops both ranks after a step with a checkpoint and exit 75, and --resume auto ends where the run left
# alone does.
set -u
octet=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# A small synthetic model whose checkpoint is ~1 MB (an fc layer of 1600 x 64 with momentum).
cat >"$tmp/c.yaml" <<'EOF'
run: {name: f, epochs: 100000, log_every: 10, threads: 1}
data: {dataset: synthetic, synthetic_train: 256, synthetic_test: 32, synthetic_shape: [1, 40, 40], synthetic_classes: 4, batch_size: 16}
model:
  layers:
    - {type: fc, out_features: 64}
    - {type: relu}
    - {type: fc, out_features: 4}
optimizer: {lr: 0.01, momentum: 0.9}
EOF

# 1. Rank 0 cannot create its run directory; rank 1 is already waiting in the first step's exchange.
start=$SECONDS
timeout 60 mpirun -np 2 "$octet" train "$tmp/c.yaml" --set run.out_dir=/proc/octet-unwritable --set run.epochs=1 >"$tmp/log1" 2>&1
rc=$?
took=$((SECONDS - start))
if [[ $rc -eq 124 ]]; then bad "unwritable run.out_dir: the job hung (killed after 60 s)"
elif [[ $rc -eq 0 ]]; then bad "unwritable run.out_dir: exit 0"
elif [[ $(grep -c "^octet: error: .*/proc/octet-unwritable.*cannot create folder" "$tmp/log1") -ne 1 ]]; then bad "unwritable run.out_dir: no single error line"; cat "$tmp/log1"
else echo "ok: unwritable run.out_dir on rank 0: one error line, job down in ${took} s (exit $rc)"; fi

# 2. The disk fills at a mid-run checkpoint: the first checkpoint fits, the second does not (the old one stays until
#    the new one is complete). Needs a private mount namespace for a small tmpfs.
if unshare -m true 2>/dev/null; then
  "$octet" train "$tmp/c.yaml" --set run.out_dir="$tmp/probe" --set run.max_steps=1 >/dev/null 2>&1
  size=$(stat -c %s "$tmp/probe/f/checkpoint.bin")
  limit=$((size + 64 * 1024))
  mkdir -p "$tmp/small"
  start=$SECONDS
  timeout 120 unshare -m bash -c "mount -t tmpfs -o size=$limit tmpfs '$tmp/small' && \
    mpirun -np 2 '$octet' train '$tmp/c.yaml' --set run.out_dir='$tmp/small' --set run.checkpoint_steps=5 >'$tmp/log2' 2>&1; \
    echo \$? >'$tmp/rc2'; cp '$tmp/small/f/checkpoint.bin' '$tmp/kept.bin' 2>/dev/null; ls -a '$tmp/small/f' >'$tmp/ls2'"
  took=$((SECONDS - start))
  rc=$(cat "$tmp/rc2" 2>/dev/null || echo hung)
  if [[ $rc == hung || $took -ge 110 ]]; then bad "full disk: the job hung"
  elif [[ $rc -eq 0 ]]; then bad "full disk: exit 0"
  elif ! grep -q "^octet: error: .*checkpoint.bin: write failed after .*No space left on device" "$tmp/log2"; then bad "full disk: no error line naming the checkpoint"; cat "$tmp/log2"
  elif grep -q "\.tmp\." "$tmp/ls2"; then bad "full disk: a temporary file was left behind: $(cat "$tmp/ls2")"
  elif [[ $(stat -c %s "$tmp/kept.bin") -ne $size ]]; then bad "full disk: the previous checkpoint is not whole"
  elif ! mpirun -np 2 "$octet" train "$tmp/c.yaml" --set run.out_dir="$tmp/resumed" --set run.max_steps=7 --resume "$tmp/kept.bin" >"$tmp/log3" 2>&1 ||
       ! grep -q "resumed from .* step 5" "$tmp/log3"; then bad "full disk: the kept checkpoint does not resume"; cat "$tmp/log3"
  else echo "ok: disk full at the checkpoint of step 10: one error line, job down in ${took} s (exit $rc), step 5's checkpoint kept and resumable"; fi
else
  echo "skipped: no private mount namespace here (unshare -m), so no full-disk case"
fi

# 3. Rank 1 is stopped (SIGSTOP) mid-training: rank 0 gives up after parallel.timeout_s and names the wait.
timeout 120 mpirun -np 2 "$octet" train "$tmp/c.yaml" --set run.out_dir="$tmp/stop" --set run.name=stopped-$$ \
  --set parallel.timeout_s=3 >"$tmp/log4" 2>&1 &
job=$!
pid=""
for _ in $(seq 1 100); do
  for p in $(pgrep -f "run.name=stopped-$$" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && [[ $(cat /proc/$p/comm) == octet ]]; then pid=$p; fi
  done
  [[ -n $pid ]] && grep -q "^epoch 3/" "$tmp/log4" && break
  sleep 0.2
done
if [[ -z $pid ]]; then
  bad "stopped peer: rank 1 never showed up"; kill "$job" 2>/dev/null; wait "$job"
else
  kill -STOP "$pid"
  start=$SECONDS
  wait "$job"
  rc=$?
  took=$((SECONDS - start))
  kill -CONT "$pid" 2>/dev/null
  if [[ $rc -eq 124 ]]; then bad "stopped peer: the job hung"
  elif [[ $rc -eq 0 ]]; then bad "stopped peer: exit 0"
  elif ! grep -q "^octet: error: rank 0 of 2: .* at step [0-9]* did not complete within 3 s (parallel.timeout_s)" "$tmp/log4"; then bad "stopped peer: no timeout error line"; cat "$tmp/log4"
  else echo "ok: rank 1 stopped: $(grep -o 'MPI_[A-Za-z]* ([^)]*) at step [0-9]*' "$tmp/log4" | head -1), job down ${took} s later (exit $rc)"; fi
fi

# 5. A stop request: SIGUSR1 to mpirun (which passes it to the ranks) mid-run.
pre=(train "$tmp/c.yaml" --set run.epochs=1000 --set run.log_every=8 --set run.eval_every=0)
timeout 120 mpirun -np 2 "$octet" "${pre[@]}" --set run.out_dir="$tmp/whole" >"$tmp/log5a" 2>&1 || bad "the run left alone"
# (no timeout command in front: mpirun itself takes the signal; CTest's timeout bounds a hang)
mpirun -np 2 "$octet" "${pre[@]}" --set run.out_dir="$tmp/pre" >"$tmp/log5b" 2>&1 &
job=$!
for _ in $(seq 400); do grep -q "^epoch 20/" "$tmp/log5b" && break; sleep 0.05; done
kill -USR1 "$job"
wait "$job"
rc=$?
if [[ $rc -ne 75 ]]; then bad "SIGUSR1: exit $rc, not 75"; tail -5 "$tmp/log5b"
elif ! grep -q "^stopped by SIGUSR1 after step [0-9]* (epoch [0-9]* batch [0-9]*): checkpoint written" "$tmp/log5b"; then
  bad "SIGUSR1: no stop line"; tail -5 "$tmp/log5b"
elif ! timeout 120 mpirun -np 2 "$octet" "${pre[@]}" --set run.out_dir="$tmp/pre" --resume auto >"$tmp/log5c" 2>&1 ||
  ! cmp -s "$tmp/pre/f/checkpoint.bin" "$tmp/whole/f/checkpoint.bin"; then
  bad "SIGUSR1: the resumed run ends elsewhere than the run left alone"; tail -3 "$tmp/log5c"
else
  echo "ok: SIGUSR1 $(grep -o '^stopped by SIGUSR1 after step [0-9]*' "$tmp/log5b"), exit 75; --resume auto ends in the run left alone's checkpoint"
fi
exit $fail
