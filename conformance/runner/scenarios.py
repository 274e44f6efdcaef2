"""Scenario files (scenarios/NN-short-name.yaml): loading, checking, selecting, and the copy a
cell gives kproxy (seed substituted, the TV1 feature entry added).

The format is documented in conformance/README.md "Scenario files". Python 3 stdlib + PyYAML.
"""

from __future__ import annotations

import copy
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO_ROOT / "scenarios"
# Known client defects, reproduced (issue #45 item 4): scenario files with a `regression:` mapping,
# run on an affected and a fixed client version (conformance/README.md "Regressions").
REGRESSION_DIR = SCENARIO_DIR / "regressions"

EXPECTS = ("exact", "exact-or-gave-up", "gave-up")
# Verifier classes that meet each expectation (conformance/verifier/README.md).
EXPECT_CLASSES = {
    "exact": {"exact"},
    "exact-or-gave-up": {"exact", "exact, gave up as documented"},
    "gave-up": {"exact, gave up as documented"},
}
# Keys kproxy's scenario loader reads (the copy given to kproxy has exactly these).
KPROXY_KEYS = ("scenario", "version", "number", "description", "protocols", "expect", "notes", "faults", "api_versions")
# Keys only the runner reads; left out of the copy given to kproxy.
RUNNER_KEYS = ("workload", "regression")
# `regression:` keys (scenarios/regressions/*.yaml). Required: issue (the upstream link), title,
# family (a driver family), affected and fixed (client versions the family's setup can install),
# protocol (the transaction protocol of the cells). Optional: driver_args (extra driver options,
# a list of words), fixed_in (where the fix is: a release note, a PR), not_provokable (why no
# proxy fault can show it: the entry is listed in the report and runs no cell).
REGRESSION_REQUIRED = {"issue", "title", "family", "affected", "fixed", "protocol"}
REGRESSION_OPTIONAL = {"driver_args", "fixed_in", "not_provokable", "notes"}
# `workload:` words (proxy/chaos/scenario.h): what shows the scenario. The drivers are producers.
# `ctp`: consume-transform-produce (runs with the drivers whose `modes` file lists ctp).
RUNNABLE_WORKLOADS = {"producer", "ctp"}
NOT_RUNNABLE_WORKLOADS = {"none", "admin"}
WORKLOAD_KEYS = {"transaction_timeout_ms", "cell_timeout_s", "transactions", "records_per_txn", "min_committed_fraction",
                 "action", "action_at", "mode", "input_aborted_transactions"}
# `workload: {action: ...}`: what the runner does mid-transaction (conformance/README.md "Scenario
# actions"): start a second live instance of the transactional id, kill the driver and start it
# again, kill the broker that coordinates the id or leads a written partition, or (ctp) have a
# second member join the consumer group; `action_at: LO-HI` is the range of transaction indexes
# the seeded moment is drawn from. `mode: ctp` runs a mapping workload as consume-transform-produce;
# `input_aborted_transactions: A` (ctp) puts A aborted transactions among the input's committed
# ones (conformance/runner/cell.py fill_input).
ACTIONS = ("zombie", "producer-crash-restart", "coordinator-broker-kill", "partition-leader-kill", "rebalance-mid-transaction")
CTP_ACTIONS = ("rebalance-mid-transaction",)   # only a consume-transform-produce workload has a group to rebalance
ACTION_AT_RX = re.compile(r"^(\d+)(-(\d+))?$")
# APIs that only the pre-KIP-890 transaction protocol (transaction.version 1) sends from a client.
TV1_ONLY_APIS = {"AddPartitionsToTxn", "AddOffsetsToTxn", "24", "25", 24, 25}
NAME_RX = re.compile(r"^(\d\d)-[a-z0-9]+(-[a-z0-9]+)*$")


class ScenarioError(ValueError):
    pass


@dataclass
class Scenario:
    path: Path
    data: Dict
    name: str = ""
    index: int = 0            # NN of the file name
    number: int = 0           # docs/faults.md scenario number
    version: int = 1
    description: str = ""
    protocols: List[int] = field(default_factory=list)
    expect: str = "exact"
    workload: Optional[Dict] = None   # None: runs with the default workload
    runnable: bool = True             # False: `workload: none`
    mode: str = "producer"            # "ctp": consume-transform-produce only
    regression: Optional[Dict] = None  # scenarios/regressions/: the known defect it reproduces

    @property
    def fault_names(self) -> List[str]:
        return [r["name"] for r in self.data.get("faults") or []]


def _apis(rule: Dict) -> List:
    api = (rule.get("match") or {}).get("api")
    if api is None:
        return []
    return list(api) if isinstance(api, list) else [api]


