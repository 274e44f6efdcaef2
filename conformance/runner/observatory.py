"""The observatory column (issue #44): kproxy's own account of a cell's transactions, from its admin
API (`GET /transactions/{transactional_id}`, docs/transactions.md and docs/admin-api.openapi.yaml),
compared with the driver's account and, where the client cannot know the outcome, with the
broker's log as the verifier read it.

kproxy keeps the last 16 ended transactions of an id and the open one; a cell runs at most a few
more than N transactions, so with the runner's N (5 by default) kproxy still has them all; with
more, the oldest are gone and the comparison says so ("history full").

Python 3 stdlib only.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Callable, Dict, List, Optional, Tuple

HISTORY = 16   # ended transactions kproxy keeps per id (docs/transactions.md "Cost and bounds")
ENDED_BADLY = ("aborted", "fenced", "timed_out")


def fetch(admin: Callable[[str], Tuple[int, str]], transactional_id: str) -> Dict:
    """kproxy's history of one id: {"transactions": [...]} (200), {"transactions": []} when kproxy saw
    none of its transactions (404), or {"error": ...}."""
    status, body = admin("/transactions/" + urllib.parse.quote(transactional_id, safe=""))
    if status == 404:
        return {"transactions": [], "seen": False}
    if status != 200:
        return {"error": f"GET /transactions/{transactional_id}: {status} {body[:200]}"}
    try:
        doc = json.loads(body)
    except ValueError:
        return {"error": f"GET /transactions/{transactional_id}: not JSON: {body[:200]}"}
    keep = ("outcome", "producer_id", "producer_epoch", "transaction_version", "records", "partitions", "retries", "cause", "groups")
    txns = [{k: t.get(k) for k in keep} for t in doc.get("transactions") or []]
    for t in txns:
        t["partitions"] = len(t.get("partitions") or [])
        cause = t.get("cause")
        t["cause"] = cause.get("error") if isinstance(cause, dict) else cause
    return {"transactions": txns, "seen": True}


def counts(txns: List[Dict]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for t in txns:
        out[t.get("outcome") or "?"] = out.get(t.get("outcome") or "?", 0) + 1
    return out


def compare(kproxy: Dict, account: Optional[Dict], verdict: Optional[Dict], records_per_txn: int, workload: str) -> Dict:
    """agrees / differs / not compared, with the difference in words.

    The client's account: committed C, aborted A, unknown U (commit asked, outcome not known to the
    client). kproxy's: its transactions by outcome. They agree when kproxy counts C committed plus
    the unknown ones the broker's log shows committed (the verifier's unknown_present), each of
    them with M records, and no transaction still open. The unknown ones the client could not
    judge are named with what the broker's log supports. Transactions the client aborted are not
    compared one for one: an abort of a transaction that never reached the broker (nothing sent)
    is no transaction to kproxy; kproxy's aborted + fenced + timed out may be fewer than A, never more
    than A + U (+ 1 when the driver gave up: the one it left open)."""
    if kproxy.get("error"):
        return {"verdict": "not compared", "difference": kproxy["error"]}
    txns = kproxy.get("transactions") or []
    k = counts(txns)
    out: Dict = {"kproxy": k}
    if not account or account.get("missing"):
        out.update(verdict="not compared", difference="the driver printed no account")
        return out
    if workload == "ctp":
        # The ctp account lists input transactions, not the driver's output transactions; what
        # can be compared: the records of kproxy's committed transactions with the outputs the
        # verifier read (each committed output once), and each committed transaction carrying
        # the group's offsets (AddOffsetsToTxn / TxnOffsetCommit name the group).
        diffs, notes = [], []
        if len(txns) > HISTORY:
            diffs.append("history full")
        committed = [t for t in txns if t.get("outcome") == "committed"]
        outputs = (verdict or {}).get("records_read")
        recs = sum(t.get("records") or 0 for t in committed)
        retried = any(t.get("retries") for t in committed)
        if outputs is not None and (recs != outputs if not retried else recs < outputs):
            diffs.append(f"records in committed transactions: kproxy {recs}, outputs read {outputs}")
        # A commit without records carries nothing (transaction.version 1: a late EndTxn ended a
        # transaction that had only registered its partitions, docs/transactions.md): noted, not
        # a difference.
        empty = sum(1 for t in committed if t.get("groups") == [] and not t.get("records"))
        no_group = sum(1 for t in committed if t.get("groups") == [] and t.get("records"))   # groups None: not stored (older cells)
        v = verdict or {}
        offsets_wrong = v.get("class") == "wrong offsets" or "wrong offsets" in (v.get("also") or [])
        if no_group and offsets_wrong:
            # The verifier found outputs committed without their inputs' offsets: kproxy shows the
            # commit that did it (e.g. a late EndTxn on transaction.version 1), as the broker's log has it.
            notes.append(f"kproxy shows {no_group} committed transaction(s) without the group's offsets, as the verifier found")
        elif no_group:
            diffs.append(f"{no_group} committed transaction(s) without the group's offsets")
        left_open = k.get("open", 0) - (1 if account.get("gave_up") else 0)   # the one a client that gave up left
        if left_open > 0 or k.get("unknown"):
            diffs.append(f"kproxy open {k.get('open', 0)}, unknown {k.get('unknown', 0)}")
        out["verdict"] = "differs" if diffs else "agrees"
        if diffs:
            out["difference"] = "; ".join(diffs)
        if empty:
            notes.append(f"kproxy counts {empty} committed transaction(s) without records or offsets")
        if notes:
            out["note"] = "; ".join(notes)
        return out
    # The account itself (lists) or the cell record's summary of it (counts).
    c, a, u = (len(account[x]) if isinstance(account.get(x), list) else int(account.get(f"{x}_count") or 0)
               for x in ("committed", "aborted", "unknown"))
    present = len((verdict or {}).get("unknown_present") or [])
    want_committed = c + present
    diffs = []
    if len(txns) > HISTORY:
        diffs.append("history full")
    if k.get("committed", 0) != want_committed:
        diffs.append(f"committed: kproxy {k.get('committed', 0)}, client {c}" + (f" + {present} unknown the broker's log shows committed" if present else ""))
    bad = sum(k.get(x, 0) for x in ENDED_BADLY)
    # One more only for a client that gave up: the transaction it left open is ended by the
    # coordinator (fenced by the next instance, or timed out), not in its account.
    if bad > a + u + (1 if account.get("gave_up") else 0):
        diffs.append(f"aborted/fenced/timed out: kproxy {bad}, client aborted {a} (unknown {u})")
    if k.get("unknown"):
        diffs.append(f"kproxy unknown {k['unknown']}")
    notes = []
    if k.get("open"):
        # A client that gave up may leave its last transaction open on the broker (until its
        # timeout aborts it): kproxy showing that one open agrees with the client.
        if account.get("gave_up") and k["open"] == 1:
            notes.append("kproxy shows open the transaction the client left when it gave up")
        else:
            diffs.append(f"kproxy still open {k['open']}")
    # kproxy counts the records of every transactional Produce request, so a batch re-sent after a
    # retried error counts again (docs/transactions.md): with retries, at least M; without, M.
    wrong_records = [t.get("records") for t in txns if t.get("outcome") == "committed"
                     and (t.get("records") != records_per_txn if not t.get("retries") else (t.get("records") or 0) < records_per_txn)]
    if wrong_records:
        diffs.append(f"committed transactions with records {wrong_records}, not {records_per_txn}")
    logged = []
    read = (verdict or {}).get("records_read")
    kept = sum(t.get("records") or 0 for t in txns if t.get("outcome") == "committed")
    if wrong_records and (verdict or {}).get("duplicate_count") and read == kept:
        # The client wrote some records twice inside one transaction (a retry after a lost
        # request): its account says M per transaction, kproxy counted every record the broker
        # kept. Which one the log supports is a fact the report can give.
        logged.append(f"the broker's log holds {read} records in the committed transactions, as kproxy counts; "
                      f"the client's account does not count the {verdict['duplicate_count']} it wrote twice")
    missing = (verdict or {}).get("missing") or []
    if missing and records_per_txn > 0:
        # A loss: transactions the client counts committed whose records the broker does not hold
        # at all (keys "<run>:<transaction>:<record>"). When kproxy's committed count is the
        # client's less those, the log supports kproxy.
        per_txn: Dict[str, int] = {}
        for key in missing:
            parts = str(key).rsplit(":", 2)
            if len(parts) == 3:
                per_txn[parts[1]] = per_txn.get(parts[1], 0) + 1
        whole = sum(1 for n in per_txn.values() if n >= records_per_txn)
        if whole and k.get("committed", 0) == c - whole:
            logged.append(f"the broker's log has no record of {whole} transaction(s) the client counts committed; "
                          f"its {c - whole} committed are kproxy's count")
    dirty_txns = {str(key).rsplit(":", 2)[1] for key in ((verdict or {}).get("dirty") or []) if len(str(key).rsplit(":", 2)) == 3}
    if dirty_txns and k.get("committed", 0) == c + len(dirty_txns):
        # A dirty read: records of transactions the client reported aborted or never reported
        # are visible to read_committed, i.e. the coordinator committed them, as kproxy counts.
        logged.append(f"the broker's log shows {len(dirty_txns)} transaction(s) committed that the client did not report "
                      f"committed (visible to read_committed), as kproxy counts")
    if account.get("gave_up") and c + a + u == 0 and k.get("committed", 0) == 0 and (verdict or {}).get("records_read") == 0:
        logged.append("the client knew the outcome of none of its transactions (it gave up first); the broker's log holds "
                      "none of their records, as kproxy counts no commit")
    out["verdict"] = "differs" if diffs else "agrees"
    if diffs:
        out["difference"] = "; ".join(diffs)
    if notes:
        out["note"] = "; ".join(notes)
    if u:
        # The client gave up (or its deadline came) before EndTxn's answer: which side does the
        # broker's log support? The verifier saw the unknown transactions' records or not.
        committed_unknown = present
        sides = []
        kc = k.get("committed", 0)
        if kc == c + committed_unknown:
            sides.append("kproxy")
        logged.insert(0, f"{u} transaction(s) of unknown outcome to the client; the broker's log shows {committed_unknown} of them "
                         f"committed, which supports " + ("kproxy's count" if sides else f"neither kproxy's {kc} committed nor the client's {c}"))
    if logged:
        out["broker_log"] = "; ".join(logged)
    return out


def recompare(cell: Dict) -> None:
    """A cell record's observatory verdict computed again from what it stored (kproxy's
    transactions, the account's counts, the verifier's output): `--report-from` after this
    comparison changed."""
    obs = cell.get("observatory")
    if not isinstance(obs, dict) or obs.get("transactions") is None:
        return
    acc = dict(cell.get("account") or {})
    if acc.get("missing"):
        acc = {"missing": acc["missing"]}
    # A second instance of the id (scenario actions zombie, producer-crash-restart): kproxy sees
    # both under one id, so both accounts count, as when the cell ran (cell._merged_account).
    second = ((cell.get("action") or {}).get("second") or {}).get("account") or {}
    if second and not acc.get("missing"):
        if second.get("missing"):
            acc = {"missing": second["missing"]}
        else:
            for k in ("committed", "aborted", "unknown"):
                acc[f"{k}_count"] = int(acc.get(f"{k}_count") or 0) + int(second.get(f"{k}_count") or 0)
            acc["gave_up"] = bool(acc.get("gave_up") or second.get("gave_up"))
    again = compare({"transactions": obs["transactions"]}, acc, cell.get("verifier"), int(cell.get("records_per_txn") or 0),
                    cell.get("workload", "producer"))
    cell["observatory"] = dict(again, transactions=obs["transactions"])


def fmt(k: Dict[str, int]) -> str:
    return ", ".join(f"{v} {n}" for n, v in sorted(k.items())) or "no transaction"
