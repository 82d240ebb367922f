#!/usr/bin/env bash
# Downloads the four original MNIST files into DIR (default datasets/mnist) for users with internet access.
# Usage: scripts/get_mnist.sh [DIR]; then point data.path at DIR.
set -euo pipefail
dir=${1:-datasets/mnist}
mkdir -p "$dir"
base=${MNIST_MIRROR:-https://storage.googleapis.com/cvdf-datasets/mnist}
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  if [[ -s $dir/$f ]]; then echo "have $dir/$f"; continue; fi
  curl -fL --retry 3 -o "$dir/$f.part" "$base/$f"
  mv "$dir/$f.part" "$dir/$f"
done
# Known-good digests of the published files.
(cd "$dir" && md5sum -c --quiet <<'SUMS'
f68b3c2dcbeaaa9fbdd348bbdeb94873  train-images-idx3-ubyte.gz
d53e105ee54ea40749a09fcbcd1e9432  train-labels-idx1-ubyte.gz
9fb629c4189551a2d022fa330f9573f3  t10k-images-idx3-ubyte.gz
ec29112dd5afa0611ce80d1b7f02629c  t10k-labels-idx1-ubyte.gz
SUMS
)
echo "MNIST in $dir: use --set data.path=$dir"
