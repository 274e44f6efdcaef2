"""What every Python workload driver shares: the contract's command line, the deadline and its
watchdog, the account of indexes and errors, and the final JSON line. See ../CONTRACT.md.

The drivers (confluent-kafka-python, kafka-python, aiokafka) keep only their client's own
transaction logic; their `run` scripts put this folder on PYTHONPATH.
"""
import argparse
import faulthandler
import json
import os
import sys
import threading
import time

OUTCOMES = ("committed", "aborted", "unknown")


class GiveUp(Exception):
    """Raised by a driver to stop the run; its text becomes give_up_reason."""


def logger(family):
    """A log function writing `[family] ...` lines to stderr."""
    def log(*a):
        print(f"[{family}]", *a, file=sys.stderr, flush=True)
    return log


def parse_args(argv=None):
    """The contract's options, as an argparse namespace (client_id None when absent)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--transactions", type=int, required=True)
    ap.add_argument("--records-per-txn", type=int, required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--transaction-timeout-ms", type=int, default=None)
    # Consume-transform-produce (CONTRACT.md "Consume-transform-produce"), for drivers that have it.
    ap.add_argument("--mode", choices=("produce", "ctp"), default="produce")
    ap.add_argument("--input-topic", default=None)
    ap.add_argument("--group", default=None)
    # Extra client configuration, key=value, repeatable (regression scenarios set e.g. a short
    # message timeout this way: scenarios/regressions/); drivers that honour it say so.
    ap.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    return ap.parse_args(argv)


def properties(a):
    """`--property key=value` options as a dict (values as strings)."""
    out = {}
    for kv in a.property:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            raise SystemExit(f"--property wants key=value, not {kv!r}")
        out[key] = value
    return out


def record_key(run_id, i, j):
    """Key and value of record j of transaction i: `RUNID:i:j`."""
    return f"{run_id}:{i}:{j}".encode()


class Deadline:
    """The `--timeout-s` bound on the whole run, counted from t0."""

    def __init__(self, timeout_s, t0=None):
        self.t0 = time.monotonic() if t0 is None else t0
        self.at = self.t0 + timeout_s

    def remaining(self):
        return self.at - time.monotonic()

    def passed(self):
        return self.remaining() <= 0

    def check(self):
        """Raises GiveUp("deadline") once the deadline has passed."""
        if self.passed():
            raise GiveUp("deadline")


class Account:
    """The run's outcome: which index is committed, aborted or unknown, the errors by name, and
    the one JSON line on stdout. Thread-safe; the JSON is printed once (by the driver or by the
    watchdog, whichever comes first)."""

    def __init__(self, family, version, library, a, t0):
        self.lock = threading.Lock()
        self.printed = False
        self.t0 = t0
        self.committing = None  # index whose commit was requested and not yet settled
        self.d = {
            "client": family, "version": version, "library": library,
            "transactions": a.transactions, "records_per_txn": a.records_per_txn, "run_id": a.run_id,
            "committed": [], "aborted": [], "unknown": [], "errors": {},
            "gave_up": False, "give_up_reason": None, "elapsed_s": 0.0,
        }

    def error(self, name):
        """Counts one error under its name."""
        with self.lock:
            self.d["errors"][name] = self.d["errors"].get(name, 0) + 1

    def begin_commit(self, i):
        """The commit of index i is about to be requested: until settled, it is unknown."""
        with self.lock:
            self.committing = i

    def settle(self, i, outcome):
        """Records index i as committed, aborted or unknown (moving it out of unknown). A settled
        commit (committed or aborted) is no longer pending."""
        assert outcome in OUTCOMES, outcome
        with self.lock:
            if outcome == "unknown":
                if i not in self.d["unknown"]:
                    self.d["unknown"].append(i)
                return
            if i in self.d["unknown"]:
                self.d["unknown"].remove(i)
            self.d[outcome].append(i)
            if self.committing == i:
                self.committing = None

    def unsettled(self, i):
        """Whether index i is in none of the three lists."""
        with self.lock:
            return all(i not in self.d[o] for o in OUTCOMES)

    def emit(self, gave_up=None):
        """Prints the JSON line (once); a pending commit counts as unknown."""
        with self.lock:
            if self.printed:
                return
            self.printed = True
            if self.committing is not None and self.committing not in self.d["unknown"]:
                self.d["unknown"].append(self.committing)
            if gave_up is not None:
                self.d["gave_up"], self.d["give_up_reason"] = True, gave_up
            self.d["elapsed_s"] = round(time.monotonic() - self.t0, 3)
            sys.stdout.write(json.dumps(self.d) + "\n")
            sys.stdout.flush()


class CtpProgress:
    """The consume-transform-produce account (CONTRACT.md): output key = RUNID:<input key>; the
    input keys are PREFIX:i:j, the account's run_id becomes RUNID:PREFIX, and input transaction i
    is committed once all M of its records went out in committed transactions."""

    def __init__(self, account, run_id, records_per_txn):
        self.account, self.run_id, self.m = account, run_id, records_per_txn
        self.done = {}   # input transaction -> its records out in committed transactions
        self.records = 0

    def output_key(self, input_key):
        return f"{self.run_id}:{input_key}"

    @staticmethod
    def input_txn(input_key):
        parts = input_key.split(":")
        try:
            int(parts[-1])
            return int(parts[-2]), ":".join(parts[:-2])
        except (ValueError, IndexError):
            return None, None

    def committed(self, input_keys):
        """One output transaction with these inputs committed."""
        for k in input_keys:
            i, prefix = self.input_txn(k)
            self.records += 1
            if i is None:
                continue
            with self.account.lock:
                if prefix and self.account.d["run_id"] == self.run_id:
                    self.account.d["run_id"] = f"{self.run_id}:{prefix}"
            self.done[i] = self.done.get(i, 0) + 1
            if self.done[i] == self.m:
                self.account.settle(i, "committed")


def start_watchdog(account, deadline, log, grace_s=5.0):
    """If the run is still going grace_s past the deadline (a blocking call hangs), dump the
    threads' stacks to stderr, print the JSON as it stands with give_up_reason "deadline", and
    leave."""
    def watchdog():
        time.sleep(max(0.0, deadline.remaining()) + grace_s)
        log("watchdog: deadline passed inside a blocking call")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)  # where it hung
        account.emit("deadline")
        os._exit(0)
    threading.Thread(target=watchdog, daemon=True).start()


def close_bounded(close, deadline, log, what="close"):
    """Calls close() on a daemon thread and waits for it at most max(1, min(10, remaining + 5))
    seconds: a close that hangs must not hold the run past the watchdog. Errors are logged."""
    def run():
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - best effort, the JSON is already out
            log(f"{what}:", type(exc).__name__, exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=max(1.0, min(10.0, deadline.remaining() + 5.0)))


def finish():
    """Leaves the process at once (exit 0), past any thread the client left running."""
    sys.stdout.flush()
    os._exit(0)
