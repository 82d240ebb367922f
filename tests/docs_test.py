#!/usr/bin/python3
# The documentation against the tree it describes:
#   1. every relative link in README.md and docs/*.md resolves: the file or folder exists, and a #anchor is one of the
#      target page's headings (GitHub's slugs) or <a id> marks; and no two pages share a title;
#   2. docs/config.md's key tables name exactly the keys octet's config reader accepts in each section: the reader's
#      own list ("unknown key (known here: ...)"), asked with a probe key through several configs and choices, so a key
#      added without its row, or a row for a key the reader refuses, fails here.
# Usage: tests/docs_test.py OCTET SOURCE_DIR
import os
import re
import subprocess
import sys

octet, root = sys.argv[1], sys.argv[2]
bad = []


def slug(title):  # GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens
    t = re.sub(r"<[^>]+>", "", title).strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def strip_code(text):  # fenced blocks and inline code spans hold no links
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    text = open(path, encoding="utf-8").read()
    out, seen = set(), {}
    for line in re.sub(r"^```.*?^```", "", text, flags=re.S | re.M).splitlines():
        m = re.match(r"^#{1,6} (.*)$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    out.update(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    return out


pages = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
for page in pages:
    rel = os.path.relpath(page, root)
    text = strip_code(open(page, encoding="utf-8").read())
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            bad.append(f"{rel}: link ({target}): no {os.path.relpath(dest, root)}")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append(f"{rel}: link ({target}): {os.path.relpath(dest, root)} has no heading or mark '{anchor}'")

# Every page's title (its first heading) is its own.
titles = {}
for page in pages:
    text = re.sub(r"^```.*?^```", "", open(page, encoding="utf-8").read(), flags=re.S | re.M)
    first = next((l for l in text.splitlines() if l.startswith("# ")), None)
    if first is None:
        continue  # (a page without a title has none to share)
    if first in titles:
        bad.append(f"{os.path.relpath(page, root)}: title '{first}' is also {titles[first]}'s")
    titles[first] = os.path.relpath(page, root)

# 2. Config keys: the reader's lists, unioned over configs and choices that open other keys.
sections = ["run", "data", "data.normalize", "data.augment", "model", "optimizer", "optimizer.schedule", "parallel",
            "compression"]
probes = [
    ["configs/fashion-mnist/lenet.yaml"],
    ["configs/mnist/mlp.yaml"],  # rmsprop
    ["configs/imagenet/resnet50.yaml", "--set",  # blocks, multistep
     "data={dataset: synthetic, synthetic_shape: [3, 224, 224], synthetic_classes: 1000}"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "data.dataset=image_folder", "--set",
     "data.augment.random_resized_crop=true"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "data.dataset=synthetic"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "data.dataset=cifar10_bin"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "optimizer.schedule={type: step, step_epochs: 1}"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "optimizer.schedule={type: cosine}"],
    ["configs/fashion-mnist/lenet.yaml", "--set", "model.precision=fp16"],
]
known = {s: set() for s in sections}
for s in sections:
    for p in probes:
        args = [octet, "train", os.path.join(root, p[0])] + p[1:] + ["--set", f"{s}.zz_docs_probe=1"]
        r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60)
        m = re.search(r"unknown key \(known here: ([^)]*)\)", r.stderr)
        if m:
            known[s].update(k.strip() for k in m.group(1).split(","))
    if not known[s]:
        bad.append(f"config section {s}: octet named no known keys for a probe key (its error changed?)")

doc = open(os.path.join(root, "docs", "config.md"), encoding="utf-8").read().splitlines()
for s in sections:
    try:
        i = doc.index(f"## `{s}`")
    except ValueError:
        bad.append(f"docs/config.md: no '## `{s}`' section")
        continue
    rows = set()
    j = i + 1
    while j < len(doc) and not doc[j].startswith("| key |") and not doc[j].startswith("## "):
        j += 1
    if j >= len(doc) or not doc[j].startswith("| key |"):
        bad.append(f"docs/config.md `{s}`: no key table ('| key |') before the next section")
        continue
    j += 2  # (past the header and its rule)
    while j < len(doc) and doc[j].startswith("|"):
        m = re.match(r"^\| `([A-Za-z0-9_]+)` \|", doc[j])
        if m:
            rows.add(m.group(1))
        j += 1
    rows |= {k for k in known[s] if f"{s}.{k}" in sections}  # (a subsection: its own table)
    for k in sorted(known[s] - rows):
        bad.append(f"docs/config.md `{s}`: the reader accepts '{k}', which has no row")
    for k in sorted(rows - known[s]):
        bad.append(f"docs/config.md `{s}`: row '{k}' is a key the reader refuses")

for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
print(f"ok: {len(pages)} pages' links resolve; docs/config.md names the reader's keys of {len(sections)} sections "
      f"({sum(len(v) for v in known.values())} keys)")
