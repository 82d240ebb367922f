#!/usr/bin/env bash
# Smoke test of the test-bed: 2 hosts at 100mbit, each rank on its own host and core, a short compressed training
# over TCP, then `down` (twice) leaves nothing behind. Exit 77 (skipped) where network namespaces cannot be made.
set -uo pipefail
octet=$1 root=$2
export NETBED_PREFIX=octt NETBED_SUBNET=10.213.78 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bed="bash $root/scripts/netbed.sh"
if [[ $(id -u) != 0 ]] || ! ip netns add octt-probe 2>/dev/null; then
  echo "SKIPPED: network namespaces cannot be made here (needs root and ip netns)"
  exit 77
fi
ip netns del octt-probe
tmp=$(mktemp -d)
trap '$bed down; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

$bed down
$bed up 2 100mbit || fail "up"
$bed up 2 100mbit 2>"$tmp/err" && fail "a second up must refuse"
grep -q "already up" "$tmp/err" || fail "second up: $(cat "$tmp/err")"
$bed status >"$tmp/status"
[[ $(grep -c "rate 100Mbit" "$tmp/status") == 2 ]] || fail "status: $(cat "$tmp/status")"
grep -q "rate 100Mbit" <<<"$(ip netns exec octtbr tc qdisc show)" || fail "bridge side not shaped"
[[ $($bed exec octt2 hostname) == octt2 ]] || fail "exec: wrong hostname"
timeout 120 $bed mpirun -np 2 hostname | sort >"$tmp/hosts" || fail "mpirun hostname"
[[ $(tr '\n' ' ' <"$tmp/hosts") == "octt1 octt2 " ]] || fail "ranks on $(cat "$tmp/hosts")"
# NETBED_BIND=core (default): host K's rank on core (K-1) mod cores; none: free; anything else refused.
cores=$(nproc --all)
timeout 120 $bed mpirun -np 2 sh -c 'echo "$(hostname) $(taskset -pc $$ | sed "s/.*: //")"' | sort >"$tmp/bind" || fail "mpirun bind"
[[ $(tr '\n' ' ' <"$tmp/bind") == "octt1 0 octt2 $((1 % cores)) " ]] || fail "bound ranks: $(cat "$tmp/bind")"
NETBED_BIND=none timeout 120 $bed mpirun -np 2 sh -c 'echo "$(hostname) $(taskset -pc $$ | sed "s/.*: //")"' | sort >"$tmp/bind" ||
  fail "mpirun unbound"
[[ $(sed -n 1p "$tmp/bind") == "octt1 $(taskset -pc $$ | sed "s/.*: //")" ]] || fail "unbound ranks: $(cat "$tmp/bind")"
NETBED_BIND=socket $bed mpirun -np 2 true 2>"$tmp/err" && fail "NETBED_BIND=socket must be refused"
grep -q "NETBED_BIND must be core or none" "$tmp/err" || fail "bad NETBED_BIND: $(cat "$tmp/err")"
timeout 300 $bed mpirun -np 2 "$octet" train "$root/configs/fashion-mnist/lenet.yaml" --set run.threads=1 --set run.epochs=1 \
  --set run.max_steps=10 --set run.out_dir="$tmp" --set run.name=bed --set compression.method=dynamic_tree8 \
  --set parallel.checksum_every=1 >"$tmp/train.log" 2>&1 || { tail -5 "$tmp/train.log"; fail "training on the bed"; }
grep -q '"ranks":2' "$tmp/bed/summary.json" || fail "summary: $(cat "$tmp/bed/summary.json")"
# NETBED_SEGMENT_KB caps the devices' segments and NETBED_BURST_MS=0 leaves the 64 KB floor; a bad value changes nothing.
NETBED_SEGMENT_KB=16 NETBED_BURST_MS=0 $bed rate 1gbit || fail "rate with segments"
$bed status >"$tmp/status"
[[ $(grep -c "rate 1Gbit burst 65.*gso_max_size 16384" "$tmp/status") == 2 ]] || fail "status with segments: $(cat "$tmp/status")"
[[ $(ip -n octtbr -d link show dev p2 | grep -o 'gso_max_size [0-9]*') == "gso_max_size 16384" ]] || fail "bridge side segments"
NETBED_SEGMENT_KB=128 $bed rate 100mbit 2>"$tmp/err" && fail "NETBED_SEGMENT_KB=128 must be refused"
grep -q "NETBED_SEGMENT_KB must be an integer 1..64, got '128'" "$tmp/err" || fail "bad NETBED_SEGMENT_KB: $(cat "$tmp/err")"
NETBED_BURST_MS=1e3 $bed rate 100mbit 2>"$tmp/err" && fail "NETBED_BURST_MS=1e3 must be refused"
grep -q "NETBED_BURST_MS must be a number of ms in 0..1000" "$tmp/err" || fail "bad NETBED_BURST_MS: $(cat "$tmp/err")"
[[ $(grep -c "rate 1Gbit" <<<"$($bed status)") == 2 ]] || fail "a refused setting changed the links: $($bed status)"
$bed rate 100mbit || fail "rate back to 100mbit"
[[ $(ip -n octt1 -d link show dev eth0 | grep -o 'gso_max_size [0-9]*') == "gso_max_size 65536" ]] || fail "segments not restored"
$bed rate none || fail "rate none"
grep -q tbf <<<"$(ip netns exec octt1 tc qdisc show dev eth0)" && fail "rate none left a tbf"
$bed down || fail "down"
$bed down || fail "second down"
grep -q "^octt" <<<"$(ip netns list)" && fail "namespaces left: $(ip netns list)"
[[ -e /etc/netns/octt1 ]] && fail "/etc/netns/octt1 left"
echo "netbed smoke test passed"
