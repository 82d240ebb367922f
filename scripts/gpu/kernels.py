#!/usr/bin/env python3
# profile.sh's table: where each side's GPU time went over the profiled steps, from a profiler's per-kernel report
# (nsys stats -r cuda_gpu_kern_sum --format csv, or ncu --csv --print-units base with gpu__time_duration.sum and,
# optionally, dram__bytes_read.sum and dram__bytes_write.sum). Kernels are put in categories by name (batchnorm,
# convolution/GEMM, pooling, casts and copies, ReLU/add/other elementwise, loss, optimizer, other), first match
# wins; per category: ms a step, kernels a step and, from ncu's bytes, GB/s. Then each side's costliest kernels.
# Usage: kernels.py --steps N LABEL=FILE.csv [LABEL=FILE.csv ...] [--top K]
#   e.g. kernels.py --steps 3 octet=out/octet_kern.csv pytorch=out/torch_kern.csv
import argparse
import csv
import re
import sys

CATEGORIES = [
    ("batchnorm", r"batch_?norm|\bbn[a-z]?_|welford"),
    ("conv/gemm", r"conv|cudnn|xmma|cutlass|gemm|implicit|wgrad|dgrad|fprop|winograd|fft|\bsm\d\d_"),
    ("pooling", r"pool"),
    ("loss", r"softmax|nll|cross_?entropy"),
    ("optimizer", r"sgd|momentum|multi_tensor|foreach|_amp_|unscale|optim|update"),
    ("cast/copy", r"cast|convert|relayout|transpose|nchw|nhwc|copy|to_16"),
    ("relu/add/elementwise", r"relu|threshold|add|clamp|elementwise|mask|mul|fill|zero|memset"),
    ("reduction", r"reduce"),
]
TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
              "second": 1.0}
BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024.0, "mibyte": 1024.0**2}


def category(name):
    low = name.lower()
    for cat, pattern in CATEGORIES:
        if re.search(pattern, low):
            return cat
    return "other"


def number(text):
    return float(text.replace(",", "").strip() or 0)


class Kernels:
    """Per kernel name: seconds, launches and (ncu) bytes over the profiled steps."""

    def __init__(self):
        self.seconds, self.count, self.bytes = {}, {}, {}
        self.has_bytes = False

    def add(self, name, seconds, count=1, nbytes=0.0):
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.count[name] = self.count.get(name, 0) + count
        self.bytes[name] = self.bytes.get(name, 0.0) + nbytes


def read(path):
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    # Both tools may print other lines (==PROF==, notes) before the header.
    start = next((i for i, line in enumerate(lines) if ("Kernel Name" in line and "Metric Name" in line) or
                  ("Total Time" in line and "Name" in line)), None)
    if start is None:
        raise SystemExit(f"kernels.py: {path}: no nsys kernel summary or ncu CSV header found")
    rows = list(csv.DictReader(lines[start:]))
    k = Kernels()
    if "Metric Name" in lines[start]:
        per_launch = {}  # ncu: one row a metric of each launch (ID)
        for r in rows:
            if not r.get("ID", "").strip().isdigit():
                continue
            d = per_launch.setdefault(r["ID"], {"name": r["Kernel Name"], "s": 0.0, "b": 0.0})
            metric, unit = r["Metric Name"], r.get("Metric Unit", "").strip().lower()
            if metric == "gpu__time_duration.sum":
                if unit not in TIME_UNITS:
                    raise SystemExit(f"kernels.py: {path}: unknown time unit '{unit}' (ID {r['ID']})")
                d["s"] = number(r["Metric Value"]) * TIME_UNITS[unit]
            elif metric.startswith("dram__bytes"):
                d["b"] += number(r["Metric Value"]) * BYTE_UNITS.get(unit, 1.0)
                k.has_bytes = True
        for d in per_launch.values():
            k.add(d["name"], d["s"], 1, d["b"])
    else:
        total = next(c for c in next(csv.reader(lines[start:start + 1])) if c.startswith("Total Time"))
        if "(ns)" not in total:
            raise SystemExit(f"kernels.py: {path}: '{total}' is not in ns")
        for r in rows:  # nsys: one row a kernel name, its total over every launch
            k.add(r["Name"], number(r[total]) * 1e-9, int(number(r["Instances"])))
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("sides", nargs="+", help="LABEL=FILE.csv")
    ap.add_argument("--steps", type=int, required=True, help="steps the profile spans")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    if a.steps < 1:
        raise SystemExit("kernels.py: --steps must be >= 1")
    sides = []
    for s in a.sides:
        if "=" not in s:
            raise SystemExit(f"kernels.py: '{s}' is not LABEL=FILE.csv")
        label, path = s.split("=", 1)
        sides.append((label, read(path)))
    cats = [c for c, _ in CATEGORIES] + ["other"]
    per = {}
    for label, k in sides:
        agg = {c: [0.0, 0, 0.0] for c in cats}
        for name, sec in k.seconds.items():
            e = agg[category(name)]
            e[0] += sec
            e[1] += k.count[name]
            e[2] += k.bytes[name]
        per[label] = agg
    head = "| category |" + "".join(f" {l} ms/step | {l} kernels/step |" for l, _ in sides)
    head += "".join(f" {l} GB/s |" for l, k in sides if k.has_bytes)
    print(head)
    print("|---|" + "---:|" * (head.count("|") - 2))
    for c in cats + ["total"]:
        row = f"| {c} |"
        for label, k in sides:
            if c == "total":
                sec, n = sum(v[0] for v in per[label].values()), sum(v[1] for v in per[label].values())
            else:
                sec, n = per[label][c][0], per[label][c][1]
            row += f" {1e3 * sec / a.steps:.2f} | {n / a.steps:.1f} |"
        for label, k in sides:
            if k.has_bytes:
                vals = per[label].values() if c == "total" else [per[label][c]]
                sec, nbytes = sum(v[0] for v in vals), sum(v[2] for v in vals)
                row += f" {nbytes / sec / 1e9:.0f} |" if sec > 0 else " - |"
        print(row)
    for label, k in sides:
        print(f"\n{label}: the {a.top} costliest kernels (ms a step, launches a step"
              f"{', GB/s' if k.has_bytes else ''}, category)")
        for name, sec in sorted(k.seconds.items(), key=lambda kv: -kv[1])[:a.top]:
            short = re.sub(r"\s+", " ", name)
            short = short if len(short) <= 110 else short[:107] + "..."
            bw = f", {k.bytes[name] / sec / 1e9:.0f}" if k.has_bytes and sec > 0 else ""
            print(f"  {1e3 * sec / a.steps:8.3f}  {k.count[name] / a.steps:5.0f}{bw}  {category(name)}: {short}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
