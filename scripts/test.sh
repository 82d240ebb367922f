#!/usr/bin/env bash
# The test command: installs the Debian packages, configures, builds and runs every test with CTest
# (unit, CLI, CUDA parity where a GPU is present, and the real-data end-to-end runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc)"  # (the entries that need the whole machine run alone)
