"""scripts/demo's body: a real Kafka 4.4.0 broker, kproxy in front of it, a transactional
workload through kproxy, then the same workload with faults injected (a lost commit answer, the
coordinator moving) and what the client, the records and kproxy each say about it. Python stdlib
only (plus the integration harness and its Java clients). Run through scripts/demo, which sets up
and builds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import clients  # noqa: E402
import kafka_harness as kh  # noqa: E402
import ports  # noqa: E402

DEMO_DIR = ROOT / "build" / "demo"
KPROXY_BIN = Path(os.environ.get("KPROXY_BIN", ROOT / "build" / "proxy" / "kproxy"))
TOPIC = "demo-orders"
SCENARIO = ROOT / "scenarios" / "demo" / "lost-commit-answer.yaml"
CLIENT_LOG4J = Path(__file__).resolve().parent / "demo-client-log4j2.properties"
CLEAN_ID = "demo-producer"
FAULT_ID = "demo-producer-faults"
# The whole conformance matrix for the Java client (conformance/README.md): every scenarios/*.yaml
# under both transaction protocols.
MATRIX_COMMAND = "scripts/conformance --clients java-4.4 --out /tmp/java-4.4.md --json /tmp/java-4.4.json"
# What the Java client logs (demo-client-log4j2.properties) that says what it saw of the faults.
CLIENT_SAW = re.compile(r"request timeout|Cancelled in-flight|Disconnecting from node|NOT_COORDINATOR|"
                        r"COORDINATOR_NOT_AVAILABLE|Discovered transaction coordinator|retry|Retrying|"
                        r"error|Error|WARN|ERROR", re.IGNORECASE)


def say(msg: str = "") -> None:
    print(msg, flush=True)


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def pick_ports(listen: int, broker_base: int, admin: int, nodes: int, any_ports: bool = False):
    """The documented demo ports if free (unless any_ports), else a block reserved through the
    test harness (tests/integration/ports.py): listen = base, broker N = base + 1 + N, admin =
    base + nodes + 2. Returns (listen, broker_base, admin)."""
    wanted = [listen, admin] + [broker_base + i for i in range(1, nodes + 1)]
    if not any_ports and all(port_free(p) for p in wanted):
        return listen, broker_base, admin
    if any_ports:
        base = ports.port_block(nodes + 3)
        return base, base + 1, base + nodes + 2
    for _ in range(100):
        base = kh.free_ports(1)[0]
        if base + nodes + 3 < 65000 and all(port_free(base + i) for i in range(nodes + 3)):
            # listen = base, admin = base + 1, broker N = (base + 1) + N
            return base, base + 1, base + nodes + 2
    raise SystemExit("demo: no free ports")


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


def http_get(url: str, timeout: float = 2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - report anything
        return None, str(e)


def run_client(program: str, args: List, log4j: Optional[Path] = None, timeout: float = 300.0) -> Dict:
    """One Java client (tests/integration/java) as clients.run_java runs it, with `log4j` as its
    logging config when given; killed with its process group on timeout or Ctrl-C."""
    cmd = clients.java_command(program, args)
    if log4j is not None:
        cmd = [f"-Dlog4j2.configurationFile={log4j}" if c.startswith("-Dlog4j2.configurationFile=") else c for c in cmd]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=kh._child_setup, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        raise
    return clients._summary(program, out, err, p.returncode, t0)


def kproxy_cli(admin: int, *args: str) -> subprocess.CompletedProcess:
    """`kproxy <args...> --admin 127.0.0.1:<admin>`: the command-line client of the admin API."""
    cmd = [str(KPROXY_BIN), *args, "--admin", f"127.0.0.1:{admin}"]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def client_saw(summary: Dict, max_lines: int = 8) -> List[str]:
    """The lines of the producer's log that say what it met (timeouts, disconnects, coordinator
    look-ups, errors), shortened; at most max_lines, then how many more."""
    lines = []
    for line in summary.get("_stderr", "").splitlines():
        if CLIENT_SAW.search(line):
            line = re.sub(r"\[Producer clientId=[^\]]*\] ", "", line)
            lines.append(line[:200])
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... and {len(lines) - max_lines} more such lines"]
    return lines


def account_of(admin: int, transactional_id: str) -> List[Dict]:
    """kproxy's ended transactions of `transactional_id`, oldest first (GET /transactions/ID)."""
    status, body = http_get(f"http://127.0.0.1:{admin}/transactions/{transactional_id}", timeout=5)
    if status != 200:
        return []
    return [t for t in json.loads(body)["transactions"] if t["outcome"] != "open"]


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/demo")
    ap.add_argument("--once", action="store_true", help="run the workloads once, clean up and exit")
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--transactions", type=int, default=10)
    ap.add_argument("--no-faults", action="store_true", help="skip the fault run")
    ap.add_argument("--summary-json", type=Path, help="write the run's figures here (tests)")
    ap.add_argument("--any-ports", action="store_true",
                    help="reserve free ports (tests) instead of the documented 19092, 19644, 19100+N")
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    times: Dict[str, float] = {}
    for item in os.environ.get("KPROXY_DEMO_TIMES", "").split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            try:
                times[k] = float(v)
            except ValueError:
                pass
    summary: Dict = {"ok": False}

    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    kproxy = None
    kproxy_log = None
    exit_code = 0
    t_workload = time.monotonic()
    say("[demo] starting a real Apache Kafka 4.4.0 broker (KRaft, single node)...")
    broker = kh.KafkaCluster(1, name="demo")
    try:
        broker.start()
        node = broker.nodes[0]
        say(f"[demo] broker node {node.node_id} ready at {node.address()} in {broker.startup_seconds:.1f}s")

        listen, broker_base, admin = pick_ports(19092, 19100, 19644, broker.n, args.any_ports)
        config = DEMO_DIR / "kproxy.yaml"
        config.write_text(
            "# Generated by scripts/demo\n"
            "listeners:\n"
            "  - name: kafka\n"
            f"    listen: 127.0.0.1:{listen}\n"
            f"    upstream: {node.address()}\n"
            "    advertise: 127.0.0.1\n"
            f"    broker_ports: {broker_base}     # broker node N reachable through kproxy at {broker_base} + N\n"
            f"admin: {{ listen: 127.0.0.1:{admin} }}\n")

        if not (KPROXY_BIN.exists() and os.access(KPROXY_BIN, os.X_OK)):
            say(f"[demo] !! no kproxy binary at {rel(KPROXY_BIN)} (run scripts/demo without --no-build)")
            return 1
        kproxy_log_path = DEMO_DIR / "kproxy.log"
        kproxy_log = open(kproxy_log_path, "wb")
        cmd = [str(KPROXY_BIN), "--config", str(config)]
        say(f"[demo] starting kproxy: {rel(KPROXY_BIN)} --config {rel(config)}")
        kproxy = subprocess.Popen(cmd, stdout=kproxy_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  preexec_fn=kh._child_setup)
        if not wait_port(listen, kproxy, 20) or not wait_port(admin, kproxy, 10):
            say(f"[demo] !! kproxy did not start (exit code {kproxy.poll()}); last lines of {rel(kproxy_log_path)}:")
            say(kh.tail(kproxy_log_path, 20))
            return 1
        bootstrap = f"127.0.0.1:{listen}"

        broker.create_topic(TOPIC, partitions=3)
        md = kh.metadata("127.0.0.1", listen, [TOPIC])
        say(f"[demo] Metadata through kproxy advertises brokers: "
            f"{', '.join(f'{b}={h}:{p}' for b, (h, p) in sorted(md.brokers.items()))}")

        # -- 1. the clean run --------------------------------------------------------------------
        say("")
        say(f"== 1. A clean run: Java TxnProducer (transactional.id {CLEAN_ID}), {args.records} records in "
            f"{args.transactions} transactions THROUGH kproxy ({bootstrap})")
        stamp = int(time.time())
        t0 = time.monotonic()
        prod = clients.txn_produce(bootstrap, TOPIC, args.records, args.transactions,
                                   transactional_id=CLEAN_ID, key_prefix=f"demo-{stamp}-")
        say(f"   producer: ok={prod['ok']} committed={prod['records_committed']} records "
            f"in {prod['transactions_committed']} transactions, {prod['elapsed_ms']} ms"
            + (f", error: {prod['error']}" if prod.get("error") else ""))
        cons = clients.read_committed(bootstrap, TOPIC, prod["records_committed"], key_prefix=prod["key_prefix"],
                                      timeout_ms=60000)
        say(f"   read_committed consumer: count={cons['count']} duplicates={cons['duplicates']} "
            f"({'exactly once' if cons['ok'] else 'NOT exactly once'})"
            + (f", error: {cons['error']}" if cons.get("error") else ""))
        times["clean run"] = time.monotonic() - t0
        summary["clean"] = {"producer_ok": prod["ok"], "transactions_committed": prod["transactions_committed"],
                            "records_committed": prod["records_committed"], "count": cons["count"],
                            "duplicates": cons["duplicates"], "consumer_ok": cons["ok"],
                            "elapsed_ms": prod["elapsed_ms"]}
        if not (prod["ok"] and cons["ok"]):
            exit_code = 1

        # -- 2. the fault run --------------------------------------------------------------------
        if not args.no_faults:
            exit_code |= fault_run(args, admin, bootstrap, stamp, times, summary)

        # What `kproxy transactions` says now, for --summary-json (the test checks it lists both runs).
        final = kproxy_cli(admin, "transactions", "--last", "40")
        summary["final_listing"] = final.stdout
        status, body = http_get(f"http://127.0.0.1:{admin}/transactions?ended=40", timeout=5)
        summary["final_overview"] = json.loads(body) if status == 200 else None

        # -- where to look -----------------------------------------------------------------------
        say("")
        say("=" * 78)
        say("What to look at:")
        if kproxy.poll() is None:
            say(f"  kproxy bootstrap     {bootstrap}   (broker node N at 127.0.0.1:{broker_base}+N)")
            status, body = http_get(f"http://127.0.0.1:{admin}/metrics")
            say(f"  metrics              http://127.0.0.1:{admin}/metrics")
            if status == 200:
                for ln in [ln for ln in body.splitlines() if ln.startswith("kproxy_transactions_total")][:6]:
                    say(f"      {ln}")
            kp = rel(KPROXY_BIN)
            say(f"  every transaction    {kp} transactions --admin 127.0.0.1:{admin}   (--json, --open, show ID)")
            say(f"  fault rules          {kp} ctl --admin 127.0.0.1:{admin} faults list")
            say(f"  watch the wire       {kp} tap --admin 127.0.0.1:{admin} --transactions")
            say(f"  admin API            http://127.0.0.1:{admin}/openapi.json   (/faults /scenario /transactions /tap)")
            say(f"  kproxy log           {rel(DEMO_DIR)}/kproxy.log")
        else:
            say("  kproxy               NOT RUNNING any more (see its log)")
            exit_code = 1
        say(f"  kproxy config        {rel(config)}")
        say(f"  real broker          {node.address()}   (scripts/kafka probe {node.address()} {TOPIC})")
        say(f"  broker logs          {broker.log_root}")
        say(f"  rerun the workload   java -cp '{rel(clients.JAVA_CLASSES)}:.cache/kafka-4.4.0/libs/*' TxnProducer "
            f"--bootstrap {bootstrap} --topic {TOPIC} --records 100 --transactions 2")
        times["workload"] = time.monotonic() - t_workload
        order = ["setup", "build", "workload"]
        say("  measured here        " + ", ".join(f"{k} {times[k]:.0f} s" for k in order if k in times)
            + (f" (of the workload: clean run {times['clean run']:.0f} s, fault run {times['fault run']:.0f} s)"
               if "fault run" in times else ""))
        say("=" * 78)
        summary["times"] = {k: round(v, 1) for k, v in times.items()}
        summary["ok"] = exit_code == 0

        if args.once:
            say(f"[demo] --once: done ({'ok' if exit_code == 0 else 'FAILED'}), cleaning up")
            return exit_code
        say("[demo] running until Ctrl-C ...")
        while True:
            if not node.alive():
                say("[demo] the broker exited unexpectedly; log tail:\n" + kh.tail(node.log_path))
                return 1
            if kproxy.poll() is not None:
                say(f"[demo] kproxy exited with code {kproxy.returncode}; log tail:\n"
                    + kh.tail(DEMO_DIR / "kproxy.log"))
                return 1
            time.sleep(1)
    except KeyboardInterrupt:
        say("\n[demo] Ctrl-C: stopping kproxy and the broker")
        return exit_code
    except (kh.KafkaHarnessError, clients.ClientError, subprocess.TimeoutExpired) as e:
        say(f"[demo] FAILED: {e}")
        return 1
    finally:
        if args.summary_json:
            args.summary_json.write_text(json.dumps(summary, indent=2) + "\n")
        if kproxy is not None and kproxy.poll() is None:
            kproxy.send_signal(signal.SIGTERM)
            try:
                kproxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kproxy.kill()
                kproxy.wait()
        if kproxy_log is not None:
            kproxy_log.close()
        broker.stop()


