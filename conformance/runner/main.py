"""scripts/conformance: runs transactional clients through kproxy's fault scenarios against a real
Kafka 4.4 cluster and writes the matrix (docs/conformance.md, docs/conformance.json).

See conformance/README.md. Python 3 stdlib + PyYAML (Debian's python3-yaml).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import concurrent.futures
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
INTEGRATION = REPO_ROOT / "tests" / "integration"
for p in (HERE, INTEGRATION):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import cell as cellmod  # noqa: E402
import report  # noqa: E402
import scenarios as scn  # noqa: E402

DEFAULT_KPROXY = REPO_ROOT / "build-release" / "proxy" / "kproxy"
DRIVERS = REPO_ROOT / "conformance" / "drivers"


def say(msg: str) -> None:
    print(f"[conformance] {msg}", flush=True)


def families() -> List[str]:
    if not DRIVERS.is_dir():
        return []
    return sorted(d.name for d in DRIVERS.iterdir() if (d / "run").is_file() and os.access(d / "run", os.X_OK))


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="scripts/conformance",
        description="Run transactional Kafka clients through kproxy fault scenarios (scenarios/*.yaml) against a real "
                    "Kafka 4.4 cluster; write the client x scenario x protocol matrix.",
        epilog="Example (one cell): scripts/conformance --clients java-4.4 --scenarios 06 --tv 2 --nodes 1 "
               "--out /tmp/c.md --json /tmp/c.json")
    ap.add_argument("--clients", help="comma-separated driver families (conformance/drivers/*); default: all with a run script")
    ap.add_argument("--scenarios", help="comma-separated file numbers (6 or 06), names or globs (0[1-5]-*); default: all")
    ap.add_argument("--tv", default="1,2", help="transaction protocol(s): 1, 2 or 1,2 (default 1,2)")
    ap.add_argument("--seed", type=int, default=1, help="substituted into every rule's trigger seed (default 1)")
    ap.add_argument("--jobs", type=int, default=1, help="cells run at once, each with its own kproxy and topic (default 1)")
    ap.add_argument("--transactions", type=int, default=5, help="transactions per cell (default 5)")
    ap.add_argument("--records-per-txn", type=int, default=10, help="records per transaction (default 10)")
    ap.add_argument("--cell-timeout", type=float, default=120.0,
                    help="seconds a cell's driver may run before it is killed (default 120; a scenario's workload.cell_timeout_s can raise it)")
    ap.add_argument("--transaction-timeout-ms", type=int, default=10000,
                    help="passed to every driver (default 10000: a transaction a client leaves open, e.g. after a fatal "
                         "error kproxy answered in the broker's place, is aborted by the broker within ~20 s, well inside "
                         "the verifier's wait; 0 = the driver's own default; a scenario's workload can override it)")
    ap.add_argument("--verifier-timeout", type=float, default=60.0,
                    help="seconds the verifier waits for the topic's last stable offset (default 60)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of each cell's topic (default 3)")
    ap.add_argument("--nodes", type=int, default=3, help="Kafka nodes to start (default 3)")
    ap.add_argument("--bootstrap", help="use this running cluster (HOST:PORT,...) instead of starting one")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell; cells whose runs disagree are 'flaky' (default 1)")
    ap.add_argument("--out", default=str(REPO_ROOT / "docs" / "conformance.md"), help="markdown report (default docs/conformance.md)")
    ap.add_argument("--json", default=str(REPO_ROOT / "docs" / "conformance.json"), help="JSON report (default docs/conformance.json)")
    ap.add_argument("--work-dir", help="per-cell files (configs, logs, accounts); default build/conformance/<time>")
    ap.add_argument("--kproxy", default=str(DEFAULT_KPROXY),
                    help="kproxy binary (default build-release/proxy/kproxy, built with cmake + ninja if missing)")
    ap.add_argument("--scenario-mode", choices=("auto", "flag", "config"), default="auto",
                    help="how kproxy gets a scenario: flag = `kproxy --scenario FILE`; config = its faults and "
                         "api_versions in the config file; auto (default) = flag if `kproxy --help` lists --scenario")
    ap.add_argument("--no-setup", action="store_true", help="skip conformance/setup (drivers and verifier already installed)")
    ap.add_argument("--regressions", action="store_true",
                    help="run the known-defect set instead of the matrix: each scenarios/regressions/*.yaml on its "
                         "affected and its fixed client version (--scenarios and --clients filter it; --tv is the "
                         "file's protocol); the report's regressions table says whether the affected version is not "
                         "exact and the fixed one exact")
    ap.add_argument("--list", action="store_true", help="list the selected scenarios and clients, run nothing")
    ap.add_argument("--workloads", default="producer,ctp",
                    help="producer, ctp or both (default): ctp runs the scenarios whose workload is ctp, and the "
                         "baseline, with the drivers whose `modes` file lists ctp")
    ap.add_argument("--min-committed-fraction", type=float, default=0.5,
                    help="a run that did not give up and committed fewer of its transactions than this is "
                         "'no progress' (default 0.5; a scenario's workload.min_committed_fraction overrides it)")
    ap.add_argument("--driver-args", default="",
                    help="test only: extra options for every driver (shell words), e.g. \"--break split\" for the "
                         "Java driver's known-bad modes")
    ap.add_argument("--tap", action="store_true",
                    help="record every frame kproxy sees in each cell (`kproxy tap --json` on its admin API) into the "
                         "cell's tap.jsonl, to read what the client said on the wire when a cell needs explaining")
    ap.add_argument("--confirm", action="store_true",
                    help="after the first run of every cell, run twice more each cell that was not exact and a seeded "
                         "random tenth (at least one) of the exact ones; a cell whose runs disagree is 'flaky' "
                         "(issue #45's publication rule; --repeat N runs every cell N times instead)")
    ap.add_argument("--confirm-from", metavar="JSON", default=None,
                    help="take every cell's first run from an earlier run's JSON report (the same cells, one run "
                         "each, the same kproxy binary) and run only --confirm's repeats now; the report is of both "
                         "(the earlier run's date, commit and command kept, the wall times added): a published run "
                         "whose first pass and repeats did not fit one sitting. An earlier --confirm run's repeats are "
                         "taken too (each from its cell.json in that run's work dir), except those that were a "
                         "runner error, which run again: a confirm pass the runner lost finishes here")
    ap.add_argument("--note", action="append", default=None, metavar="TEXT",
                    help="a line for the report header's notes (repeatable): why a run was split, resumed or had "
                         "cells taken out; kept through --confirm-from and --report-from")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="run only the K-th of N slices of the cells (1-based; merge the JSON reports with --report-from)")
    ap.add_argument("--report-from", metavar="JSON", default=None, action="append",
                    help="run nothing: rewrite --out (and --json) from the cells of an earlier run's JSON report "
                         "(e.g. after a driver's FINDINGS.md changed); repeat it to merge the reports of --shard runs")
    args = ap.parse_args(argv)
    try:
        args.protocols = sorted({int(x) for x in args.tv.split(",") if x.strip()})
    except ValueError:
        ap.error(f"--tv: want 1, 2 or 1,2, not {args.tv!r}")
    if not args.protocols or any(p not in (1, 2) for p in args.protocols):
        ap.error(f"--tv: want 1, 2 or 1,2, not {args.tv!r}")
    if args.jobs < 1 or args.repeat < 1 or args.nodes < 1:
        ap.error("--jobs, --repeat and --nodes must be >= 1")
    args.workload_list = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if not args.workload_list or set(args.workload_list) - {"producer", "ctp"}:
        ap.error(f"--workloads: want producer, ctp or producer,ctp, not {args.workloads!r}")
    args.shard_k, args.shard_n = 1, 1
    if args.shard:
        try:
            k, n = (int(x) for x in args.shard.split("/"))
        except ValueError:
            ap.error(f"--shard: want K/N, not {args.shard!r}")
        if not 1 <= k <= n:
            ap.error(f"--shard: want 1 <= K <= N, not {args.shard!r}")
        args.shard_k, args.shard_n = k, n
    return args


def ensure_kproxy(path: str) -> str:
    p = Path(path)
    if p.is_file() and os.access(p, os.X_OK):
        return str(p)
    if p.resolve() != DEFAULT_KPROXY.resolve():
        raise SystemExit(f"scripts/conformance: --kproxy {path}: no such executable")
    say(f"{p} missing: building it (Release)")
    for cmd in (["cmake", "-S", ".", "-B", "build-release", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", "build-release", "-j2", "--target", "kproxy"]):
        say("$ " + " ".join(cmd))
        if subprocess.run(["nice", "-n", "10"] + cmd, cwd=str(REPO_ROOT)).returncode != 0:
            raise SystemExit("scripts/conformance: building kproxy failed")
    return str(p)


def scenario_flag_supported(kproxy: str) -> bool:
    try:
        r = subprocess.run([kproxy, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--scenario" in (r.stdout + r.stderr)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(REPO_ROOT), capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


# What a kproxy binary is built from: the files the build reads (CMake, the codec, the config
# loader, the proxy). A run split over sittings (--shard, --confirm-from) must run one source tree.
KPROXY_SOURCES = ("CMakeLists.txt", "cmake", "codec", "config", "proxy")


def kproxy_source_tree() -> str:
    """A short hash of the committed kproxy sources at HEAD (git's tree ids of KPROXY_SOURCES),
    with "-dirty" when the work tree changes any of them; "unknown" outside git."""
    try:
        ids = subprocess.run(["git", "rev-parse"] + [f"HEAD:{s}" for s in KPROXY_SOURCES], cwd=str(REPO_ROOT),
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--"] + list(KPROXY_SOURCES), cwd=str(REPO_ROOT),
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if ids.returncode != 0:
        return "unknown"
    tree = hashlib.sha1(ids.stdout.encode()).hexdigest()[:12]
    return tree + ("-dirty" if dirty.stdout.strip() else "")


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def drivers_not_set_up(clients: List[str]) -> List[str]:
    """Each client's driver asked whether it is set up (its run script with
    CONFORMANCE_CHECK_SETUP=1 exits 0 once its checks pass, before running anything): the ones that
    are not, with what the driver said. A run must not start with them: their cells would read
    `crashed` for a missing install, not for anything the client did."""
    missing = []
    for c in clients:
        env = dict(cellmod.driver_env(c) or os.environ, CONFORMANCE_CHECK_SETUP="1")
        try:
            r = subprocess.run([str(DRIVERS / cellmod.split_client(c)[0] / "run")], env=env, capture_output=True,
                               text=True, timeout=600)
            if r.returncode != 0:
                missing.append(f"{c}: {(r.stderr.strip().splitlines() or ['exit ' + str(r.returncode)])[-1]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            missing.append(f"{c}: {e}")
    return missing


def cluster_transaction_version(bootstrap: str) -> Optional[int]:
    try:
        from test_chaos_features import api_versions  # ApiVersions v4 with the feature tags
        return api_versions(bootstrap, "conformance-probe")["finalized"].get("transaction.version")
    except Exception as e:  # noqa: BLE001 - a probe failure is reported, not fatal
        say(f"could not read the cluster's finalized features: {e}")
        return None


def runs_of_earlier_cells(earlier: Dict) -> Dict[tuple, List[Dict]]:
    """--confirm-from: each cell's runs in an earlier report, as full records. A cell of one run is
    its own record; a cell of a --confirm run keeps a summary per run, so each run's record is read
    from the cell.json in its directory. Runs that were a runner error are left out (they run
    again); so is a cell whose first run was one."""
    out: Dict[tuple, List[Dict]] = {}
    for cell in earlier.get("cells", []):
        key = (cell.get("client"), cell.get("scenario"), cell.get("protocol"), cell.get("workload") or "producer")
        if not cell.get("class"):
            continue
        if not cell.get("runs"):
            out[key] = [dict(cell, attempt=1)]
            continue
        recs = []
        for attempt, summary in enumerate(cell["runs"], 1):
            if summary.get("class") == "runner error":
                continue
            rec = json.loads((Path(summary["dir"]) / "cell.json").read_text())
            if rec.get("run_id") != summary.get("run_id"):
                raise ValueError(f"{summary['dir']}/cell.json is run {rec.get('run_id')}, not {summary.get('run_id')}")
            recs.append(dict(rec, attempt=attempt))
        if recs and recs[0]["attempt"] == 1:
            out[key] = recs
    return out


def combine(runs: List[Dict]) -> Dict:
    """One record for a cell from its runs: the first run's, with class 'flaky' when they disagree."""
    first = dict(runs[0])
    classes = [r["class"] for r in runs]
    if len(runs) > 1:
        first["runs"] = [{k: r.get(k) for k in ("class", "run_id", "elapsed_s", "driver_s", "faults_injected_total", "dir",
                                                 "protocol_seen", "observatory")} for r in runs]
        first["classes"] = classes
        if len(set(classes)) > 1:
            first["class"] = "flaky"
            first["matches_expect"] = False
        else:
            first["matches_expect"] = all(r.get("matches_expect") for r in runs)
        first["elapsed_s"] = round(sum(r.get("elapsed_s", 0) for r in runs), 1)
    return first


