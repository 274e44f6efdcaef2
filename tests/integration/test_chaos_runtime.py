"""Chaos rules changed at run time through the admin API while a real Java client keeps running:
the change applies from the next frame on the open connections, without a reconnect.
"""

import re
import socket
import statistics
import struct
import time

import clients
from test_chaos_support import ChaosKproxy
from test_proxy_support import recv_frame, request

DELAY_MS = 300


def _accepted_ids(kp: ChaosKproxy):
    return [int(m.group(1)) for m in re.finditer(r"conn=(\d+) accepted", kp.log_text())]


def test_delay_turned_on_and_off_mid_run_without_reconnect(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    with ChaosKproxy(kafka.bootstrap(), name="runtime") as kp:
        run = clients.start_java("ChaosSteadyProducer", ["--bootstrap", kp.bootstrap, "--topic", topic_name,
                                                        "--duration-ms", 7000, "--interval-ms", 40])
        try:
            run.wait_for_line("first send acknowledged", timeout=60)
            time.sleep(1.0)  # past the bootstrap connection: the producer uses its broker connection
            opened_before = kp.metric("kproxy_connections_opened_total", side="client")
            ids_before = _accepted_ids(kp)
            closed_before = re.findall(r"conn=\d+ closed.*", kp.log_text())  # the start-up probe's
            on_at = time.time() * 1000
            kp.put_rule("slow-produce", {"match": {"api": "Produce"}, "action": {"delay": DELAY_MS, "side": "response"}})
            time.sleep(2.5)
            off_at = time.time() * 1000
            status, _ = kp.admin("DELETE", "/faults/slow-produce")
            assert status == 204
            time.sleep(2.0)
            # Still running: the connections it had before the rule came and went are the ones it has.
            assert run.proc.poll() is None, "the producer ended early"
            opened_after = kp.metric("kproxy_connections_opened_total", side="client")
            ids_after = _accepted_ids(kp)
            closed = re.findall(r"conn=\d+ closed.*", kp.log_text())
            during = kp.metric("kproxy_faults_injected_total", rule="slow-produce")
            out = run.result(timeout=60)
        finally:
            run.kill()
        assert out["ok"] and out["failed"] == 0, out
        assert opened_after == opened_before, (opened_before, opened_after)
        assert ids_after == ids_before
        assert closed == closed_before, closed

        sends = out["sends"]  # [wall ms at send, latency ms, failed]
        before = [lat for at, lat, _ in sends if at < on_at - DELAY_MS]
        on = [lat for at, lat, _ in sends if on_at + 50 < at < off_at - 50]
        after = [lat for at, lat, _ in sends if at > off_at + DELAY_MS + 50]
        assert len(before) >= 5 and len(on) >= 3 and len(after) >= 5, (len(before), len(on), len(after))
        # On: every Produce answer waited for the rule's delay; off again: back to normal.
        assert min(on) >= DELAY_MS, on
        assert statistics.median(before) < DELAY_MS / 2, before
        assert statistics.median(after) < DELAY_MS / 2, after
        assert during >= len(on), (during, len(on))
        assert kp.metric("kproxy_faults_injected_total", rule="slow-produce") == during  # nothing after the DELETE
        assert kp.stop() == 0


def _list_groups(port: int, correlation_id: int) -> int:
    """Sends ListGroups v0 to kproxy; returns the response's ErrorCode."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request(16, 0, correlation_id, b""))
        body = recv_frame(s)
    cid, code = struct.unpack(">ih", body[:6])
    assert cid == correlation_id
    return code


def test_two_once_answer_rules_answer_two_requests_and_count_what_they_did(kafka):
    """Issue #15 bug 9: the second of two `times: 1` answer rules was counted (and its shot spent)
    on the request the first had answered; the metric said 1 for the first only."""
    with ChaosKproxy(kafka.bootstrap(), name="answers") as kp:
        kp.put_rule("first", {"match": {"api": "ListGroups"}, "action": {"answer": "NOT_COORDINATOR"}, "trigger": {"times": 1}})
        kp.put_rule("second", {"match": {"api": "ListGroups"}, "action": {"answer": "COORDINATOR_NOT_AVAILABLE"},
                               "trigger": {"times": 1}})
        assert _list_groups(kp.port, 1) == 16  # NOT_COORDINATOR, from the first rule
        assert (kp.rule("first")["injected"], kp.rule("second")["injected"]) == (1, 0)
        assert kp.rule("second")["hits"] == 0
        assert kp.metric("kproxy_faults_injected_total", rule="first") == 1
        assert kp.metric("kproxy_faults_injected_total", rule="second") == 0
        assert _list_groups(kp.port, 2) == 15  # COORDINATOR_NOT_AVAILABLE: the second rule still had its shot
        assert (kp.rule("first")["injected"], kp.rule("second")["injected"]) == (1, 1)
        assert kp.metric("kproxy_faults_injected_total", rule="second") == 1
        assert _list_groups(kp.port, 3) == 0  # both spent: the broker answers
        assert kp.stop() == 0
