"""kproxy's codec against Kafka's own Java serializers, and the kproxy-codec CLI it goes through.

The differential (tests/differential/run_differential.py) needs no broker: Kafka 4.4.0's
kafka-clients writes random messages for every API key, version and direction it defines,
kproxy re-encodes them byte for byte, and the other way round. See that script's docstring.

The binary comes from $KPROXY_CODEC_BIN, else build/codec/tool/kproxy-codec (scripts/test
builds it). The work files of the last run stay in build/test-logs/differential/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = REPO_ROOT / "tests" / "differential" / "run_differential.py"
LOG_DIR = Path(os.environ.get("KPROXY_TEST_LOGS", REPO_ROOT / "build" / "test-logs")) / "differential"
SEED = 20251129


def codec_bin() -> Path:
    env = os.environ.get("KPROXY_CODEC_BIN")
    path = Path(env) if env else REPO_ROOT / "build" / "codec" / "tool" / "kproxy-codec"
    if not os.access(path, os.X_OK):
        pytest.fail(f"kproxy-codec not built at {path} (build the project, or set KPROXY_CODEC_BIN)")
    return path


def codec(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(codec_bin()), *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_codec_matches_kafka_for_every_api_version_and_direction():
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(DRIVER), "--codec", str(codec_bin()), "--seed", str(SEED),
                           "--work-dir", str(LOG_DIR)], capture_output=True, text=True, timeout=600)
    out = proc.stdout
    print(out)
    print(proc.stderr, file=sys.stderr)
    (LOG_DIR / "report.txt").write_text(out + proc.stderr)

    defined = int(re.search(r"pairs defined by kafka-clients 4\.4\.0: (\d+)", out).group(1))
    assert defined > 500, "Kafka defines far fewer API versions than expected: is the jar right?"
    excluded = int(re.search(r"^excluded: (\d+)", out, re.M).group(1))
    fwd = re.search(r"^forward .*: (\d+)/(\d+) pairs byte-identical", out, re.M)
    rev = re.search(r"^reverse .*: (\d+)/(\d+) pairs byte-identical", out, re.M)
    mismatches = int(re.search(r"^mismatches: (\d+)", out, re.M).group(1))
    assert fwd, "no forward result (Kafka writes, kproxy re-encodes)"
    assert rev, "no reverse result (kproxy writes, Kafka re-encodes): does kproxy-codec have `random`?"
    assert mismatches == 0, f"{mismatches} messages differ; see {LOG_DIR}/mismatches.txt"
    assert int(fwd.group(2)) == defined - excluded
    assert int(fwd.group(1)) == int(fwd.group(2)), "forward coverage is not complete"
    assert int(rev.group(1)) == int(rev.group(2)), "reverse coverage is not complete"
    assert re.search(r"ApiVersions v0 fallback: (\d+)/\1 frames", out), "ApiVersions v0 fallback failed"
    assert re.search(r"^fields .*: (\d+)/\1 messages", out, re.M), "decode JSON differs from Kafka's JSON"
    assert proc.returncode == 0


# A Metadata v12 request (header v2, client id "cli", no topics = null, allow auto-create).
METADATA_V12_REQUEST = "0003000c0000002a0003636c6900" + "00" + "01" + "00" + "00"
# An ApiVersions v0 response: correlation id 7, ErrorCode 35, one range (ApiVersions 0-3).
API_VERSIONS_V0_UNSUPPORTED = "00000007" + "0023" + "00000001" + "0012" + "0000" + "0003"


def test_help_and_usage_errors():
    h = codec("--help")
    assert h.returncode == 0
    assert "decode" in h.stdout and "roundtrip" in h.stdout and "random" in h.stdout
    assert codec().returncode == 2
    assert codec("nonsense").returncode == 2
    assert codec("decode", "extra").returncode == 2
    assert codec("random", "request", "3").returncode == 2


def test_decode_prints_header_and_body_by_field_name():
    r = codec("decode", stdin=f"request 3 12 {METADATA_V12_REQUEST}\n")
    assert r.returncode == 0
    j = json.loads(r.stdout)
    assert j["api"] == "Metadata" and j["api_key"] == 3 and j["version"] == 12
    assert j["header"]["CorrelationId"] == 42 and j["header"]["ClientId"] == "cli"
    assert j["body"]["Topics"] is None and j["body"]["AllowAutoTopicCreation"] is True


def test_every_bad_line_gets_its_own_error_line_and_exit_status_stays_zero():
    lines = [
        f"request 3 12 {METADATA_V12_REQUEST}",
        f"request 3 12 {METADATA_V12_REQUEST[:-4]}",     # truncated body
        "request 3 12 zz",                               # not hex
        "sideways 3 12 00",                              # bad direction
        f"request 3 999 {METADATA_V12_REQUEST}",         # header disagrees / unknown version
        f"request 3 12 {METADATA_V12_REQUEST}00",        # a trailing byte
    ]
    r = codec("decode", stdin="\n".join(lines) + "\n")
    assert r.returncode == 0
    out = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(out) == len(lines)
    assert "error" not in out[0]
    assert all("error" in o for o in out[1:])
    # The Reader's text names the message, the field and the offset from the frame start.
    assert re.match(r"MetadataRequest v12: field \w+ at offset \d+: ", out[1]["error"]), out[1]["error"]
    assert "1 bytes left after the body" in out[5]["error"]
    rt = codec("roundtrip", stdin="\n".join(lines) + "\n")
    rows = rt.stdout.splitlines()
    assert rt.returncode == 0 and len(rows) == len(lines)
    assert rows[0] == METADATA_V12_REQUEST
    assert all(row.startswith("error ") for row in rows[1:])


def test_api_versions_response_falls_back_to_v0_on_unsupported_version():
    r = codec("decode", stdin=f"response 18 3 {API_VERSIONS_V0_UNSUPPORTED}\n")
    j = json.loads(r.stdout)
    assert j.get("decoded_as_v0") is True and j["version"] == 0, j
    assert j["body"]["ErrorCode"] == 35
    rt = codec("roundtrip", stdin=f"response 18 3 {API_VERSIONS_V0_UNSUPPORTED}\n")
    assert rt.stdout.strip() == API_VERSIONS_V0_UNSUPPORTED


def test_unknown_tagged_fields_survive_a_roundtrip():
    # ApiVersions v3 request (header v2 with an unknown header tag 5 = 0xabcd), body: client
    # software name "k", version "1", then body tags: unknown 9 = 0x01 and 300 = empty.
    header = "0012" "0003" "00000001" "0000" + "01" "05" "02" "abcd"
    body = "026b" "0231" + "02" "09" "01" "01" "ac02" "00"
    frame = header + body
    rt = codec("roundtrip", stdin=f"request 18 3 {frame}\n")
    assert rt.stdout.strip() == frame
    j = json.loads(codec("decode", stdin=f"request 18 3 {frame}\n").stdout)
    assert "error" not in j, j


def test_random_frames_are_reproducible_and_decode():
    a = codec("random", "response", "1", "16", "99", "3")
    b = codec("random", "response", "1", "16", "99", "3")
    assert a.returncode == 0 and a.stdout == b.stdout and len(a.stdout.splitlines()) == 3
    rt = codec("roundtrip", stdin=a.stdout)
    assert [l.split()[3] for l in a.stdout.splitlines()] == rt.stdout.splitlines()
