#!/usr/bin/env python3
"""Rewrites octet's CUDA files (.cu, .cuh) as C++ for the CUDA emulator (tests/cuemu): what g++ cannot read becomes
calls into the emulator, and nothing else changes (#line keeps errors pointing at the original file and line).

  kernel<<<grid, block[, shared[, stream]]>>>(args)
      -> ::cuemu::launch("kernel", [](auto&&... a) { kernel(a...); }, grid, block[, shared[, stream]])(args)
  extern __shared__ [__align__(n)] T name[];
      -> T* name = reinterpret_cast<T*>(::cuemu::dynamic_shared());
  __shared__ T a[N], b;   (a block's fixed-size shared variables)
      -> the same, then ::cuemu::shared_use(&a, sizeof a); ::cuemu::shared_use(&b, sizeof b);
         (the emulator fills them with 0xff bytes at each block's start, as it does the dynamic array)

usage: translate.py SOURCE_ROOT OUT_DIR FILE...   (each FILE relative to SOURCE_ROOT; .cu -> OUT_DIR/FILE.cpp,
       .cuh -> OUT_DIR/FILE, so that the rewritten headers shadow the originals on the include path)
"""
import os
import re
import sys

# The kernel: a name (with ::) and optional template arguments, then <<<config>>> and the argument list's "(".
LAUNCH = re.compile(r"((?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*(?:<[^<>;(){}]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)
DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>, ]+?)\s+(\w+)\s*\[\s*\]\s*;")


def shared_names(decl):
    """The variables a `__shared__ T a[..], b;` declaration (its text after __shared__, without the ;) declares."""
    flat, depth = "", 0
    for ch in decl:  # (a union's or struct's braces dropped)
        depth += ch == "{"
        if depth == 0:
            flat += ch
        depth -= ch == "}"
    flat = re.sub(r"<[^<>]*>", "", flat)  # (template arguments, whose commas are not declarators')
    names = []
    for item in flat.split(","):
        item = re.sub(r"\[.*", "", item).strip()
        m = re.search(r"(\w+)\s*$", item)
        if m:
            names.append(m.group(1))
    return names


def register_shared(text):
    """After each fixed-size __shared__ declaration, a call that lets the emulator poison it at every block's start."""
    out, pos = [], 0
    for m in re.finditer(r"(?<!extern )__shared__\s", text):
        if m.start() < pos:
            continue
        depth, end = 0, m.end()
        while end < len(text) and not (text[end] == ";" and depth == 0):
            depth += (text[end] == "{") - (text[end] == "}")
            end += 1
        decl = text[m.end():end]
        calls = " ".join("::cuemu::shared_use(&%s, sizeof %s);" % (n, n) for n in shared_names(decl))
        out.append(text[pos:end + 1] + " " + calls)
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def translate(text, path):
    def launch(m):
        name, config = m.group(1), " ".join(m.group(2).split())
        lines = "\n" * m.group(0).count("\n")  # (kept, so later lines keep their numbers)
        return '::cuemu::launch("%s", [](auto&&... cuemu_a) { %s(cuemu_a...); }, %s)(%s' % (name, name, config, lines)

    out, n = LAUNCH.subn(launch, text)
    if "<<<" in out:
        line = out[: out.index("<<<")].count("\n") + 1
        sys.exit("translate.py: %s:%d: a kernel launch this script cannot read" % (path, line))
    out = DYNAMIC_SHARED.sub(lambda m: "%s* %s = reinterpret_cast<%s*>(::cuemu::dynamic_shared());"
                             % (m.group(1), m.group(2), m.group(1)), out)
    if re.search(r"extern\s+__shared__", out):
        sys.exit("translate.py: %s: a dynamic shared array this script cannot read" % path)
    out = register_shared(out)
    return '#line 1 "%s"\n%s' % (path, out)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    root, dest = sys.argv[1], sys.argv[2]
    for rel in sys.argv[3:]:
        src = os.path.join(root, rel)
        with open(src, encoding="utf-8") as f:
            text = translate(f.read(), src)
        target = os.path.join(dest, rel + (".cpp" if rel.endswith(".cu") else ""))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        old = None
        if os.path.exists(target):
            with open(target, encoding="utf-8") as f:
                old = f.read()
        if old != text:  # (unchanged outputs keep their times: no rebuild)
            with open(target + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(target + ".tmp", target)


if __name__ == "__main__":
    main()
