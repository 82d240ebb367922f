#!/usr/bin/env bash
# Open MPI's launch agent on the test-bed (scripts/netbed.sh): "agent HOST COMMAND..." runs COMMAND in HOST's
# network namespace with HOST as its hostname, as ssh would on a real cluster. With NETBED_BIND=core (set by
# netbed.sh mpirun) host K's daemon and rank run on core (K - 1) mod cores, as Open MPI binds a rank on a real node.
set -euo pipefail
while [[ ${1:-} == -* ]]; do shift; done  # ssh-style options Open MPI may add
host=$1
shift
pin=()
if [[ ${NETBED_BIND:-none} == core ]]; then
  k=${host##*[!0-9]}
  [[ -n $k ]] || { echo "netbed_rsh.sh: host '$host' has no number to bind by" >&2; exit 1; }
  pin=(taskset -c $(( (k - 1) % $(nproc --all) )))
fi
exec "${pin[@]}" ip netns exec "$host" unshare --uts sh -c 'hostname "$0"; eval "$*"' "$host" "$@"
