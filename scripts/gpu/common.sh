# Sourced by speed.sh, profile.sh and realdata.sh: where they run (an unpacked octet-gpu bundle: its env.sh puts its
# octet, Open MPI and libraries first; else the source tree as root), the reproduction nets they train (config, input
# shape, classes), the octet binary and a python3 with CUDA-enabled torch, and the JSON field reader.
gpu_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -f $gpu_here/env.sh && -d $gpu_here/bin && -d $gpu_here/configs ]]; then
  # shellcheck source=scripts/gpu/env.sh
  . "$gpu_here/env.sh"
  root=$gpu_here
else
  root=$(cd "$gpu_here/../.." && pwd)
fi
# shellcheck disable=SC2034  # (read by the scripts that source this)
declare -A cfg=([resnet50]=configs/imagenet/resnet50.yaml [resnet18]=configs/imagenet/resnet18.yaml
  [alexnet]=configs/imagenet/alexnet.yaml [lenet]=configs/mnist/lenet.yaml)
# shellcheck disable=SC2034
declare -A shape=([resnet50]="3,224,224" [resnet18]="3,224,224" [alexnet]="3,227,227" [lenet]="1,28,28")
# shellcheck disable=SC2034
declare -A classes=([resnet50]=1000 [resnet18]=1000 [alexnet]=1000 [lenet]=10)
# PyTorch runs with no library path: its wheels find their own CUDA libraries, where env.sh's path (or a CUDA
# toolkit's on the machine's) would hand it another cuDNN than the one it was built against (a mismatch that
# torch.backends.cudnn refuses, and a slower PyTorch than its users get).
torch_env=(env -u LD_LIBRARY_PATH)

# The octet to run: OCTET, else octet on PATH, else the source tree's build-gpu/ or build/ one ("" where none).
find_octet() {
  local o=${OCTET:-$(command -v octet || true)} c
  for c in "$root/build-gpu/octet" "$root/build/octet"; do [[ -z $o && -x $c ]] && o=$c; done
  echo "$o"
}
# A python3 whose torch sees a GPU (any torch with "cpu"): PYTHON, python3, /opt/torch/.venv's ("" where none).
find_torch_python() {
  local c
  for c in ${PYTHON:-} python3 /opt/torch/.venv/bin/python3; do
    command -v "$c" >/dev/null 2>&1 || continue
    if [[ ${1:-cuda} == cpu ]] && "${torch_env[@]}" "$c" -c 'import torch' 2>/dev/null; then echo "$c"; return; fi
    "${torch_env[@]}" "$c" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null &&
      { echo "$c"; return; }
  done
}
num() { grep -o "\"$2\": *[0-9.e+-]*" "$1" 2>/dev/null | head -1 | sed 's/.*: *//'; }  # num FILE KEY
