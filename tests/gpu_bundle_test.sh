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
# env.sh puts the folder of the newest libcudnn.so.9 first (stand-ins that only answer cudnnGetVersion).
fake=$(mktemp -d)
for v in 91999:new 90100:old; do
  mkdir -p "$fake/${v#*:}"
  printf '#include <stddef.h>\nsize_t cudnnGetVersion(void) { return %s; }\n' "${v%%:*}" >"$fake/c.c"
  gcc -shared -fPIC -o "$fake/${v#*:}/libcudnn.so.9" "$fake/c.c" || { echo "FAIL: gcc"; exit 1; }
done
got=$(env -u CUDNN_LIB_DIR bash -c ". '$src/scripts/gpu/env.sh'; printf '%s\n' '$fake/old' '$fake/new' | octet_newest_cudnn")
pinned=$(CUDNN_LIB_DIR=$fake/old bash -c ". '$src/scripts/gpu/env.sh'; echo \$LD_LIBRARY_PATH")
rm -rf "$fake"
[[ $got == "$fake/new" ]] || { echo "FAIL: env.sh chose '$got' as the newest cuDNN, not $fake/new"; exit 1; }
[[ $pinned == *"/openmpi/lib:$fake/old:"* ]] || { echo "FAIL: CUDNN_LIB_DIR is not first after the bundle's: $pinned"; exit 1; }
echo "ok: env.sh takes the newest cuDNN, or CUDNN_LIB_DIR"
# profile.sh under a stand-in ncu (it checks the range flag and run.profile, then writes an ncu CSV of two launches),
# and kernels.py's table from that CSV and an nsys kernel summary.
fake=$(mktemp -d)
cat >"$fake/ncu" <<'EOF2'
#!/usr/bin/env bash
args="$*" log=""
while [[ $# -gt 0 ]]; do case $1 in --log-file) log=$2; shift 2 ;; --csv) shift ;; --*) shift 2 ;; *) break ;; esac; done
[[ $args == *"--profile-from-start off"* && $args == *"run.profile=true"* && $args == *"run.trace_steps=2"* ]] || exit 3
h='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
{ echo "==PROF== Connected"; echo "$h"
  echo '"0","1","octet","h","void octet::bnv_stats<__nv_bfloat16>(const T1 *)","1","7","(256,1,1)","(8,1,1)","0","9.0","m","gpu__time_duration.sum","nsecond","1,500,000"'
  echo '"0","1","octet","h","void octet::bnv_stats<__nv_bfloat16>(const T1 *)","1","7","(256,1,1)","(8,1,1)","0","9.0","m","dram__bytes_read.sum","byte","3,000,000,000"'
  echo '"1","1","octet","h","sm90_xmma_fprop_implicit_gemm_bf16","1","7","(256,1,1)","(8,1,1)","0","9.0","m","gpu__time_duration.sum","nsecond","4000000"'
} >"$log"
EOF2
chmod +x "$fake/ncu"
printf '%s\n' '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"' \
  '"60.0","6000000","4","1","1","1","1","0","void at::native::batch_norm_collect_statistics_channels_last_kernel<c10::BFloat16>"' \
  '"40.0","2,000,000","8","1","1","1","1","0","void at::native::vectorized_elementwise_kernel<4, clamp_min>"' >"$fake/torch.csv"
PATH=$fake:$PATH PROFILER=ncu OCTET=/bin/true PYTHON=/nonexistent bash "$src/scripts/gpu/profile.sh" "$fake/out" >/dev/null 2>&1
table=$(python3 "$src/scripts/gpu/kernels.py" --steps 2 octet="$fake/out/octet_kern.csv" pytorch="$fake/torch.csv" 2>&1)
rm -rf "$fake"
grep -q "^| batchnorm | 0.75 | 0.5 | 3.00 | 2.0 | 2000 |$" <<<"$table" &&
  grep -q "^| conv/gemm | 2.00 | 0.5 | 0.00 | 0.0 | 0 |$" <<<"$table" &&
  grep -q "^| relu/add/elementwise | 0.00 | 0.0 | 1.00 | 4.0 | - |$" <<<"$table" ||
  { echo "FAIL: profile.sh + kernels.py's table:"; echo "$table"; exit 1; }
echo "ok: profile.sh's profiled run and kernels.py's table (ncu CSV and nsys summary)"
unshare -m true 2>/dev/null || { echo "skipping: no private mount namespace here (unshare -m)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$src/scripts/gpu/bundle.sh" --build-dir "$build" --out "$tmp/octet-gpu.tar.gz" || { echo "FAIL: bundle.sh"; exit 1; }
size=$(stat -c %s "$tmp/octet-gpu.tar.gz")
if [[ $size -gt $((60 * 1024 * 1024)) ]]; then echo "FAIL: the bundle is $size bytes, over 60 MiB (the device tool carries 64)"; exit 1; fi
tar -C "$tmp" -xzf "$tmp/octet-gpu.tar.gz"
b=$tmp/octet-gpu
for f in "$b"/*.sh "$b"/*.py; do [[ $f == */env.sh || -x $f ]] || { echo "FAIL: $(basename "$f") in the bundle is not executable"; exit 1; }; done
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
