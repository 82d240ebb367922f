#!/usr/bin/env bash
# Runs at their edges, as the 2026-11-26 reliability probe tried them (its defect numbers in brackets): a run stopped
# before its first checkpoint restarts with --resume auto [D1]; two runs on one run directory, one refused naming the
# holder [D2]; a stop signal during start-up exits 75 [D7]; SIGTERM to mpirun, and through requeue.sh [D10]; auto plans only what is exchanged [D8] and a plan.yaml that
# is not the checkpoint's is refused [D18]; errors every rank meets are one line from rank 0 [D14]; a closed stdout
# does not kill the run [D23]; --resume "" is refused and requeue.sh passes no empty value [D24]; a changed powersgd
# rank on resume drops the residuals, saying so [D11]; an auto run resumes on another rank count [D12]; sync
# batchnorm's batch check counts every rank [D9]; overrides keep min_numel [D6]; octet model on synthetic data [D15];
# auto's keys without auto [D16]; known-key lists [D20]; the first step's non-finite hint [D19]; predict --plan with
# nodes [D25].
set -u
source "$(dirname "$0")/lib.sh"
test_setup "$1" "$2"
ok() { echo "ok: $*"; }

cat >"$tmp/c.yaml" <<'EOF'
run: {name: r, epochs: 2, log_every: 2, threads: 1}
data: {dataset: synthetic, synthetic_train: 512, synthetic_test: 64, synthetic_shape: [1, 12, 12], synthetic_classes: 4, batch_size: 16}
model:
  layers:
    - {type: conv, name: conv1, out_channels: 8, kernel: 3}
    - {type: relu}
    - {type: fc, name: fc1, out_features: 700}
    - {type: relu}
    - {type: fc, name: fc2, out_features: 4}
optimizer: {lr: 0.05, momentum: 0.9}
EOF
c=(train "$tmp/c.yaml" --set run.out_dir="$tmp/runs")

# [D1] A non-finite loss before the first checkpoint leaves metrics and no checkpoint: --resume auto starts afresh.
"$octet" "${c[@]}" --set run.name=nan --set optimizer.lr=1e9 >"$tmp/nan1" 2>&1
if [[ -s $tmp/runs/nan/metrics.jsonl && ! -e $tmp/runs/nan/checkpoint.bin ]] && grep -q "non-finite" "$tmp/nan1"; then
  "$octet" "${c[@]}" --set run.name=nan >"$tmp/nan2" 2>&1
  rc_plain=$?
  "$octet" "${c[@]}" --set run.name=nan --set run.max_steps=6 --resume auto >"$tmp/nan3" 2>&1
  rc_auto=$?
  if [[ $rc_plain -ne 0 ]] && grep -q "stopped before its first checkpoint.*--resume auto or --overwrite starts it afresh" "$tmp/nan2" &&
     [[ $rc_auto -eq 0 && -s $tmp/runs/nan/checkpoint.bin ]] && grep -q "starts it afresh" "$tmp/nan3" &&
     ! grep -q '"step":2,.*"loss":[0-9.]*e+' "$tmp/runs/nan/metrics.jsonl"; then
    ok "a run that stopped at a non-finite loss before its first checkpoint: refused with the way out; --resume auto starts it afresh"
  else bad "NaN stop then --resume auto (plain rc $rc_plain, auto rc $rc_auto)"; tail -2 "$tmp/nan2" "$tmp/nan3"; fi
else bad "the NaN run did not stop before its first checkpoint"; tail -3 "$tmp/nan1"; fi

# [D2] Two runs started together on one run.name: one trains, the other is refused naming the lock's holder.
"$octet" "${c[@]}" --set run.name=two >"$tmp/two1" 2>&1 &
p1=$!
"$octet" "${c[@]}" --set run.name=two >"$tmp/two2" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
refused=$(grep -l "runs/two is in use by another run (run.lock: pid [0-9]* host .* since " "$tmp/two1" "$tmp/two2" | wc -l)
if [[ $((r1 + r2)) -ne 0 && ($r1 -eq 0 || $r2 -eq 0) && $refused -eq 1 ]] &&
   python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$tmp/runs/two/metrics.jsonl" &&
   [[ ! -e $tmp/runs/two/run.lock ]]; then
  ok "two runs on one run directory: one trained (whole metrics.jsonl), the other refused naming the holder"
