#!/usr/bin/env bash
# A cluster on one machine: N "hosts" as Linux network namespaces, each with a veth NIC on a bridge that lives in a
# namespace of its own, addresses only inside those namespaces, and tc tbf on both directions of every link.
#
#   scripts/netbed.sh up N [RATE] [R]    RATE: 100mbit, 1gbit, 10gbit, ... or none (default none); R ranks per host
#                                        (default 1): a node of R ranks that share its memory and its one link
#   scripts/netbed.sh rate RATE          re-shape every link of the bed that is up
#   scripts/netbed.sh status             hosts, addresses and qdiscs
#   scripts/netbed.sh exec HOST CMD...   run CMD on HOST (its own network namespace and hostname)
#   scripts/netbed.sh mpirun ARGS...     mpirun from the first host, R ranks per host: TCP between hosts on the bed,
#                                        shared memory (Open MPI's vader) between the ranks of a host
#   scripts/netbed.sh down               remove everything the bed made (idempotent)
#
# Hosts are named ${NETBED_PREFIX}1..N (default prefix "obh"); the bridge namespace is ${NETBED_PREFIX}br. Addresses
# are 10.213.77.H/24 (NETBED_SUBNET overrides the first three octets), a private /24 that exists only on the bed.
# The kernel here has no netem, so links have a rate but no added latency; this script does not pretend otherwise.
# NETBED_BIND=core (the default) runs host K's ranks on core (K - 1) mod cores, as Open MPI binds each rank to its
# own cores on a real node: hosts then share the machine's cores evenly instead of as the scheduler's load balancer
# happens to place them (ranks fell up to 120 ms out of step per step without it). NETBED_BIND=none leaves them free.
set -euo pipefail
prefix=${NETBED_PREFIX:-obh}
subnet=${NETBED_SUBNET:-10.213.77}
br=${prefix}br
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "netbed.sh: $*" >&2; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "must run as root (ip netns needs CAP_SYS_ADMIN)"; }
hosts() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" | sort -V || true; }

