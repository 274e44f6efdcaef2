#!/usr/bin/env python3
"""Imports Kafka's message definitions into kproxy's facts-only schema file.

Reads every common/message/*.json from kafka-clients-<version>.jar, strips the `//` comments and
the prose ("about"), keeps the request, response and header messages, lists Kafka's error codes
(by running ListErrors.java against the same jar), and writes one JSON file that the build-time
generator (generate.py) reads:

    codec/gen/kafka-<version>-messages.json

Usage: import_schema.py [--jar PATH] [--out PATH]
The jar defaults to .cache/kafka-<version>/libs/ (scripts/setup puts it there), then the Maven local
repository. Anything unexpected in the input (an unknown key or type) stops the import.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import zipfile

KAFKA_VERSION = "4.4.0"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

MESSAGE_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
                "latestVersionUnstable", "fields", "commonStructs", "about"}
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
              "mapKey", "entityType", "ignorable", "zeroCopy", "flexibleVersions", "fields", "about"}
STRUCT_KEYS = {"name", "versions", "fields", "about"}
KEPT_TYPES = {"request", "response", "header"}
KNOWN_TYPES = KEPT_TYPES | {"data", "metadata", "coordinator-key", "coordinator-value"}
PRIMITIVES = {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "string",
              "bytes", "records", "uuid"}
ENTITY_TYPES = {"topicName", "transactionalId", "producerId", "groupId", "brokerId"}
VERSIONS_RE = re.compile(r"^(none|\d+|\d+\+|\d+-\d+)$")
STRUCT_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class ImportError_(Exception):
    pass


def fail(where, what):
    raise ImportError_(f"{where}: {what}")


def strip_comments(text):
    """Removes // and /* */ comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ImportError_("unterminated /* comment")
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_versions(where, key, value):
    if not isinstance(value, str) or not VERSIONS_RE.match(value):
        fail(where, f"{key} {value!r} is not a version range")


def clean_field(where, f):
    if not isinstance(f, dict):
        fail(where, "field is not an object")
    unknown = set(f) - FIELD_KEYS
    if unknown:
        fail(where, f"unknown field keys {sorted(unknown)}")
    name = f.get("name")
    if not isinstance(name, str) or not FIELD_NAME_RE.match(name):
        fail(where, f"bad field name {name!r}")
    where = f"{where}.{name}"
    for req in ("type", "versions"):
        if req not in f:
            fail(where, f"missing {req}")
    t = f["type"]
    base = t[2:] if t.startswith("[]") else t
    if base not in PRIMITIVES and not STRUCT_NAME_RE.match(base):
        fail(where, f"unknown type {t!r}")
    is_struct = base not in PRIMITIVES
    if is_struct != ("fields" in f) and not is_struct:
        fail(where, "a primitive field has nested fields")
    for key in ("versions", "nullableVersions", "taggedVersions", "flexibleVersions"):
        if key in f:
            check_versions(where, key, f[key])
    if "tag" in f and (not isinstance(f["tag"], int) or f["tag"] < 0):
        fail(where, f"bad tag {f['tag']!r}")
    if ("tag" in f) != ("taggedVersions" in f):
        fail(where, "tag and taggedVersions must come together")
    if "entityType" in f and f["entityType"] not in ENTITY_TYPES:
        fail(where, f"unknown entityType {f['entityType']!r}")
    for key in ("mapKey", "ignorable", "zeroCopy"):
        if key in f and not isinstance(f[key], bool):
            fail(where, f"{key} is not a boolean")
    out = {}
    for key, value in f.items():
        if key == "about":
            continue
        if key == "fields":
            value = [clean_field(where, sub) for sub in value]
        if key == "default":
            # Kafka writes defaults as strings or bare literals; keep them as strings.
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, int):
                value = str(value)
            elif not isinstance(value, str):
                fail(where, f"bad default {value!r}")
        out[key] = value
    return out


