# Helpers shared by the benchmark and experiment scripts (sourced, not run).
lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # scripts/, wherever the caller stands

# field FILE KEY: a number from a flat JSON file such as a run's summary.json.
field() { grep -o "\"$2\":[-0-9.e+]*" "$1" | sed -n 1p | cut -d: -f2; }
# require_fashion: sets fm to Debian's Fashion-MNIST folder (dataset-fashion-mnist), or fails the test saying so;
# makes the scratch folder tmp, removed on exit.
require_fashion() {
  fm=/usr/share/datasets/fashion-mnist
  [[ -f $fm/train-images-idx3-ubyte.gz ]] ||
    { echo "FAIL: Fashion-MNIST expected at $fm (Debian's dataset-fashion-mnist)"; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}
# within_a_point A B FLOOR: true when accuracies A and B (fractions) differ by at most 0.01 and B exceeds FLOOR.
within_a_point() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 && b > f) }'; }
# codec_table BASE EPOCHS TARGET ROW...: the Markdown table of a codec comparison; each ROW is
# "codec|accuracy|bytes sent|fp32 bytes|ratio|ratio fc|ratio conv|seconds|images/s|time to TARGET"; BASE: fp32's
# accuracy ("": each row's own); TARGET: the accuracy (a fraction) of the last column, whose cells are time_to_acc's
# answers (seconds, or "not reached").
codec_table() {
  local base=$1 ep=$2 target=$3 r c acc sent fp32 ratio rfc rconv secs ips tta
  shift 3
  echo "| codec | test accuracy | vs fp32 (points) | kB sent/step/rank | ratio (all) | ratio fc | ratio conv | s/epoch | images/s | $(target_title "$target") |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for r in "$@"; do
    IFS='|' read -r c acc sent fp32 ratio rfc rconv secs ips tta <<<"$r"
    awk -v c="$c" -v acc="$acc" -v base="${base:-$acc}" -v sent="$sent" -v ratio="$ratio" -v rfc="$rfc" -v rconv="$rconv" \
        -v secs="$secs" -v ips="$ips" -v ep="$ep" -v tta="$(tta_cell "$tta")" 'BEGIN {
      printf "| %s | %.2f%% | %+.2f | %.1f | %.1fx | %s | %s | %.1f | %.0f | %s |\n", c, 100*acc, 100*(acc-base), sent/1000, ratio,
             rfc == "" ? "-" : sprintf("%.1fx", rfc), rconv == "" ? "-" : sprintf("%.1fx", rconv), secs/ep, ips, tta }'
  done
}
# time_to_acc RUN_DIR|METRICS_JSONL TARGET: the training seconds at the run's first test evaluation with accuracy >=
# TARGET (a fraction), or "not reached" (scripts/time_to_accuracy.py: train_seconds, evaluation excluded).
time_to_acc() { /usr/bin/python3 "$lib_dir/time_to_accuracy.py" "$1" "$2"; }
# check_target SCRIPT VALUE: exits 2 with one error line unless VALUE (a --target) is a fraction in [0, 1].
check_target() {
  [[ $2 =~ ^(0(\.[0-9]*)?|\.[0-9]+|1(\.0*)?)$ ]] ||
    { echo "$1: --target $2: want a test accuracy as a fraction in [0, 1], e.g. 0.88" >&2; exit 2; }
}
# target_title TARGET: a "time to" column's title, e.g. "time to 88% (s)" for 0.88.
target_title() { awk -v t="$1" 'BEGIN { printf "time to %g%% (s)", 100 * t }'; }
# target_caption TARGET [CLOCK]: the lines under a table that say what its "time to" column measures; CLOCK: what the
# seconds count (default: octet's train_seconds).
target_caption() {
  local pct clock=${2:-"rank 0's training seconds (its steps with their data loading; evaluation and checkpoints excluded)"}
  pct=$(awk -v t="$1" 'BEGIN { printf "%g%%", 100 * t }')
  echo "Time to $pct: $clock"
  echo "up to the first test evaluation (one at each epoch's end) at or above $pct test accuracy, so a run is timed at the"
  echo "end of that epoch; \"not reached\": no evaluation got there (scripts/time_to_accuracy.py)."
}
# tta_cell ANSWER: a "time to" cell: seconds to one decimal, or "not reached" (and "-" for no answer).
tta_cell() {
  case $1 in
    "") echo "-" ;;
    "not reached") echo "not reached" ;;
    *) awk -v s="$1" 'BEGIN { printf "%.1f", s }' ;;
  esac
}
# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# codec_args NAME: the `octet train --set` options for a run name: fp32 (codec none), fp32-mpi (codec none through
# MPI's allreduce), qsgdN (qsgd with N bits; qsgd = 8), powersgdN (powersgd at rank N from step 100; powersgd = 2), or
# any codec name.
codec_args() {
  case $1 in
    fp32) echo "--set compression.method=none" ;;
    fp32-mpi) echo "--set compression.method=none --set compression.algorithm=allreduce" ;;
    qsgd*) local b=${1#qsgd}; echo "--set compression.method=qsgd --set compression.bits=${b:-8}" ;;
    powersgd*) local r=${1#powersgd}; echo "--set compression.method=powersgd --set compression.rank=${r:-2} --set compression.start_step=100" ;;
    *) echo "--set compression.method=$1" ;;
  esac
}

