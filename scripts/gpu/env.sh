# Sourced from an unpacked octet-gpu bundle (scripts/gpu/bundle.sh): puts its octet and Open MPI first on PATH, its
# libraries and those of the machine's CUDA installation (the CUDA toolkit's lib64 and, where cuDNN and cuBLAS came as
# Python wheels, their nvidia/*/lib folders) on LD_LIBRARY_PATH, and relocates Open MPI and PMIx into the bundle.
octet_bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
octet_cuda_libs() {  # folders holding libcudnn.so.9 / libcublas.so.13, best first
  local d py
  for d in "${CUDNN_LIB_DIR:-}" "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    [[ -n $d && -d $d ]] && echo "$d"
  done
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if d not in seen and os.path.isdir(d):
            seen.add(d); print(d)
PY
  done
}
# The folder whose libcudnn.so.9 is the newest (cudnnGetVersion through ctypes, each in a process of its own):
# CUDNN_LIB_DIR when set, else the newest, so that a machine whose CUDA toolkit carries an older cuDNN than its
# PyTorch wheels runs octet on the newer one. (On an H100, PyTorch's bf16 ResNet-50 ran at 2,250 img/s on the
# toolkit's cuDNN 9.14 against 2,864 on its own 9.19, batch 64: docs/gpu_speed.md.) Prints nothing where no folder
# has one or no python3 can load it.
octet_newest_cudnn() {
  local d v best="" best_v=0
  [[ -n ${CUDNN_LIB_DIR:-} ]] && { echo "$CUDNN_LIB_DIR"; return; }
  command -v python3 >/dev/null 2>&1 || return 0
  while read -r d; do
    [[ -e $d/libcudnn.so.9 ]] || continue
    v=$(python3 -c 'import ctypes, sys
l = ctypes.CDLL(sys.argv[1]); l.cudnnGetVersion.restype = ctypes.c_size_t; print(l.cudnnGetVersion())' \
      "$d/libcudnn.so.9" 2>/dev/null) || continue
    [[ $v =~ ^[0-9]+$ && $v -gt $best_v ]] && best=$d best_v=$v
  done
  [[ -n $best ]] && echo "$best"
  return 0
}
octet_dirs=$(octet_cuda_libs | awk '!seen[$0]++')
octet_cudnn=$(octet_newest_cudnn <<<"$octet_dirs")
octet_ld=$octet_bundle/lib:$octet_bundle/lib/x86_64-linux-gnu/openmpi/lib${octet_cudnn:+:$octet_cudnn}
while read -r d; do [[ -n $d && $d != "$octet_cudnn" ]] && octet_ld=$octet_ld:$d; done <<<"$octet_dirs"
export LD_LIBRARY_PATH=$octet_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$octet_bundle/bin:$PATH
export OPAL_PREFIX=$octet_bundle PMIX_PREFIX=$octet_bundle/pmix PMIX_LIBDIR=$octet_bundle/pmix/lib
export PMIX_PKGLIBDIR=$octet_bundle/pmix/lib/pmix PMIX_DATADIR=$octet_bundle/pmix/share
export PMIX_PKGDATADIR=$octet_bundle/pmix/share/pmix
export OCTET_SOURCE_DIR=$octet_bundle  # the test programs' configs and data
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Plugins for fabrics the machine lacks (InfiniBand, Omni-Path) fail to load quietly; shared memory and TCP remain.
export OMPI_MCA_mca_base_component_show_load_errors=0
unset octet_ld octet_dirs octet_cudnn
