"""Reads an octet run's metrics.jsonl into its records (stdlib only), for time_to_accuracy.py and plot.py."""
import json
import sys


def _fail(prog, msg):
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_records(path, prog, strict=False):
    """The metrics file's records in order, as (line number, record) pairs, one record a JSON object a line.

    prog names the script in its messages ("PROG: error: ..." and exit 1, "PROG: warning: ..."). A file that is not
    UTF-8 is an error naming the byte offset; a broken line is an error naming the line. A last line cut off mid-write
    (a full disk, a kill: octet's --resume drops it) is skipped with a warning. strict=False (time_to_accuracy.py): any
    last line that is no JSON object is taken as cut off; errors say "not a JSON record". strict=True (plot.py): only a
    last line without its newline that is not JSON is cut off (its warning names the JSON error); errors name the JSON
    error and column, or the JSON type of a record that is no object.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        _fail(prog, f"{path}: not a metrics file: binary bytes at offset {err.start}")
    lines = text.split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out = []
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        where = f"{path}:{i + 1}"
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError if strict else ValueError) as err:
            if i == last and (not strict or not text.endswith("\n")):
                how = f" ({err.msg}); skipped it" if strict else "; skipped"
                print(f"{prog}: warning: {where}: the last line is cut off{how}", file=sys.stderr)
                continue
            _fail(prog, f"{where}: not JSON ({err.msg} at column {err.colno})" if strict else
                  f"{where}: not a JSON record")
        if not isinstance(rec, dict):
            if strict:
                _fail(prog, f"{where}: not a metrics record (a JSON {type(rec).__name__})")
            if i == last:
                print(f"{prog}: warning: {where}: the last line is cut off; skipped", file=sys.stderr)
                continue
            _fail(prog, f"{where}: not a JSON record")
        out.append((i + 1, rec))
    return out