def fault_run(args, admin: int, bootstrap: str, stamp: int, times: Dict[str, float], summary: Dict) -> int:
    """Applies the demo scenario, runs the same workload under a transactional.id of its own and
    prints what the client saw, whether the records are exactly once, kproxy's account and the
    rules' hit counts. Returns 0, or 1 when something did not hold."""
    rc = 0
    kp = rel(KPROXY_BIN)
    say("")
    say(f"== 2. The same workload with faults: {rel(SCENARIO)}")
    t0 = time.monotonic()
    applied = kproxy_cli(admin, "ctl", "scenario", "apply", str(SCENARIO))
    if applied.returncode != 0:
        say(f"   !! $ {kp} ctl scenario apply {rel(SCENARIO)} failed: {applied.stdout.strip()}")
        return 1
    try:
        rules = ", ".join(json.loads(applied.stdout).get("rules", []))
    except (ValueError, AttributeError):
        rules = "?"
    say(f"   $ {kp} ctl scenario apply {rel(SCENARIO)}   (PUT /scenario: rules {rules})")
    say("   (the 2nd commit's answer is lost on its way back; the 5th commit is answered NOT_COORDINATOR)")
    prod = run_client("TxnProducer", [
        "--bootstrap", bootstrap, "--topic", TOPIC, "--records", args.records, "--transactions", args.transactions,
        "--transactional-id", FAULT_ID, "--key-prefix", f"demo-faults-{stamp}-",
        "--abort-on-error", "true", "--report-transactions", "true"], log4j=CLIENT_LOG4J, timeout=300)
    client_outcomes = [t["outcome"] for t in prod.get("transactions", [])]
    say("")
    say("   What the client saw:")
    causes = ", ".join(f"{k} x{v}" for k, v in (prod.get("error_aborts") or {}).items())
    say(f"     ok={prod['ok']}: {prod['transactions_committed']} transactions committed, "
        f"{prod['transactions_aborted']} aborted{f' ({causes})' if causes else ''}, in "
        f"{prod['elapsed_ms'] / 1000:.1f} s (the clean run took {summary['clean']['elapsed_ms'] / 1000:.1f} s)"
        + (f", error: {prod['error']}" if prod.get("error") else ""))
    say(f"     connections opened {prod.get('connection_creation_total')}, closed {prod.get('connection_close_total')} "
        f"(a lost answer ends in a request timeout and a new connection)")
    for line in client_saw(prod):
        say(f"     | {line}")

    cons = clients.read_committed(bootstrap, TOPIC, prod["records_committed"], key_prefix=prod["key_prefix"],
                                  timeout_ms=60000)
    say("")
    say("   The records (read_committed consumer):")
    say(f"     count={cons['count']} of {prod['records_committed']} committed, duplicates={cons['duplicates']}, "
        f"records of aborted transactions seen: {max(0, cons['count'] - prod['records_committed'])} -> "
        + ("still exactly once" if cons["ok"] else "NOT exactly once"))

    ended = account_of(admin, FAULT_ID)
    account_outcomes = [t["outcome"] for t in ended]
    say("")
    say(f"   kproxy's account of each transaction ($ {kp} transactions --last {len(ended) or args.transactions}):")
    listing = kproxy_cli(admin, "transactions", "--last", str(len(ended) or args.transactions))
    say(indent(listing.stdout, "     "))
    say("     (a lost answer is no error on the wire: the broker committed that transaction and kproxy saw its answer")
    say("      before dropping it; the client waited out its request timeout, reconnected and sent EndTxn again,")
    say("      which kproxy counts with that commit, not as a new one: CAUSE says 'EndTxn answer lost; sent again')")
    agree = account_outcomes == client_outcomes and len(client_outcomes) == args.transactions
    say(f"     kproxy's outcomes {'equal' if agree else 'DIFFER FROM'} the client's: "
        f"client {summarize(client_outcomes)}, kproxy {summarize(account_outcomes)}")

    faults = kproxy_cli(admin, "ctl", "faults", "list")
    say("")
    say(f"   The fault rules and their hit counts ($ {kp} ctl faults list):")
    say(indent(faults.stdout, "     "))
    cleared = kproxy_cli(admin, "ctl", "scenario", "clear")
    say(f"   ($ {kp} ctl scenario clear: {'done' if cleared.returncode == 0 else 'FAILED: ' + cleared.stdout.strip()}; "
        "kproxy passes everything through again)")

    say("")
    say("   This client against the whole matrix (every scenarios/*.yaml, both transaction protocols):")
    say(f"     $ {MATRIX_COMMAND}")
    times["fault run"] = time.monotonic() - t0

    summary["faults"] = {
        "producer_ok": prod["ok"], "transactions_committed": prod["transactions_committed"],
        "transactions_aborted": prod["transactions_aborted"], "records_committed": prod["records_committed"],
        "count": cons["count"], "duplicates": cons["duplicates"], "consumer_ok": cons["ok"],
        "client_outcomes": client_outcomes, "account_outcomes": account_outcomes,
        "account_causes": [t["cause"] for t in ended], "account_errors": [t["errors"] for t in ended],
        "account_retries": [t["retries"] for t in ended], "fault_list": faults.stdout,
        "transactions_listing": listing.stdout}
    if not (prod["ok"] and cons["ok"] and agree and faults.returncode == 0 and listing.returncode == 0):
        rc = 1
    return rc


def summarize(outcomes: List[str]) -> str:
    counts: Dict[str, int] = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "none"


if __name__ == "__main__":
    sys.exit(main())
