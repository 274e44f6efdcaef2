"""The agreement test of kproxy's Toxiproxy API (issue #34, docs/toxiproxy.md "Where kproxy differs
from Toxiproxy"): one list of requests, every endpoint with good and bad bodies, sent in the same
order to kproxy's toxiproxy port and to the real Toxiproxy (toxiproxy-server v2.12.0, built from
the Go module github.com/Shopify/toxiproxy/v2 by tests/integration/toxiproxy_go/build, started
here on a loopback port from ports.py). For each request: the same status code, and the same
JSON shape (object keys, value types, list lengths; numbers are one type), except for the
requests listed in DIFFERENCES, whose entries say what differs; docs/toxiproxy.md lists the same
differences with the reasons. A listed difference that no longer shows fails the test too, so the
list stays true.

Both servers' proxies forward to one TCP echo server the test starts; every proxy listens on
127.0.0.1 with a port the kernel picks (each server reports the port it got)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import kafka_harness as kh
import ports
import slowness
from test_proxy_support import Kproxy
from test_toxiproxy_tcp import EchoServer

SERVER = kh.REPO_ROOT / ".cache" / "toxiproxy-go" / "bin" / "toxiproxy-server"
# Keys left out of every object before shapes are compared: kproxy's extension fields of a proxy
# (docs/toxiproxy.md), and "Logger", an internal field Toxiproxy 2.12 leaks into every proxy as {}.
EXTENSIONS = {"kafka", "kafka_reason", "relay", "Logger"}


def _request(base: str, method: str, path: str, body):
    """(status, parsed JSON or ("text", raw) or None for an empty body)."""
    data = body.encode() if isinstance(body, str) else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=slowness.scaled(10)) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if not raw.strip():
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, ("text", raw.decode(errors="replace").strip())


def shape(value):
    """The JSON shape of a value: objects by key (kproxy's extension fields left out), lists
    element by element (sorted by shape, so order does not count), scalars by type."""
    if isinstance(value, tuple):
        return "text"
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items() if k not in EXTENSIONS}
    if isinstance(value, list):
        return sorted((shape(v) for v in value), key=lambda s: json.dumps(s, sort_keys=True))
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "string"


# The requests, in order: (id, method, path, body). In bodies and paths, {echo} is the echo
# server's address and {listen_a} the listen address this server gave proxy "a".
REQUESTS = [
    ("version", "GET", "/version", None),
    ("list-empty", "GET", "/proxies", None),
    ("create-a", "POST", "/proxies", {"name": "a", "upstream": "{echo}", "listen": "127.0.0.1:0"}),
    ("create-a-again", "POST", "/proxies", {"name": "a", "upstream": "{echo}", "listen": "127.0.0.1:0"}),
    ("create-no-upstream", "POST", "/proxies", {"name": "b"}),
    ("create-no-name", "POST", "/proxies", {"upstream": "{echo}"}),
    ("create-not-json", "POST", "/proxies", "this is not json"),
    ("create-array", "POST", "/proxies", [{"name": "b", "upstream": "{echo}"}]),
    ("create-name-number", "POST", "/proxies", {"name": 5, "upstream": "{echo}"}),
    ("create-enabled-string", "POST", "/proxies", {"name": "b", "upstream": "{echo}", "enabled": "yes"}),
    ("create-listen-bad-port", "POST", "/proxies", {"name": "b", "upstream": "{echo}", "listen": "127.0.0.1:99999"}),
    ("create-listen-taken", "POST", "/proxies", {"name": "b", "upstream": "{echo}", "listen": "{listen_a}"}),
    ("create-disabled", "POST", "/proxies", {"name": "off", "upstream": "{echo}", "listen": "127.0.0.1:0", "enabled": False}),
    ("create-disabled-bad-listen", "POST", "/proxies", {"name": "bad", "upstream": "{echo}", "listen": "127.0.0.1:99999",
                                                        "enabled": False}),
    ("delete-disabled-bad-listen", "DELETE", "/proxies/bad", None),
    ("show-a", "GET", "/proxies/a", None),
    ("show-missing", "GET", "/proxies/missing", None),
    ("disable-a", "PATCH", "/proxies/a", {"enabled": False}),
    ("enable-a-post", "POST", "/proxies/a", {"enabled": True}),
    ("update-missing", "PATCH", "/proxies/missing", {"enabled": False}),
    ("update-not-json", "PATCH", "/proxies/a", "{"),
    ("toxics-empty", "GET", "/proxies/a/toxics", None),
    ("toxics-missing-proxy", "GET", "/proxies/missing/toxics", None),
    ("add-latency", "POST", "/proxies/a/toxics", {"type": "latency", "attributes": {"latency": 100, "jitter": 10}}),
    ("add-latency-again", "POST", "/proxies/a/toxics", {"type": "latency", "attributes": {"latency": 100}}),
    ("add-bandwidth-upstream", "POST", "/proxies/a/toxics", {"name": "bw", "type": "bandwidth", "stream": "upstream",
                                                              "toxicity": 0.5, "attributes": {"rate": 64}}),
    ("add-slow-close", "POST", "/proxies/a/toxics", {"type": "slow_close", "attributes": {"delay": 10}}),
    ("add-timeout", "POST", "/proxies/a/toxics", {"type": "timeout", "stream": "upstream", "attributes": {"timeout": 1000}}),
    ("add-reset-peer", "POST", "/proxies/a/toxics", {"type": "reset_peer", "attributes": {"timeout": 1000}}),
    ("add-slicer", "POST", "/proxies/a/toxics", {"type": "slicer", "attributes": {"average_size": 16, "size_variation": 4,
                                                                                  "delay": 10}}),
    ("add-limit-data", "POST", "/proxies/a/toxics", {"type": "limit_data", "attributes": {"bytes": 1000}}),
    ("add-no-attributes", "POST", "/proxies/a/toxics", {"name": "bare", "type": "latency"}),
    ("add-unknown-type", "POST", "/proxies/a/toxics", {"type": "no_such_toxic"}),
    ("add-bad-stream", "POST", "/proxies/a/toxics", {"type": "latency", "stream": "sideways"}),
    ("add-not-json", "POST", "/proxies/a/toxics", "nope"),
    ("add-missing-proxy", "POST", "/proxies/missing/toxics", {"type": "latency"}),
    ("add-toxicity-2", "POST", "/proxies/a/toxics", {"name": "t2", "type": "latency", "toxicity": 2}),
    ("add-negative-latency", "POST", "/proxies/a/toxics", {"name": "neg", "type": "latency", "attributes": {"latency": -5}}),
    ("add-kafka-error", "POST", "/proxies/a/toxics", {"name": "kerr", "type": "kafka_error",
                                                      "attributes": {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}}),
    # What one server took and the other refused is deleted again, so both hold the same toxics.
    ("delete-toxicity-2", "DELETE", "/proxies/a/toxics/t2", None),
    ("delete-negative-latency", "DELETE", "/proxies/a/toxics/neg", None),
    ("delete-kafka-error", "DELETE", "/proxies/a/toxics/kerr", None),
    ("toxics-list", "GET", "/proxies/a/toxics", None),
    ("show-toxic", "GET", "/proxies/a/toxics/latency_downstream", None),
    ("show-toxic-missing", "GET", "/proxies/a/toxics/missing", None),
    ("show-toxic-missing-proxy", "GET", "/proxies/missing/toxics/latency_downstream", None),
    ("update-toxic", "PATCH", "/proxies/a/toxics/latency_downstream", {"attributes": {"latency": 200}}),
    ("update-toxic-post", "POST", "/proxies/a/toxics/bw", {"toxicity": 1, "attributes": {"rate": 128}}),
    ("update-toxic-missing", "PATCH", "/proxies/a/toxics/missing", {"attributes": {"latency": 1}}),
    ("update-toxic-not-json", "PATCH", "/proxies/a/toxics/bw", "]"),
    ("delete-toxic", "DELETE", "/proxies/a/toxics/latency_downstream", None),
    ("delete-toxic-again", "DELETE", "/proxies/a/toxics/latency_downstream", None),
    ("show-a-with-toxics", "GET", "/proxies/a", None),
    ("populate", "POST", "/populate", [{"name": "a", "upstream": "{echo}", "listen": "{listen_a}"},
                                       {"name": "c", "upstream": "{echo}", "listen": "127.0.0.1:0"}]),
    ("populate-object", "POST", "/populate", {"name": "c", "upstream": "{echo}"}),
    ("populate-missing-upstream", "POST", "/populate", [{"name": "d"}]),
    ("populate-empty", "POST", "/populate", []),
    ("list", "GET", "/proxies", None),
    ("reset", "POST", "/reset", None),
    ("toxics-after-reset", "GET", "/proxies/a/toxics", None),
    ("show-off-after-reset", "GET", "/proxies/off", None),
    ("unknown-path", "GET", "/no/such/path", None),
    ("wrong-method", "PUT", "/proxies", {}),
    ("delete-a", "DELETE", "/proxies/a", None),
    ("delete-a-again", "DELETE", "/proxies/a", None),
    ("list-after-delete", "GET", "/proxies", None),
    ("populate-duplicate", "POST", "/populate", [{"name": "e", "upstream": "{echo}", "listen": "127.0.0.1:0"},
                                                 {"name": "e", "upstream": "{echo}", "listen": "127.0.0.1:0"}]),
]

# What differs, by request id: {"status": (kproxy, toxiproxy)} and/or "shape": why. Each entry is
# in docs/toxiproxy.md "Where kproxy differs from Toxiproxy".
DIFFERENCES = {
    # kproxy's version string names kproxy; the shape is the same.
    "create-listen-bad-port": {"status": (400, 500)},   # a malformed address: 400 (Toxiproxy: 500)
    "create-listen-taken": {"status": (409, 500)},      # an address in use: 409 (Toxiproxy: 500)
    "create-disabled-bad-listen": {"status": (400, 201)},  # checked although disabled (Toxiproxy: 500 once enabled)
    "delete-disabled-bad-listen": {"status": (404, 204)},  # (deleted where it was taken)
    "add-toxicity-2": {"status": (400, 200)},           # toxicity outside 0..1 refused
    "add-negative-latency": {"status": (400, 200)},     # negative attributes refused
    "add-kafka-error": {"status": (200, 400)},          # kproxy's Kafka toxics are extension types
    "delete-toxicity-2": {"status": (404, 204)},        # (the toxics above, deleted where they were taken)
    "delete-negative-latency": {"status": (404, 204)},
    "delete-kafka-error": {"status": (204, 404)},
    "populate-object": {"shape": "Toxiproxy's refused /populate carries \"proxies\": null; kproxy's the error alone"},
    "populate-missing-upstream": {"shape": "the same"},
    "populate-empty": {"shape": "an empty list: kproxy answers \"proxies\": [], Toxiproxy \"proxies\": null"},
    "populate-duplicate": {"status": (400, 201)},       # a name twice in one list: 400 (Toxiproxy takes the last)
    "unknown-path": {"shape": "kproxy answers {\"error\": ...} JSON; Toxiproxy's router a text 404 page"},
    "wrong-method": {"shape": "kproxy answers {\"error\": ...} JSON with Allow; Toxiproxy's router an empty 405"},
}


@pytest.fixture
def servers():
    if not SERVER.exists():
        pytest.fail(f"toxiproxy-server is not built at {SERVER}: run scripts/setup (tests/integration/toxiproxy_go/build)")
    port = ports.free_port()
    (kh.REPO_ROOT / "build" / "test-logs").mkdir(parents=True, exist_ok=True)
    log = open(kh.REPO_ROOT / "build" / "test-logs" / "toxiproxy-server.log", "w")
    real = subprocess.Popen([str(SERVER), "-host", "127.0.0.1", "-port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=kh._child_setup)
    kp = Kproxy("127.0.0.1:9", name="toxi-agree", extra_yaml="toxiproxy: { listen: 127.0.0.1:0, max_proxies: 16 }\n")
    echo = EchoServer()
    try:
        with kp:
            real_base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + slowness.scaled(15)
            while True:
                assert real.poll() is None, f"toxiproxy-server exited with {real.returncode}"
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    assert time.monotonic() < deadline, "toxiproxy-server did not listen in time"
                    time.sleep(0.05)
            yield f"http://{kp.wait_bound('toxiproxy', 'api')}", real_base, f"127.0.0.1:{echo.port}"
    finally:
        echo.close()
        real.terminate()
        try:
            real.wait(timeout=10)
        except subprocess.TimeoutExpired:
            real.kill()
            real.wait(timeout=10)
        log.close()


def _fill(value, subst: dict):
    if isinstance(value, str):
        for k, v in subst.items():
            value = value.replace("{" + k + "}", v)
        return value
    if isinstance(value, list):
        return [_fill(v, subst) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, subst) for k, v in value.items()}
    return value


def test_kproxy_and_toxiproxy_answer_the_same_requests_alike(servers):
    kproxy_base, real_base, echo = servers
    subst = {"kproxy": {"echo": echo}, "real": {"echo": echo}}
    answers = []
    for rid, method, path, body in REQUESTS:
        got = {}
        for who, base in (("kproxy", kproxy_base), ("real", real_base)):
            b = body if isinstance(body, str) else _fill(body, subst[who])
            got[who] = _request(base, method, path, b)
            if rid == "create-a" and got[who][0] == 201:
                subst[who]["listen_a"] = got[who][1]["listen"]
        answers.append((rid, got))

    mismatches = []
    differences_seen = set()
    for rid, got in answers:
        (ks, kb), (rs, rb) = got["kproxy"], got["real"]
        listed = DIFFERENCES.get(rid, {})
        if "status" in listed:
            if (ks, rs) == listed["status"]:
                differences_seen.add(rid)
            else:
                mismatches.append(f"{rid}: status kproxy {ks}, toxiproxy {rs}; listed as {listed['status']}")
            continue
        if ks != rs:
            mismatches.append(f"{rid}: status kproxy {ks}, toxiproxy {rs}\n  kproxy: {kb}\n  toxiproxy: {rb}")
            continue
        if "shape" in listed:
            if shape(kb) != shape(rb):
                differences_seen.add(rid)
            else:
                mismatches.append(f"{rid}: listed as a shape difference, but the shapes agree: {shape(kb)}")
            continue
        if shape(kb) != shape(rb):
            mismatches.append(f"{rid}: shapes differ\n  kproxy: {json.dumps(kb)}\n  toxiproxy: {json.dumps(rb)}")
    for rid, got in answers:
        print(f"{rid:28} kproxy {got['kproxy'][0]}  toxiproxy {got['real'][0]}")
    assert not mismatches, "\n".join(mismatches)
    assert differences_seen == set(DIFFERENCES), sorted(set(DIFFERENCES) - differences_seen)
    # Both made the same proxies and toxics: the requests exercised the APIs, not just errors.
    assert sum(1 for _, got in answers if got["kproxy"][0] in (200, 201, 204)) >= 30

