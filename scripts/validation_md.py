#!/usr/bin/env python3
"""Writes validation figures into docs/validation.md, and its headline table
into README.md, as generated data.

    python3 scripts/validation_md.py section NAME --command 'CMD …' < BODY.md
    python3 scripts/validation_md.py headline

`section` replaces what lies between `<!-- NAME -->` and `<!-- /NAME -->` in
docs/validation.md with a line naming the command, the machine, the kernel
and the date, then BODY (a Markdown table and any notes), and regenerates
the headline. The `scripts/validate-*` scripts and `scripts/study-convergence`
call it when given `--markdown`, so a table is replaced, never appended to.

`headline` (also `scripts/headline`) builds the headline table from every
section that has a `ratio` column (kscale ÷ reference) and writes it between
`<!-- headline -->` markers in both files; `cargo test -p kscale --test
docs` fails when README.md's copy differs from validation.md's.
"""

import argparse
import datetime
import os
import platform
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "docs" / "validation.md"
README = ROOT / "README.md"

# Section name -> (families, reference, the anchor of its heading in
# validation.md) in the headline. A section missing here keeps its table in
# validation.md and stays out of the headline. The headline carries no date:
# the README has none, and each table's own header says when it was taken.
HEADLINE = {
    "validate-micro-lmbench": ("`syscall` `ipc` `ctx` `mem` `fs`", "lmbench",
                               "micro-families-against-lmbench"),
    "validate-micro-tools": ("`syscall` `threads` `fscache`", "perf bench, sysbench, fio",
                             "micro-families-against-perf-sysbench-and-fio"),
    "validate-net": ("`net`", "netperf, iperf3", "net-against-netperf-and-iperf3"),
    "validate-chat": ("`chat`", "perf bench sched messaging (same order of magnitude)",
                      "chat-against-perf-bench-sched-messaging"),
    "validate-web-sleep-writable": ("`web`", "wrk (the load waiting and writing as wrk does, `send=writable`)",
                                    "web-against-wrk"),
    "validate-fileserver": ("`fileserver.mix`", "dbench (the trace's proportions, not its calls: same order of magnitude)",
                            "fileserver-against-dbench"),
    "validate-fileserver-trace-tmpfs": ("`fileserver.trace` on tmpfs", "dbench (the same loadfile and calls, `calls=dbench`)",
                                        "fileservertrace-against-dbench"),
    "validate-fileserver-trace-ext4": ("`fileserver.trace` on journalled ext4",
                                       "dbench (the same loadfile and calls, `calls=dbench`)",
                                       "fileservertrace-against-dbench"),
    "validate-cmd": ("`cmd`", "hyperfine", "cmd-against-hyperfine"),
}


def markers(name):
    return f"<!-- {name} -->", f"<!-- /{name} -->"


def block(text, name):
    """The text between a section's markers, or None."""
    start, end = markers(name)
    i = text.find(start)
    j = text.find(end)
    if i < 0 or j < i:
        return None
    return text[i + len(start):j]


def replace(text, name, body, path):
    start, end = markers(name)
    i = text.find(start)
    j = text.find(end)
    if i < 0 or j < i:
        sys.exit(f"validation_md: {path} has no {start} … {end} section")
    return text[:i + len(start)] + "\n" + body.strip("\n") + "\n" + text[j:]


def machine():
    model, flags = "", ""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            key, _, val = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = val.strip()
            elif key == "flags" and not flags:
                flags = val
    except OSError:
        pass
    model = re.sub(r"\((R|TM)\)", "", model or platform.machine())
    model = re.sub(r"\s+", " ", model).strip()
    vm = ", virtual machine" if " hypervisor" in f" {flags}" else ""
    return f"{os.cpu_count()} CPUs, {model}{vm}"


def filesystem_of(path):
    """`ext4 (/dev/loop0, journal) mounted at /mnt/kj`: what a measured
    directory's files are on, as /proc/self/mountinfo and /sys/fs/ext4 say;
    file-system figures follow the filesystem more than the kernel."""
    path = os.path.realpath(path)
    best = None
    for line in open("/proc/self/mountinfo", encoding="utf-8"):
        left, _, right = line.partition(" - ")
        point = left.split()[4].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and \
                (best is None or len(point) > len(best[0])):
            fstype, source = right.split()[:2]
            best = (point, fstype, source)
    if best is None:
        return "an unknown filesystem"
    point, fstype, source = best
    what = [source]
    if fstype == "ext4":
        task = Path(f"/sys/fs/ext4/{Path(source).name}/journal_task")
        if task.exists():
            what.append("no journal" if task.read_text().strip() == "<none>" else "journal")
    return f"{fstype} ({', '.join(what)}) mounted at {point}"


def header(command):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return f"`{command}` · {machine()} · Linux {platform.release()} · {date}"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def ratios(body):
    """Every kscale ÷ reference ratio in the `ratio` columns of a section's
    tables: plain numbers (1.02), percentages (102.6 %) and ranges or lists
    (0.88–1.14, 0.91 / 0.94) alike."""
    out = []
    col = None
    for line in body.splitlines():
        if not line.startswith("|"):
            col = None
            continue
        row = cells(line)
        if col is None:
            col = next((k for k, c in enumerate(row) if c.lower() == "ratio"), -1)
            continue
        if col < 0 or col >= len(row) or set(row[col]) <= set("-: "):
            continue
        cell = row[col]
        for m in re.finditer(r"(?<![±\d.])(\d+(?:\.\d+)?)(\s*%)?", cell):
            v = float(m.group(1)) / (100 if m.group(2) else 1)
            if m.group(2) or "." in m.group(1):
                out.append(v)
    return out


def headline(text):
    rows = [
        "| families | against | kscale ÷ reference: median (range) | within ±10 % | table |",
        "|---|---|---|---:|---|",
    ]
    for name, (families, reference, anchor) in HEADLINE.items():
        body = block(text, name)
        if body is None:
            continue
        rs = ratios(body)
        if not rs:
            continue
        near = sum(0.9 <= r <= 1.1 for r in rs)
        rows.append(
            f"| {families} | {reference} | {statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f}) "
            f"| {near} of {len(rs)} | [validation.md](docs/validation.md#{anchor}) |"
        )
    return "\n".join(rows)


def write_headline():
    text = VALIDATION.read_text(encoding="utf-8")
    table = headline(text)
    VALIDATION.write_text(replace(text, "headline", table, VALIDATION), encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    README.write_text(replace(readme, "headline", table, README), encoding="utf-8")


def write_section(name, command, body):
    """Replaces section NAME of docs/validation.md with the header line of
    COMMAND run here and now, then BODY; regenerates the headline."""
    text = VALIDATION.read_text(encoding="utf-8")
    text = replace(text, name, header(command) + "\n\n" + body, VALIDATION)
    VALIDATION.write_text(text, encoding="utf-8")
    print(f"validation_md: wrote <!-- {name} --> in {VALIDATION.relative_to(ROOT)}", file=sys.stderr)
    write_headline()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("section")
    s.add_argument("name")
    s.add_argument("--command", required=True)
    sub.add_parser("headline")
    a = ap.parse_args()
    if a.what == "section":
        write_section(a.name, a.command, sys.stdin.read())
    else:
        write_headline()


if __name__ == "__main__":
    main()
