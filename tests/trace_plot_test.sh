#!/usr/bin/env bash
# Tracing and plots: a 2-rank overlap run with --trace writes one valid Chrome trace with both ranks, their main,
# comm and loader threads, the phases, every layer and each tensor's encode / transport / decode, the comm thread's
# buckets overlapping backward; no trace.json without tracing; a bad trace key is a config error; scripts/plot.py
# writes four non-empty PNGs from two run directories and refuses a folder that holds no run, and says in one line
# that matplotlib is missing where it is.
set -u
source "$(dirname "$0")/lib.sh"
test_setup "$1" "$2"
common=(--set data.path="$src/datasets/mnist-22k" --set run.out_dir="$tmp" --set run.threads=1 --set run.max_steps=24
  --set run.log_every=4 --set data.train_limit=4000)
timeout 300 mpirun -np 2 "$octet" train "$src/configs/mnist/lenet.yaml" "${common[@]}" --set run.name=traced --trace \
  --set run.trace_start=2 --set run.trace_steps=10 --set parallel.overlap=true --set parallel.bucket_mb=0 \
  --set compression.method=dynamic_tree8 >"$tmp/log1" 2>&1 || { tail "$tmp/log1"; bad "the traced run"; }
grep "^trace:" "$tmp/log1" || bad "no trace: line in the log"
/usr/bin/python3 - "$tmp/traced/trace.json" <<'PY' || bad "trace.json"
import json, sys
d = json.load(open(sys.argv[1]))  # valid JSON or an exception
ev = d["traceEvents"]
spans = [e for e in ev if e["ph"] == "X"]
threads = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("missing:", what); ok = False
for pid in (0, 1):
    need((pid, "main") in threads and (pid, "comm (overlap)") in threads and (pid, "loader") in threads,
         f"rank {pid}'s main, comm and loader threads ({sorted(threads)})")
    names = {e["name"] for e in spans if e["pid"] == pid}
    for n in ("step", "data", "forward", "backward", "update", "forward conv1", "backward fc1", "bucket",
              "encode fc1.weight", "transport fc1.weight", "decode fc1.weight", "exchange conv2.weight",
              "assemble batch", "wait for buckets"):
        need(n in names, f"rank {pid}: span '{n}'")
    steps = {e["args"]["step"] for e in spans if e["pid"] == pid and e["name"] == "step"}
    need(steps == set(range(2, 12)), f"rank {pid}: steps 2..11 traced, got {sorted(steps)}")
    need(all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans if e["pid"] == pid), f"rank {pid}: times from the origin")
# The overlap: some bucket's exchange starts on the comm thread before backward of its step has ended.
tid_comm = {e["pid"]: e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "comm (overlap)"}
under = 0
for pid in (0, 1):
    bw = [e for e in spans if e["pid"] == pid and e["name"] == "backward"]
    for b in (e for e in spans if e["pid"] == pid and e["tid"] == tid_comm[pid] and e["name"] == "bucket"):
        under += any(w["ts"] < b["ts"] < w["ts"] + w["dur"] for w in bw)
need(under > 0, "a bucket exchanged while backward ran")
print(f"trace: {len(spans)} spans, {len(threads)} threads, {under} buckets started under backward")
sys.exit(0 if ok else 1)
PY
timeout 300 "$octet" train "$src/configs/mnist/lenet.yaml" "${common[@]}" --set run.name=plain >"$tmp/log2" 2>&1 ||
  bad "the untraced run"
[[ -e $tmp/plain/trace.json ]] && bad "trace.json written without tracing"
"$octet" train "$src/configs/mnist/lenet.yaml" "${common[@]}" --set run.name=x --set run.trace_steps=0 >"$tmp/log3" 2>&1 &&
  bad "run.trace_steps 0 accepted"
grep -q "^octet: error: .*run.trace_steps: must be >= 1" "$tmp/log3" || { cat "$tmp/log3"; bad "no error line naming run.trace_steps"; }
mkdir "$tmp/plots"
if /usr/bin/python3 "$src/scripts/plot.py" "$tmp/traced" "$tmp/plain" --out "$tmp/plots" >"$tmp/log4" 2>&1; then
  for f in loss accuracy bytes phases; do
    [[ $(head -c 8 "$tmp/plots/$f.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a && $(stat -c %s "$tmp/plots/$f.png") -gt 5000 ]] ||
      bad "$f.png is not a non-empty PNG"
  done
  ls "$tmp/plots" | grep -q "^\." && bad "a temporary file was left in the plot folder"
else
  cat "$tmp/log4"; bad "plot.py"
fi
/usr/bin/python3 "$src/scripts/plot.py" "$tmp/plots" --out "$tmp/plots" >"$tmp/log5" 2>&1 && bad "plot.py accepted a folder without a run"
grep -q "^plot.py: error: .*metrics.jsonl: no such file" "$tmp/log5" || { cat "$tmp/log5"; bad "plot.py: no error line naming the file"; }
# A run whose last metrics line was cut by a full disk still plots (the line skipped with a warning); binary bytes are
# one error line, not a traceback.
cp -r "$tmp/plain" "$tmp/cut"
printf '{"event":"train","step":9' >>"$tmp/cut/metrics.jsonl"
if /usr/bin/python3 "$src/scripts/plot.py" "$tmp/cut" --out "$tmp/plots" >"$tmp/log6" 2>&1 &&
  grep -q "^plot.py: warning: .*metrics.jsonl:[0-9]*: the last line is cut off" "$tmp/log6"; then
  echo "ok: plot.py skips a cut-off last line with a warning"
else cat "$tmp/log6"; bad "plot.py and a cut-off last line"; fi
cp -r "$tmp/plain" "$tmp/bin"
head -c 300 /dev/urandom >>"$tmp/bin/metrics.jsonl"
printf '\xff\xfe\x00' >>"$tmp/bin/metrics.jsonl"
/usr/bin/python3 "$src/scripts/plot.py" "$tmp/bin" --out "$tmp/plots" >"$tmp/log7" 2>&1 && bad "plot.py accepted binary bytes"
if [[ $(wc -l <"$tmp/log7") -eq 1 ]] && grep -q "^plot.py: error: .*metrics.jsonl: not a metrics file: binary bytes at offset" "$tmp/log7"; then
  echo "ok: plot.py on binary bytes: one error line"
else cat "$tmp/log7"; bad "plot.py on binary bytes: not one error line"; fi
# Without matplotlib (hidden by a sitecustomize): one error line saying so, not a traceback; --help still works.
mkdir "$tmp/nompl"
echo 'import sys; sys.modules["matplotlib"] = None' >"$tmp/nompl/sitecustomize.py"
PYTHONPATH=$tmp/nompl /usr/bin/python3 "$src/scripts/plot.py" "$tmp/plain" --out "$tmp/plots" >"$tmp/log8" 2>&1 &&
  bad "plot.py ran without matplotlib"
if [[ $(wc -l <"$tmp/log8") -eq 1 ]] && grep -q "^plot.py: error: matplotlib is not installed" "$tmp/log8"; then
  echo "ok: plot.py without matplotlib: one error line"
else cat "$tmp/log8"; bad "plot.py without matplotlib: not one error line"; fi
PYTHONPATH=$tmp/nompl /usr/bin/python3 "$src/scripts/plot.py" --help >/dev/null 2>&1 || bad "plot.py --help without matplotlib"
[[ $fail -eq 0 ]] && echo "trace and plot tests passed"
exit $fail
