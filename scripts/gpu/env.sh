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
octet_ld=$octet_bundle/lib:$octet_bundle/lib/x86_64-linux-gnu/openmpi/lib
while read -r d; do octet_ld=$octet_ld:$d; done < <(octet_cuda_libs | awk '!seen[$0]++')
export LD_LIBRARY_PATH=$octet_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$octet_bundle/bin:$PATH
export OPAL_PREFIX=$octet_bundle PMIX_PREFIX=$octet_bundle/pmix PMIX_LIBDIR=$octet_bundle/pmix/lib
export PMIX_PKGLIBDIR=$octet_bundle/pmix/lib/pmix PMIX_DATADIR=$octet_bundle/pmix/share
export PMIX_PKGDATADIR=$octet_bundle/pmix/share/pmix
export OCTET_SOURCE_DIR=$octet_bundle  # the test programs' configs and data
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Plugins for fabrics the machine lacks (InfiniBand, Omni-Path) fail to load quietly; shared memory and TCP remain.
export OMPI_MCA_mca_base_component_show_load_errors=0
unset octet_ld
