#!/usr/bin/env bash
# Configures and builds octet into build/ (Release). Extra arguments go to cmake, e.g. -DOCTET_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)"
