#!/usr/bin/python3
# Reads an octet trace.json (run.trace) and prints, per rank, the mean time per traced step of its main phases, the
# time the communication thread spent exchanging buckets, and how much of that lay under backward: the figure that
# says whether parallel.overlap hides the exchange.
# Usage: scripts/trace_summary.py RUN_DIR/trace.json
import json
import sys


def fail(msg):
    print(f"trace_summary.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(a, b):  # total length of the intersection of two unions of intervals
    i = j = 0
    tot = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        tot += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def main():
    if len(sys.argv) != 2:
        fail("usage: trace_summary.py TRACE.json")
    try:
        d = json.load(open(sys.argv[1]))
        ev = d["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{sys.argv[1]}: not an octet trace ({e})")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in ev if e.get("ph") == "X"]
    print(f"{'rank':>4} {'steps':>5} {'step ms':>8} {'fwd':>7} {'bwd':>7} {'wait':>7} {'upd':>7} "
          f"{'exchange ms':>11} {'under bwd':>9}")
    for pid in sorted({e["pid"] for e in spans}):
        mine = [e for e in spans if e["pid"] == pid]
        steps = [e for e in mine if e["name"] == "step"]
        if not steps:
            continue
        n = len(steps)
        per = lambda name: sum(e["dur"] for e in mine if e["name"] == name and names.get((pid, e["tid"])) == "main") / n / 1e3
        bwd = union([(e["ts"], e["ts"] + e["dur"]) for e in mine if e["name"] == "backward"])
        buckets = union([(e["ts"], e["ts"] + e["dur"]) for e in mine
                         if e["name"] == "bucket" or (e["name"].startswith("exchange ") and
                                                      names.get((pid, e["tid"])) == "main")])
        ex = sum(b - a for a, b in buckets)
        hidden = overlap(bwd, buckets)
        print(f"{pid:>4} {n:>5} {sum(e['dur'] for e in steps) / n / 1e3:>8.2f} {per('forward'):>7.2f} "
              f"{per('backward'):>7.2f} {per('wait for buckets'):>7.2f} {per('update'):>7.2f} {ex / n / 1e3:>11.2f} "
              f"{(100 * hidden / ex if ex else 0):>8.1f}%")


if __name__ == "__main__":
    main()
