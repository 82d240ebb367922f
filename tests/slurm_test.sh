#!/usr/bin/env bash
# Submits the sbatch scripts (srun --mpi=pmix and mpirun inside the allocation) for a tiny training run to a local
# single-node Slurm and checks their output. Exit 77 (skipped) where Slurm cannot start. Always takes Slurm down.
set -uo pipefail
octet=$1 root=$2
dir=$(mktemp -d /tmp/octet-slurm-test.XXXXXX)
export SLURM_PORT=16817 SLURM_CONF=$dir/slurm.conf
trap 'bash "$root/scripts/slurm/local_slurm.sh" down "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [[ $(id -u) != 0 ]]; then echo "SKIPPED: the local Slurm needs root"; exit 77; fi
if ! command -v slurmctld >/dev/null && ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null 2>&1; then
  echo "SKIPPED: slurm-wlm and munge are not installed and cannot be"
  exit 77
fi
bash "$root/scripts/slurm/local_slurm.sh" up "$dir" || fail "the local Slurm did not start"
cd "$root" || exit 1
finish() {  # finish JOBID: waits up to 2 minutes for the job to leave the queue; sets state=JobState=...
  for _ in $(seq 240); do
    [[ -z $(squeue -h -j "$1" 2>/dev/null) ]] && break
    sleep 0.5
  done
  state=$(scontrol show job "$1" 2>/dev/null | grep -o "JobState=[A-Z]*")
}
for s in train_srun train_mpirun; do
  jid=$(OCTET_BIN=$octet sbatch --parsable --output="$dir/$s-%j.out" scripts/slurm/$s.sbatch configs/fashion-mnist/lenet.yaml \
    --set run.epochs=1 --set run.max_steps=10 --set run.out_dir="$dir/runs" --set run.name=$s --set compression.method=dynamic_tree8) ||
    fail "sbatch $s"
  finish "$jid"
  out=$(cat "$dir/$s-$jid.out" 2>/dev/null)
  [[ $state == JobState=COMPLETED ]] || { echo "$out" | tail -5; scancel "$jid"; fail "$s job $jid ended in ${state:-an unknown state}"; }
  grep -q "2 ranks x batch 64" <<<"$out" || fail "$s: not 2 ranks: $(echo "$out" | head -3)"
  # The layout Slurm gave reaches the job's log and octet's topology (one node: the flat exchange).
  grep -q "ranks on .* (2 per node)" <<<"$out" || fail "$s: no node layout: $(echo "$out" | head -3)"
  grep -q "^topology: 1 node x 2 ranks, exchange flat (auto)" <<<"$out" || fail "$s: no topology line: $(echo "$out" | head -5)"
  grep -q "^done: 10 steps" <<<"$out" || fail "$s: no summary line: $(echo "$out" | tail -3)"
  echo "$s: job $jid completed: $(echo "$out" | grep '^done:' | cut -c1-60)"
done
# The GPU script on this GPU-less node: Slurm is told to give no GPU (--gpus-per-task=0), and octet, asked for
# parallel.device: cuda, must fail the job with its one error line naming the key.
jid=$(OCTET_BIN=$octet sbatch --parsable --gpus-per-task=0 --cpus-per-task=1 --output="$dir/gpu-%j.out" \
  scripts/slurm/train_gpu.sbatch configs/fashion-mnist/lenet.yaml --set run.max_steps=10 --set run.out_dir="$dir/runs") ||
  fail "sbatch train_gpu"
finish "$jid"
out=$(cat "$dir/gpu-$jid.out" 2>/dev/null)
[[ $state == JobState=FAILED ]] || { echo "$out" | tail -5; fail "train_gpu job $jid ended in ${state:-an unknown state}, not FAILED"; }
grep -q "^octet: error: .*parallel.device: cuda, but no CUDA device can be used here" <<<"$out" ||
  fail "train_gpu: no error line naming parallel.device: $(echo "$out" | tail -3)"
echo "train_gpu: job $jid failed as it must without a GPU: $(grep '^octet: error' <<<"$out" | head -1 | cut -c1-90)"
# Preemption: a job signalled mid-epoch (after step 100 of 250) as Slurm does before its time limit (--signal=B:USR1:
# the batch shell) stops after a step with a checkpoint, exits 75, requeues itself, resumes (--resume auto) and ends in
# the checkpoint bytes of the same run left alone.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pre=(configs/fashion-mnist/lenet.yaml --set run.epochs=1 --set data.train_limit=32000 --set run.log_every=25
  --set run.out_dir="$dir/runs" --set compression.method=dynamic_tree8 --set run.threads=1)
timeout 300 mpirun -np 2 --oversubscribe "$octet" train "${pre[@]}" --set run.name=whole >"$dir/whole.log" 2>&1 ||
  { tail -5 "$dir/whole.log"; fail "the uninterrupted run"; }
jid=$(OCTET_BIN=$octet sbatch --parsable --output="$dir/pre-%j.out" scripts/slurm/train_mpirun.sbatch "${pre[@]}" \
  --set run.name=pre) || fail "sbatch the run to preempt"
for _ in $(seq 240); do grep -q "step 100/" "$dir/pre-$jid.out" 2>/dev/null && break; sleep 0.25; done
grep -q "step 100/" "$dir/pre-$jid.out" || { scancel "$jid"; cat "$dir/pre-$jid.out"; fail "the job never reached step 100"; }
scancel --signal=USR1 --batch "$jid" || fail "scancel --signal=USR1 --batch $jid"
# (Slurm holds a requeued job back until its old credential expires: 120 s by default, 10 s on the local Slurm.)
finish "$jid"
out=$(cat "$dir/pre-$jid.out" 2>/dev/null)
[[ $state == JobState=COMPLETED ]] || { echo "$out" | tail -8; scancel "$jid"; fail "the preempted job ended in ${state:-an unknown state}"; }
for want in "^stopped by SIGUSR1 after step " "stopped with a checkpoint; requeueing it" "^resumed from .* at epoch 1 batch " "^done: 250 steps"; do
  grep -q "$want" <<<"$out" || { echo "$out" | tail -8; fail "the preempted job's output lacks '$want'"; }
done
cmp -s "$dir/runs/pre/checkpoint.bin" "$dir/runs/whole/checkpoint.bin" ||
  fail "the preempted, requeued and resumed run ends elsewhere than the run left alone"
echo "preemption: job $jid $(grep -o '^stopped by SIGUSR1 after step [0-9]*' <<<"$out"), requeued, resumed, and ended in the uninterrupted run's checkpoint (byte for byte)"
echo "slurm test passed"
