"""Helpers for the chaos integration tests (test_chaos_*.py): a kproxy with its admin API on, and
small clients of that API and of /metrics. No tests live here.

    with ChaosKproxy(kafka.bootstrap(), name="x", extra_yaml=rules) as kp:
        kp.admin("PUT", "/faults/slow", {"match": {...}, "action": {...}})   # -> (status, json)
        kp.rule("slow")["injected"]                                          # counters of one rule
        kp.metric("kproxy_connections_opened_total", side="client")          # summed over labels
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from typing import Dict, Optional, Tuple

import kafka_harness as kh
from test_proxy_support import Kproxy


class ChaosKproxy(Kproxy):
    """A Kproxy with `admin: {listen: 127.0.0.1:0}` added to its config (the kernel picks the
    port; `admin_port` is read from kproxy's report at start, and kept by restart()); `port` fixes
    the listener's port (e.g. one a broker already advertises); `token` is sent as the admin
    bearer token (kproxy reads its own from $KPROXY_ADMIN_TOKEN, inherited from the test)."""

    def __init__(self, upstream: str, *, extra_yaml: str = "", port: Optional[int] = None, token: Optional[str] = None,
                 **kwargs):
        self.admin_port = 0
        self.token = token
        super().__init__(upstream, extra_yaml="admin: { listen: 127.0.0.1:0 }\n" + extra_yaml, port=port, **kwargs)

    def _pin_kernel_ports(self) -> None:
        super()._pin_kernel_ports()
        old = "admin: { listen: 127.0.0.1:0 }\n"
        if self.admin_port and self.config_text.count(old) == 1:
            self.config_text = self.config_text.replace(old, f"admin: {{ listen: 127.0.0.1:{self.admin_port} }}\n")
            self.config_path.write_text(self.config_text)

    def start(self, timeout: float = 10.0, append_log: bool = False) -> "ChaosKproxy":
        """Starts kproxy, reads where its admin API listens and checks that it answers there
        (the admin API opens before the Kafka listeners, so this wait is only a check)."""
        super().start(timeout, append_log)
        self.admin_port = int(self.wait_bound("admin", "api", timeout).rsplit(":", 1)[1])
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.admin_port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline or not self.alive():
                    raise RuntimeError(f"kproxy's admin API did not listen on {self.admin_port}:\n{self.log_text()[-3000:]}")
                time.sleep(0.05)

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def admin(self, method: str, path: str, body: Optional[object] = None, timeout: float = 10.0) -> Tuple[int, object]:
        """One admin API call; returns (HTTP status, decoded JSON body or None)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.admin_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, (json.loads(raw) if raw.strip() else None)

    def put_rule(self, name: str, spec: Dict) -> Dict:
        status, body = self.admin("PUT", f"/faults/{name}", spec)
        assert status == 200, (status, body)
        return body["rule"]

    def rule(self, name: str) -> Dict:
        status, body = self.admin("GET", f"/faults/{name}")
        assert status == 200, (status, body)
        return body

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.admin_url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of every sample of `name` whose labels include `labels`."""
        total = 0.0
        rx = re.compile(r"^" + re.escape(name) + r"(\{[^}]*\})?\s+(\S+)$", re.M)
        for m in rx.finditer(self.metrics_text()):
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if all(got.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
        return total
