#!/usr/bin/env bash
# The simulated device's proof: each GPU-path defect it exists to catch is put back into a copy of the tree, octet is
# rebuilt, and the case of tests/sim_train_test.sh that covers it must then fail (and pass again once it is undone).
# Prints one line per mutation with the first error line the failing run printed. A few minutes on 2 cores.
# Usage: scripts/sim_mutations.sh [--keep]   (--keep: leave the work folder for inspection)
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/octet-mutations.XXXXXX)
[[ ${1:-} == --keep ]] || trap 'rm -rf "$work"' EXIT
echo "sim mutations: building a CPU-only copy of the tree in $work"
tar -C "$here" --exclude=./build --exclude=./.git -cf - . | tar -C "$work" -xf -
cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DOCTET_CUDA=OFF -DOCTET_TESTS=OFF -DOCTET_OPENCV=OFF \
  >"$work/cmake.log" 2>&1 || { tail "$work/cmake.log"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" --target octet >"$work/build.log" 2>&1 || { tail "$work/build.log"; exit 1; }

# mutation NAME CASES FILE OLD NEW [FILE OLD NEW]...: each FILE's OLD text replaced by NEW; the sim cases CASES must
# then fail.
results=()
mutation() {
  local name=$1 cases=$2
  shift 2
  local files=() ok=1
  while (($# >= 3)); do
    local file=$1 old=$2 new=$3
    shift 3
    [[ -f $work/$file.orig ]] || cp "$work/$file" "$work/$file.orig"
    files+=("$file")
    OLD="$old" NEW="$new" python3 - "$work/$file" <<'PY' || ok=0
import os, sys
p = sys.argv[1]
s = open(p).read()
if os.environ["OLD"] not in s:
    sys.exit("sim mutations: the text to mutate is not in " + p)
open(p, "w").write(s.replace(os.environ["OLD"], os.environ["NEW"], 1))
PY
  done
  if ((!ok)); then
    results+=("ERROR  $name: the code it mutates has changed")
  elif ! cmake --build "$work/build" -j "$(nproc)" --target octet >"$work/build.log" 2>&1; then
    results+=("ERROR  $name: does not build")
  else
    SIM_CASES="$cases" bash "$work/tests/sim_train_test.sh" "$work/build/octet" "$work" >"$work/$name.log" 2>&1
    local rc=$?
    local why
    why=$(grep -h -m1 -E "octet: error|FAIL:" "$work/$name.log" | cut -c1-240)
    if ((rc != 0)); then results+=("caught $name (sim case $cases): $why"); else results+=("MISSED $name (sim case $cases)"); fi
  fi
  for f in "${files[@]}"; do  # restored, and newer than its mutated object: the next build recompiles it
    [[ -f $work/$f.orig ]] && mv "$work/$f.orig" "$work/$f" && touch "$work/$f"
  done
  echo "${results[-1]}"
}

dlogits=", dlogits_(Shape{0}, model.exec().device()) {"
mutation dlogits_on_the_host 1 parallel/data_parallel_step.cpp "$dlogits" " {"
# The defect as it was found: dlogits on the host and the loss head dispatching on its device, so the CPU loop reads
# the device's probabilities and labels on the host; no operand check in the way: the guarded memory alone catches it.
mutation dlogits_on_the_host_and_the_cpu_loop_run 1 parallel/data_parallel_step.cpp "$dlogits" " {" \
  layers/softmax_ce.cpp "  OCTET_CHECK(dlogits.device() == exec.device() && probs_.device() == exec.device()," \
  "  if (dlogits.device() == Device::CPU)
    return ce_backward_cpu(probs_.data(), labels_, dlogits.data(), probs_.dim(0), probs_.dim(1), grad_scale, Stream{});
  OCTET_CHECK(dlogits.device() == exec.device() && probs_.device() == exec.device(),"
mutation dact_on_the_host 4 parallel/fc_model_parallel_step.cpp ", dact_(Shape{0}, model.exec().device()) {" " {"
# dact on the host with the model-parallel step's own check gone: the pooling layer's operand check names it.
mutation dact_on_the_host_unchecked 4 parallel/fc_model_parallel_step.cpp ", dact_(Shape{0}, model.exec().device()) {" \
  " {" parallel/fc_model_parallel.cpp "  OCTET_CHECK(a.device() == ex_.device() && da.device() == ex_.device()," \
  "  OCTET_CHECK(a.device() == ex_.device(),"
mutation no_sync_before_mpi_reads_staged_bytes 2 comm/staged_transport.cpp \
  "  ex_.sync(s);  // the host reads the staged payloads only once they are there" ""
# Pipelined pieces on the device: a piece decoded before the courier's copies of its bytes have run, and the courier
# thread staging through page-locked memory without being bound to the device.
mutation piece_decoded_before_its_bytes_arrived 2 comm/pipeline.h "    if (device_) ex_.wait(ex_.comm(), p.received);" ""
mutation courier_thread_not_bound_to_the_device 2 comm/pipeline.h "        ex_.bind_thread();" ""
mutation no_wait_between_copy_and_compute 1 trainer/run.cpp \
  "    exec_->wait(exec_->compute(), exec_->record(exec_->copy()));" ""
mutation no_wait_before_the_comm_stream_reads_gradients 2 comm/grad_sync.cpp \
  "  if (on_device(exec_.device())) exec_.wait(exec_.comm(), exec_.record(exec_.compute()));" ""
mutation no_wait_before_the_update_reads_the_means 2 comm/grad_sync.cpp \
  "  if (on_device(exec_.device())) exec_.wait(exec_.compute(), exec_.record(exec_.comm()));" ""
mutation overlap_thread_ignores_the_ready_event 6 comm/overlap.cpp "        Exec::host().sync(item.ready);" ""
mutation loader_thread_not_bound_to_the_device 1 data/loader.cpp "    if (device_) device_->bind_thread();" ""
# A step no longer waits for its own backward and update: the next batch must not land where they still read (two
# device batches in turn, each after the step that read it: both gone, the next batch overwrites the one backward reads).
mutation next_batch_overwrites_one_still_read 1 trainer/run.cpp "dev = &dev_batches_[pos.global_step % 2];" \
  "dev = &dev_batches_[0];" data/loader.cpp "  ex.wait(s, d.released);" ""
mutation loss_read_before_its_copy_arrived 1 layers/softmax_ce.cpp "    exec_->sync(ready_);" ""
mutation update_flags_read_before_their_copy_arrived 1 optim/optimizer.cpp "  exec_->sync(flags_ready_);" ""
# The control: with every mutation undone, every case passes again.
cmake --build "$work/build" -j "$(nproc)" --target octet >"$work/build.log" 2>&1 || { tail "$work/build.log"; exit 1; }
if bash "$work/tests/sim_train_test.sh" "$work/build/octet" "$work" >"$work/control.log" 2>&1; then
  results+=("passes with every mutation undone: $(grep -c '^ok:' "$work/control.log") ok lines")
else
  results+=("ERROR  the unmutated tree fails: $(grep -m1 FAIL "$work/control.log")")
fi
echo
printf '%s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -qE "^(MISSED|ERROR)"
