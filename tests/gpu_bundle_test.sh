#!/usr/bin/env bash
# The GPU bundle stands on its own: scripts/gpu/bundle.sh packs this build, and its check.sh runs two ranks through
# the bundled Open MPI in a mount namespace where the system's Open MPI, PMIx and every library the bundle carries
# are hidden (as on a GPU machine without Debian's packages); no GPU here, so check.sh reports the GPU checks skipped.
# Skipped (77) where the build has no CUDA backend or no private mount namespace can be made.
set -u
build=$1
src=$2
grep -q OCTET_WITH_CUDA "$build/CMakeFiles/octet_lib.dir/flags.make" 2>/dev/null ||
  { echo "skipping: this build has no CUDA backend, so no GPU bundle"; exit 77; }
unshare -m true 2>/dev/null || { echo "skipping: no private mount namespace here (unshare -m)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$src/scripts/gpu/bundle.sh" --build-dir "$build" --out "$tmp/octet-gpu.tar.gz" || { echo "FAIL: bundle.sh"; exit 1; }
size=$(stat -c %s "$tmp/octet-gpu.tar.gz")
if [[ $size -gt $((60 * 1024 * 1024)) ]]; then echo "FAIL: the bundle is $size bytes, over 60 MiB (the device tool carries 64)"; exit 1; fi
tar -C "$tmp" -xzf "$tmp/octet-gpu.tar.gz"
b=$tmp/octet-gpu
# What to hide: the system's mpirun, the system copy of every bundled library, then the Open MPI and PMIx trees.
hide=""
for f in $(command -v mpirun orterun orted 2>/dev/null); do hide="$hide mount --bind /dev/null $(readlink -f "$f");"; done
for lib in "$b"/lib/*; do
  n=$(basename "$lib")
  for d in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu/pmix2/lib; do
    [[ -e $d/$n ]] && hide="$hide mount --bind /dev/null $(readlink -f "$d/$n");"
  done
done
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
  [[ -d $d ]] && hide="$hide mount -t tmpfs tmpfs $d;"
done
unshare -m bash -c "set -e; $hide
  if ldd /usr/lib/x86_64-linux-gnu/libdnnl.so.2 >/dev/null 2>&1; then echo 'FAIL: the system oneDNN is still visible'; exit 1; fi
  bash '$b/check.sh' --out '$tmp/out'" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[[ $rc -eq 0 ]] || { echo "FAIL: check.sh in the bundle exited $rc"; tail -30 "$tmp/out/check.log" 2>/dev/null; exit 1; }
grep -q "^ok: the bundled Open MPI runs 2 ranks" "$tmp/out/summary.txt" || { echo "FAIL: no 2-rank run"; exit 1; }
if grep -n "Sorry!\|couldn't open\|not found\|was unable to" "$tmp/out/check.log"; then
  echo "FAIL: the bundled runtime looked outside the bundle (above)"; exit 1
fi
grep -q "^skipped: no GPU usable" "$tmp/out/summary.txt" || { echo "FAIL: the GPU checks were not reported skipped"; exit 1; }
echo "ok: the bundle ($((size / 1024 / 1024)) MiB) runs 2 ranks with the system's Open MPI and $(ls "$b/lib" | wc -l) libraries hidden"
