"""docs/conformance.md and docs/conformance.json from the cells of a run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Dict, List, Optional

from scenarios import Scenario

JSON_LOG_LINES = 3
CLASS_LABEL = {"exact, gave up as documented": "gave up (exact)"}
EXACT_CLASSES = ("exact", "exact, gave up as documented")


def cell_label(c: Dict) -> str:
    text = CLASS_LABEL.get(c["class"], c["class"])
    if c["class"] == "flaky":
        text = "flaky: " + " / ".join(CLASS_LABEL.get(x, x) for x in c.get("classes", []))
    also = [a for a in (c.get("verifier") or {}).get("also") or [] if a != c["class"]]
    if also and c["class"] != "flaky":
        text += " + " + ", ".join(also)
    if not c.get("matches_expect"):
        text = f"**{text}**"
    notes = []
    if c.get("faults_injected_total") == 0:
        notes.append("no fault fired")
    if c.get("protocol_seen") not in (None, c["protocol"]):
        notes.append(f"TV{c['protocol_seen']} client")
    if c.get("kproxy_exit") not in (None, 0):
        notes.append(f"kproxy exit {c['kproxy_exit']}")
    obs = c.get("observatory") or {}
    if obs.get("verdict") == "differs":
        notes.append("observatory differs")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def observatory_summary(row_cells: List[Dict]) -> str:
    """The row's observatory column: whether kproxy's GET /transactions/{id} agrees with each
    client's account (conformance/runner/observatory.py)."""
    judged = [c for c in row_cells if (c.get("observatory") or {}).get("verdict") in ("agrees", "differs")]
    if not judged:
        return "-"
    differs = [c for c in judged if c["observatory"]["verdict"] == "differs"]
    if not differs:
        return f"agrees ({len(judged)})"
    return "differs: " + "; ".join(f"{c['client']}: {c['observatory'].get('difference', '')}"
                                   + (f" (broker's log: {c['observatory']['broker_log']})" if c["observatory"].get("broker_log") else "")
                                   for c in differs)


def reproduce_command(c: Dict, settings: Dict) -> str:
    regression = ["--regressions"] if c.get("regression") else []
    args = ["scripts/conformance"] + regression + ["--clients", c["client"], "--scenarios", c["scenario"], "--tv", str(c["protocol"]),
            "--workloads", c.get("workload", "producer"),
            "--seed", str(settings["seed"]), "--transactions", str(settings["transactions"]),
            "--records-per-txn", str(settings["records_per_txn"]), "--nodes", str(settings["nodes"]),
            "--cell-timeout", str(int(settings["cell_timeout_s"])),
            "--transaction-timeout-ms", str(settings["transaction_timeout_ms"]),
            "--verifier-timeout", str(int(settings["verifier_timeout_s"])),
            "--out", "/tmp/conformance-one.md", "--json", "/tmp/conformance-one.json"]
    return " ".join(shlex.quote(a) for a in args)