else bad "two runs at once: exits $r1 $r2, $refused refusals"; tail -1 "$tmp/two1" "$tmp/two2"; fi

# [D7] A stop signal while the ranks start up: exit 75, said as arriving before the run began, nothing written.
for delay in 0.15 0.3 0.6; do
  mpirun -np 2 "$octet" "${c[@]}" --set run.name="early$delay" --set run.epochs=1000 >"$tmp/early" 2>&1 &
  pid=$!
  sleep "$delay"
  kill -USR1 $pid
  wait $pid
  rc=$?
  if [[ $rc -eq 75 ]] && grep -q "^stopped by SIGUSR1 \(during start-up, before step 1: nothing trained or written\|after step\)" "$tmp/early"; then
    ok "SIGUSR1 to mpirun ${delay} s after its start: exit 75: $(grep -m1 '^stopped by' "$tmp/early" | cut -c1-70)"
  else bad "SIGUSR1 ${delay} s into start-up: exit $rc"; tail -3 "$tmp/early"; fi
done

# [D8, D18] auto with model-parallel FC plans only the exchanged layers; a plan.yaml edited behind the checkpoint's
# back is refused on resume.
mpirun -np 2 "$octet" "${c[@]}" --set run.name=mp --set run.max_steps=4 --set compression.method=auto \
  --set parallel.model_parallel_fc=true >"$tmp/mp" 2>&1
if [[ $? -eq 0 ]] && grep -q "conv1:" "$tmp/runs/mp/plan.yaml" && ! grep -q "fc1:" "$tmp/runs/mp/plan.yaml"; then
  ok "auto with model_parallel_fc plans conv1 only (fc1 and fc2 are never exchanged)"
else bad "auto with model_parallel_fc"; cat "$tmp/runs/mp/plan.yaml"; tail -3 "$tmp/mp"; fi
mpirun -np 2 "$octet" "${c[@]}" --set run.name=pl --set run.max_steps=4 --set compression.method=auto >"$tmp/pl" 2>&1
python3 - "$tmp/runs/pl/plan.yaml" <<'PY'  # fc1 takes another candidate of the balanced policy
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"fc1: \{method: ([a-z0-9_]+)", t)
open(sys.argv[1], "w").write(t.replace(m.group(0), "fc1: {method: " + ("bf16" if m.group(1) == "fp16" else "fp16")))
PY
mpirun -np 2 "$octet" "${c[@]}" --set run.name=pl --set run.max_steps=8 --set compression.method=auto \
  --resume auto >"$tmp/pl2" 2>&1
rc=$?
if [[ $rc -ne 0 && $(grep -c "^octet: error" "$tmp/pl2") -eq 1 ]] &&
   grep -q "plan.yaml: none of its plans is the one the checkpoint beside it was written under (that one chose " "$tmp/pl2"; then
  ok "a plan.yaml that is not the checkpoint's: one error line naming the checkpoint's choices"
else bad "foreign plan.yaml on resume: exit $rc"; grep -i "error\|plan" "$tmp/pl2" | head -5; fi

# [D12] An auto run's checkpoint at an epoch's end resumes on another rank count with a new plan.
mpirun -np 4 "$octet" "${c[@]}" --set run.name=rk --set run.epochs=1 --set compression.method=auto >"$tmp/rk" 2>&1
mpirun -np 2 "$octet" "${c[@]}" --set run.name=rk --set run.epochs=2 --set compression.method=auto --resume auto >"$tmp/rk2" 2>&1
if [[ $? -eq 0 ]] && grep -q "was planned for 4 ranks, this run has 2: a new plan takes over" "$tmp/rk2"; then
  ok "an auto checkpoint of 4 ranks resumes on 2 with a new plan, saying so"
else bad "auto resume on another rank count"; grep "error\|auto:" "$tmp/rk2" | head -3; fi

