"""One cell of the conformance matrix: client family x scenario x transaction protocol.

    fresh topic -> kproxy with the scenario -> driver (time-bounded) -> kproxy's fault counts,
    fault log lines and request versions -> kproxy stopped -> verifier (reads the cluster
    directly, not through kproxy) -> a dict (the cell's record, also written as cell.json)

Every process a cell starts runs in its own process group and is killed at its bound, so a stuck
client never blocks the next cell. Python 3 stdlib + PyYAML.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import signal
import socket
import random
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

import observatory
from scenarios import EXPECT_CLASSES, Scenario, kproxy_copy

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVERS = REPO_ROOT / "conformance" / "drivers"
VERIFIER = REPO_ROOT / "conformance" / "verifier" / "run"
LIVE: set = set()  # process groups still running; killed at exit (atexit below)
FAULT_LOG_RX = re.compile(r"fault rule '[^']*'")
REQUESTS_RX = re.compile(r'^kproxy_requests_total\{([^}]*)\}\s+(\S+)$', re.M)


@dataclass
class Settings:
    kproxy: str
    scenario_mode: str          # "flag": kproxy --scenario FILE; "config": faults/api_versions in the config
    cluster_bootstrap: str      # real broker addresses, comma-separated
    nodes: int
    transactions: int
    records_per_txn: int
    cell_timeout_s: float
    seed: Optional[int]
    work_dir: Path
    partitions: int = 3
    verifier_timeout_s: float = 60.0
    transaction_timeout_ms: Optional[int] = None
    driver_args: List[str] = field(default_factory=list)   # test-only: extra driver options (known-bad modes)
    min_committed_fraction: float = 0.5
    abort_cleanup_ms: int = 10000   # the cluster's transaction.abort.timed.out.transaction.cleanup.interval.ms
    cluster: Optional[object] = None  # the KafkaCluster the runner started (None with --bootstrap): broker actions need it
    tap: bool = False               # --tap: every frame of the cell into tap.jsonl


def split_client(client: str) -> Tuple[str, Optional[str]]:
    """"family" or "family@version" (a version-pinned variant: the family's setup and run get
    CONFORMANCE_CLIENT_VERSION=version; conformance/README.md "Client versions")."""
    family, _, version = client.partition("@")
    return family, (version or None)


def driver_env(client: str) -> Optional[Dict[str, str]]:
    """The environment of a driver's setup and run: CONFORMANCE_CLIENT_VERSION for a pinned
    variant, else None (the runner's own)."""
    _, version = split_client(client)
    if version is None:
        return None
    env = dict(os.environ)
    env["CONFORMANCE_CLIENT_VERSION"] = version
    return env


def driver_modes(client: str) -> List[str]:
    """The workloads a driver runs: conformance/drivers/<family>/modes (words, e.g. "produce ctp");
    without that file, "produce" only."""
    f = DRIVERS / split_client(client)[0] / "modes"
    try:
        return f.read_text().split() or ["produce"]
    except OSError:
        return ["produce"]


# Key prefix of the aborted input transactions (workload `input_aborted_transactions`); the
# verifier is told it (--aborted-input-prefix): an output of one of them is a dirty read.
ABORTED_INPUT_PREFIX = "ab"


def fill_input(bootstrap: str, topic: str, prefix: str, transactions: int, records_per_txn: int, out_dir: Path,
               timeout: float = 90.0, aborted: int = 0) -> None:
    """The input of a consume-transform-produce cell: N committed transactions of M records keyed
    PREFIX:i:j, written straight to the cluster (not through kproxy) by the Java driver. With
    `aborted` > 0, that many transactions keyed ab:i:j are written to the log and aborted between
    the first half of the committed ones and the rest (their own transactional id): the client's
    read_committed consumer must skip them where they lie among committed records."""
    def one(tag: str, txn_id: str, run_id: str, n: int, extra: List[str], want_committed: int) -> None:
        cmd = [str(DRIVERS / "java-4.4" / "run"), "--bootstrap", bootstrap, "--topic", topic,
               "--transactional-id", txn_id, "--transactions", str(n),
               "--records-per-txn", str(records_per_txn), "--run-id", run_id, "--timeout-s", str(int(timeout - 10)), *extra]
        rc, timed_out, _ = _run_bounded(cmd, timeout, out_dir / f"{tag}.stdout", out_dir / f"{tag}.stderr")
        acc = last_json_line((out_dir / f"{tag}.stdout").read_text(errors="replace"))
        got = None if not acc else (len(acc.get("committed") or []), len(acc.get("aborted") or []))
        if rc != 0 or timed_out or got != (want_committed, n - want_committed):
            raise RuntimeError(f"filling the input topic {topic} ({tag}) failed (exit {rc}{', timed out' if timed_out else ''}): {acc}")

    if aborted <= 0:
        one("fill", f"fill-{topic}", prefix, transactions, [], transactions)
        return
    half = transactions // 2
    if half:
        one("fill", f"fill-{topic}", prefix, half, [], half)
    one("fill-aborted", f"fill-ab-{topic}", ABORTED_INPUT_PREFIX, aborted, ["--abort-every", "1"], 0)
    one("fill-rest", f"fill-{topic}", prefix, transactions - half, ["--first-index", str(half)], transactions - half)


def _free_ports(n: int) -> List[int]:
    import ports  # tests/integration/ports.py: outside the ephemeral range, reserved for this process
    return ports.free_ports(n)


def _port_block(n: int) -> int:
    import ports
    return ports.port_block(n)


def _kill_live() -> None:
    for proc in list(LIVE):
        _kill_group(proc)


atexit.register(_kill_live)


def _kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _run_bounded(cmd: List[str], timeout: float, stdout: Path, stderr: Path, env: Optional[Dict] = None,
                 on_start=None) -> Tuple[Optional[int], bool, float]:
    """Runs `cmd` in its own process group; kills the group at `timeout`. `on_start(proc)` is
    called once it runs (a scenario action may kill it).
    Returns (exit code or None when killed, timed_out, seconds)."""
    t0 = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=str(REPO_ROOT),
                                start_new_session=True, env=env)
        LIVE.add(proc)
        if on_start is not None:
            on_start(proc)
        try:
            rc = proc.wait(timeout=max(1.0, timeout))
            # Children the driver left behind (a JVM it forked, say) die with the group.
            _kill_group(proc)
            return rc, False, time.monotonic() - t0
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
            return None, True, time.monotonic() - t0
        finally:
            LIVE.discard(proc)