def what_happened(c: Dict) -> str:
    parts = []
    if c.get("runner_error"):
        parts.append(f"runner: {c['runner_error'][:300]}")
    acc = c.get("account") or {}
    d = c.get("driver") or {}
    if d:
        drv = f"driver exit {d.get('exit')}" + (", killed at the cell bound" if d.get("timed_out") else "") + f" after {d.get('seconds')} s"
        if acc.get("missing"):
            drv += ", no account printed"
        else:
            drv += (f"; committed {acc.get('committed_count')}, aborted {acc.get('aborted_count')}, "
                    f"unknown {acc.get('unknown_count')} transactions")
        parts.append(drv)
    if acc.get("errors"):
        parts.append("client errors " + ", ".join(f"{k} x{v}" for k, v in sorted(acc["errors"].items())))
    if acc.get("gave_up"):
        parts.append(f"gave up: {acc.get('give_up_reason')}")
    v = c.get("verifier") or {}
    if v.get("error"):
        parts.append(v["error"][:300])
    elif v:
        keys = ("records_read", "committed_expected", "missing_count", "duplicate_count", "dirty_count")
        parts.append("verifier: " + ", ".join(f"{k} {v.get(k)}" for k in keys if k in v)
                     + (f"; {v['detail']}" if v.get("detail") else ""))
    act = c.get("action") or {}
    if act:
        what = f"action {act.get('kind')} at transaction {act.get('at_transaction')}"
        if not act.get("fired"):
            what += ": not reached (the client ended before that transaction's EndTxn)"
        else:
            what += f" ({act.get('after_s')} s in)"
            if "killed_node" in act:
                what += f": node {act['killed_node']} killed, restored in {act.get('restore_s')} s"
            joiner = act.get("joiner") or {}
            if joiner:
                what += (f"; a second group member joined for {joiner.get('seconds')} s and was given {joiner.get('records')} record(s)"
                         + (f" ({joiner['error'][:160]})" if joiner.get("error") else ""))
            second = act.get("second") or {}
            if second:
                sa = second.get("account") or {}
                what += (f"; second instance {second.get('run_id')}: {second.get('class')}, committed {sa.get('committed_count')}, "
                         f"aborted {sa.get('aborted_count')}, unknown {sa.get('unknown_count')}"
                         + (f", gave up: {sa.get('give_up_reason')}" if sa.get("gave_up") else ""))
        parts.append(what)
    f = [x for x in c.get("faults") or [] if x.get("name")]
    if f:
        parts.append("faults (injected/hits): " + ", ".join(f"{x['name']} {x.get('injected')}/{x.get('hits')}" for x in f))
    if c.get("protocol_seen") not in (None, c["protocol"]):
        parts.append(f"requests show TV{c['protocol_seen']}: {c.get('request_versions')}")
    if c.get("kproxy_exit") not in (None, 0):
        parts.append(f"kproxy exited {c['kproxy_exit']} (its log: {c.get('dir')}/kproxy.log)")
    if c["class"] == "flaky":
        parts.append("runs: " + " / ".join(c.get("classes", [])))
    obs = c.get("observatory") or {}
    if obs.get("verdict"):
        parts.append(f"observatory {obs['verdict']}" + (f": {obs['difference']}" if obs.get("difference") else "")
                     + (f"; {obs['note']}" if obs.get("note") else "")
                     + (f"; {obs['broker_log']}" if obs.get("broker_log") else ""))
    return "; ".join(parts)


DRIVERS = Path(__file__).resolve().parent.parent / "drivers"


def table_section(w: str, p: int, scenarios: List[Scenario], clients: List[str], by_key: Dict, header: Dict, col) -> List[str]:
    """One table: workload `w` (producer or ctp) under transaction protocol `p`, a row per scenario,
    a column per client and the observatory's column; then a note per cell that is not exact."""
    title = "transaction.version 2, KIP-890" if p == 2 else "pre-KIP-890, transaction.version 1 shown by kproxy"
    if w == "ctp":
        lines = [f"## Consume-transform-produce, transaction protocol {p} ({title})", "",
                 "The runner fills an input topic with N committed transactions of M records; the driver reads it "
                 "read_committed in a group, writes one output per input in a transaction and commits the input "
                 "offsets with it. The verifier checks each input exactly once in the output and the group's "
                 "committed offsets against the outputs (the last input of each committed transaction, + 1).", ""]
        rows = [sc for sc in scenarios if sc.runnable and (sc.mode == "ctp" or sc.number == 0)]
        cols = [c for c in clients if any(k[0] == c and k[3] == "ctp" for k in by_key)]
    else:
        lines = [f"## Transaction protocol {p} ({title})", ""]
        rows = [sc for sc in scenarios if sc.mode != "ctp"]
        cols = clients
    if not cols:
        return lines + ["No client ran this workload.", ""]
    lines.append("| scenario | " + " | ".join(col(c) for c in cols) + " | observatory |")
    lines.append("|---|" + "---|" * (len(cols) + 1))
    notes = []
    for sc in rows:
        row = [f"{sc.name} (v{sc.version}, #{sc.number or '-'}, expect {sc.expect})"]
        row_cells = []
        for client in cols:
            if not sc.runnable:
                row.append("workload: none")
                continue
            if p not in sc.protocols:
                row.append("n/a")
                continue
            c = by_key.get((client, sc.name, p, w))
            if c is None:
                row.append("not run")
                continue
            row_cells.append(c)
            row.append(cell_label(c))
            if (c["class"] != "exact" or not c.get("matches_expect") or c.get("faults_injected_total") == 0
                    or (c.get("observatory") or {}).get("verdict") == "differs"):
                notes.append(f"- {client} x {sc.name}{' (ctp)' if w == 'ctp' else ''}: **{CLASS_LABEL.get(c['class'], c['class'])}** "
                             f"(expect {sc.expect}). {what_happened(c)}. Reproduce: `{reproduce_command(c, header)}`")
        row.append(observatory_summary(row_cells))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines += notes or ["Every cell run was exact."]
    lines.append("")
    return lines