# Token bucket on one device: burst = NETBED_BURST_MS (default 10; a decimal, 0 = the floor) ms of traffic, at
# least 64 KB, so that a 10gbit link is not capped by HZ and the largest segment fits. A link that was idle passes a
# burst at once, above its rate, which a real NIC does not: 1 ms is closer to a real link where the rate allows it.
# NETBED_SEGMENT_KB (1..64; unset: the kernel's 64 KB) caps the segments the host's stack hands to each device
# (gso_max_size), so a 64 KB burst holds several of them: with 16 KB segments and NETBED_BURST_MS=0 a 1gbit link
# moves a 64 KB allreduce at about its large-message rate instead of twice it (scripts/bench/predict_check.sh).
shape() {  # NS DEV RATE: checks every setting before it touches the device
  local ns=$1 dev=$2 rate=$3 seg=${NETBED_SEGMENT_KB:-64} ms=${NETBED_BURST_MS:-10} bits=0
  [[ $seg =~ ^[0-9]+$ ]] && (( seg >= 1 && seg <= 64 )) || die "NETBED_SEGMENT_KB must be an integer 1..64, got '$seg'"
  [[ $ms =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v m="$ms" 'BEGIN { exit !(m <= 1000) }' ||
    die "NETBED_BURST_MS must be a number of ms in 0..1000, got '$ms'"
  if [[ $rate != none ]]; then
    bits=$(echo "$rate" | awk '{r=tolower($0); n=r+0; if (r ~ /gbit$/) n*=1e9; else if (r ~ /mbit$/) n*=1e6; else if (r ~ /kbit$/) n*=1e3; else n=-1; printf "%.0f\n", n}')
    [[ $bits != -1 && $bits != 0 ]] || die "bad rate '$rate' (examples: 100mbit, 1gbit, 10gbit, none)"
  fi
  ip -n "$ns" link set "$dev" gso_max_size $(( seg * 1024 ))
  ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
  [[ $rate == none ]] && return 0
  local burst
  burst=$(awk -v b="$bits" -v m="$ms" 'BEGIN { x = b / 8000 * m; printf "%.0f\n", x < 65536 ? 65536 : x }')
  ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 200ms
}

ranks_file() { echo "/run/netbed-${prefix}.ranks"; }
ranks_per_host() { cat "$(ranks_file)" 2>/dev/null || echo 1; }

up() {
  need_root
  local n=${1:-} rate=${2:-none} r=${3:-1}
  [[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 64 )) || die "up needs a host count in 1..64, got '${n}'"
  [[ $r =~ ^[0-9]+$ ]] && (( r >= 1 && r <= 64 )) || die "up needs ranks per host in 1..64, got '${r}'"
  [[ -z $(hosts) ]] || die "a bed is already up (run: scripts/netbed.sh down)"
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  ip -n "$br" link set lo up
  local i h
  for ((i = 1; i <= n; i++)); do
    h=${prefix}$i
    ip netns add "$h"
    ip link add "nb${prefix}$i" type veth peer name "nbp${prefix}$i"
    ip link set "nb${prefix}$i" netns "$h"
    ip link set "nbp${prefix}$i" netns "$br"
    ip -n "$h" link set "nb${prefix}$i" name eth0
    ip -n "$br" link set "nbp${prefix}$i" name "p$i"
    ip -n "$br" link set "p$i" master br0 up
    ip -n "$h" addr add "$subnet.$i/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
  done
  # Name resolution on the bed: ip netns exec bind-mounts /etc/netns/NAME/hosts over /etc/hosts.
  for ((i = 1; i <= n; i++)); do
    mkdir -p "/etc/netns/${prefix}$i"
    { echo "127.0.0.1 localhost"; for ((j = 1; j <= n; j++)); do echo "$subnet.$j ${prefix}$j"; done; } >"/etc/netns/${prefix}$i/hosts"
  done
  set_rate "$rate"
  echo "$r" >"$(ranks_file)"
  echo "netbed: $n hosts ${prefix}1..${prefix}$n on $subnet.0/24, links $rate, $r rank(s) per host"
}

set_rate() {
  local rate=$1 h i
  for h in $(hosts); do
    i=${h#"$prefix"}
    shape "$h" eth0 "$rate"    # host -> bridge
    shape "$br" "p$i" "$rate"  # bridge -> host
  done
}

down() {
  need_root
  local h
  for h in $(hosts); do ip netns del "$h"; rm -rf "/etc/netns/$h"; done
  grep -qx "$br" <<<"$(ip netns list 2>/dev/null | awk '{print $1}')" && ip netns del "$br"
  rm -f "$(ranks_file)"
  return 0
}

status() {
  local hs
  hs=$(hosts)
  [[ -n $hs ]] || { echo "netbed: down"; return 0; }
  echo "ranks per host: $(ranks_per_host)"
  local h
  for h in $hs; do
    printf '%s %s %s\n' "$h" "$(ip -n "$h" -4 -o addr show dev eth0 | awk '{print $4}')" \
      "$(ip netns exec "$h" tc qdisc show dev eth0 | sed -n 1p)$(ip -n "$h" -d link show dev eth0 | grep -o ' gso_max_size [0-9]*')"
  done
}

run_on() {  # HOST CMD...: the host's network namespace, its own UTS namespace and hostname
  local h=$1
  shift
  [[ -n $(hosts | grep -x "$h") ]] || die "no host '$h' on the bed (hosts: $(hosts | tr '\n' ' '))"
  exec ip netns exec "$h" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$h" "$@"
}

bed_mpirun() {
  local hs n hf
  hs=$(hosts)
  [[ -n $hs ]] || die "no bed is up (run: scripts/netbed.sh up N RATE)"
  n=$(echo "$hs" | wc -l)
  hf=$(mktemp /tmp/netbed-hosts.XXXXXX)
  local r
  r=$(ranks_per_host)
  for h in $hs; do echo "$h slots=$r"; done >"$hf"
  local first
  first=$(sed -n 1p <<<"$hs")
  # Open MPI launches a daemon per host through the agent; TCP only, on the bed's subnet. The hosts share this
  # machine's cores, so ranks yield while they wait: busy-polling ranks starve the kernel's network stack (on 2 cores
  # a 1 MB allreduce took 25 ms polling and 2 ms yielding). Each daemon sees a small "node" and would bind its
  # ranks from core 0, piling every host's ranks onto the same cores: --bind-to none, and NETBED_BIND pins each host
  # (its daemon and ranks) to a core of its own through the launch agent; the first host's ranks are mpirun's
  # children, so mpirun is pinned. --map-by slot fills a host's R slots before the next: ranks K*R..K*R+R-1 on host
  # K+1, as a real node's ranks are numbered. The ranks of a host talk through shared memory (vader), as on a node.
  # The bed needs root, and Open MPI refuses root unless told (as scripts/lib.sh's prepare_run tells it).
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local bind=${NETBED_BIND:-core} pin=()
  case $bind in
    core) pin=(taskset -c 0) ;;
    none) ;;
    *) rm -f "$hf"; die "NETBED_BIND must be core or none, got '$bind'" ;;
  esac
  NETBED_BIND=$bind "${pin[@]}" ip netns exec "$first" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$first" \
    mpirun --hostfile "$hf" --map-by slot --mca plm_rsh_agent "$here/netbed_rsh.sh" --mca pml ob1 --mca btl tcp,vader,self \
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" --mca plm_rsh_no_tree_spawn 1 \
    --mca mpi_yield_when_idle 1 --bind-to none -x PATH "$@" || { local rc=$?; rm -f "$hf"; return $rc; }
  rm -f "$hf"
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  rate) need_root; [[ -n $(hosts) ]] || die "no bed is up"; set_rate "${1:?rate needs a RATE}" ;;
  down) down ;;
  status) status ;;
  exec) [[ $# -ge 2 ]] || die "exec needs HOST CMD..."; run_on "$@" ;;
  mpirun) bed_mpirun "$@" ;;
  *) die "unknown command '${cmd}' (known: up, rate, status, exec, mpirun, down)" ;;
esac
