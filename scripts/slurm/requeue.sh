# Sourced by the sbatch scripts: runs the training launcher so that a stop request reaches it and a stopped run comes
# back. SIGUSR1 or SIGTERM to the batch shell (`#SBATCH --signal=B:USR1@120`: two minutes before the time limit, or a
# preemption) is passed on to the launcher as SIGUSR1 (mpirun and srun pass it to every rank); octet stops after the
# step under way, writes its checkpoint and exits 75; the job is then requeued (`#SBATCH --requeue`) and its next start
# resumes it (`--resume auto`).

# octet_args ARGS...: sets the array OCTET_ARGS to the octet train options to run with. The first start keeps them,
# adding --resume auto unless they say how to start (--resume, --overwrite); a requeued start (SLURM_RESTART_COUNT > 0)
# drops those and resumes (--resume auto), so that it continues the run instead of starting it over.
octet_args() {
  OCTET_ARGS=()
  local restarted=$((${SLURM_RESTART_COUNT:-0} > 0)) said=0
  while (($#)); do
    case $1 in
      --overwrite) ((restarted)) || OCTET_ARGS+=("$1"); said=1 ;;
      --resume=*) ((restarted)) || OCTET_ARGS+=("$1"); said=1 ;;
      --resume)
        said=1
        if (($# < 2)); then ((restarted)) || OCTET_ARGS+=("$1"); break; fi  # dangling: octet says it needs a value
        ((restarted)) || OCTET_ARGS+=("$1" "$2"); shift ;;
      *) OCTET_ARGS+=("$1") ;;
    esac
    shift
  done
  if ((restarted || !said)); then OCTET_ARGS+=(--resume auto); fi
}

# run_requeueable COMMAND...: COMMAND's exit status, except that exit 75 (stopped with a checkpoint) requeues the job.
# SIGTERM or SIGUSR1 to the calling shell reaches COMMAND as SIGUSR1: Open MPI's mpirun passes SIGUSR1 to the ranks and
# returns their 75, where a SIGTERM of its own would end the job with status 1 (docs/running.md, "Signals to mpirun itself").
run_requeueable() {
  "$@" &
  local pid=$! rc=0
  trap 'echo "octet job ${SLURM_JOB_ID:-?}: signalled: asking octet to stop after its step"; kill -USR1 "$pid" 2>/dev/null' USR1 TERM
  while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" || true  # (a trapped signal ends the wait early while the launcher still runs)
  done
  rc=0
  wait "$pid" || rc=$?  # the launcher's own status, whenever it ended
  trap - USR1 TERM
  if [[ $rc -eq 75 && -n ${SLURM_JOB_ID:-} ]]; then
    echo "octet job $SLURM_JOB_ID: stopped with a checkpoint; requeueing it to resume"
    scontrol requeue "$SLURM_JOB_ID" && exit 0
  fi
  return "$rc"  # (outside Slurm: 75 for a stop with a checkpoint, for the caller to act on)
}
