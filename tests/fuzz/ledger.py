#!/usr/bin/env python3
"""tests/fuzz/ledger.py — keeps tests/fuzz/CAMPAIGNS.md (called by tests/fuzz/campaign).

    ledger.py CAMPAIGNS.md                      rewrite the per-target table from the rows
    ledger.py CAMPAIGNS.md --row DATE COMMIT SECONDS EXECS TOTAL CRASHES EDGES NOTE
                                                append one run, then rewrite the table

A run row's cells: date, commit, seconds per target, "target N; target N" executions, their total,
crashes ("0", or "N: target n; ..."; a bare N > 0 from before this script named no target), edges
per target ("target E; ..."; libFuzzer's "cov:" at the end of the run, "—" where not recorded),
note. The per-target table adds every row's executions, takes the edges of the latest row that
has them, counts crashes, and keeps the notes column (seed corpus, dictionary) written by hand.
"""
import re
import sys
from pathlib import Path

ALL_TARGETS = [
    "frame_reader", "request_decode", "response_decode", "api_versions_rewrite", "broker_address_rewrite",
    "config_loader", "admin_json", "admin_request", "client_hello", "proxy_header", "txn_produce", "txn_model",
]
FLOOR = 10_000_000  # issue #46: every target to 10 M executions

TITLE = """# Fuzzing campaigns

One row per `tests/fuzz/campaign` run (appended by the script). Executions add up over runs, per
target toward issue #46's floor of 10 M each (and in all toward issue #15's 100 M). Smoke runs of
`scripts/test` and the short runs made while a target was written are not counted here.
"""
TARGETS_HEAD = "## Per target"
TARGETS_INTRO = """Rewritten by the script from the rows below (`tests/fuzz/campaign --ledger`): executions of all
runs, the edges covered at the end of the latest run that recorded them (libFuzzer's `cov:`, which
counts what the whole corpus reaches), crashes found. The last column is written by hand: what a
target starts from beyond the generated seeds (`tests/fuzz/corpus/<target>/`,
`tests/fuzz/dictionaries/<target>.dict`).
"""
TARGETS_HEADER = "| target | executions | ≥ 10 M | edges | crashes | seeds, dictionary |"
RUNS_HEAD = "## Runs"
RUNS_HEADER = "| date (UTC) | commit | s/target | executions per target | total | crashes | edges per target | note |"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def pairs(cell):
    """'a 1; b 2' -> [('a', 1), ('b', 2)]"""
    out = []
    for part in cell.split(";"):
        m = re.fullmatch(r"\s*([a-z_]+)\s+(\d+)\s*", part)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def parse(text):
    rows, notes = [], {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| date (UTC) |"):
            old = len(cells(line)) == 7  # before the edges column
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                c = cells(row)
                if old or len(c) == 7:
                    c = c[:6] + ["—"] + c[6:]
                rows.append(c)
            break
    for i, line in enumerate(lines):
        if line.startswith("| target | executions"):
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                c = cells(row)
                notes[c[0].strip("`")] = c[-1]
            break
    return rows, notes


def render(rows, notes):
    execs = {t: 0 for t in ALL_TARGETS}
    edges, crashes, unattributed = {}, {t: 0 for t in ALL_TARGETS}, []
    for c in rows:
        for t, n in pairs(c[3]):
            execs[t] = execs.get(t, 0) + n
        for t, e in pairs(c[6]):
            edges[t] = e  # rows are in time order: the latest wins
        named = pairs(c[5].split(":", 1)[1]) if ":" in c[5] else []
        for t, n in named:
            crashes[t] = crashes.get(t, 0) + n
        if not named and re.fullmatch(r"\d+", c[5]) and int(c[5]) > 0:
            unattributed.append(f"{c[0]} ({c[5]})")
    out = [TITLE, TARGETS_HEAD, "", TARGETS_INTRO, TARGETS_HEADER, "|---|---:|---|---:|---:|---|"]
    for t in ALL_TARGETS:
        out.append(
            f"| {t} | {execs[t]:,} | {'yes' if execs[t] >= FLOOR else 'no'} | {edges.get(t, '—')} | "
            f"{crashes[t]} | {notes.get(t, '')} |")
    if unattributed:
        out.append("")
        out.append("Rows whose crashes name no target (see their note): " + ", ".join(unattributed) + ".")
    out += ["", RUNS_HEAD, "", RUNS_HEADER, "|---|---|---|---|---|---|---|---|"]
    out += ["| " + " | ".join(c) + " |" for c in rows]
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    rows, notes = parse(path.read_text()) if path.exists() else ([], {})
    if len(argv) > 2:
        if argv[2] != "--row" or len(argv) != 11:
            print(__doc__, file=sys.stderr)
            return 2
        row = [a.replace("|", "/").replace("\n", " ") for a in argv[3:]]
        rows.append(row)
    path.write_text(render(rows, notes))
    total = sum(n for c in rows for _, n in pairs(c[3]))
    print(f"ledger: {len(rows)} runs, {total:,} executions in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
