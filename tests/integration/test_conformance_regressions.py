"""Issue #45 item 4: known client defects, reproduced. `scripts/conformance --regressions` runs each
scenarios/regressions/*.yaml on the client version that had the defect and on the one that fixed
it (version-pinned driver variants, `family@version`), through kproxy against a real broker, and
the report's regressions table says whether the affected version is not exact and the fixed one is.

- the files themselves: every one loads, names an upstream link, an affected and a fixed version
  of a family whose driver has version-pinned variants (no broker);
- the verdict rule on hand-made cells (no broker);
- end to end, two pairs on the session's Kafka node, both cells of each run for real:
  01 franz-go v1.21.5 / v1.21.6 under TV2 (EndTxn answered UNKNOWN_SERVER_ERROR in the broker's
  place: the affected version commits the unconfirmed transaction with the next one, `not atomic`)
  and 02 kafka-clients 3.3.1 / 3.3.2 (InitProducerId answered REQUEST_TIMED_OUT: the affected
  version gives up on a retriable error). The first run installs the four variants (Go module
  proxy, Maven Central), which takes a minute or two; later runs reuse them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from test_proxy_support import REPO_ROOT, kproxy_binary

sys.path.insert(0, str(REPO_ROOT / "conformance" / "runner"))
import report  # noqa: E402
import scenarios as scn  # noqa: E402

RUN_TIMEOUT_S = 420


def test_regression_files_are_valid():
    regs = scn.load_all(scn.REGRESSION_DIR)
    assert len([r for r in regs if r.runnable]) >= 6, [r.name for r in regs]
    for r in regs:
        reg = r.regression
        assert reg["issue"].startswith("https://"), r.name
        family = REPO_ROOT / "conformance" / "drivers" / reg["family"]
        if reg.get("not_provokable"):
            assert not r.runnable, r.name
            continue
        assert r.runnable and r.data.get("faults"), r.name
        for script in ("setup", "run"):
            assert "CONFORMANCE_CLIENT_VERSION" in (family / script).read_text(), (r.name, script)
        assert reg["protocol"] in r.protocols, r.name
    # A regression file in scenarios/ itself (the matrix) is refused, and so is a plain one in regressions/.
    assert not [s for s in scn.load_all() if s.regression is not None]


def _cell(version, cls, name="x"):
    return {"regression": name, "client_version": version, "class": cls, "run_id": f"r-{version}"}


def test_regression_verdicts():
    sc = scn.Scenario(path=scn.REGRESSION_DIR / "x.yaml", data={}, name="x",
                      regression={"issue": "https://example.invalid/1", "title": "t", "family": "java-3.x",
                                  "affected": "1.0", "fixed": "1.1", "protocol": 1})
    verdict = lambda a, f: report.regression_rows([sc], [_cell("1.0", a), _cell("1.1", f)])[0]["verdict"]  # noqa: E731
    assert verdict("loss", "exact") == "as expected"
    assert verdict("gave up (undocumented)", "exact") == "as expected"
    # A documented give-up on the affected side is shown apart; the fixed side must be exact.
    assert verdict("exact, gave up as documented", "exact") == "as expected, documented give-up"
    assert verdict("exact, gave up as documented", "loss").startswith("NOT as expected")
    assert verdict("exact", "exact").startswith("NOT as expected")
    assert verdict("loss", "exact, gave up as documented") == "NOT as expected: the fixed version is not exact"
    assert report.regression_rows([sc], [_cell("1.0", "loss")])[0]["verdict"] == "half run"
    # An affected cell that failed without the fault having fired shows nothing about the defect.
    silent = dict(_cell("1.0", "stuck"), faults_injected_total=0)
    assert report.regression_rows([sc], [silent, _cell("1.1", "exact")])[0]["verdict"] == \
        "NOT as expected: no fault fired in the affected version's cell"


def test_regressions_end_to_end(kafka, tmp_path):
    kproxy = kproxy_binary()
    help_text = subprocess.run([kproxy, "--help"], capture_output=True, text=True, timeout=30)
    if "--scenario" not in help_text.stdout + help_text.stderr:
        pytest.xfail(f"{kproxy} has no --scenario option")
    out_md, out_json, work = tmp_path / "r.md", tmp_path / "r.json", tmp_path / "work"
    cmd = [str(REPO_ROOT / "scripts" / "conformance"), "--regressions", "--scenarios", "01,02",
           "--bootstrap", kafka.bootstrap(), "--nodes", "1", "--cell-timeout", "60", "--jobs", "2",
           "--kproxy", kproxy, "--out", str(out_md), "--json", str(out_json), "--work-dir", str(work)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=str(REPO_ROOT))
    log = f"$ {' '.join(cmd)}\nexit {r.returncode} after {time.monotonic() - t0:.0f}s\n{r.stdout[-5000:]}\n{r.stderr[-3000:]}"
    assert r.returncode == 0, log
    doc = json.loads(out_json.read_text())
    cells = {(c["regression"], c["client_version"]): c for c in doc["cells"]}
    assert set(cells) == {("01-franz-go-endtxn-unconfirmed-tv2", "v1.21.5"), ("01-franz-go-endtxn-unconfirmed-tv2", "v1.21.6"),
                          ("02-java-initpid-request-timed-out", "3.3.1"), ("02-java-initpid-request-timed-out", "3.3.2")}, log
    for c in cells.values():
        assert c["kproxy_exit"] == 0 and c["faults_injected_total"] == 1, (c.get("faults"), log)
        # The variant really ran the pinned version (the driver reports its client library's version).
        assert c["account"]["version"] == c["client_version"], c["account"]
        assert c["client"] == f"{c['client_family']}@{c['client_version']}"
    a, f = cells[("01-franz-go-endtxn-unconfirmed-tv2", "v1.21.5")], cells[("01-franz-go-endtxn-unconfirmed-tv2", "v1.21.6")]
    assert a["protocol_seen"] == 2 and f["protocol_seen"] == 2
    # Affected: the unconfirmed transaction's records became visible in the next one's commit.
    assert a["class"] == "not atomic" and "committed together with" in a["verifier"]["detail"], a["verifier"]
    assert a["matches_expect"] and a["regression_side"] == "affected"
    assert f["class"] == "exact" and f["account"]["unknown_count"] == 1, (f["class"], f["account"], f["verifier"])
    a, f = cells[("02-java-initpid-request-timed-out", "3.3.1")], cells[("02-java-initpid-request-timed-out", "3.3.2")]
    assert a["class"] == "gave up (undocumented)" and a["account"]["committed_count"] == 0, (a["class"], a["account"])
    assert f["class"] == "exact" and f["account"]["committed_count"] == 5, (f["class"], f["account"])
    rows = {row["name"]: row for row in doc["regressions"]}
    assert set(rows) == {"01-franz-go-endtxn-unconfirmed-tv2", "02-java-initpid-request-timed-out"}
    for row in rows.values():
        assert row["verdict"] == "as expected", row
    md = out_md.read_text()
    assert "## Regressions: known defects, reproduced" in md
    assert "| v1.21.5: not atomic | v1.21.6: exact | as expected |" in md
    assert "| 3.3.1: gave up (undocumented) | 3.3.2: exact | as expected |" in md
