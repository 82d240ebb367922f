#!/usr/bin/env bash
# Installs every Debian package octet's build, tests and quickstart need (idempotent).
# Usage: scripts/install_deps.sh [--bench]   (--bench adds python3-torchvision for the reference benchmarks)
set -euo pipefail
pkgs=(build-essential cmake pkg-config zlib1g-dev
      openmpi-bin libopenmpi-dev libyaml-cpp-dev catch2 libdnnl-dev
      nlohmann-json3-dev  # safetensors (octet export, model.init_from, octet eval) and eval.json
      libopencv-imgcodecs-dev libopencv-imgproc-dev  # image_folder's decoder (a dlopen'ed module, data/image_codec.h)
      dataset-fashion-mnist
      iproute2 slurm-wlm munge  # the test-bed (ip netns, tc) and the local Slurm of the cluster tests
      clang libclang-rt-14-dev  # the libFuzzer targets (ASan + UBSan) of the fuzz test
      python3-matplotlib python3-yaml python3-numpy python3-pil  # scripts/plot.py, convert_idx.py and their tests
      python3-torch)  # the weights' parity test against PyTorch (tests/weights_parity_test.py)
[[ "${1:-}" == "--bench" ]] && pkgs+=(python3-torchvision)
missing=()
for p in "${pkgs[@]}"; do
  grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then echo "install_deps: all ${#pkgs[@]} packages present"; exit 0; fi
echo "install_deps: installing ${missing[*]}"
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
