"""schemathesis hooks for test_toxiproxy_api_contract.py (loaded through SCHEMATHESIS_HOOKS).

The Toxiproxy API opens listeners and sends ApiVersions probes to the addresses a request names.
Generated addresses may name any IPv4 host; the test machine may send traffic to loopback only.
So right before each request, a `listen` or `upstream` that is a well-formed `host:port`
(docs/toxiproxy-api.openapi.yaml, "Address") gets the host 127.0.0.1, and any other non-empty
string becomes "not-an-address" (no port: refused before anything resolves it; a malformed one
such as "1.2.3:80" would otherwise be read as the IPv4 address 1.2.0.3 and probed). Valid input
stays valid, invalid input stays invalid, and nothing leaves the machine.
"""

from __future__ import annotations

import json
import re

import schemathesis

_ADDRESS = re.compile(r"^(localhost|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})"
                      r":(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)$")


def _loopback(value):
    if isinstance(value, dict):
        for key in ("listen", "upstream"):
            v = value.get(key)
            if isinstance(v, str):
                m = _ADDRESS.match(v)
                if m:
                    value[key] = f"127.0.0.1:{m.group(2)}"
                elif v:
                    value[key] = "not-an-address"
    elif isinstance(value, list):
        for item in value:
            _loopback(item)
    return value


@schemathesis.hook
def before_call(context, case, kwargs):
    _loopback(case.body)
    if "json" in kwargs:
        _loopback(kwargs["json"])
    data = kwargs.get("data")
    if isinstance(data, (bytes, str)) and data:
        try:
            parsed = json.loads(data)
        except ValueError:
            return
        kwargs["data"] = json.dumps(_loopback(parsed)).encode()
