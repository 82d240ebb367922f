#!/usr/bin/env bash
# Open MPI's launch agent on the test-bed (scripts/netbed.sh): "agent HOST COMMAND..." runs COMMAND in HOST's
# network namespace with HOST as its hostname, as ssh would on a real cluster.
set -euo pipefail
while [[ ${1:-} == -* ]]; do shift; done  # ssh-style options Open MPI may add
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0"; eval "$*"' "$host" "$@"
