#!/usr/bin/env bash
# Quick start: installs the Debian packages, builds, and trains Caffe's LeNet on Fashion-MNIST for one epoch on
# 2 MPI ranks with 8-bit dynamic-tree gradient compression (more --set overrides change it, e.g. --set run.epochs=5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe build/octet train configs/fashion-mnist/lenet.yaml --set run.epochs=1 --set run.threads=1 \
  --set run.name=quickstart --set compression.method=dynamic_tree8 "$@"
echo "quickstart: outputs in runs/quickstart (config.yaml, metrics.jsonl, summary.json, checkpoint.bin)"
