#!/usr/bin/python3
# Time to accuracy: the training seconds an octet run needed to reach a target test accuracy, read from its
# metrics.jsonl (stdlib only). The time is the run's train_seconds at the first test evaluation whose test_accuracy is
# >= TARGET: rank 0's wall time of its training steps (data loading included; evaluation and checkpoints excluded,
# trainer/run.cpp), so a run is measured at the end of the epoch whose evaluation (run.eval_every) first reaches the
# target. Evaluations are the "eval" records and the "summary" record (the run's final test evaluation). A run
# continued with --resume restarts train_seconds at 0 (trainer/metrics.h); where train_seconds falls between records
# the earlier invocation's last value is added, which undercounts the steps after that record (a lower bound).
# Usage: scripts/time_to_accuracy.py RUN_DIR|METRICS_JSONL TARGET
#   TARGET  a fraction in [0, 1], e.g. 0.88 (test_accuracy's unit)
# Prints the seconds (e.g. "41.27"), or "not reached" when no evaluation reaches TARGET; exit 0 either way.
# Exit 1: no metrics file, a broken record, an evaluation without train_seconds or no evaluation in it; exit 2: bad
# arguments (one error line).
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from metrics_file import read_records  # noqa: E402  (this folder's module; the script runs from any folder)

NAME = "time_to_accuracy.py"
EVALS = ("eval", "summary")  # the records of a test evaluation


def usage_error(msg):
    print(f"{NAME}: {msg} (usage: {NAME} RUN_DIR|METRICS_JSONL TARGET)", file=sys.stderr)
    sys.exit(2)


def fail(msg):
    print(f"{NAME}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def parse_target(text):
    try:
        t = float(text)
    except ValueError:
        usage_error(f"target {text!r}: not a number (want a fraction in [0, 1], e.g. 0.88)")
    if not math.isfinite(t) or t < 0 or t > 1:
        usage_error(f"target {text}: want a fraction in [0, 1], e.g. 0.88 (not a percentage)")
    return t


def time_to(path, target):
    """(seconds, evaluations seen): seconds is None when no evaluation reaches target."""
    offset, prev, evals = 0.0, None, 0
    for n, rec in read_records(path, NAME):
        ts = rec.get("train_seconds")
        if ts is None:
            if rec.get("event") in EVALS:  # an evaluation that cannot be timed: no answer to give
                fail(f"{path}:{n}: {rec.get('event')} record has no train_seconds (written by an older octet?)")
            continue
        if not isinstance(ts, (int, float)):
            fail(f"{path}:{n}: train_seconds is not a number")
        if prev is not None and ts < prev:  # a new invocation (--resume): its clock starts at 0
            offset += prev
        prev = ts
        if rec.get("event") not in EVALS:
            continue
        acc = rec.get("test_accuracy")
        if not isinstance(acc, (int, float)):
            fail(f"{path}:{n}: an {rec.get('event')} record without a numeric test_accuracy")
        evals += 1
        if acc >= target:
            return offset + ts, evals
    return None, evals


def main(argv):
    if any(a in ("-h", "--help") for a in argv):
        with open(__file__) as f:
            for line in f.readlines()[1:]:
                if not line.startswith("#"):
                    break
                print(line[2:].rstrip())
        return 0
    flags = [a for a in argv if a.startswith("--")]
    if flags:
        usage_error(f"unknown argument {flags[0]} (known: --help)")
    if len(argv) != 2:
        usage_error(f"want 2 arguments, got {len(argv)}")
    where, target = argv[0], parse_target(argv[1])
    path = os.path.join(where, "metrics.jsonl") if os.path.isdir(where) else where
    if not os.path.isfile(path):
        fail(f"{path}: no such file (is {where} an octet run directory?)")
    secs, evals = time_to(path, target)
    if evals == 0:
        fail(f"{path}: no evaluation record (event eval or summary with test_accuracy): did the run finish an epoch?")
    print("not reached" if secs is None else f"{secs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