# [D14] An error every rank meets (two_level on one node) is one line, from rank 0.
mpirun -np 4 "$octet" "${c[@]}" --set run.name=h --set parallel.hierarchy=two_level >"$tmp/h" 2>&1
lines=$(grep -c "^octet: error" "$tmp/h")
if [[ $lines -eq 1 ]] && grep -q "^octet: error: .*two_level needs more than one node" "$tmp/h"; then
  ok "an error all 4 ranks meet: one line ($(grep '^octet: error' "$tmp/h" | cut -c1-60)...)"
else bad "shared error: $lines lines"; grep "^octet: error" "$tmp/h"; fi

# [D23] stdout closed by the reader: the run goes on to its end (exit 0), with one warning on stderr.
set -o pipefail
"$octet" "${c[@]}" --set run.name=pipe --set run.log_every=1 2>"$tmp/pipe.err" | head -3 >/dev/null
rc=$?
set +o pipefail
if [[ $rc -eq 0 && -s $tmp/runs/pipe/summary.json ]] && grep -q "standard output was closed" "$tmp/pipe.err"; then
  ok "stdout closed after 3 lines: the run finished (summary.json), one warning"
else bad "closed stdout: exit $rc"; cat "$tmp/pipe.err"; fi

# [D24] --resume "" is an error; requeue.sh's octet_args passes a dangling --resume as it is.
"$octet" "${c[@]}" --set run.name=e --resume "" >"$tmp/empty" 2>&1 && bad '--resume "" was accepted'
grep -q -- "--resume: empty value" "$tmp/empty" && ok '--resume "": one error line' || { bad '--resume ""'; cat "$tmp/empty"; }
args=$(bash -c 'source "$1"; octet_args a --resume; printf "[%s]" "${OCTET_ARGS[@]}"' _ "$src/scripts/slurm/requeue.sh")
[[ $args == "[a][--resume]" ]] && ok "requeue.sh: a dangling --resume stays dangling ($args)" || bad "octet_args: $args"

# [D10] SIGTERM to mpirun: the ranks checkpoint but mpirun exits 1 (Open MPI's own status; docs/running.md); through
# requeue.sh's run_requeueable the same SIGTERM reaches mpirun as SIGUSR1 and the status is 75.
# (Quiet runs: once mpirun is terminating it stops reading the ranks' output, and a rank that fills the pipe blocks.)
quiet=(--set run.epochs=100 --set data.synthetic_train=40000 --set run.log_every=100000 --set run.eval_every=0)
mpirun --mca odls_base_sigkill_timeout 5 -np 2 "$octet" "${c[@]}" --set run.name=term "${quiet[@]}" >"$tmp/term" 2>&1 &
pid=$!
sleep 2.5
kill -TERM $pid
wait $pid
rc=$?
if [[ $rc -eq 1 ]] && grep -q "^stopped by SIGTERM after step" "$tmp/term" && [[ -s $tmp/runs/term/checkpoint.bin ]]; then
  ok "SIGTERM to mpirun: every rank checkpointed, mpirun exits 1 as docs/running.md says"
else bad "SIGTERM to mpirun: exit $rc"; tail -3 "$tmp/term"; fi
bash -c 'source "$1"; shift; run_requeueable "$@"' _ "$src/scripts/slurm/requeue.sh" mpirun -np 2 "$octet" "${c[@]}" \
  --set run.name=rq "${quiet[@]}" >"$tmp/rq" 2>&1 &
pid=$!
sleep 2.5
kill -TERM $pid
wait $pid
rc=$?
if [[ $rc -eq 75 ]] && grep -q "^stopped by SIGUSR1 after step" "$tmp/rq" && ! grep -q "requeueing" "$tmp/rq"; then
  ok "SIGTERM to requeue.sh's run_requeueable: SIGUSR1 to mpirun, exit 75 (no requeue outside Slurm)"
else bad "run_requeueable under SIGTERM: exit $rc"; tail -3 "$tmp/rq"; fi

# [D11] powersgd resumed with another rank: its state does not fit, is dropped and said so.
psgd=(--set compression.method=powersgd --set compression.start_step=2)
mpirun -np 2 "$octet" "${c[@]}" --set run.name=ps --set run.max_steps=6 "${psgd[@]}" --set compression.rank=2 >"$tmp/ps" 2>&1
mpirun -np 2 "$octet" "${c[@]}" --set run.name=ps --set run.max_steps=10 "${psgd[@]}" --set compression.rank=4 \
  --resume auto >"$tmp/ps2" 2>&1
