#!/usr/bin/python3
# Plots that compare octet runs (Debian's python3-matplotlib): training loss and test accuracy against step and
# against training time, one line per run labelled by its codec; bytes sent per step; and a stacked bar of each
# run's phase times per step. Reads each run directory's metrics.jsonl, summary.json and config.yaml. With --confusion,
# the confusion matrix of an `octet eval` report instead.
# Usage: scripts/plot.py RUN_DIR [RUN_DIR...] [--out DIR] [--labels a,b,...] [--title TEXT]
#        scripts/plot.py --confusion EVAL_JSON [--out DIR] [--title TEXT]
#   --out        where the PNGs go (default: the current folder): loss.png, accuracy.png, bytes.png, phases.png
#   --labels     one label per run (default: the codec, e.g. "dynamic_tree8", with the run's name when two share one)
#   --confusion  octet eval's eval.json: confusion.png, each row (a true class) as shares of its images, the classes
#                named as the report names them
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from metrics_file import read_records  # noqa: E402  (this folder's module; the script runs from any folder)

PHASES = ["data", "forward", "backward", "compress", "communicate", "decompress", "wait", "update"]


def fail(msg):
    print(f"plot.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load_run(path):
    metrics = os.path.join(path, "metrics.jsonl")
    if not os.path.isfile(metrics):
        fail(f"{metrics}: no such file (is {path} an octet run directory?)")
    train, evals, summary = [], [], None
    # A last line cut off mid-write (a full disk, a kill) is skipped with a warning: octet's --resume drops it too.
    for _, e in read_records(metrics, "plot.py", strict=True):
        kind = e.get("event")
        if kind == "train":
            train.append(e)
        elif kind == "eval":
            evals.append(e)
        elif kind == "summary":
            summary = e
    if not train and not evals:
        fail(f"{metrics}: no train or eval events to plot")
    method = "none"
    cfg = os.path.join(path, "config.yaml")
    if os.path.isfile(cfg):
        import yaml
        try:
            c = yaml.safe_load(open(cfg, encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            fail(f"{cfg}: not YAML ({str(err).splitlines()[0]})")
        if not isinstance(c, dict):
            fail(f"{cfg}: not an octet config (a YAML {type(c).__name__})")
        method = ((c.get("compression") or {}).get("method")) or "none"
    return {"path": path, "name": os.path.basename(os.path.normpath(path)), "method": method, "train": train,
            "evals": evals, "summary": summary}


def save(fig, out, name):
    # Written through a temporary file in the same folder and renamed: no half-written PNG.
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".png", dir=out)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
        os.replace(tmp, os.path.join(out, name))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return os.path.join(out, name)


def import_pyplot():
    """matplotlib.pyplot on the Agg backend, imported here (not at the top) so that --help and argument errors work
    without it; without it, one error line (exit 1) rather than a traceback."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        if err.name in ("matplotlib", "matplotlib.pyplot"):
            fail("matplotlib is not installed (apt-get install python3-matplotlib)")
        fail(f"matplotlib cannot be imported ({err}); reinstall python3-matplotlib")
    return plt


def confusion(path, out, title):
    """confusion.png from an octet eval report: rows the true classes, columns the predictions, each row as shares of
    its images (a class with no image stays blank)."""
    try:
        with open(path) as f:
            e = json.load(f)
        m = e["confusion"]
        names = {c["class"]: c.get("name", str(c["class"])) for c in e.get("per_class", [])}
    except OSError as err:
        fail(f"--confusion: {path}: {err.strerror}")
    except (ValueError, KeyError, TypeError) as err:
        fail(f"--confusion: {path}: not an octet eval report ({err!r})")
    if m is None:
        fail(f"--confusion: {path}: the report holds no confusion matrix (a model of more than 1,000 outputs)")
    k = len(m)
    if k == 0 or any(not isinstance(r, list) or len(r) != k for r in m):
        fail(f"--confusion: {path}: confusion is not a square matrix")
    # Only the classes that occur (as labels or predictions): 1000 ImageNet outputs on a 10-class test set stay 10.
    used = [c for c in range(k) if sum(m[c]) > 0 or sum(m[r][c] for r in range(k)) > 0] or list(range(k))
    shares = [[m[r][c] / sum(m[r]) if sum(m[r]) else float("nan") for c in used] for r in used]
    plt = import_pyplot()
    n = len(used)
    fig, ax = plt.subplots(figsize=(min(4 + 0.45 * n, 24), min(3.5 + 0.45 * n, 24)))
    im = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    labels = [names.get(c, str(c)) for c in used]
    if n <= 40:
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        ax.set_yticklabels(labels, fontsize=8)
    if n <= 20:
        for r in range(n):
            for c in range(n):
                v = m[used[r]][used[c]]
                if v:
                    ax.text(c, r, str(v), ha="center", va="center", fontsize=7,
                            color="white" if shares[r][c] > 0.5 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    fig.colorbar(im, ax=ax, label="share of the true class's images")
    top1 = e.get("top1")
    fig.suptitle(f"{title + ': ' if title else ''}confusion matrix, {e.get('count', '?')} images"
                 + (f", top-1 {100 * top1:.2f}%" if isinstance(top1, (int, float)) else ""), fontsize=11)
    print(save(fig, out, "confusion.png"))
    plt.close(fig)


def out_folder(path):
    """--out: made where it is missing (as its parents); something else by that name is an error."""
    if os.path.exists(path) and not os.path.isdir(path):
        fail(f"--out: {path} is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        fail(f"--out: cannot make {path}: {e.strerror}")


def main():
    ap = argparse.ArgumentParser(description="Plots that compare octet runs, or an octet eval confusion matrix.")
    ap.add_argument("runs", nargs="*", metavar="RUN_DIR")
    ap.add_argument("--out", default=".")
    ap.add_argument("--labels", default="")
    ap.add_argument("--title", default="")
    ap.add_argument("--confusion", default="", metavar="EVAL_JSON")
    a = ap.parse_args()
    if a.confusion:
        if a.runs:
            fail("--confusion plots one octet eval report; give run directories without it")
        out_folder(a.out)
        confusion(a.confusion, a.out, a.title)
        return
    if not a.runs:
        fail("give one or more run directories, or --confusion EVAL_JSON")
    plt = import_pyplot()
    runs = [load_run(p) for p in a.runs]
    if a.labels:
        labels = a.labels.split(",")
        if len(labels) != len(runs):
            fail(f"--labels: {len(labels)} labels for {len(runs)} runs")
    else:
        methods = [r["method"] for r in runs]
        labels = [m if methods.count(m) == 1 else f"{m} ({r['name']})" for m, r in zip(methods, runs)]
    out_folder(a.out)

    written = []
    title = (a.title + ": ") if a.title else ""
    for key, ylabel, fname, source in (("loss", "training loss", "loss.png", "train"),
                                       ("test_accuracy", "test accuracy", "accuracy.png", "evals")):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for i, (r, label) in enumerate(zip(runs, labels)):
            pts = [e for e in r[source] if key in e]
            if not pts:
                continue
            # Ten colours, then the same ten dashed: no two runs look alike up to twenty.
            style = {"color": f"C{i % 10}", "linestyle": "-" if i < 10 else "--", "label": label}
            axes[0].plot([e["step"] for e in pts], [e[key] for e in pts], marker="." if len(pts) < 30 else None,
                         **style)
            timed = [e for e in pts if "train_seconds" in e]
            axes[1].plot([e["train_seconds"] for e in timed], [e[key] for e in timed],
                         marker="." if len(timed) < 30 else None, **style)
        axes[0].set_xlabel("step")
        axes[1].set_xlabel("training time (s)")
        for ax in axes:
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        if key == "loss":
            for ax in axes:
                ax.set_yscale("log")
        axes[1].legend(fontsize=8)
        fig.suptitle(f"{title}{ylabel} against step and against training time")
        written.append(save(fig, a.out, fname))
        plt.close(fig)

    sums = [r["summary"] or {} for r in runs]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(runs) + 2), 4))
    sent = [s.get("bytes_sent_per_step", 0) / 1e6 for s in sums]
    fp32 = [s.get("fp32_bytes_per_step", 0) / 1e6 for s in sums]
    xs = range(len(runs))
    ax.bar([x - 0.2 for x in xs], fp32, width=0.4, label="fp32 equivalent", color="#bbbbbb")
    ax.bar([x + 0.2 for x in xs], sent, width=0.4, label="sent")
    for x, s in zip(xs, sums):
        if s.get("compression_ratio"):
            ax.annotate(f"x{s['compression_ratio']:.1f}", (x + 0.2, s.get("bytes_sent_per_step", 0) / 1e6),
                        ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("MB per step (per rank)")
    ax.legend(fontsize=8)
    ax.set_title(f"{title}bytes on the wire per step")
    written.append(save(fig, a.out, "bytes.png"))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(runs) + 2), 4))
    bottom = [0.0] * len(runs)
    for ph in PHASES:
        vals = [s.get(f"{ph}_ms", 0.0) for s in sums]
        if not any(vals):
            continue
        ax.bar(list(xs), vals, bottom=bottom, label=ph)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title(f"{title}where a step's time goes")
    written.append(save(fig, a.out, "phases.png"))
    plt.close(fig)
    for w in written:
        print(w)


if __name__ == "__main__":
    main()
