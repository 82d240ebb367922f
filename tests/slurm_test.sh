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
echo "slurm test passed"
