#!/usr/bin/env bash
# A single-node Slurm on this machine for testing the batch scripts: Debian's slurm-wlm and munge, config and state
# in one folder, munged as the munge user with the package key, slurmctld and slurmd as root.
#
#   scripts/slurm/local_slurm.sh up [DIR]     install (apt-get) if needed, write DIR/slurm.conf, start the daemons,
#                                             wait until the node is idle; prints "export SLURM_CONF=DIR/slurm.conf"
#   scripts/slurm/local_slurm.sh status [DIR]
#   scripts/slurm/local_slurm.sh down [DIR]   stop everything it started and remove DIR (idempotent)
# DIR defaults to /tmp/octet-slurm. Client commands (sbatch, srun, squeue) need SLURM_CONF=DIR/slurm.conf.
# SLURM_PORT (default 6817) sets slurmctld's port; slurmd listens on the next one.
set -euo pipefail
cmd=${1:-}
dir=${2:-/tmp/octet-slurm}
die() { echo "local_slurm.sh: $*" >&2; exit 1; }

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pid() {  # PIDFILE: TERM, wait up to 10 s, then KILL
  pid_alive "$1" || return 0
  local p
  p=$(cat "$1")
  kill "$p" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$p" 2>/dev/null || true
}

up() {
  [[ $(id -u) == 0 ]] || die "must run as root (slurmd runs jobs as their users)"
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
  fi
  [[ -f /etc/munge/munge.key ]] || die "/etc/munge/munge.key missing (the munge package creates it)"
  [[ ! -f $dir/slurmctld.pid ]] || ! pid_alive "$dir/slurmctld.pid" || die "a local Slurm is already up in $dir"
  mkdir -p "$dir"/{state,spool,log,munge}
  chmod 755 "$dir"  # munged runs as munge and must reach its socket folder (mktemp -d makes 0700)
  chown munge:munge "$dir/munge"
  local host cpus mem port=${SLURM_PORT:-6817}
  [[ $port =~ ^[0-9]+$ ]] && (( port > 1024 && port < 65000 )) || die "SLURM_PORT must be a port number, got '$port'"
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  cat >"$dir/slurm.conf" <<CONF
# Written by scripts/slurm/local_slurm.sh: one node, no cgroups, state under $dir; credentials expire after 10 s
# (a requeued job waits that long) and the schedulers pass every 2 s (a test does not wait out their minute).
ClusterName=octet
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
CryptoType=crypto/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=60 State=UP OverSubscribe=YES
CONF
  runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" || die "munged did not start (see $dir/munge/munged.log)"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -i -f "$dir/slurm.conf" || die "slurmctld did not start (see $dir/log/slurmctld.log)"
  slurmd -f "$dir/slurm.conf" || die "slurmd did not start (see $dir/log/slurmd.log)"
  for _ in $(seq 60); do
    if grep -qx idle <<<"$(sinfo -h -o %t 2>/dev/null)"; then
      echo "local Slurm up: node $host, $cpus CPUs, partition debug"
      echo "export SLURM_CONF=$dir/slurm.conf"
      return 0
    fi
    sleep 0.5
  done
  die "the node did not become idle in 30 s (see $dir/log/)"
}

down() {
  [[ -d $dir ]] || return 0
  if [[ -f $dir/slurm.conf ]]; then SLURM_CONF=$dir/slurm.conf scancel --quiet --user=root 2>/dev/null || true; fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munge/munged.pid"
  rm -rf "$dir"
}

status() {
  [[ -f $dir/slurm.conf ]] || { echo "local Slurm: down"; return 0; }
  SLURM_CONF=$dir/slurm.conf sinfo
  SLURM_CONF=$dir/slurm.conf squeue
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "unknown command '${cmd}' (known: up, status, down)" ;;
esac
