#!/usr/bin/env bash
# octet's image_folder training pipeline (OpenCV JPEG decode, random-resized crop, flip, normalize; `octet bench
# loader`) against torchvision's (ImageFolder + RandomResizedCrop + RandomHorizontalFlip + ToTensor + Normalize,
# DataLoader workers; scripts/bench/loader_torchvision.py) on the same JPEG tree, in the same run: images/s per core
# for 1..W workers and the ratio. Without a tree, one is made from Debian's Fashion-MNIST at 256x256.
# Usage: scripts/bench/loader.sh [--tree DIR] [--workers W] [--images N] [--size S] [--octet build/octet]
set -euo pipefail
cd "$(dirname "$0")/../.."
tree="" workers=2 images=3000 size=224 octet=build/octet
while (($#)); do
  case $1 in
    --tree) tree=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --octet) octet=$2; shift 2 ;;
    *) echo "loader.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
[[ -x $octet ]] || { echo "loader.sh: $octet not built (scripts/build.sh)" >&2; exit 2; }
if [[ -z $tree ]]; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  /usr/bin/python3 scripts/convert_idx.py --jpeg-tree --size 256 --limit-train 3000 --limit-test 10 \
    /usr/share/datasets/fashion-mnist "$tree" >/dev/null
fi
field() { grep -o "$1=[0-9.]*" <<<"$2" | cut -d= -f2; }
printf "%-8s %14s %20s %8s\n" workers "octet img/s/core" "torchvision img/s/core" ratio
for ((w = 1; w <= workers; w++)); do
  o=$("$octet" bench loader "$tree" --threads "$w" --images "$images" --size "$size")
  t=$(/usr/bin/python3 scripts/bench/loader_torchvision.py "$tree" --workers "$w" --images "$images" --size "$size")
  po=$(field per_core "$o") pt=$(field per_core "$t")
  printf "%-8s %14s %20s %7.2fx\n" "$w" "$po" "$pt" "$(awk -v a="$po" -v b="$pt" 'BEGIN { print a / b }')"
done
