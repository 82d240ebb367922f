# Sourced by the sbatch scripts: runs the training launcher so that a stop request reaches it and a stopped run comes
# back. SIGUSR1 or SIGTERM to the batch shell (`#SBATCH --signal=B:USR1@120`: two minutes before the time limit, or a
# preemption) is passed on to the launcher as SIGUSR1 (mpirun and srun pass it to every rank); octet stops after the
# step under way, writes its checkpoint and exits 75; the job is then requeued (`#SBATCH --requeue`) and its next start
# resumes it (`--resume auto`).

# resume_args ARGS...: "--resume auto" unless the octet options already say how to start (--resume, --overwrite).
resume_args() {
  local a
  for a in "$@"; do [[ $a == --resume || $a == --overwrite ]] && return 0; done
  echo "--resume auto"
}

# run_requeueable COMMAND...: COMMAND's exit status, except that exit 75 (stopped with a checkpoint) requeues the job.
run_requeueable() {
  "$@" &
  local pid=$! rc=0
  trap 'echo "octet job ${SLURM_JOB_ID:-?}: signalled: asking octet to stop after its step"; kill -USR1 "$pid" 2>/dev/null' USR1 TERM
  while :; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break  # (a trapped signal ends the wait early: the launcher still runs)
  done
  trap - USR1 TERM
  if [[ $rc -eq 75 ]]; then
    echo "octet job ${SLURM_JOB_ID:-?}: stopped with a checkpoint; requeueing it to resume"
    scontrol requeue "${SLURM_JOB_ID:?not inside a Slurm job}" && exit 0
  fi
  return "$rc"
}