# parse_flags SCRIPT SPEC ARGS...: the scripts' command lines. Each word of SPEC is a flag: "name" (--name VALUE sets
# the variable name, dashes as underscores), "name:var" (sets var) or "name!" (a switch: sets the variable to 1).
# An unknown flag or a missing value: one error line naming SCRIPT and the known flags, exit 2.
parse_flags() {
  local _script=$1 _spec=$2 _known="" _s _flag _var _hit
  shift 2
  for _s in $_spec; do _known+="${_known:+, }--${_s%%[:!]*}"; done
  while [[ $# -gt 0 ]]; do
    _hit=""
    for _s in $_spec; do
      _flag=${_s%%[:!]*}
      [[ $1 == "--$_flag" ]] || continue
      _var=${_flag//-/_}
      [[ $_s == *:* ]] && _var=${_s#*:}
      if [[ $_s == *! ]]; then
        printf -v "$_var" 1
        shift
      else
        [[ $# -ge 2 ]] || { echo "$_script: $1 needs a value" >&2; exit 2; }
        printf -v "$_var" '%s' "$2"
        shift 2
      fi
      _hit=1
      break
    done
    [[ -n $_hit ]] || { echo "$_script: unknown argument $1 (known: $_known)" >&2; exit 2; }
  done
}

# prepare_run NAME: builds octet if build/octet is missing, lets Open MPI run as root (these scripts launch mpirun)
# and makes the scratch folder $work (/tmp/NAME.<random>).
prepare_run() {
  [[ -x build/octet ]] || bash scripts/build.sh
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  work=$(mktemp -d "/tmp/$1.XXXXXX")
}

# finish_run: on exit, copies $work into $keep when the script set one, takes the bed down if launcher put it up,
# and removes $work.
finish_run() {
  if [[ -n ${keep:-} ]]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
  if [[ ${bed_up:-0} == 1 ]]; then bash scripts/netbed.sh down; fi
  rm -rf "$work"
}

# launcher LOCAL HOSTS RATE: sets `launch` (the mpirun command line) and `where` (its description) for HOSTS ranks,
# on plain local mpirun (LOCAL=1) or one per host on a fresh test-bed with links of RATE (torn down on exit, with
# the folder $work: finish_run). NETBED_BURST_MS and NETBED_SEGMENT_KB, when set, reach netbed.sh.
launcher() {
  local local_=$1 hosts=$2 rate=$3
  if [[ $local_ == 1 ]]; then
    trap finish_run EXIT
    # Unbound, as Open MPI leaves the ranks of an oversubscribed node (the bed instead binds each host to a core, as
    # Open MPI binds ranks on nodes of their own: NETBED_BIND in scripts/netbed.sh).
    launch=(mpirun -np "$hosts" --oversubscribe --mca mpi_yield_when_idle 1)
    where="$hosts local ranks (loopback)"
  else
    bed_up=1
    trap finish_run EXIT
    bash scripts/netbed.sh down
    env ${NETBED_BURST_MS:+NETBED_BURST_MS=$NETBED_BURST_MS} ${NETBED_SEGMENT_KB:+NETBED_SEGMENT_KB=$NETBED_SEGMENT_KB} \
      bash scripts/netbed.sh up "$hosts" "$rate" >/dev/null
    launch=(bash scripts/netbed.sh mpirun -np "$hosts")
    where="$hosts hosts on the test-bed, links $rate${NETBED_BURST_MS:+ (burst $NETBED_BURST_MS ms, at least 64 KB)}${NETBED_SEGMENT_KB:+ (segments of $NETBED_SEGMENT_KB KB)}, NETBED_BIND=${NETBED_BIND:-core}"
  fi
}
