#!/usr/bin/env bash
# Fails when a source file includes a header from a folder above its own in the layering docs/architecture.md states (its
# "Dependencies point one way:" line, lowest first, groups separated by "<-"): the house's arrows point down only.
# Usage: layering_test.sh <source root>
set -euo pipefail
root=${1:?usage: layering_test.sh <source root>}
line=$(grep -m1 '^Dependencies point one way:' "$root/docs/architecture.md") || {
  echo "layering_test: docs/architecture.md has no 'Dependencies point one way:' line" >&2
  exit 1
}
declare -A level
n=0
IFS='<' read -ra groups <<<"${line#*:}"
for g in "${groups[@]}"; do
  g=${g#-}
  for name in $(grep -o '`[a-z_]*`' <<<"$g" | tr -d '`'); do level[$name]=$n; done
  n=$((n + 1))
done
((${#level[@]} >= 5)) || { echo "layering_test: could not read the layering from: $line" >&2; exit 1; }
bad=0
checked=0
for dir in "${!level[@]}"; do
  [[ -d $root/$dir ]] || { echo "layering_test: docs/architecture.md names folder '$dir', which does not exist" >&2; bad=1; continue; }
  for f in "$root/$dir"/*.{h,cpp,cu,cuh}; do
    [[ -e $f ]] || continue
    checked=$((checked + 1))
    while IFS=: read -r ln inc; do
      to=${inc%%/*}
      if [[ -z ${level[$to]+x} ]]; then
        echo "${f#$root/}:$ln: includes \"$inc\" from '$to', a folder the layering does not name" >&2
        bad=1
      elif ((level[$to] > level[$dir])); then
        echo "${f#$root/}:$ln: includes \"$inc\": $to/ is above $dir/ (docs/architecture.md: ${line#*: })" >&2
        bad=1
      fi
    done < <(grep -n '^#include "[a-z_]*/' "$f" | sed -E 's/^([0-9]+):#include "([^"]*)".*/\1:\2/')
  done
done
((bad == 0)) || exit 1
echo "layering_test: $checked files in ${#level[@]} folders, every include points down or sideways"
