"""A broker port that another listener owns is never handed to a client (issue #15 bug 4).

Two listeners in front of the session's broker; listener `a` has `broker_ports` set so that the
broker's node id lands exactly on listener `b`'s bootstrap port. The config is valid (bases are
checked only at node 0), so the clash shows at discovery: a Metadata response through `a` must
not tell the client "node N is at b's port" (b's clients reach b's cluster there; with two
clusters that is the wrong one). kproxy refuses the node: the client's connection is closed with
the reason, one log line names both ports' owners, and
kproxy_proxy_broker_ports_refused_total{reason="claimed_by_other"} counts it once.
"""

import socket
import urllib.request

import kafka_harness as kh
import ports
from test_proxy_support import Kproxy


def _metrics(admin: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kproxy_proxy_broker_port"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_a_base_plus_node_id_on_another_listeners_port_is_refused_at_discovery(kafka):
    node = next(iter(kafka.metadata().brokers))
    assert node > 0, "node 0 on b's port would be refused by check-config already: the test needs a node id > 0"
    b_port, admin = ports.free_ports(2)
    b_base = ports.port_block(node + 1)
    kp = Kproxy(kafka.bootstrap(), name="claims", workers=1, port=ports.free_ports(1)[0])  # a's ports derive from it
    a_base = b_port - node
    kp.config_text = (
        "listeners:\n"
        f"  - name: a\n    listen: 127.0.0.1:{kp.port}\n    upstream: {kafka.bootstrap()}\n    advertise: 127.0.0.1\n"
        f"    broker_ports: {a_base}\n"
        f"  - name: b\n    listen: 127.0.0.1:{b_port}\n    upstream: {kafka.bootstrap()}\n    advertise: 127.0.0.1\n"
        f"    broker_ports: {b_base}\n"
        f"admin: {{ listen: 127.0.0.1:{admin} }}\n"
        "workers: 1\nlog: { format: text, level: info }\n")
    kp.config_path.write_text(kp.config_text)
    with kp:
        kp.wait_for_log(r"admin API on ")  # the admin API starts after the listeners
        before = _metrics(admin)
        assert before.get('kproxy_proxy_broker_ports_refused_total{reason="claimed_by_other"}', 0) == 0, before
        # Through a: the response would name b's bootstrap port, so the connection is closed.
        for _ in range(2):
            try:
                meta = kh.metadata("127.0.0.1", kp.port)
                raise AssertionError(f"listener a handed out {meta.brokers}")
            except (ConnectionError, socket.timeout, OSError, EOFError) as e:
                assert "handed out" not in str(e)
        line = kp.wait_for_log(rf"listener=a refuses broker node {node}: its port {b_port} is the bootstrap port of listener 'b'")
        assert line
        assert kp.log_text().count(f"refuses broker node {node}:") == 1  # once per node, not per response
        kp.wait_for_log(r"cannot rewrite broker addresses .*no kproxy port can be given to broker node")
        # Through b: its own broker port, opened on demand.
        meta = kh.metadata("127.0.0.1", b_port)
        assert meta.brokers[node] == ("127.0.0.1", b_base + node)
        after = _metrics(admin)
        assert after['kproxy_proxy_broker_ports_refused_total{reason="claimed_by_other"}'] == 1, after
        assert after['kproxy_proxy_broker_ports_refused_total{reason="over_max_broker_ports"}'] == 0, after
        assert after["kproxy_proxy_broker_ports_opened_total"] == before["kproxy_proxy_broker_ports_opened_total"] + 1, after
        assert after["kproxy_proxy_broker_port_failures_total"] == 0, after


def test_max_broker_ports_refuses_nodes_past_the_cap(kafka):
    """max_broker_ports: 1 and a cluster of one node works; the cap itself is covered by unit
    tests (broker_directory_test: 47 nodes past a cap of 3, one refusal each); here the key is
    accepted by a real start and the node within the cap gets its port."""
    with Kproxy(kafka.bootstrap(), name="cap", workers=1, listener_yaml="    max_broker_ports: 1\n") as kp:
        meta = kh.metadata("127.0.0.1", kp.port)
        node = next(iter(meta.brokers))
        assert meta.brokers[node] == ("127.0.0.1", kp.broker_port(node))