def last_json_line(text: str) -> Optional[Dict]:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            v = json.loads(line)
        except ValueError:
            return None
        return v if isinstance(v, dict) else None
    return None


def create_topic(bootstrap: str, name: str, partitions: int, replication: int, timeout: float = 60.0) -> None:
    import kafka_harness as kh
    addrs = [a.rsplit(":", 1) for a in bootstrap.split(",")]
    host, port = addrs[0][0], int(addrs[0][1])
    err, msg = kh.create_topics_raw(host, port, name, partitions, replication, timeout=30.0)
    if err not in (0, 36):
        raise RuntimeError(f"CreateTopics {name}: error {err} {msg or ''}")
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok = True
        for h, p in addrs:
            try:
                t = kh.metadata(h, int(p), [name], 5.0).topics.get(name)
            except (OSError, kh.KafkaHarnessError) as e:
                ok, last = False, e
                break
            if t is None or t.error_code != 0 or len(t.partitions) != partitions or any(x.leader < 0 for x in t.partitions.values()):
                ok, last = False, t
                break
        if ok:
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} not ready within {timeout:.0f}s (last: {last})")


class KproxyProcess:
    """One kproxy for one cell: a listener in front of the cluster, the admin API, debug log."""

    def __init__(self, s: Settings, cell_dir: Path, scenario_doc: Dict, max_node_id: int = 8):
        self.s = s
        self.dir = cell_dir
        self.port, self.admin_port = _free_ports(2)
        self.base = _port_block(max_node_id + 1)
        upstream = s.cluster_bootstrap.split(",")[0]
        config = {
            "listeners": [{"name": "conformance", "listen": f"127.0.0.1:{self.port}", "upstream": upstream,
                           "advertise": "127.0.0.1", "broker_ports": self.base}],
            "workers": 1,
            "drain_timeout": "2s",
            "log": {"format": "text", "level": "debug"},
            "admin": {"listen": f"127.0.0.1:{self.admin_port}"},
        }
        self.scenario_path = cell_dir / "scenario.yaml"
        self.scenario_path.write_text(yaml.safe_dump(scenario_doc, sort_keys=False))
        if s.scenario_mode == "config":
            if scenario_doc.get("faults"):
                config["faults"] = scenario_doc["faults"]
            if scenario_doc.get("api_versions"):
                config["api_versions"] = scenario_doc["api_versions"]
        self.config_path = cell_dir / "kproxy.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = cell_dir / "kproxy.log"
        self.cmd = [s.kproxy, "--config", str(self.config_path)]
        if s.scenario_mode == "flag":
            self.cmd += ["--scenario", str(self.scenario_path)]
        self.proc: Optional[subprocess.Popen] = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        LIVE.add(self.proc)
        deadline = time.monotonic() + timeout
        pending = [self.port, self.admin_port]
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kproxy exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kproxy did not listen on {pending} within {timeout:.0f}s:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", pending[0]), timeout=0.5):
                    pending.pop(0)
            except OSError:
                time.sleep(0.05)

    def admin(self, path: str, timeout: float = 10.0) -> Tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}{path}", timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError as e:
            return 0, str(e)

    def faults(self) -> List[Dict]:
        """[{name, hits, injected}] from GET /faults."""
        status, body = self.admin("/faults")
        if status != 200:
            return [{"error": f"GET /faults: {status} {body[:200]}"}]
        try:
            doc = json.loads(body)
        except ValueError:
            return [{"error": f"GET /faults: not JSON: {body[:200]}"}]
        rules = doc.get("rules", doc.get("faults", doc)) if isinstance(doc, dict) else doc
        if isinstance(rules, dict):
            rules = [dict(v, name=k) if isinstance(v, dict) else {"name": k} for k, v in rules.items()]
        out = []
        for r in rules or []:
            if isinstance(r, dict):
                out.append({"name": r.get("name"), "hits": r.get("hits"), "injected": r.get("injected")})
        return out

    def request_versions(self) -> Dict[str, Dict[str, int]]:
        """{api: {version: requests}} from kproxy_requests_total, for the transaction APIs."""
        status, text = self.admin("/metrics")
        out: Dict[str, Dict[str, int]] = {}
        if status != 200:
            return out
        for m in REQUESTS_RX.finditer(text):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            api, ver = labels.get("api"), labels.get("version")
            if api in ("Produce", "EndTxn", "AddPartitionsToTxn", "AddOffsetsToTxn", "InitProducerId", "TxnOffsetCommit") and ver:
                n = int(float(m.group(2)))
                if n:
                    out.setdefault(api, {})
                    out[api][ver] = out[api].get(ver, 0) + n
        return out

    def start_tap(self, timeout: float = 10.0) -> None:
        """`kproxy tap --json` on this kproxy's admin API into tap.jsonl, until stop(); waits until
        the tap hub counts the subscriber, so the driver's first frame is in it."""
        self._tap_out = open(self.dir / "tap.jsonl", "wb")
        self.tap_proc = subprocess.Popen([self.s.kproxy, "tap", "--admin", f"127.0.0.1:{self.admin_port}", "--json"],
                                         stdout=self._tap_out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        LIVE.add(self.tap_proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, text = self.admin("/metrics")
            m = re.search(r"^kproxy_tap_subscribers\S*\s+(\S+)$", text, re.M) if status == 200 else None
            if m and float(m.group(1)) >= 1:
                return
            time.sleep(0.05)

    def stop(self) -> Optional[int]:
        if getattr(self, "tap_proc", None) is not None:
            _kill_group(self.tap_proc, signal.SIGTERM)
            self.tap_proc.wait()
            LIVE.discard(self.tap_proc)
            self._tap_out.close()
            self.tap_proc = None
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)  # a second SIGTERM skips the drain
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    _kill_group(self.proc)
                    self.proc.wait()
        LIVE.discard(self.proc)
        if self._log:
            self._log.close()
            self._log = None
        return self.proc.returncode

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def fault_log_lines(self, limit: int = 40) -> Tuple[int, List[str]]:
        try:
            lines = [l for l in self.log_path.read_text(errors="replace").splitlines() if FAULT_LOG_RX.search(l)]
        except OSError:
            return 0, []
        return len(lines), lines[:limit]


def protocol_seen(versions: Dict[str, Dict[str, int]]) -> Optional[int]:
    """The transaction protocol the client used, from the EndTxn and AddPartitionsToTxn versions
    it sent: EndTxn v5+ = TV2; EndTxn <= v4 or AddPartitionsToTxn = TV1; None = no EndTxn seen."""
    endtxn = {int(v) for v in versions.get("EndTxn", {})}
    if endtxn and max(endtxn) >= 5:
        return 2
    if endtxn or versions.get("AddPartitionsToTxn"):
        return 1
    return None


# Scenario actions that change what runs, not only the answers (issue #45 item 3): the runner
# holds the first instance's EndTxn of a seeded transaction k in kproxy (a `delay` on the request
# side) and acts while it is held, so the moment is mid-transaction and the same for every client.
# Actions that kill a broker of the shared cluster: such a cell runs alone (GATE below), and the
# cluster is restored (the node restarted, every partition in sync) before the next cell.
BROKER_ACTIONS = ("coordinator-broker-kill", "partition-leader-kill")
HOLD_RULE = "runner-hold-endtxn"
HOLD = "8s"   # long enough for a second instance to start and initialise (a JVM takes 1-3 s), shorter than every
             # client's request timeout (franz-go's is 10 s): the hold must not also be a late EndTxn (scenario 41 is that)


def runner_action(sc: Scenario, seed: Optional[int]) -> Optional[Dict]:
    """The scenario's action (workload `action:` and `action_at: LO-HI`, the transaction index range
    the seeded pick comes from), with the kproxy rule that holds that transaction's EndTxn; None
    for a scenario without one. The pick depends on the seed and the scenario only, so every
    client of a run is stopped at the same transaction."""
    w = sc.workload or {}
    kind = w.get("action")
    if not kind:
        return None
    lo, _, hi = str(w.get("action_at", "1-3")).partition("-")
    lo_i, hi_i = int(lo), int(hi or lo)
    k = random.Random(f"{seed if seed is not None else 1}:{sc.name}").randint(lo_i, hi_i)
    rule = {"name": HOLD_RULE, "match": {"api": "EndTxn"}, "action": {"delay": HOLD, "side": "request"},
            "trigger": {"after": k, "times": 1}}
    return {"kind": kind, "at_transaction": k, "hold_rule": rule}


def _run_with_action(action: Dict, kp: "KproxyProcess", driver_cmd, run_id: str, env: Optional[Dict], cell_timeout: float,
                     cell_dir: Path, s: Optional[Settings] = None, txn_id: str = "", topic: str = "",
                     ctx_input_topic: str = "", ctx_group: str = "") -> Tuple[Tuple[Optional[int], bool, float], Dict]:
    """Runs the first instance; once kproxy holds its EndTxn of transaction k, acts: kills it
    (producer-crash-restart) or not (zombie) and runs a second instance of the same
    transactional id with its own run id to the end; or kills the broker that coordinates the id
    (coordinator-broker-kill) or leads partition 0 of the topic (partition-leader-kill), lets
    the first instance finish through it, and restores the cluster. Returns the first instance's
    (exit, timed_out, seconds) and what the action did."""
    started: Dict = {}
    result: Dict = {}

    def first() -> None:
        result["run"] = _run_bounded(driver_cmd(run_id), cell_timeout, cell_dir / "driver.stdout", cell_dir / "driver.stderr",
                                     env=env, on_start=lambda p: started.update(proc=p, t0=time.monotonic()))

    thread = threading.Thread(target=first, daemon=True)
    thread.start()
    done: Dict = {"kind": action["kind"], "at_transaction": action["at_transaction"], "fired": False}
    deadline = time.monotonic() + cell_timeout
    while thread.is_alive() and time.monotonic() < deadline:
        if any(f.get("name") == HOLD_RULE and (f.get("injected") or 0) >= 1 for f in kp.faults()):
            done["fired"] = True
            break
        time.sleep(0.05)
    if done["fired"]:
        done["after_s"] = round(time.monotonic() - started.get("t0", time.monotonic()), 1)
        if action["kind"] in BROKER_ACTIONS:
            try:
                node = (find_coordinator(s.cluster_bootstrap, txn_id) if action["kind"] == "coordinator-broker-kill"
                        else partition_leader(s.cluster_bootstrap, topic))
                s.cluster.kill_node(node)  # kill -9: no hand-over; kproxy's connections to it break
                done["killed_node"] = node
                thread.join(cell_timeout + 10)
            finally:
                t_restore = time.monotonic()
                s.cluster.restore()  # the next cell gets the whole cluster back, every partition in sync
                done["restore_s"] = round(time.monotonic() - t_restore, 1)
            return result.get("run", (None, True, cell_timeout)), done
        if action["kind"] == "rebalance-mid-transaction":
            # A second member of the input group (a plain consumer, straight to the cluster, not
            # committing anything) joins while transaction k is open, reads what it is given for
            # a few seconds and leaves: the first instance's group generation moves on twice
            # (KIP-447: offsets sent with an old generation are refused) and it must still write
            # every input exactly once.
            joiner = _join_group(s.cluster_bootstrap, ctx_input_topic, ctx_group, cell_dir)
            done["joiner"] = joiner
            thread.join(cell_timeout + 10)
            return result.get("run", (None, True, cell_timeout)), done
        if action["kind"] == "producer-crash-restart" and "proc" in started:
            _kill_group(started["proc"])  # SIGKILL, mid-transaction: EndTxn k has not reached the broker
        second_id = run_id + ("-z" if action["kind"] == "zombie" else "-r")
        rc2, to2, secs2 = _run_bounded(driver_cmd(second_id), cell_timeout, cell_dir / "second.stdout", cell_dir / "second.stderr",
                                       env=env)
        done["second"] = {"run_id": second_id, "exit": rc2, "timed_out": to2, "seconds": round(secs2, 1)}
    thread.join(cell_timeout + 10)
    return result.get("run", (None, True, cell_timeout)), done


class _ClusterGate:
    """Cells share the cluster; a cell whose action kills a broker must have it to itself. Shared
    for the others, exclusive for that one; a waiting exclusive cell goes before new shared ones."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self):
        with self._cv:
            while self._exclusive or self._waiting:
                self._cv.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cv:
                self._shared -= 1
                self._cv.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cv:
            self._waiting += 1
            while self._exclusive or self._shared:
                self._cv.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cv:
                self._exclusive = False
                self._cv.notify_all()


GATE = _ClusterGate()


def find_coordinator(bootstrap: str, transactional_id: str, timeout: float = 20.0) -> int:
    """The node id of the transaction coordinator of `transactional_id` (FindCoordinator v1, key
    type 1), asked of the cluster directly."""
    import kafka_harness as kh
    body = kh._str(transactional_id) + bytes([1])
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for addr in bootstrap.split(","):
            host, port = addr.rsplit(":", 1)
            try:
                b = kh._Buf(kh.kafka_request(host, int(port), 10, 1, body, 5.0))
            except (OSError, kh.KafkaHarnessError) as e:
                last = e
                continue
            b.int32()  # throttle_time_ms
            err = b.int16()
            b.string()  # error_message
            node = b.int32()
            if err == 0 and node >= 0:
                return node
            last = f"error {err}"
        time.sleep(0.2)
    raise RuntimeError(f"no transaction coordinator for {transactional_id} within {timeout:.0f}s (last: {last})")


def partition_leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    import kafka_harness as kh
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return kh.metadata(host, int(port), [topic], 5.0).topics[topic].partitions[partition].leader


JOIN_MEMBER_S = 20   # how long the joining member waits for records (longer than the hold: it is given partitions once the first instance rejoins)


def _join_group(bootstrap: str, input_topic: str, group: str, cell_dir: Path) -> Dict:
    """Kafka's own console consumer as a second member of `group` on `input_topic`: no offset
    commits, read_committed, from the earliest offset where the group has none, the assignors of every driver's client it can share a group with
    (range, roundrobin, cooperative-sticky); it leaves JOIN_MEMBER_S seconds after its last record.
    Returns its exit, its seconds and how many records it was given (> 0: it had partitions)."""
    import kafka_harness as kh
    cmd = [kh.java_binary(), "-Xmx256m", "-cp", kh.kafka_classpath(), "org.apache.kafka.tools.consumer.ConsoleConsumer",
           "--bootstrap-server", bootstrap, "--topic", input_topic, "--group", group,
           "--consumer-property", "enable.auto.commit=false", "--consumer-property", "isolation.level=read_committed",
           "--consumer-property", "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor,"
           "org.apache.kafka.clients.consumer.RoundRobinAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
           "--from-beginning", "--timeout-ms", str(JOIN_MEMBER_S * 1000)]
    rc, timed_out, secs = _run_bounded(cmd, 90, cell_dir / "joiner.stdout", cell_dir / "joiner.stderr")
    err = (cell_dir / "joiner.stderr").read_text(errors="replace")
    m = re.search(r"Processed a total of (\d+) messages", err)
    return {"exit": rc, "timed_out": timed_out, "seconds": round(secs, 1), "records": int(m.group(1)) if m else None,
            "error": next((l.strip() for l in err.splitlines() if "INCONSISTENT_GROUP_PROTOCOL" in l or "Exception" in l), None)}


def _account_summary(account: Dict) -> Dict:
    out = {k: account.get(k) for k in ("client", "version", "library", "errors", "gave_up", "give_up_reason", "elapsed_s", "missing")}
    out.update({f"{k}_count": len(account.get(k) or []) for k in ("committed", "aborted", "unknown")})
    return out


def _merged_account(a: Dict, b: Dict) -> Dict:
    """Two instances of one transactional id, as kproxy sees them: one id, both instances'
    transactions (for the observatory's comparison)."""
    if a.get("missing") or b.get("missing"):
        return a if a.get("missing") else b
    out = {k: list(a.get(k) or []) + [f"second:{x}" for x in b.get(k) or []] for k in ("committed", "aborted", "unknown")}
    out["gave_up"] = bool(a.get("gave_up") or b.get("gave_up"))
    return out


def _with_second_instance(rec: Dict) -> str:
    """The cell's class when a second instance ran: for zombie the first (fenced) instance is the
    one judged and the second must be exact; for producer-crash-restart the restarted one is
    judged and the killed one's records must be exactly what its state says."""
    act = rec.get("action") or {}
    second = act.get("second")
    if not second:
        return rec["class"]
    if act["kind"] == "producer-crash-restart":
        return rec["class"] + " (killed instance)" if rec["class"] != "exact" else second["class"]
    return rec["class"] if second["class"] == "exact" else second["class"] + " (new instance)"


def run_cell(s: Settings, client: str, sc: Scenario, protocol: int, attempt: int = 1, workload_mode: str = "producer") -> Dict:
    """run_one_cell, alone on the cluster when its action kills a broker."""
    kills_broker = (sc.workload or {}).get("action") in BROKER_ACTIONS
    with (GATE.exclusive() if kills_broker else GATE.shared()):
        return run_one_cell(s, client, sc, protocol, attempt, workload_mode)


def run_one_cell(s: Settings, client: str, sc: Scenario, protocol: int, attempt: int = 1, workload_mode: str = "producer") -> Dict:
    """Runs one cell and returns its record. `workload_mode`: "producer" (the drivers' produce
    workload) or "ctp" (consume-transform-produce: the runner fills an input topic, the driver
    reads it in a group and writes one output per input, committing the input offsets in the same
    transaction)."""
    ctp = workload_mode == "ctp"
    run_id = f"{sc.index:02d}-{client}-tv{protocol}{'-ctp' if ctp else ''}-{attempt}-{uuid.uuid4().hex[:6]}"
    run_id = re.sub(r"[^A-Za-z0-9._-]", "-", run_id)
    cell_dir = s.work_dir / "cells" / run_id
    cell_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    workload = dict(sc.workload or {})
    transactions = int(workload.get("transactions", s.transactions))
    records_per_txn = int(workload.get("records_per_txn", s.records_per_txn))
    cell_timeout = float(max(s.cell_timeout_s, workload.get("cell_timeout_s", 0)))
    txn_timeout = workload.get("transaction_timeout_ms", s.transaction_timeout_ms)
    aborted_inputs = int(workload.get("input_aborted_transactions", 0)) if ctp else 0
    topic = f"conformance-{run_id}"
    client_id = (f"legacy-{run_id}" if protocol == 1 else f"conf-{run_id}")
    txn_id = f"txn-{run_id}"
    input_topic, group = f"{topic}-in", f"g-{run_id}"
    rec: Dict = {
        "client": client, "scenario": sc.name, "scenario_version": sc.version, "number": sc.number,
        "protocol": protocol, "expect": sc.expect, "attempt": attempt, "run_id": run_id, "topic": topic,
        "workload": workload_mode,
        **({"regression": sc.name, "client_family": split_client(client)[0],
            "client_version": split_client(client)[1]} if sc.regression else {}),
        "transactional_id": txn_id, "client_id": client_id, "dir": str(cell_dir),
        "transactions": transactions, "records_per_txn": records_per_txn, "cell_timeout_s": cell_timeout,
        "transaction_timeout_ms": txn_timeout,
    }
    kp: Optional[KproxyProcess] = None
    action: Optional[Dict] = None
    try:
        create_topic(s.cluster_bootstrap, topic, s.partitions, min(3, s.nodes))
        if ctp:
            rec["input_topic"], rec["group"] = input_topic, group
            create_topic(s.cluster_bootstrap, input_topic, s.partitions, min(3, s.nodes))
            fill_input(s.cluster_bootstrap, input_topic, "in", transactions, records_per_txn, cell_dir,
                       aborted=aborted_inputs)
        doc = kproxy_copy(sc, seed=s.seed, protocol=protocol)
        action = runner_action(sc, s.seed)
        if action is not None:
            if action["kind"] in BROKER_ACTIONS and s.cluster is None:
                raise RuntimeError(f"{action['kind']} kills a broker: it needs a cluster the runner started (not --bootstrap)")
            doc["faults"].append(action["hold_rule"])
        kp = KproxyProcess(s, cell_dir, doc)
        rec["kproxy_command"] = " ".join(kp.cmd)
        kp.start()
        if s.tap:
            kp.start_tap()
        driver_timeout_s = max(10, int(cell_timeout * 0.8) - 5)

        def driver_cmd(rid: str) -> List[str]:
            c = [str(DRIVERS / split_client(client)[0] / "run"), "--bootstrap", kp.bootstrap, "--topic", topic,
                 "--transactional-id", txn_id, "--transactions", str(transactions),
                 "--records-per-txn", str(records_per_txn), "--run-id", rid, "--client-id", client_id,
                 "--timeout-s", str(driver_timeout_s)]
            if txn_timeout:
                c += ["--transaction-timeout-ms", str(int(txn_timeout))]
            if ctp:
                c += ["--mode", "ctp", "--input-topic", input_topic, "--group", group]
            c += list(s.driver_args)
            if sc.regression:
                c += list(sc.regression.get("driver_args") or [])
            return c

        cmd = driver_cmd(run_id)
        env = driver_env(client)
        rec["driver_command"] = ((f"CONFORMANCE_CLIENT_VERSION={env['CONFORMANCE_CLIENT_VERSION']} " if env else "")
                                 + " ".join(cmd))
        if action is None:
            rc, timed_out, secs = _run_bounded(cmd, cell_timeout, cell_dir / "driver.stdout", cell_dir / "driver.stderr",
                                               env=env)
        else:
            (rc, timed_out, secs), rec["action"] = _run_with_action(action, kp, driver_cmd, run_id, env, cell_timeout, cell_dir,
                                                                    s, txn_id, topic, input_topic, group)
        account = last_json_line((cell_dir / "driver.stdout").read_text(errors="replace"))
        rec["driver"] = {"exit": rc, "timed_out": timed_out, "seconds": round(secs, 1), "json": account is not None}
        rec["faults"] = kp.faults()
        rec["request_versions"] = kp.request_versions()
        rec["protocol_seen"] = protocol_seen(rec["request_versions"])
        count, lines = kp.fault_log_lines()
        rec["fault_log_count"], rec["fault_log_lines"] = count, lines
        # kproxy's own account of the cell's transactional id, before it stops (issue #44).
        obs_raw = observatory.fetch(kp.admin, txn_id)
        rec["kproxy_exit"] = kp.stop()
        killed = action is not None and action["kind"] == "producer-crash-restart" and rec["action"].get("fired")
        if killed:
            # The killed instance printed nothing; what it had done is known from where it was
            # stopped: transactions 0..k-1 committed (their EndTxn answered), k held in kproxy on
            # its way to the broker, so never committed: the new instance's InitProducerId must
            # have it aborted. Judged as an account of k + 1 transactions.
            k = action["at_transaction"]
            account = {"client": split_client(client)[0], "run_id": run_id, "transactions": k + 1,
                       "records_per_txn": records_per_txn, "committed": list(range(k)), "aborted": [k], "unknown": [],
                       "errors": {}, "gave_up": False, "give_up_reason": None,
                       "note": "killed by the runner (SIGKILL) while its EndTxn was held in kproxy"}
            account_path = cell_dir / "killed-account.json"
            account_path.write_text(json.dumps(account) + "\n")
        else:
            account_path = cell_dir / "driver.stdout"
        if account is None:
            account = {"missing": "the driver printed no JSON line"}
        rec["account"] = _account_summary(account)

        def verify(rid: str, acc_path: Path, exit_code: Optional[int], killed_at_bound: bool, n: int, tag: str) -> Dict:
            # The verifier reads the last JSON line of the account file itself; none = the driver
            # printed no account (it classifies that as crashed, or stuck when killed at the bound).
            vcmd = [str(VERIFIER), "--bootstrap", s.cluster_bootstrap, "--topic", topic, "--account", str(acc_path),
                    "--timeout-s", str(int(s.verifier_timeout_s)), "--driver-exit", str(exit_code if exit_code is not None else -9),
                    "--expect-run-id", rid, "--expect-transactions", str(n),
                    "--expect-records-per-txn", str(records_per_txn), "--protocol", str(rec["protocol_seen"] or protocol),
                    "--transaction-timeout-ms", str(int(txn_timeout or 0)), "--abort-cleanup-ms", str(s.abort_cleanup_ms),
                    "--min-committed-fraction", str(workload.get("min_committed_fraction", s.min_committed_fraction)),
                    "--save-read", str(cell_dir / f"read{tag}.json")]
            if ctp:
                vcmd += ["--workload", "ctp", "--input-topic", input_topic, "--group", group]
                if aborted_inputs:
                    vcmd += ["--aborted-input-prefix", ABORTED_INPUT_PREFIX]
            if killed_at_bound:
                vcmd.append("--driver-timed-out")
            rec["verifier_command" + tag.replace("-", "_")] = " ".join(vcmd)
            # The verifier waits up to max(--timeout-s, transaction timeout + abort cleanup + 10 s) for
            # open transactions, then reads (bounded by 45 s per topic).
            vwait = max(s.verifier_timeout_s, (int(txn_timeout or 60000) + s.abort_cleanup_ms) / 1000 + 10)
            vrc, vto, _ = _run_bounded(vcmd, vwait + 120, cell_dir / f"verifier{tag}.stdout", cell_dir / f"verifier{tag}.stderr")
            got = last_json_line((cell_dir / f"verifier{tag}.stdout").read_text(errors="replace"))
            return got if got is not None else {
                "error": f"verifier printed no JSON (exit {vrc}{', timed out' if vto else ''}): "
                         + (cell_dir / f"verifier{tag}.stderr").read_text(errors="replace")[-500:]}

        first_n = account["transactions"] if killed else transactions
        verdict_or_error = verify(run_id, account_path, 0 if killed else rc, timed_out and not killed, first_n, "")
        verdict = None if "error" in verdict_or_error and "class" not in verdict_or_error else verdict_or_error
        rec["verifier"] = verdict_or_error
        merged = account
        second = (rec.get("action") or {}).get("second")
        if second:
            # The second instance (same transactional id, its own run id, the whole workload).
            acc2 = last_json_line((cell_dir / "second.stdout").read_text(errors="replace")) or {"missing": "the second instance printed no JSON line"}
            v2 = verify(second["run_id"], cell_dir / "second.stdout", second["exit"], second["timed_out"], transactions, "-second")
            second.update(account=_account_summary(acc2), verifier=v2, **{"class": v2.get("class") or "no verdict"})
            merged = _merged_account(account, acc2)
        rec["observatory"] = dict(observatory.compare(obs_raw, merged, verdict, records_per_txn, workload_mode),
                                  transactions=obs_raw.get("transactions"))
        if verdict is not None and verdict.get("class"):
            rec["class"] = verdict["class"]
        elif timed_out:
            rec["class"] = "stuck"
        elif account.get("missing") or (rc not in (0, None)):
            rec["class"] = "crashed"
        else:
            rec["class"] = "no verdict"
        rec["class"] = _with_second_instance(rec)
    except Exception as e:  # a cell that could not run is recorded, never fatal to the run
        rec["class"] = "runner error"
        rec["runner_error"] = f"{type(e).__name__}: {e}"[:2000]
        if kp is not None:
            rec["kproxy_exit"] = kp.stop()
    rec["matches_expect"] = rec["class"] in EXPECT_CLASSES[sc.expect]
    if sc.regression and split_client(client)[1] == str(sc.regression["affected"]):
        # A version with the known defect is expected to show it: neither exact nor a documented give-up.
        rec["regression_side"] = "affected"
        rec["matches_expect"] = rec["class"] not in EXPECT_CLASSES["exact-or-gave-up"]
    elif sc.regression:
        rec["regression_side"] = "fixed"
    injected = [f.get("injected") for f in rec.get("faults", []) if isinstance(f.get("injected"), int)]
    rec["faults_injected_total"] = sum(injected) if injected else None
    rec["elapsed_s"] = round(time.monotonic() - t0, 1)
    rec["driver_s"] = (rec.get("driver") or {}).get("seconds")
    (cell_dir / "cell.json").write_text(json.dumps(rec, indent=1) + "\n")
    return rec