def clean_message(filename, m):
    where = filename
    unknown = set(m) - MESSAGE_KEYS
    if unknown:
        fail(where, f"unknown message keys {sorted(unknown)}")
    if m.get("type") not in KNOWN_TYPES:
        fail(where, f"unknown message type {m.get('type')!r}")
    if m["type"] not in KEPT_TYPES:
        return None
    # Removed APIs (e.g. ControlledShutdown in 4.x) keep only their key and "validVersions": "none".
    removed = m.get("validVersions") == "none"
    for req in ("name", "validVersions") if removed else ("name", "validVersions", "flexibleVersions", "fields"):
        if req not in m:
            fail(where, f"missing {req}")
    if m["type"] != "header" and not isinstance(m.get("apiKey"), int):
        fail(where, "request/response without an integer apiKey")
    check_versions(where, "validVersions", m["validVersions"])
    if "flexibleVersions" in m:
        check_versions(where, "flexibleVersions", m["flexibleVersions"])
    if "latestVersionUnstable" in m and not isinstance(m["latestVersionUnstable"], bool):
        fail(where, "latestVersionUnstable is not a boolean")
    out = {}
    for key, value in m.items():
        if key == "about":
            continue
        if key == "fields":
            value = [clean_field(f"{where}:{m['name']}", f) for f in value]
        elif key == "commonStructs":
            structs = []
            for s in value:
                extra = set(s) - STRUCT_KEYS
                if extra:
                    fail(where, f"unknown commonStructs keys {sorted(extra)}")
                check_versions(where, "commonStructs.versions", s.get("versions"))
                structs.append({"name": s["name"], "versions": s["versions"],
                                "fields": [clean_field(f"{where}:{s['name']}", f) for f in s["fields"]]})
            value = structs
        out[key] = value
    return out


def find_jar():
    candidates = [os.path.join(REPO, ".cache", f"kafka-{KAFKA_VERSION}", "libs", f"kafka-clients-{KAFKA_VERSION}.jar"),
                  os.path.expanduser(f"~/.m2/repository/org/apache/kafka/kafka-clients/{KAFKA_VERSION}/kafka-clients-{KAFKA_VERSION}.jar")]
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise ImportError_("kafka-clients-%s.jar not found in %s; pass --jar" % (KAFKA_VERSION, " or ".join(candidates)))


def find_slf4j(jar):
    """Errors' static initialiser needs slf4j-api; look next to the jar, then in ~/.m2."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(jar), "slf4j-api-*.jar")))
    found += sorted(glob.glob(os.path.expanduser("~/.m2/repository/org/slf4j/slf4j-api/*/slf4j-api-*.jar")))
    if not found:
        raise ImportError_("slf4j-api jar not found next to %s or in ~/.m2 (needed by ListErrors.java)" % jar)
    return found[0]


def list_errors(jar):
    cp = os.pathsep.join([jar, find_slf4j(jar)])
    proc = subprocess.run(["java", "-cp", cp, os.path.join(HERE, "ListErrors.java")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImportError_("ListErrors.java failed:\n" + proc.stderr)
    errors = []
    for line in proc.stdout.splitlines():
        m = re.match(r"^(-?\d+)\t([A-Z][A-Z0-9_]*)$", line)
        if not m:
            raise ImportError_(f"unexpected ListErrors output line {line!r}")
        errors.append({"code": int(m.group(1)), "name": m.group(2)})
    codes = [e["code"] for e in errors]
    if len(set(codes)) != len(codes) or 0 not in codes or -1 not in codes:
        raise ImportError_("error table has duplicates or lacks NONE/UNKNOWN_SERVER_ERROR")
    return sorted(errors, key=lambda e: e["code"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jar", help=f"kafka-clients-{KAFKA_VERSION}.jar")
    ap.add_argument("--out", default=os.path.join(HERE, f"kafka-{KAFKA_VERSION}-messages.json"))
    args = ap.parse_args()
    jar = args.jar or find_jar()
    messages = []
    seen = 0
    with zipfile.ZipFile(jar) as z:
        names = sorted(n for n in z.namelist() if re.match(r"^common/message/[^/]+\.json$", n))
        if not names:
            raise ImportError_(f"{jar} has no common/message/*.json")
        for n in names:
            seen += 1
            text = z.read(n).decode("utf-8")
            try:
                raw = json.loads(strip_comments(text))
            except json.JSONDecodeError as e:
                raise ImportError_(f"{n}: not JSON after stripping comments: {e}")
            msg = clean_message(n, raw)
            if msg is not None:
                messages.append(msg)
    messages.sort(key=lambda m: (m.get("apiKey", -1), m["type"], m["name"]))
    doc = {
        "kafka_version": KAFKA_VERSION,
        "source": os.path.basename(jar),
        "generated_by": "codec/gen/import_schema.py",
        "messages": messages,
        "errors": list_errors(jar),
    }
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if '"about"' in text:
        raise ImportError_("an 'about' key survived the import")
    with open(args.out, "w") as f:
        f.write(text)
    print(f"read {seen} definitions, kept {len(messages)} messages and {len(doc['errors'])} errors -> {args.out}")


if __name__ == "__main__":
    try:
        main()
    except ImportError_ as e:
        sys.exit(f"import_schema.py: error: {e}")