def load(path: Path) -> Scenario:
    """Reads and checks one scenario file; ScenarioError says what is wrong."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ScenarioError(f"{path}: {e}") from None
    where = path.name
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: not a mapping")
    unknown = set(data) - set(KPROXY_KEYS) - set(RUNNER_KEYS)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {sorted(unknown)}")
    baseline = not data.get("faults") and not data.get("api_versions")
    regression = data.get("regression")
    for key in ("scenario", "version", "number", "description", "protocols", "expect"):
        if key == "number" and (baseline or regression is not None):
            continue  # a baseline (nothing injected) or a regression belongs to no docs/faults.md scenario
        if key not in data:
            raise ScenarioError(f"{where}: missing key {key!r}")
    m = NAME_RX.match(path.stem)
    if not m:
        raise ScenarioError(f"{where}: file name must be NN-short-name.yaml")
    if data["scenario"] != path.stem:
        raise ScenarioError(f"{where}: scenario: {data['scenario']!r} is not the file name {path.stem!r}")
    if not isinstance(data["description"], str) or not 1 <= len(data["description"]) <= 1000 or "\n" in data["description"]:
        raise ScenarioError(f"{where}: description must be one line of 1 to 1000 characters (kproxy's scenario loader refuses more)")
    if not isinstance(data["version"], int) or data["version"] < 1:
        raise ScenarioError(f"{where}: version must be an integer >= 1")
    if "number" in data and (not isinstance(data["number"], int) or not 1 <= data["number"] <= 16):
        raise ScenarioError(f"{where}: number must be a docs/faults.md scenario number, 1..16")
    prot = data["protocols"]
    if not isinstance(prot, list) or not prot or any(p not in (1, 2) for p in prot) or len(set(prot)) != len(prot):
        raise ScenarioError(f"{where}: protocols must be a non-empty list of 1 and/or 2")
    if data["expect"] not in EXPECTS:
        raise ScenarioError(f"{where}: expect must be one of {EXPECTS}")
    faults = data.get("faults") or []
    if not isinstance(faults, list):
        raise ScenarioError(f"{where}: faults must be a list")
    names = set()
    for i, rule in enumerate(faults):
        if not isinstance(rule, dict) or not isinstance(rule.get("name"), str):
            raise ScenarioError(f"{where}: faults[{i}] needs a name")
        if rule["name"] in names:
            raise ScenarioError(f"{where}: faults[{i}]: duplicate rule name {rule['name']!r}")
        names.add(rule["name"])
        for key in ("match", "action"):
            if not isinstance(rule.get(key), dict):
                raise ScenarioError(f"{where}: faults[{i}] ({rule['name']}) needs a {key} mapping")
        trig = rule.get("trigger")
        if isinstance(trig, dict) and "probability" in trig and "seed" not in trig:
            raise ScenarioError(f"{where}: faults[{i}] ({rule['name']}): probability needs a seed")
    av = data.get("api_versions") or []
    if not isinstance(av, list):
        raise ScenarioError(f"{where}: api_versions must be a list")
    workload = data.get("workload")
    runnable = not (isinstance(workload, str) and workload in NOT_RUNNABLE_WORKLOADS)
    if isinstance(workload, str):
        if workload not in RUNNABLE_WORKLOADS | NOT_RUNNABLE_WORKLOADS:
            raise ScenarioError(f"{where}: workload: one of {sorted(RUNNABLE_WORKLOADS | NOT_RUNNABLE_WORKLOADS)} or a mapping")
    elif workload is not None and (not isinstance(workload, dict) or set(workload) - WORKLOAD_KEYS):
        raise ScenarioError(f"{where}: workload must be a word or a mapping of {sorted(WORKLOAD_KEYS)}")
    if isinstance(workload, dict) and "action" in workload:
        if workload["action"] not in ACTIONS:
            raise ScenarioError(f"{where}: workload.action must be one of {list(ACTIONS)}")
        at = ACTION_AT_RX.match(str(workload.get("action_at", "1-3")))
        if not at or (at.group(3) and int(at.group(3)) < int(at.group(1))):
            raise ScenarioError(f"{where}: workload.action_at must be a transaction index or a range LO-HI")
        last = int(at.group(3) or at.group(1))
        if last >= int(workload.get("transactions", 5)) - 1:
            raise ScenarioError(f"{where}: workload.action_at must leave the last transaction after the action "
                                f"(transactions: {workload.get('transactions', 5)})")
        if any({"EndTxn", 26, "26"} & set(_apis(r) or ["EndTxn"]) for r in faults):  # no api: matches EndTxn too
            raise ScenarioError(f"{where}: a scenario with an action holds EndTxn itself: its own rules must not match EndTxn")
    elif isinstance(workload, dict) and "action_at" in workload:
        raise ScenarioError(f"{where}: workload.action_at needs workload.action")
    if isinstance(workload, dict) and workload.get("mode", "producer") not in RUNNABLE_WORKLOADS:
        raise ScenarioError(f"{where}: workload.mode must be one of {sorted(RUNNABLE_WORKLOADS)}")
    mode = "ctp" if workload == "ctp" or (isinstance(workload, dict) and workload.get("mode") == "ctp") else "producer"
    if isinstance(workload, dict) and workload.get("action") in CTP_ACTIONS and mode != "ctp":
        raise ScenarioError(f"{where}: workload.action {workload['action']} needs mode: ctp")
    if isinstance(workload, dict) and "input_aborted_transactions" in workload:
        n = workload["input_aborted_transactions"]
        if mode != "ctp" or not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100:
            raise ScenarioError(f"{where}: workload.input_aborted_transactions (aborted transactions in the input topic, "
                                f"1-100) needs mode: ctp")
    if regression is not None:
        if not isinstance(regression, dict):
            raise ScenarioError(f"{where}: regression must be a mapping")
        missing = REGRESSION_REQUIRED - set(regression)
        extra = set(regression) - REGRESSION_REQUIRED - REGRESSION_OPTIONAL
        if missing or extra:
            raise ScenarioError(f"{where}: regression: missing {sorted(missing)}, unknown {sorted(extra)}")
        if not str(regression["issue"]).startswith("https://"):
            raise ScenarioError(f"{where}: regression.issue must be a link (https://...)")
        if regression["protocol"] not in prot:
            raise ScenarioError(f"{where}: regression.protocol {regression['protocol']} is not in protocols {prot}")
        if str(regression["affected"]) == str(regression["fixed"]):
            raise ScenarioError(f"{where}: regression: affected and fixed are the same version")
        da = regression.get("driver_args", [])
        if not isinstance(da, list) or not all(isinstance(x, str) for x in da):
            raise ScenarioError(f"{where}: regression.driver_args must be a list of strings")
        if regression.get("not_provokable"):
            runnable = False
        elif not faults:
            raise ScenarioError(f"{where}: a regression needs faults (or not_provokable: why none can show it)")
    if runnable and 2 in prot and faults and all(_apis(r) and set(_apis(r)) <= TV1_ONLY_APIS for r in faults):
        raise ScenarioError(f"{where}: every rule names only AddPartitionsToTxn/AddOffsetsToTxn, which TV2 clients "
                            f"never send: protocols must be [1]")
    return Scenario(path=path, data=data, name=path.stem, index=int(m.group(1)), number=data.get("number", 0),
                    version=data["version"], description=str(data["description"]), protocols=list(prot),
                    expect=data["expect"], workload=workload if isinstance(workload, dict) else None,
                    runnable=runnable, mode=mode,
                    regression=dict(regression) if isinstance(regression, dict) else None)


def load_all(directory: Path = SCENARIO_DIR) -> List[Scenario]:
    out = [load(p) for p in sorted(Path(directory).glob("*.yaml"))]
    regressions = [s.name for s in out if s.regression is not None] if Path(directory) != REGRESSION_DIR else []
    if regressions:
        raise ScenarioError(f"{regressions}: a regression: mapping belongs in {REGRESSION_DIR.relative_to(REPO_ROOT)}/")
    if Path(directory) == REGRESSION_DIR:
        plain = [s.name for s in out if s.regression is None]
        if plain:
            raise ScenarioError(f"{plain}: every file in {REGRESSION_DIR.relative_to(REPO_ROOT)}/ needs a regression: mapping")
    seen: Dict[int, str] = {}
    for s in out:
        if s.index in seen:
            raise ScenarioError(f"{s.path.name}: file number {s.index:02d} also used by {seen[s.index]}")
        seen[s.index] = s.path.name
    return out


def select(all_scenarios: List[Scenario], specs: Optional[List[str]]) -> List[Scenario]:
    """`specs`: file numbers ("3", "03"), names, or globs on the name ("0[1-5]-*", "*endtxn*");
    None or [] = all. Unknown specs are an error."""
    if not specs:
        return list(all_scenarios)
    chosen: List[Scenario] = []
    for spec in specs:
        spec = spec.strip()
        if not spec:
            continue
        if spec.isdigit():
            hits = [s for s in all_scenarios if s.index == int(spec)]
        else:
            spec = spec[:-5] if spec.endswith(".yaml") else spec
            hits = [s for s in all_scenarios if fnmatch.fnmatchcase(s.name, spec)]
        if not hits:
            raise ScenarioError(f"--scenarios: nothing matches {spec!r}")
        chosen += [s for s in hits if s not in chosen]
    return sorted(chosen, key=lambda s: s.index)


def kproxy_copy(s: Scenario, *, seed: Optional[int], protocol: int) -> Dict:
    """What kproxy is given for one cell: the KPROXY_KEYS of the file, every rule's trigger seed
    replaced by `seed` (when given), and for protocol 1 the entry
    `{feature: transaction.version, max: 1}` first in api_versions (unless the file already lowers
    that feature for every client)."""
    data = {k: copy.deepcopy(s.data[k]) for k in KPROXY_KEYS if k in s.data}
    data["faults"] = data.get("faults") or []
    for rule in data["faults"]:
        trig = rule.get("trigger")
        if seed is not None and isinstance(trig, dict) and "seed" in trig:
            trig["seed"] = seed
    av = list(data.get("api_versions") or [])
    if protocol == 1:
        already = any(isinstance(e, dict) and e.get("feature") == "transaction.version" and "client_id" not in e
                      and "listener" not in e and isinstance(e.get("max"), int) and e["max"] <= 1 for e in av)
        if not already:
            av.insert(0, {"feature": "transaction.version", "max": 1})
    data["api_versions"] = av
    return data