def counts_section(clients: List[str], protocols: List[int], cells: List[Dict], col) -> List[str]:
    """Per client, table and protocol: cells run, exact (committed exactly once, whether or not the
    client gave up as documented), not exact, flaky, as the scenario expects / not, the cells in
    which the client spoke the other protocol, the observatory's agreement, and the time per cell."""
    out = ["## Counts per client", "",
           "| client | table | protocol | cells | exact (incl. gave up as documented) | not exact | flaky | as expected | "
           "not as expected | spoke the other protocol | observatory agrees / differs | s per cell (median, max) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for client in clients:
        for w in ("producer", "ctp"):
            for p in protocols:
                mine = [c for c in cells if c["client"] == client and c["protocol"] == p and c.get("workload", "producer") == w]
                if not mine:
                    continue
                exact = sum(1 for c in mine if c["class"] in EXACT_CLASSES)
                flaky = sum(1 for c in mine if c["class"] == "flaky")
                expected = sum(1 for c in mine if c.get("matches_expect"))
                other = sum(1 for c in mine if c.get("protocol_seen") not in (None, p))
                agree = sum(1 for c in mine if (c.get("observatory") or {}).get("verdict") == "agrees")
                differ = sum(1 for c in mine if (c.get("observatory") or {}).get("verdict") == "differs")
                times = sorted(r.get("elapsed_s") or 0 for c in mine for r in (c.get("runs") or [c]))
                med = times[len(times) // 2] if times else 0
                out.append(f"| {col(client)} | {w} | TV{p} | {len(mine)} | {exact} | {len(mine) - exact - flaky} | {flaky} | {expected} | "
                           f"{len(mine) - expected} | {other} | {agree} / {differ} | {med:.0f}, {times[-1] if times else 0:.0f} |")
    out.append("")
    return out


def findings_section(clients: List[str]) -> List[str]:
    """What the drivers' authors saw a client do that Kafka's protocol does not allow, with the
    known issues of that client that match: conformance/drivers/<family>/FINDINGS.md, as written."""
    out = []
    for client in clients:
        f = DRIVERS / client / "FINDINGS.md"
        if not f.is_file():
            continue
        body = f.read_text().strip().splitlines()
        if body and body[0].startswith("# "):
            body = body[1:]
        while body and not body[0].strip():
            body = body[1:]
        out += [f"### {client} ([conformance/drivers/{client}/FINDINGS.md](../conformance/drivers/{client}/FINDINGS.md))", ""]
        out += [line[1:] if line.startswith("## ") else line for line in body] + [""]
    if out:
        out = ["## Findings", "",
               "What the drivers' authors saw a client do, in the cells above and in runs of their own, and whether a known "
               "issue of that client matches (each family's FINDINGS.md, included as written).", ""] + out
    return out


def regression_verdict(affected: Optional[Dict], fixed: Optional[Dict]) -> str:
    """"as expected" when the affected version's cell is not exact (nor a documented give-up) and
    the fixed version's cell is `exact`; otherwise what is missing."""
    if affected is None or fixed is None:
        return "not run" if affected is None and fixed is None else "half run"
    # A cell in which the scenario's faults never fired shows nothing about the defect.
    silent = [side for side, c in (("affected", affected), ("fixed", fixed)) if c.get("faults_injected_total") == 0]
    if silent:
        return "NOT as expected: no fault fired in the " + " and the ".join(silent) + " version's cell"
    a_ok = affected["class"] not in EXACT_CLASSES
    f_ok = fixed["class"] == "exact"
    if a_ok and f_ok:
        return "as expected"
    if f_ok and affected["class"] == "exact, gave up as documented":
        # The defect made the client raise an error its documentation says to stop on, where the
        # fixed version goes on: visible, but no record was wrong. Shown apart from the above.
        return "as expected, documented give-up"
    return "NOT as expected: " + ", ".join(
        x for x in (None if a_ok else "the affected version is exact", None if f_ok else "the fixed version is not exact") if x)


def regression_rows(regressions: List[Scenario], cells: List[Dict]) -> List[Dict]:
    """One entry per regression file: the defect, the versions and the class each version's cell got."""
    rows = []
    for sc in regressions:
        r = sc.regression or {}
        mine = {c.get("client_version"): c for c in cells if c.get("regression") == sc.name}
        a, f = mine.get(str(r.get("affected"))), mine.get(str(r.get("fixed")))
        rows.append({"name": sc.name, "version": sc.version, "issue": r.get("issue"), "title": r.get("title"),
                     "family": r.get("family"), "protocol": r.get("protocol"),
                     "affected": str(r.get("affected")), "fixed": str(r.get("fixed")), "fixed_in": r.get("fixed_in"),
                     "not_provokable": r.get("not_provokable"),
                     "affected_class": a["class"] if a else None, "fixed_class": f["class"] if f else None,
                     "verdict": ("not provokable through a proxy" if r.get("not_provokable")
                                 else regression_verdict(a, f)),
                     "affected_run_id": a["run_id"] if a else None, "fixed_run_id": f["run_id"] if f else None})
    return rows


def regressions_section(regressions: List[Scenario], cells: List[Dict], header: Dict) -> List[str]:
    """The regressions table (issue #45 item 4): each known defect's scenario on the affected and on
    the fixed client version; then, per entry, what each cell did and the command that reruns it."""
    if not regressions:
        return []
    rows = regression_rows(regressions, cells)
    lines = ["## Regressions: known defects, reproduced", "",
             "Each row is a transactional defect that was reported and fixed upstream, provoked by the scenario file "
             "in [scenarios/regressions/](../scenarios/regressions/) through kproxy against the real cluster, once on "
             "a client version that has the defect and once on the version that fixed it (both pinned in the file). "
             "\"as expected\": the affected version is not `exact` (nor a documented give-up) and the fixed version is "
             "`exact`, on the same scenario, seed and protocol, and the scenario's faults fired in both cells; "
             "\"as expected, documented give-up\": the affected version stopped on an error its documentation says to "
             "stop on (no record wrong, but the run ended where the fixed version's completed). `scripts/conformance --regressions` runs this set.", "",
             "| defect | scenario | client | TV | affected version: class | fixed version: class | verdict |",
             "|---|---|---|---|---|---|---|"]
    notes = []
    by_run = {c["run_id"]: c for c in cells}
    for row, sc in zip(rows, regressions):
        label = lambda cls: "not run" if cls is None else CLASS_LABEL.get(cls, cls)  # noqa: E731
        if row["not_provokable"]:
            lines.append(f"| [{row['title']}]({row['issue']}) | {row['name']} | {row['family']} | - | {row['affected']}: - | "
                         f"{row['fixed']}: - | not provokable through a proxy |")
            notes.append(f"- {row['name']}: not provokable through a proxy: {row['not_provokable']}")
            continue
        verdict = row["verdict"] if row["verdict"].startswith("as expected") else f"**{row['verdict']}**"
        lines.append(f"| [{row['title']}]({row['issue']}) | [{row['name']}](../scenarios/regressions/{row['name']}.yaml) (v{row['version']}) "
                     f"| {row['family']} | TV{row['protocol']} | {row['affected']}: {label(row['affected_class'])} "
                     f"| {row['fixed']}: {label(row['fixed_class'])} | {verdict} |")
        for which in ("affected", "fixed"):
            c = by_run.get(row[f"{which}_run_id"])
            if c is not None:
                notes.append(f"- {row['name']}, {which} {row[which]}: **{CLASS_LABEL.get(c['class'], c['class'])}**. "
                             f"{what_happened(c)}. Reproduce: `{reproduce_command(c, header)}`")
    return lines + [""] + notes + [""]


def dumps(doc: Dict) -> str:
    """The JSON report: the header indented, then one cell per line (diffs show changed cells)."""
    head = json.dumps({k: v for k, v in doc.items() if k != "cells"}, indent=1)
    cells = ",\n  ".join(json.dumps(c, separators=(",", ":")) for c in doc.get("cells", []))
    return head[:-2] + ',\n "cells": [\n  ' + cells + "\n ]\n}\n"


def write(md_path: Path, json_path: Path, *, header: Dict, scenarios: List[Scenario], clients: List[str],
          protocols: List[int], cells: List[Dict], client_info: Dict[str, Dict],
          regressions: Optional[List[Scenario]] = None) -> None:
    regressions = list(regressions or [])
    reg_cells = [c for c in cells if c.get("regression")]
    cells = [c for c in cells if not c.get("regression")]
    by_key = {(c["client"], c["scenario"], c["protocol"], c.get("workload", "producer")): c for c in cells}

    def col(client: str) -> str:
        info = client_info.get(client) or {}
        ver = info.get("version")
        return f"{client} ({ver})" if ver else client

    lines = ["# Transactional client conformance", "",
             "Generated by `scripts/conformance` (conformance/README.md); do not edit by hand.", "",
             f"- date: {header['date']}",
             f"- seed: {header['seed']}",
             f"- kproxy commit: {header['kproxy_commit']} (`{header['kproxy']}`, scenarios given by {header['scenario_mode_text']})"
             + (f"; kproxy sources {header['kproxy_source']} (CMake, codec/, config/, proxy/ at that commit)" if header.get("kproxy_source") else "")
             + (f"; binary sha256 {header['kproxy_sha256'][:16]}…" if header.get("kproxy_sha256") else "")
             + ("".join(f"; merged with a run at {c}" for c in sorted(set(header.get("merged_commits") or []) - {header['kproxy_commit']}))),
             f"- cluster: Kafka {header['kafka_version']}, {header['nodes']} node(s), transaction.version {header['cluster_tv']} finalized",
             f"- workload: {header['transactions']} transactions of {header['records_per_txn']} records per cell, "
             f"{header['partitions']} partitions, transaction.timeout.ms {header['transaction_timeout_ms'] or 'client default'}, "
             f"cell bound {int(header['cell_timeout_s'])} s, verifier wait for open transactions max({int(header['verifier_timeout_s'])} s, "
             f"transaction timeout + the coordinator's 10 s abort cleanup + 10 s), {header['repeat']} run(s) per cell"
             + (" (+2 for each cell not exact on its first run and for a seeded tenth of the exact ones: --confirm)" if header.get("confirm") else "")
             + (f", workloads {', '.join(header['workloads'])}" if header.get("workloads") else "")
             + (f", `no progress` below {int(100 * header['min_committed_fraction'])} % committed" if header.get("min_committed_fraction") is not None else ""),
             "- clients: " + (", ".join(f"{k} {v.get('version') or '?'} ({v.get('library') or '?'})" for k, v in sorted(client_info.items())) or "none"),
             f"- command: `{header['command']}`"
             + "".join(f"; merged with `{c}`" for c in (header.get("merged_commands") or [])[1:]),
             *[f"- note: {n}" for n in header.get("notes") or []],
             f"- cells: {len(cells) + len(reg_cells)} of {header.get('cells_planned', len(cells) + len(reg_cells))}, wall time {header['wall_s']:.0f} s"
             + ("" if header.get("complete", True) else " (run not finished: the rest are \"not run\")"), "",
             "Classes are the verifier's ([conformance/verifier/README.md](../conformance/verifier/README.md)). **Bold**: not what the scenario "
             "expects of a correct client (`expect:` in the scenario file). \"no fault fired\": the scenario's rules "
             "never injected in that cell, so it shows nothing about the fault. \"TV1 client\" (in a TV2 table): the "
             "EndTxn / AddPartitionsToTxn versions the client sent show the pre-KIP-890 protocol, so the cell is no "
             "KIP-890 result. `+ stuck` and the like: further classes the verifier found in the same cell. "
             "`flaky`: the runs of one cell disagree (each run's class shown). `gave up (undocumented)`: the client "
             "stopped on an error its own documentation does not name as fatal for that call "
             "([conformance/verifier/documented-fatal.json](../conformance/verifier/documented-fatal.json)). "
             "`no progress`: the client did not give up but committed fewer than "
             f"{int(100 * (header.get('min_committed_fraction') or 0.5))} % of its transactions. `n/a`: the scenario "
             "does not apply to that protocol. The observatory column: whether kproxy's `GET /transactions/{id}` "
             "counts the cell's transactions as the client's account does (\"agrees (n)\" over n cells; each difference named, "
             "with what the broker's log shows where it settles the difference: a transaction the client could not know "
             "the outcome of, one it counts committed that the log lacks, one it did not report that the log shows "
             "committed, records it wrote twice).", ""]
    v1 = [c for c in cells if c.get("verifier") and "atomicity_checked" not in c["verifier"]]
    if v1:
        lines += [f"**{len(v1)} of the {len(cells)} cells were judged by the first verifier** (before issue #45: no atomicity "
                  "check, any give-up counted as documented, no `no progress`, `stuck` hiding other classes, no observatory "
                  "comparison): their classes are that verifier's, re-rendered here (`--report-from`), not v2 verdicts.", ""]
    if regressions:
        lines += ["This report has a regressions table (known client defects, each on an affected and a fixed "
                  "client version): add one as conformance/README.md \"Regressions\" says.", ""]
    if scenarios or not regressions:
        workloads = [w for w in ("producer", "ctp") if any(c.get("workload", "producer") == w for c in cells)] or ["producer"]
        for w in workloads:
            for p in protocols:
                lines += table_section(w, p, scenarios, clients, by_key, header, col)
    lines += regressions_section(regressions, reg_cells, header)
    if clients:
        lines += counts_section(clients, protocols, cells, col)
    lines += findings_section(clients)
    skipped = [sc for sc in scenarios if not sc.runnable]
    if skipped:
        lines += ["## Scenarios this workload cannot show", ""]
        lines += [f"- {sc.name} (#{sc.number}): {sc.description}" for sc in skipped]
        lines.append("")
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text("\n".join(lines))
    doc = dict(header)
    doc["clients"] = client_info
    doc["scenarios"] = [{"name": s.name, "version": s.version, "number": s.number, "protocols": s.protocols,
                         "expect": s.expect, "runnable": s.runnable, "mode": s.mode, "description": s.description}
                        for s in scenarios]
    # The first few fault log lines per cell (cell.json in the work dir keeps up to 40): the
    # committed JSON stays small enough to diff.
    doc["regressions"] = regression_rows(regressions, reg_cells)
    doc["cells"] = [dict(c, fault_log_lines=(c.get("fault_log_lines") or [])[:JSON_LOG_LINES]) for c in cells + reg_cells]
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(dumps(doc))