if [[ $? -eq 0 ]] && grep -q "error-feedback state does not fit this run's compression (.*): it is dropped" "$tmp/ps2"; then
  ok "powersgd rank 2 -> 4 on resume: state dropped, saying so"
else bad "powersgd rank change on resume"; grep "error\|resume" "$tmp/ps2" | head -3; fi

# [D9] Synchronized batchnorm after an fc layer at batch 1 on 2 ranks normalizes over 2 values: accepted.
mpirun -np 2 "$octet" "${c[@]}" --set run.name=bn --set run.max_steps=2 --set data.batch_size=1 \
  --set parallel.sync_batchnorm=true \
  --set 'model.layers=[{type: fc, name: f1, out_features: 8}, {type: batchnorm, name: bn1}, {type: fc, name: f2, out_features: 4}]' \
  >"$tmp/bn" 2>&1 && ok "sync batchnorm, batch 1 x 2 ranks: trains" || { bad "sync batchnorm at batch 1 x 2 ranks"; grep error "$tmp/bn"; }

# [D6] An override keeps min_numel: fc1's bias (700 values) travels as fp32 under a topk override.
mpirun -np 2 "$octet" "${c[@]}" --set run.name=ov --set run.max_steps=2 \
  --set "compression.overrides={fc1: {method: topk}}" >"$tmp/ov" 2>&1
if grep -q "fc1.weight .*topk" "$tmp/ov" && grep -E "fc1.bias " "$tmp/ov" | grep -q "fp32\|none"; then
  ok "overrides keep min_numel: $(grep -E 'fc1.bias ' "$tmp/ov" | tr -s ' ' | cut -c1-70)"
else bad "override and min_numel"; grep "fc1" "$tmp/ov"; fi

# [D15, D16, D20, D19] Small things said right.
"$octet" model "$src/configs/bench/alexnet_synthetic.yaml" >"$tmp/m" 2>&1 && grep -q "total parameters" "$tmp/m" &&
  ok "octet model on a synthetic config" || { bad "octet model synthetic"; tail -2 "$tmp/m"; }
"$octet" "${c[@]}" --set compression.policy=aggressive >"$tmp/p" 2>&1 && bad "policy without auto accepted"
grep -q "compression.policy: belongs to compression.method auto; method is none" "$tmp/p" &&
  ok "compression.policy without auto: refused" || { bad "policy without auto"; cat "$tmp/p"; }
"$octet" "${c[@]}" --set model.layers.0.ceil_mode=true >"$tmp/k" 2>&1
grep -q "unknown key (known here: .*decay_mult.*lr_mult" "$tmp/k" && ok "conv's known keys list lr_mult and decay_mult" ||
  { bad "known keys"; cat "$tmp/k"; }
"$octet" "${c[@]}" --set run.name=g --set 'model.layers.2={type: fc, name: fc1, out_features: 700, init: gaussian, std: 1e30}' \
  >"$tmp/g" 2>&1
grep -q "at the run's start: the initialization (init, std, bias_value)" "$tmp/g" &&
  ok "a huge initialization is named at the first steps" || { bad "init blow-up hint"; grep error "$tmp/g"; }

# [D25] predict --plan with nodes plans their exchange and names the node link as such.
"$octet" predict "$src/configs/fashion-mnist/lenet.yaml" --ranks 4 --node-ranks 2 --bandwidth 1 --latency 10 \
  --plan lossless >"$tmp/q" 2>&1
grep -q "auto plan (policy lossless, 4 ranks: 2 nodes x 2; link 1 GB/s per node, .* exchange two_level)" "$tmp/q" &&
  ok "predict --plan with 2 nodes x 2 ranks: $(grep -o '2 nodes x 2; link 1 GB/s per node' "$tmp/q")" ||
  { bad "predict --plan with nodes"; grep "auto plan\|error" "$tmp/q"; }

if ((fail)); then echo "run_edges: FAILED"; exit 1; fi
echo "run_edges: all passed"
