#!/usr/bin/env bash
# Packs a built octet into one relocatable tarball for a GPU machine that has the NVIDIA driver, CUDA, cuDNN and
# cuBLAS but no Debian packages: the binaries (octet and the test programs), every shared library they and Open MPI's
# plugins need except glibc's and NVIDIA's, the Open MPI runtime (mpirun, plugins, help texts; relocated through
# OPAL_PREFIX), the configs, the real MNIST subset, the GPU tests, check.sh and speed.sh. Unpack anywhere and run
#   octet-gpu/check.sh        (or: . octet-gpu/env.sh; mpirun -np 2 octet train ...)
# Usage: scripts/gpu/bundle.sh [--build-dir DIR] [--out FILE.tar.gz]
#   --build-dir  a configured build to pack; by default build-gpu/, configured and built here for any x86-64-v3 CPU
#                and NVIDIA sm_80/sm_90 (A100, H100, H200) when missing
#   --out        default: BUILD_DIR/octet-gpu.tar.gz
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=""
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown argument '$1' (known: --build-dir DIR, --out FILE)" >&2; exit 2 ;;
  esac
done
if [[ -z $build ]]; then
  build=$src/build-gpu
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DOCTET_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
      -DCMAKE_CUDA_ARCHITECTURES="80;90"
  fi
  cmake --build "$build" -j "$(nproc)"
fi
build=$(cd "$build" && pwd)
out=${out:-$build/octet-gpu.tar.gz}
for b in octet tests/octet_cuda_tests tests/octet_sim_tests tests/octet_tests tests/octet_mpi_tests; do
  [[ -x $build/$b ]] || { echo "bundle.sh: $build/$b is missing (build with the CUDA backend and the tests)" >&2; exit 1; }
done
grep -q "OCTET_WITH_CUDA" "$build/CMakeFiles/octet_lib.dir/flags.make" 2>/dev/null ||
  { echo "bundle.sh: $build was configured without the CUDA backend (nvcc, cuDNN or cuBLAS not found)" >&2; exit 1; }
mpirun_bin=$(readlink -f "$(command -v mpirun)")
ompi_libdir=$(ompi_info --path libdir --parsable | cut -d: -f3)
ompi_pkglibdir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
ompi_pkgdatadir=$(ompi_info --path pkgdatadir --parsable | cut -d: -f3)
ompi_prefix=$(ompi_info --path prefix --parsable | cut -d: -f3)
pmix_prefix=$(ompi_info --all --parsable 2>/dev/null | grep -o "with-pmix=[^']*" | head -1 | cut -d= -f2 || true)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/octet-gpu
mkdir -p "$b/bin" "$b/lib" "$b/tests" "$b/datasets"
cp "$build/octet" "$build/tests/octet_cuda_tests" "$build/tests/octet_sim_tests" "$build/tests/octet_tests" \
  "$build/tests/octet_mpi_tests" "$b/bin/"
cp "$mpirun_bin" "$b/bin/"
ln -sf "$(basename "$mpirun_bin")" "$b/bin/mpirun"
for t in orted ompi_info; do [[ -x $ompi_prefix/bin/$t ]] && cp "$ompi_prefix/bin/$t" "$b/bin/"; done
# Open MPI's layout below OPAL_PREFIX mirrors the installed one (libdir, pkglibdir and pkgdatadir are prefix-relative).
rel_pkglib=${ompi_pkglibdir#"$ompi_prefix"/}
rel_pkgdata=${ompi_pkgdatadir#"$ompi_prefix"/}
mkdir -p "$b/$rel_pkglib" "$b/$rel_pkgdata"
cp -a "$ompi_pkglibdir/." "$b/$rel_pkglib/"
cp -a "$ompi_pkgdatadir/." "$b/$rel_pkgdata/"
if [[ -n $pmix_prefix && -d $pmix_prefix/lib/pmix ]]; then  # an external PMIx: its plugins and help texts too
  mkdir -p "$b/pmix/lib/pmix"
  cp -a "$pmix_prefix/lib/pmix/." "$b/pmix/lib/pmix/"
  [[ -d $pmix_prefix/share ]] && cp -a "$pmix_prefix/share" "$b/pmix/"
fi

# Every library the binaries and plugins load, but glibc's (the target has its own, as new or newer) and NVIDIA's
# (the driver's and the CUDA installation's: libcuda, cuDNN, cuBLAS; the CUDA runtime is small and travels).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libcudnn|libcublas|libnvidia)'
deps() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'; }
{
  deps "$b"/bin/*
  find "$b/$rel_pkglib" "$b/pmix" -name '*.so' -print0 2>/dev/null | xargs -0 -r ldd 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
} | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  [[ -e $b/lib/$name ]] || cp -L "$path" "$b/lib/$name"
done
# A second pass for what the copied libraries need in turn.
deps "$b"/lib/*.so* | sort -u | while read -r name path; do
  [[ $name =~ $skip || -e $b/lib/$name ]] && continue
  cp -L "$path" "$b/lib/$name"
done

cp -r "$src/configs" "$b/"
cp -r "$src/datasets/mnist-22k" "$b/datasets/"
cp "$src/tests/cuda_train_test.sh" "$src/tests/lib.sh" "$b/tests/"
mkdir -p "$b/tests/data" && cp "$src/tests/data/residual_net.yaml" "$b/tests/data/"
mkdir -p "$b/scripts/bench"
cp "$src/scripts/bench/lenet_torch.py" "$src/scripts/bench/idx_data.py" "$b/scripts/bench/"
cp "$src/scripts/gpu/check.sh" "$src/scripts/gpu/env.sh" "$src/scripts/gpu/speed.sh" "$src/scripts/gpu/speed_torch.py" \
  "$src/scripts/gpu/profile.sh" "$src/scripts/gpu/kernels.py" "$src/scripts/gpu/triage.sh" "$src/scripts/gpu/realdata.sh" \
  "$src/scripts/gpu/common.sh" \
  "$b/"
(cd "$src" && git describe --always --dirty 2>/dev/null || echo unknown) >"$b/VERSION"
mkdir -p "$(dirname "$out")"
tar -C "$tmp" -czf "$out.tmp" octet-gpu
mv "$out.tmp" "$out"
echo "bundle: $out ($(du -h "$out" | cut -f1), $(ls "$b/lib" | wc -l) libraries, commit $(cat "$b/VERSION"))"
