"""Port 0 everywhere (issue #30 item 7): the kernel picks kproxy's bootstrap port, each broker's
port and the admin API's; kproxy reports every address it bound ("kproxy bound KIND LABEL
HOST:PORT" on standard output, and GET /listeners), and real clients find every broker through
those ports on a real 3-node Kafka 4.4 cluster. Nothing is probed for free ports."""

import clients
import kafka_harness as kh
from test_chaos_support import ChaosKproxy


def test_port_zero_for_listener_brokers_and_admin_carries_transactions_and_reports_every_address(kafka_cluster, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    kp = ChaosKproxy(kafka_cluster.bootstrap(), name="p0", workers=2, broker_ports="kernel")
    assert "    listen: 127.0.0.1:0\n" in kp.config_text
    assert "    broker_ports: 0\n" in kp.config_text
    assert "admin: { listen: 127.0.0.1:0 }\n" in kp.config_text
    with kp:
        assert kp.port != 0 and kp.admin_port != 0
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=600, transactions=6)
        assert prod["ok"], prod
        assert (prod["records_committed"], prod["transactions_committed"]) == (600, 6)
        read = clients.read_committed(kp.bootstrap, topic_name, expect=600)
        assert read["ok"], read
        assert (read["count"], read["duplicates"]) == (600, 0)

        # Every broker the clients were told about is a port kproxy reported, none a real one.
        real = {n.ports[name] for n in kafka_cluster.nodes for name in n.ports}
        md = kh.metadata("127.0.0.1", kp.port, [topic_name])
        assert sorted(md.brokers) == sorted(n.node_id for n in kafka_cluster.nodes)
        bound = kp.bound_addresses()
        for node, (host, port) in md.brokers.items():
            assert host == "127.0.0.1" and port not in real
            assert bound[("broker", f"p0/node-{node}")] == f"127.0.0.1:{port}"
        assert bound[("listener", "p0")] == kp.bootstrap
        assert bound[("admin", "api")] == f"127.0.0.1:{kp.admin_port}"
        assert len({a.rsplit(":", 1)[1] for a in bound.values()}) == len(bound)  # all distinct

        # GET /listeners says the same.
        status, body = kp.admin("GET", "/listeners")
        assert status == 200, body
        assert body["admin"] == f"127.0.0.1:{kp.admin_port}"
        (listener,) = body["listeners"]
        assert listener["name"] == "p0" and listener["address"] == kp.bootstrap and listener["broker_ports"] == "kernel"
        brokers = {b["node_id"]: b for b in listener["brokers"]}
        assert sorted(brokers) == sorted(md.brokers)
        for node, b in brokers.items():
            assert b["listening"], b
            assert b["address"] == b["advertised"] == bound[("broker", f"p0/node-{node}")]
            assert int(b["broker"].rsplit(":", 1)[1]) in real