def rewrite_report(sources: List[Path], all_sc, md_path: Path, json_path: Path, all_reg=(), notes=()) -> int:
    """The report of earlier runs, written again from their JSON (cells, header, clients): the
    tables and notes are the runs'; the findings and counts are read again. Several sources (the
    shards of one run, --shard K/N) are merged: their cells, scenarios and clients together, the
    header of the first with the wall times added up."""
    docs = []
    for source in sources:
        try:
            docs.append(json.loads(Path(source).read_text()))
        except (OSError, ValueError) as e:
            print(f"scripts/conformance: --report-from {source}: {e}", file=sys.stderr)
            return 2
    doc = dict(docs[0])
    trees = sorted({d.get("kproxy_source") for d in docs if d.get("kproxy_source")})
    if len(trees) > 1 or (len(docs) > 1 and any(t.endswith("-dirty") for t in trees)):
        print(f"scripts/conformance: --report-from: the sources ran different or uncommitted kproxy sources "
              f"({', '.join(trees)}): one report is of one kproxy", file=sys.stderr)
        return 2
    if len(docs) > 1:
        seen = set()
        doc["cells"], doc["scenarios"], doc["clients"] = [], [], {}
        for d in docs:
            for c in d.get("cells", []):
                key = (c["client"], c["scenario"], c["protocol"], c.get("workload", "producer"))
                if key not in seen:
                    seen.add(key)
                    doc["cells"].append(c)
            for sc in d.get("scenarios", []):
                if sc["name"] not in {x["name"] for x in doc["scenarios"]}:
                    doc["scenarios"].append(sc)
            for r in d.get("regressions", []):
                if r["name"] not in {x["name"] for x in doc.setdefault("regressions_merged", [])}:
                    doc["regressions_merged"].append(r)
            for k, v in (d.get("clients") or {}).items():
                if v.get("version") or k not in doc["clients"]:
                    doc["clients"][k] = v
        doc["scenarios"].sort(key=lambda x: x["name"])
        doc["wall_s"] = sum(d.get("wall_s", 0) for d in docs)
        doc["cells_planned"] = sum(d.get("cells_planned", 0) for d in docs)
        doc["shards"] = [d.get("shard") for d in docs]
        doc["merged_commits"] = [d.get("kproxy_commit") for d in docs]
        # Every source's command in the header (a shard, a re-run of some cells, the regressions);
        # and every source's notes (why a source's cells were chosen).
        doc["merged_commands"] = [c for d in docs for c in (d.get("merged_commands") or [d.get("command")]) if c]
        doc["notes"] = [n for d in docs for n in d.get("notes") or []]
        doc["complete"] = all(d.get("complete", True) for d in docs)
    doc["notes"] = list(doc.get("notes") or []) + [n for n in notes if n not in (doc.get("notes") or [])]
    names = [s["name"] for s in doc.get("scenarios", [])]
    by_name = {sc.name: sc for sc in all_sc}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"scripts/conformance: --report-from: scenarios no longer in scenarios/: {unknown}", file=sys.stderr)
        return 2
    cells = doc.get("cells", [])
    import observatory
    for c in cells:
        observatory.recompare(c)   # the comparison as it is now, from what each cell stored
    header = {k: v for k, v in doc.items() if k not in ("cells", "clients", "scenarios")}
    protocols = sorted({c["protocol"] for c in cells if not c.get("regression")}) or [1, 2]
    # The scenario as it was in that run (its version), not as the file reads now.
    as_run = [dataclasses.replace(by_name[s["name"]], version=s["version"]) for s in doc.get("scenarios", [])]
    reg_by_name = {r.name: r for r in all_reg}
    reg_names = [r["name"] for r in doc.pop("regressions_merged", None) or doc.get("regressions", [])]
    gone = [n for n in reg_names if n not in reg_by_name]
    if gone:
        print(f"scripts/conformance: --report-from: regressions no longer in scenarios/regressions/: {gone}", file=sys.stderr)
        return 2
    header = {k: v for k, v in header.items() if k != "regressions"}
    # The matrix's columns: every client with a cell outside the regressions set.
    plain_clients = [c for c in doc.get("clients", {}) if any(x["client"] == c and not x.get("regression") for x in cells)]
    report.write(md_path, json_path, header=header, scenarios=as_run, clients=plain_clients,
                 protocols=protocols, cells=cells, client_info=doc.get("clients", {}),
                 regressions=[reg_by_name[n] for n in reg_names])
    say(f"wrote {md_path} and {json_path} from {', '.join(map(str, sources))} ({len(cells)} cell(s))")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    command = "scripts/conformance " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    try:
        all_sc = scn.load_all()
        chosen = scn.select(all_sc, args.scenarios.split(",") if args.scenarios else None)
    except scn.ScenarioError as e:
        print(f"scripts/conformance: {e}", file=sys.stderr)
        return 2
    try:
        all_reg = scn.load_all(scn.REGRESSION_DIR) if scn.REGRESSION_DIR.is_dir() else []
    except scn.ScenarioError as e:
        print(f"scripts/conformance: {e}", file=sys.stderr)
        return 2
    if args.report_from:
        return rewrite_report([Path(x) for x in args.report_from], all_sc, Path(args.out), Path(args.json), all_reg,
                              notes=args.note or [])
    available = families()
    if args.regressions:
        try:
            chosen = scn.select(all_reg, args.scenarios.split(",") if args.scenarios else None)
        except scn.ScenarioError as e:
            print(f"scripts/conformance: {e}", file=sys.stderr)
            return 2
        wanted = [c.strip() for c in args.clients.split(",") if c.strip()] if args.clients else None
        clients = []
        for sc in chosen:
            r = sc.regression
            for v in (r["affected"], r["fixed"]):
                spec = f"{r['family']}@{v}"
                if sc.runnable and (wanted is None or spec in wanted or r["family"] in wanted) and spec not in clients:
                    clients.append(spec)
        args.clients = ",".join(clients)
    else:
        clients = [c.strip() for c in args.clients.split(",") if c.strip()] if args.clients else available
    missing = [c for c in clients if cellmod.split_client(c)[0] not in available]
    pinned_unsupported = [c for c in clients if cellmod.split_client(c)[1] is not None
                          and "CONFORMANCE_CLIENT_VERSION" not in (DRIVERS / cellmod.split_client(c)[0] / "run").read_text()]
    if pinned_unsupported:
        print(f"scripts/conformance: {pinned_unsupported}: that family has no version-pinned variants "
              "(its run script ignores CONFORMANCE_CLIENT_VERSION)", file=sys.stderr)
        return 2
    if missing:
        print(f"scripts/conformance: no driver {missing} (conformance/drivers/<family>/run; have {available})", file=sys.stderr)
        return 2
    if not clients:
        print("scripts/conformance: no client driver found under conformance/drivers", file=sys.stderr)
        return 2
    if not args.no_setup and not args.list:
        setup = [str(REPO_ROOT / "conformance" / "setup")] + (clients if args.clients else [])
        say("$ " + " ".join(setup))
        if subprocess.run(setup, cwd=str(REPO_ROOT)).returncode != 0:
            print("scripts/conformance: conformance/setup failed", file=sys.stderr)
            return 1
    if not (REPO_ROOT / "conformance" / "verifier" / "run").exists() and not args.list:
        print("scripts/conformance: conformance/verifier/run is missing", file=sys.stderr)
        return 2
    plan = []
    for sc in (chosen if args.regressions else []):
        r = sc.regression
        if sc.runnable:
            for v in (r["affected"], r["fixed"]):
                if f"{r['family']}@{v}" in clients:
                    plan.append((f"{r['family']}@{v}", sc, int(r["protocol"]), sc.mode))
    for w in (args.workload_list if not args.regressions else []):
        for sc in chosen:
            # ctp: the ctp scenarios and the baseline (the control row of the ctp table).
            if not sc.runnable or (sc.mode != w and not (w == "ctp" and sc.number == 0)):
                continue
            for p in args.protocols:
                if p not in sc.protocols:
                    continue
                for c in clients:
                    if w == "producer" or "ctp" in cellmod.driver_modes(c):
                        plan.append((c, sc, p, w))
    if args.shard_n > 1:
        plan = [job for k, job in enumerate(plan) if k % args.shard_n == args.shard_k - 1]
    if args.list:
        for sc in chosen:
            if sc.regression:
                r = sc.regression
                print(f"{sc.name}  {r['issue']}  {r['family']} {r['affected']} -> {r['fixed']}  TV{r['protocol']}"
                      + (f"  (not provokable: {r['not_provokable']})" if r.get("not_provokable") else ""))
                continue
            print(f"{sc.name}  #{sc.number}  protocols {sc.protocols}  expect {sc.expect}"
                  + ("" if sc.runnable else "  (workload: none)") + ("  (workload: ctp)" if sc.mode == "ctp" else ""))
        print(f"clients: {', '.join(clients)}; {len(plan)} cell(s) x {args.repeat} run(s)")
        return 0

    missing = drivers_not_set_up(sorted({c for (c, _, _, _) in plan}))
    if missing:
        print("scripts/conformance: driver(s) not set up (run without --no-setup, or the setup each names):\n  "
              + "\n  ".join(missing), file=sys.stderr)
        return 2
    kproxy = ensure_kproxy(args.kproxy)
    flag_ok = scenario_flag_supported(kproxy)
    mode = args.scenario_mode
    if mode == "auto":
        mode = "flag" if flag_ok else "config"
    elif mode == "flag" and not flag_ok:
        say(f"warning: `{kproxy} --help` does not list --scenario; trying it anyway (--scenario-mode flag)")
    mode_text = ("`kproxy --scenario FILE`" if mode == "flag" else
                 "the kproxy config's faults: and api_versions: sections (this kproxy has no --scenario)" if not flag_ok else
                 "the kproxy config's faults: and api_versions: sections")
    commit, started_at = git_commit(), time.strftime("%Y-%m-%d %H:%M:%S %Z")  # when the run started
    source, binary_sha = kproxy_source_tree(), file_sha256(kproxy)
    earlier: Dict = {}  # --confirm-from: the first pass's report
    rerun_note: List[str] = []
    if args.confirm_from:
        try:
            earlier = json.loads(Path(args.confirm_from).read_text())
        except (OSError, ValueError) as e:
            print(f"scripts/conformance: --confirm-from {args.confirm_from}: {e}", file=sys.stderr)
            return 2
        ran = Path(earlier.get("kproxy") or "")
        if (ran if ran.is_absolute() else REPO_ROOT / ran).resolve() != Path(kproxy).resolve():
            print(f"scripts/conformance: --confirm-from {args.confirm_from}: its first pass ran {earlier.get('kproxy')}, "
                  f"this run {kproxy}: the repeats must run the same binary", file=sys.stderr)
            return 2
        if earlier.get("repeat", 1) != 1:
            print(f"scripts/conformance: --confirm-from {args.confirm_from}: not a first pass "
                  "(--repeat 1, with or without --confirm)", file=sys.stderr)
            return 2
        try:
            earlier_runs = runs_of_earlier_cells(earlier)
        except (OSError, ValueError, KeyError) as e:
            print(f"scripts/conformance: --confirm-from {args.confirm_from}: a repeat's record is not readable ({e}): "
                  "an earlier --confirm run is resumed only where its work dir is", file=sys.stderr)
            return 2
        if earlier.get("kproxy_source") and earlier["kproxy_source"] != source:
            print(f"scripts/conformance: --confirm-from {args.confirm_from}: its first pass ran kproxy sources "
                  f"{earlier['kproxy_source']}, this checkout has {source}: the repeats must run the same code", file=sys.stderr)
            return 2
        args.confirm = True
        commit, started_at = earlier.get("kproxy_commit", commit), earlier.get("date", started_at)
        command = f"{earlier.get('command')}; then {command}"
        lost = [r for c in earlier.get("cells", []) for r in (c.get("runs") or [])[1:] if r.get("class") == "runner error"]
        if lost:
            rerun_note = [f"{len(lost)} repeat(s) of the first invocation were a runner error (the cluster or the "
                          f"runner failed, not the client; their records are in its work dir) and ran again in the second"]
    work = Path(args.work_dir) if args.work_dir else REPO_ROOT / "build" / "conformance" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    say(f"{len(plan)} cell(s) x {args.repeat} run(s): clients {clients}, {len(chosen)} scenario(s), TV {args.protocols}; "
        f"kproxy {kproxy} ({mode}); work dir {work}")

    import kafka_harness as kh
    cluster = None
    t_start = time.monotonic()
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            cluster = kh.KafkaCluster(args.nodes, name="conformance")
            say(f"starting Kafka {kh.KAFKA_VERSION}, {args.nodes} node(s)")
            cluster.start()
            bootstrap = cluster.bootstrap()
            say(f"cluster up in {cluster.startup_seconds:.1f} s: {bootstrap}")
        tv = cluster_transaction_version(bootstrap)
        if tv != 2 and 2 in args.protocols:
            say(f"warning: the cluster has transaction.version {tv} finalized, not 2: TV2 cells are not what they say")
        settings = cellmod.Settings(kproxy=kproxy, scenario_mode=mode, cluster_bootstrap=bootstrap, nodes=args.nodes,
                                    transactions=args.transactions, records_per_txn=args.records_per_txn,
                                    cell_timeout_s=args.cell_timeout, seed=args.seed, work_dir=work,
                                    partitions=args.partitions, transaction_timeout_ms=args.transaction_timeout_ms or None,
                                    verifier_timeout_s=args.verifier_timeout, driver_args=shlex.split(args.driver_args), tap=args.tap,
                                    min_committed_fraction=args.min_committed_fraction, cluster=cluster)
        jobs = [(c, sc, p, w, k) for (c, sc, p, w) in plan for k in range(1, args.repeat + 1)]
        results: Dict = {}
        if earlier:
            # The first pass is the earlier run's: its cells become each cell's first run here; a cell
            # it lacks is run now (and confirmed like the others).
            planned = {(c, sc.name, p, w) for (c, sc, p, w) in plan}
            results.update({key: recs for key, recs in earlier_runs.items() if key in planned})
            jobs = [j for j in jobs if (j[0], j[1].name, j[2], j[3]) not in results]
            kept = sum(len(r) - 1 for r in results.values())
            say(f"--confirm-from {args.confirm_from}: {len(results)} cell(s) taken from the first pass"
                + (f" and {kept} of its repeats" if kept else "") + f", {len(jobs)} run now before the repeats")
        lock = threading.Lock()
        done = [0]

        def one(job):
            c, sc, p, w, k = job
            rec = cellmod.run_cell(settings, c, sc, p, attempt=k, workload_mode=w)
            with lock:
                done[0] += 1
                results.setdefault((c, sc.name, p, w), []).append(rec)
                extra = f", {rec['runner_error']}" if rec.get("runner_error") else ""
                if rec.get("observatory"):
                    extra += f", observatory {rec['observatory'].get('verdict')}"
                say(f"[{done[0]}/{len(jobs)}] {c} x {sc.name} x TV{p}" + (" ctp" if w == "ctp" else "")
                    + (f" run {k}" if args.repeat > 1 else "")
                    + f": {rec['class']}{'' if rec['matches_expect'] else ' (expected ' + ('not exact: the affected version' if rec.get('regression_side') == 'affected' else sc.expect) + ')'}"
                    + f", faults injected {rec.get('faults_injected_total')}, {rec['elapsed_s']:.1f} s{extra}")
            return rec

        def write_report(final: bool) -> List[Dict]:
            cells = []
            for (c, sc, p, w) in plan:
                # A cell is reported once all its runs are in (a partial report leaves it "not run").
                runs = sorted(results.get((c, sc.name, p, w), []), key=lambda r: r["attempt"])
                if runs and len(runs) >= args.repeat and not (final is False and (c, sc.name, p, w) in pending_confirm):
                    cells.append(combine(runs))
            client_info: Dict[str, Dict] = {}
            for rec in cells:
                acc = rec.get("account") or {}
                if acc.get("version") and rec["client"] not in client_info:
                    client_info[rec["client"]] = {"version": acc.get("version"), "library": acc.get("library")}
            for c in clients:
                client_info.setdefault(c, {"version": None, "library": None})
            header = {
                "date": started_at, "seed": args.seed, "kproxy_commit": commit,
                "kproxy_source": source, "kproxy_sha256": binary_sha,
                "kproxy": os.path.relpath(kproxy, REPO_ROOT) if kproxy.startswith(str(REPO_ROOT)) else kproxy,
                "scenario_mode": mode, "scenario_mode_text": mode_text, "kafka_version": kh.KAFKA_VERSION,
                "nodes": args.nodes if not args.bootstrap else len(bootstrap.split(",")), "cluster_tv": tv,
                "transactions": args.transactions, "records_per_txn": args.records_per_txn, "partitions": args.partitions,
                "cell_timeout_s": args.cell_timeout, "repeat": args.repeat,
                "transaction_timeout_ms": args.transaction_timeout_ms, "verifier_timeout_s": args.verifier_timeout,
                "command": command, "wall_s": time.monotonic() - t_start + float(earlier.get("wall_s") or 0), "work_dir": str(work),
                "complete": final, "cells_planned": len(plan), "workloads": args.workload_list,
                "shard": args.shard, "min_committed_fraction": args.min_committed_fraction, "confirm": args.confirm,
                "driver_args": args.driver_args or None, "regressions_run": args.regressions,
                # The first pass's notes (why some of its cells were taken out and run again here).
                "notes": list(earlier.get("notes") or []) + rerun_note + (args.note or []),
            }
            for rec in cells:
                rec["reproduce"] = report.reproduce_command(rec, header)
            report.write(Path(args.out), Path(args.json), header=header,
                         scenarios=[] if args.regressions else chosen, clients=[] if args.regressions else clients,
                         protocols=args.protocols, cells=cells, client_info=client_info,
                         regressions=chosen if args.regressions else [])
            return cells

        def one_and_report(job):
            rec = one(job)
            with lock:
                write_report(False)  # a run stopped half-way still leaves the cells it finished
            return rec

        pending_confirm: set = set()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(one_and_report, jobs))
        if args.confirm:
            # Not exact on the first run: twice more; and a seeded random tenth of the exact ones.
            import random
            firsts = {key: runs[0] for key, runs in results.items()}
            exact = sorted(k for k, r in firsts.items() if r["class"] == "exact")
            rng = random.Random(args.seed)
            sample = set(rng.sample(exact, max(1, (len(exact) + 9) // 10))) if exact else set()
            again = sorted(k for k, r in firsts.items() if r["class"] != "exact") + sorted(sample)
            by_name = {sc.name: sc for sc in chosen}
            more = [(c, by_name[n], p, w, k) for (c, n, p, w) in again for k in (args.repeat + 1, args.repeat + 2)
                    if k not in {r["attempt"] for r in results.get((c, n, p, w), [])}]  # not taken from --confirm-from
            pending_confirm.update(again)
            say(f"confirming: {len(again) - len(sample)} cell(s) not exact and {len(sample)} exact one(s) sampled, "
                f"{len(more)} more run(s)")
            jobs.extend(more)
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
                list(pool.map(one_and_report, more))
            pending_confirm.clear()
        with lock:
            cells = write_report(True)
        say(f"wrote {args.out} and {args.json} ({len(cells)} cell(s), {time.monotonic() - t_start:.0f} s)")
        counts: Dict[str, int] = {}
        for rec in cells:
            counts[rec["class"]] = counts.get(rec["class"], 0) + 1
        say("classes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
            f"; not as expected: {sum(1 for r in cells if not r['matches_expect'])}")
        return 0
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
