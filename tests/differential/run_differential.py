#!/usr/bin/env python3
"""Differential test of kproxy's codec against Kafka's own Java serializers.

For every API key, every version and both directions that kafka-clients 4.4.0 defines:

  forward   Kafka writes N random messages (KafkaCodecOracle.java, fixed printed seed)
            -> `kproxy-codec roundtrip` decodes and re-encodes each -> bytes must be identical;
            `kproxy-codec decode` must decode each to JSON without an error.
  fields    `kproxy-codec decode` of each must equal Kafka's own JSON of the body
            (*DataJsonConverter), field by field: proves fields land in the right members.
  reverse   kproxy writes N random messages (`kproxy-codec random`) -> Kafka reads and re-writes
            each -> bytes must be identical.
  normalise Kafka's raw random bytes that Kafka re-encodes differently (tagged fields written with
            their default value, which writers omit) -> kproxy must re-encode them as Kafka does.
  damaged   3 damaged copies of each of Kafka's messages (cut short, a byte changed, a byte
            inserted): Kafka and kproxy must both refuse, or re-encode identically, except for the
            explained divergences in MUTANT_DIVERGENCES (counted and printed).
  edge      hand-written frames for the rules around lengths, varints, tags and strings
            (edge_cases()); open codec issues are listed in KNOWN_ISSUES and printed.
  fallback  ApiVersions responses: a v0 body with error 35 labelled as a higher version must
            decode (as v0) and re-encode to the same bytes (docs/protocol.md "The v0 fallback").

Prints the coverage (pairs covered of pairs defined, per direction), lists every mismatch with
api/version/direction and the first differing offset, and keeps the failing input lines in the
work directory so one can reproduce with `kproxy-codec roundtrip < file`. Exit status 0 only
with zero mismatches and full coverage (pairs in EXCLUDED are listed with their reason).

One JVM runs for the whole test (stdlib-only Python; Java 17; Kafka jars from scripts/setup).

usage: run_differential.py [--codec PATH] [--seed S] [--count N] [--work-dir DIR]
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE = os.path.join(ROOT, "tests", "differential", "KafkaCodecOracle.java")
KAFKA_LIBS = os.path.join(ROOT, ".cache", "kafka-4.4.0", "libs")
DEFAULT_SEED = 20251129
CHILD_TIMEOUT_S = 600  # one JVM or kproxy-codec run; subprocess.run kills the child on expiry

# (direction, api_key, version) -> why the pair is not compared. Keep empty unless a pair cannot
# be compared for a reason outside kproxy's control; every entry is printed in the report.
EXCLUDED = {}

Pair = collections.namedtuple("Pair", "direction api_key version")


def say(msg):
    print(msg, flush=True)


def find_codec(path):
    candidates = [path] if path else [
        os.path.join(ROOT, d, "codec", "tool", "kproxy-codec")
        for d in ("build", "build-tool")
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    sys.exit("run_differential: kproxy-codec not found (build it, or pass --codec PATH); looked in: "
             + ", ".join(c for c in candidates if c))


def ensure_kafka_libs():
    jar = os.path.join(KAFKA_LIBS, "kafka-clients-4.4.0.jar")
    if os.path.exists(jar):
        return
    say("run_differential: Kafka jars missing, running scripts/setup --no-apt")
    subprocess.run([os.path.join(ROOT, "scripts", "setup"), "--no-apt"], check=True)
    if not os.path.exists(jar):
        sys.exit(f"run_differential: {jar} still missing after scripts/setup")


def parse_line_key(line):
    parts = line.split()
    return Pair(parts[0], int(parts[1]), int(parts[2])), parts[3] if len(parts) > 3 else ""


def first_difference(a, b):
    """First differing byte offset of two hex strings (as bytes), or None when equal."""
    if a == b:
        return None
    n = min(len(a), len(b))
    for i in range(0, n, 2):
        if a[i:i + 2] != b[i:i + 2]:
            return i // 2
    return n // 2


# Where Kafka and kproxy may legitimately disagree on a damaged frame: (verdict, test).
# `kafka` and `ours` are each a re-encoding in hex or "error <reason>".
MUTANT_DIVERGENCES = [
    ("diverges (explained): Kafka replaces invalid UTF-8 with U+FFFD, kproxy keeps the bytes",
     lambda hexin, kafka, ours: not kafka.startswith("error") and not ours.startswith("error")
     and has_byte_aligned(kafka, "efbfbd") and not has_byte_aligned(ours, "efbfbd")),
    ("diverges (explained): Kafka reads tags out of order but refuses to write them; kproxy keeps them",
     lambda hexin, kafka, ours: "Invalid raw tag field list" in kafka and not ours.startswith("error")),
    ("diverges (explained): kproxy checks a known tagged field's size, Kafka does not",
     lambda hexin, kafka, ours: not kafka.startswith("error") and re.search(r"tagged field (decoded to|\d+ of \d+ bytes exceeds)", ours)),
    ("diverges (explained): a tag known only in other versions: kproxy keeps it as unknown "
     "(docs/protocol.md 'Tagged fields'), Kafka refuses it",
     lambda hexin, kafka, ours: re.search(r"Tag \d+ is not valid for version", kafka) and not ours.startswith("error")),
    ("diverges (explained): Kafka drops the bits above 32 of a 5-byte varint, kproxy refuses it",
     lambda hexin, kafka, ours: not kafka.startswith("error") and "varint longer than 5 bytes or above 32 bits" in ours),
    ("diverges (reported): Kafka reads a classic length below -1 (or a compact one of 2^31 and up) "
     "as null, kproxy refuses it",
     lambda hexin, kafka, ours: not kafka.startswith("error") and (
         re.search(r"negative (string|bytes|array) length -(?!1\b)\d+", ours)
         or any(int(n) >= 2**31 for n in re.findall(r"(?:count|length) (\d{10}) exceeds", ours)))),
]


def lower_first(name):
    return name[:1].lower() + name[1:]


def normalise_json(o):
    """kproxy's decode JSON in the shape of Kafka's JsonConverter output: camelCase field names,
    no unknown tagged fields, records {"bytes": N} as <name>SizeInBytes."""
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k == "_unknown_tagged_fields":
                continue
            if isinstance(v, dict) and list(v) == ["bytes"] and isinstance(v["bytes"], int):
                out[lower_first(k) + "SizeInBytes"] = v["bytes"]
            else:
                out[lower_first(k)] = normalise_json(v)
        return out
    if isinstance(o, list):
        return [normalise_json(x) for x in o]
    return o


def compare_json(theirs, ours, path, diffs):
    """Appends to `diffs` every place where kproxy's value differs from Kafka's."""
    if len(diffs) > 5:
        return
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            diffs.append(f"{path or '/'}: Kafka has an object, kproxy {json.dumps(ours)[:60]}")
            return
        for k, v in theirs.items():
            if k not in ours:
                diffs.append(f"{path}.{k}: missing in kproxy's JSON")
            else:
                compare_json(v, ours[k], f"{path}.{k}", diffs)
    elif isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            diffs.append(f"{path}: Kafka has {len(theirs)} elements, kproxy {json.dumps(ours)[:60]}")
            return
        for i, (a, b) in enumerate(zip(theirs, ours)):
            compare_json(a, b, f"{path}[{i}]", diffs)
    elif isinstance(theirs, float) and not isinstance(ours, bool) and isinstance(ours, (int, float)):
        if float(ours) != theirs:
            diffs.append(f"{path}: Kafka {theirs!r}, kproxy {ours!r}")
    elif ours is None and (theirs in ("Infinity", "-Infinity", "NaN")
                           or (isinstance(theirs, float) and (theirs != theirs or abs(theirs) == float("inf")))):
        pass  # JSON has no Infinity/NaN: Jackson prints a string, kproxy (nlohmann) null
    elif isinstance(theirs, bool) != isinstance(ours, bool) or theirs != ours:
        diffs.append(f"{path}: Kafka {json.dumps(theirs)[:60]}, kproxy {json.dumps(ours)[:60]}")


def collect_paths(o, path, into):
    if isinstance(o, dict):
        for k, v in o.items():
            into.add(f"{path}.{k}")
            collect_paths(v, f"{path}.{k}", into)
    elif isinstance(o, list):
        for x in o:
            collect_paths(x, path + "[]", into)


def uvarint_hex(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return out.hex()


# Edge cases Kafka and kproxy are known to treat differently, reported to the codec and listed
# here so the run stays green while they are open: name -> what differs. A fixed one shows up as
# "no longer one" in the report (then delete it here).
KNOWN_ISSUES = {
}


def edge_cases():
    """(name, line, expectation) with expectation "agree", "diverges" (explained divergence) or a
    KNOWN_ISSUES text. Frames are built by hand around Metadata v4/v12 requests (header v1/v2,
    client id "cli") and ApiVersions v3 requests."""
    h_md4 = "00030004" "00000001" "0003636c69"            # Metadata v4, header v1
    h_md12 = "0003000c" "00000001" "0003636c69" "00"      # Metadata v12, header v2, no tags
    h_av3 = "00120003" "00000001" "0003636c69"            # ApiVersions v3, header v2 (tags follow)
    cases = [
        ("classic array count -2 (Kafka: null)", f"request 3 4 {h_md4}fffffffe01", "agree"),
        ("compact array count 2^31 (uvarint 2^31+1; Kafka: null)", f"request 3 12 {h_md12}8180808008010000", "agree"),
        ("boolean byte 0x02 (both: true)", f"request 3 4 {h_md4}ffffffff02", "agree"),
        ("non-minimal uvarint 0x80 0x00 as a tag count", f"request 3 12 {h_md12}00" "01" "00" "8000", "agree"),
        ("uvarint of 6 bytes as a tag count", f"request 3 12 {h_md12}00" "01" "00" "808080808000", "agree"),
        ("compact null topics, then defaults (control)", f"request 3 12 {h_md12}00" "01" "00" "00", "agree"),
        ("classic string of exactly 32767 bytes", f"request 3 4 {h_md4}00000001" "7fff" + "61" * 0x7FFF + "01", "agree"),
        ("compact string over 32767 bytes", f"request 18 3 {h_av3}00" + uvarint_hex(40001) + "6b" * 40000 + "0231" "00", "agree"),
        ("header tags out of order (5 then 2)", f"request 18 3 {h_av3}02" "0501aa" "0201bb" "026b" "0231" "00", "diverges"),
        ("the same unknown tag twice", f"request 18 3 {h_av3}00" "026b" "0231" "02" "0901aa" "0901bb", "diverges"),
        ("a tag known only in later versions (ProduceResponse v9, tag 0)", "response 0 9 00000001" "00" "01" "00000000" "01" "00" "01" "01", "diverges"),
        ("a known tagged field shorter than its size", "response 0 10 00000001" "00" "01" "00000000" "01" "00" "02" "01" "ab", "agree"),
        ("trailing byte after the body", f"request 3 4 {h_md4}ffffffff01ff", "agree"),
        ("empty frame", "request 3 4 ", "agree"),
        ("a frame cut inside the header", "request 3 4 000300", "agree"),
        ("null in a non-nullable string (ApiVersions ClientSoftwareName)", f"request 18 3 {h_av3}00" "00" "0231" "00", "agree"),
        ("invalid UTF-8 in a string", f"request 18 3 {h_av3}00" "02ff" "0231" "00", "diverges"),
    ]
    return [(n, l.strip(), e) for n, l, e in cases]


def has_byte_aligned(hexstr, needle):
    """True when `needle` (hex) occurs in `hexstr` at a byte boundary. Kafka's messages written
    by the oracle never contain U+FFFD, so in a re-encoding it marks a replaced invalid UTF-8."""
    i = hexstr.find(needle)
    while i >= 0:
        if i % 2 == 0:
            return True
        i = hexstr.find(needle, i + 1)
    return False


def classify_mutant(hexin, kafka, ours):
    k_err, o_err = kafka.startswith("error"), ours.startswith("error")
    if k_err and o_err:
        return "agree: both refuse"
    if not k_err and not o_err and kafka == ours:
        return "agree: same re-encoding"
    for verdict, test in MUTANT_DIVERGENCES:
        if test(hexin, kafka, ours):
            return verdict
    if k_err and not o_err:
        return "UNEXPLAINED: kproxy accepts what Kafka refuses"
    if o_err:
        return "UNEXPLAINED: kproxy refuses what Kafka accepts"
    return "UNEXPLAINED: both accept, re-encodings differ"


def run_codec(codec, args, input_text, what):
    proc = subprocess.run([codec] + args, input=input_text, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if proc.returncode != 0:
        sys.exit(f"run_differential: kproxy-codec {' '.join(args)} ({what}) exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.splitlines()


def codec_has_random(codec):
    proc = subprocess.run([codec, "random", "request", "18", "0", "1"], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0 and proc.stdout.startswith("request 18 0 ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--codec", help="path of kproxy-codec (default: build/codec/tool/kproxy-codec)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--count", type=int, default=16, help="random messages per pair and side")
    ap.add_argument("--work-dir", help="keep inputs, outputs and failing lines here")
    ap.add_argument("--java", default=shutil.which("java") or "java")
    args = ap.parse_args()

    t0 = time.monotonic()
    codec = find_codec(args.codec)
    ensure_kafka_libs()
    work = args.work_dir or tempfile.mkdtemp(prefix="kproxy-differential-")
    os.makedirs(work, exist_ok=True)
    say(f"differential: seed {args.seed}, {args.count} messages per pair and side, codec {codec}, work dir {work}")

    # What kproxy's codec knows, and its random instances for the reverse direction.
    cpp_pairs = set()
    for line in run_codec(codec, ["versions"], "", "versions"):
        d, k, v = line.split()
        cpp_pairs.add(Pair(d, int(k), int(v)))
    have_random = codec_has_random(codec)
    cpp_random_path = os.path.join(work, "cpp_random.txt")
    cpp_random = []
    cpp_random_errors = []   # frames kproxy could not write consistently
    if have_random:
        specs = "".join(f"{p.direction} {p.api_key} {p.version} {args.seed} {args.count}\n" for p in sorted(cpp_pairs))
        for l in run_codec(codec, ["random"], specs, "random instances"):
            if l.startswith("error "):
                cpp_random_errors.append(l)
            elif l.strip():
                cpp_random.append(l)
    edge = edge_cases()
    with open(cpp_random_path, "w") as f:
        # Kafka re-encodes kproxy's random frames, then the hand-written edge cases.
        f.write("".join(l + "\n" for l in cpp_random))
        f.write("".join(e[1] + "\n" for e in edge))

    # One JVM: list the pairs, write Kafka's random messages, re-encode kproxy's.
    pairs_path = os.path.join(work, "pairs.txt")
    java_gen_path = os.path.join(work, "java_random.txt")
    java_reencoded_path = os.path.join(work, "java_reencoded.txt")
    raw_path = os.path.join(work, "java_raw.txt")
    mutants_path = os.path.join(work, "java_mutants.txt")
    json_path = os.path.join(work, "java_json.txt")
    cmd = [args.java, "-cp", os.path.join(KAFKA_LIBS, "*"), ORACLE, "--seed", str(args.seed), "--count", str(args.count),
           "--pairs-out", pairs_path, "--generate-out", java_gen_path, "--raw-out", raw_path, "--mutants-out", mutants_path, "--json-out", json_path,
           "--reencode-in", cpp_random_path, "--reencode-out", java_reencoded_path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    for l in proc.stdout.splitlines():
        say("  " + l)
    if proc.returncode != 0:
        sys.exit(f"run_differential: KafkaCodecOracle failed ({proc.returncode}):\n{proc.stderr}")
    oracle_skips = [l for l in proc.stderr.splitlines() if l.startswith("oracle-skip")]

    defined = []
    stability = {}
    with open(pairs_path) as f:
        for l in f:
            d, k, v, name, stab = l.split()
            p = Pair(d, int(k), int(v))
            defined.append(p)
            stability[p] = (name, stab)
    names = {p.api_key: stability[p][0].removesuffix("Request").removesuffix("Response") for p in defined}

    def label(p):
        return f"{names.get(p.api_key, '?')}({p.api_key}) v{p.version} {p.direction}"

    mismatches = []   # (side, pair, detail, line)
    fwd_ok = collections.Counter()
    rev_ok = collections.Counter()

    # Forward: Kafka writes, kproxy reads and re-writes.
    with open(java_gen_path) as f:
        java_lines = [l.rstrip("\n") for l in f if l.strip()]
    java_input = "".join(l + "\n" for l in java_lines)
    roundtrip = run_codec(codec, ["roundtrip"], java_input, "forward roundtrip")
    decoded = run_codec(codec, ["decode"], java_input, "forward decode")
    if len(roundtrip) != len(java_lines) or len(decoded) != len(java_lines):
        sys.exit(f"run_differential: kproxy-codec printed {len(roundtrip)}/{len(decoded)} lines for {len(java_lines)} frames")
    with open(json_path) as f:
        kafka_json = [l.rstrip("\n") for l in f if l.strip()]
    if len(kafka_json) != len(java_lines):
        sys.exit(f"run_differential: the oracle printed {len(kafka_json)} JSON bodies for {len(java_lines)} frames")
    json_ok = 0
    kafka_paths = collections.defaultdict(set)   # pair -> field paths Kafka's JSON ever showed
    our_paths = collections.defaultdict(set)     # pair -> field paths kproxy's JSON ever showed
    for line, out, dec, kj in zip(java_lines, roundtrip, decoded, kafka_json):
        pair, hexin = parse_line_key(line)
        if out.startswith("error"):
            mismatches.append(("forward", pair, out, line))
            continue
        off = first_difference(hexin, out)
        if off is not None:
            mismatches.append(("forward", pair, f"re-encoding differs at byte {off} (in {len(hexin)//2} bytes, out {len(out)//2} bytes)", line))
            continue
        try:
            j = json.loads(dec)
        except ValueError as e:
            mismatches.append(("forward", pair, f"decode printed invalid JSON: {e}", line))
            continue
        if "error" in j:
            mismatches.append(("forward", pair, "decode: " + j["error"], line))
            continue
        if j.get("version") != pair.version or j.get("api_key") != pair.api_key or "body" not in j:
            mismatches.append(("forward", pair, "decode printed the wrong api/version or no body", line))
            continue
        # Field by field against Kafka's own JSON of the same body.
        ours = normalise_json(j["body"])
        theirs = json.loads(kj)
        diffs = []
        compare_json(theirs, ours, "", diffs)
        collect_paths(theirs, "", kafka_paths[pair])
        collect_paths(ours, "", our_paths[pair])
        if diffs:
            mismatches.append(("fields", pair, f"decode differs from Kafka's JSON: {'; '.join(diffs[:3])}", line))
            continue
        json_ok += 1
        fwd_ok[pair] += 1

    # Reverse: kproxy writes, Kafka reads and re-writes.
    with open(java_reencoded_path) as f:
        java_out = [l.rstrip("\n") for l in f]
    if len(java_out) != len(cpp_random) + len(edge):
        sys.exit(f"run_differential: the oracle printed {len(java_out)} lines for {len(cpp_random) + len(edge)} frames")
    java_edge = java_out[len(cpp_random):]
    java_out = java_out[:len(cpp_random)]
    for line, out in zip(cpp_random, java_out):
        pair, hexin = parse_line_key(line)
        if out.startswith("error"):
            mismatches.append(("reverse", pair, "Kafka cannot read it: " + out[6:], line))
            continue
        off = first_difference(hexin, out)
        if off is not None:
            mismatches.append(("reverse", pair, f"Kafka's re-encoding differs at byte {off} (kproxy {len(hexin)//2} bytes, Kafka {len(out)//2} bytes)", line))
            continue
        rev_ok[pair] += 1

    # Normalising: Kafka's raw random bytes that Kafka itself re-encodes differently (a tagged
    # field written with its default value, which the writer omits): kproxy must do the same.
    with open(raw_path) as f:
        raw_rows = [l.split() for l in f if l.strip()]
    normalise_ok = 0
    if raw_rows:
        rt = run_codec(codec, ["roundtrip"], "".join(" ".join(r[:4]) + "\n" for r in raw_rows), "normalising roundtrip")
        for r, out in zip(raw_rows, rt):
            pair = Pair(r[0], int(r[1]), int(r[2]))
            line = " ".join(r[:4])
            if out.startswith("error"):
                mismatches.append(("normalise", pair, out, line))
            elif out != r[4]:
                mismatches.append(("normalise", pair, f"differs from Kafka's re-encoding at byte {first_difference(r[4], out)}", line))
            else:
                normalise_ok += 1

    # Damaged frames: Kafka and kproxy must agree (both refuse, or both re-encode to the same
    # bytes), apart from the known, explained divergences in MUTANT_DIVERGENCES.
    with open(mutants_path) as f:
        mutant_rows = [l.rstrip("\n").split("\t", 1) for l in f if l.strip()]
    mutant_stats = collections.Counter()
    if mutant_rows:
        rt = run_codec(codec, ["roundtrip"], "".join(r[0] + "\n" for r in mutant_rows), "damaged frames roundtrip")
        for (line, kafka), ours in zip(mutant_rows, rt):
            pair, hexin = parse_line_key(line)
            verdict = classify_mutant(hexin, kafka, ours)
            mutant_stats[verdict] += 1
            if verdict.startswith("UNEXPLAINED"):
                mismatches.append(("damaged", pair, f"{verdict}: Kafka: {kafka[:160]} / kproxy: {ours[:160]}", line))

    # Fields kproxy prints that Kafka's JSON never showed for that pair (Kafka omits tagged
    # fields at their default, so these are reported, not failed).
    only_ours = collections.Counter()
    for pair, paths in our_paths.items():
        for pth in paths - kafka_paths[pair]:
            only_ours[(label(pair), pth)] += 1

    # Hand-written edge cases: each must end as expected (see edge_cases()).
    edge_report = []
    known_open = []
    if edge:
        ours_edge = run_codec(codec, ["roundtrip"], "".join(e[1] + "\n" for e in edge), "edge cases roundtrip")
        for (name, line, expect), kafka, ours in zip(edge, java_edge, ours_edge):
            pair, hexin = parse_line_key(line)
            verdict = classify_mutant(hexin, kafka, ours)
            if expect.startswith("known issue"):
                if verdict.startswith("UNEXPLAINED"):
                    known_open.append((name, expect, line, kafka, ours))
                    edge_report.append(f"  {name}: {verdict} -- {expect}")
                else:
                    edge_report.append(f"  {name}: {verdict} -- listed as a known issue but no longer one: remove it from KNOWN_ISSUES")
            elif (expect == "agree" and verdict.startswith("agree")) or (expect == "diverges" and verdict.startswith("diverges")):
                edge_report.append(f"  {name}: {verdict}")
            else:
                edge_report.append(f"  {name}: {verdict} (expected: {expect})")
                mismatches.append(("edge", pair, f"{name}: {verdict}: Kafka: {kafka[:160]} / kproxy: {ours[:160]}", line))

    for l in cpp_random_errors:
        words = l[len("error "):].split(":", 1)[0].split()
        pair = Pair(words[0], int(words[1]), int(words[2])) if len(words) == 3 else Pair("?", -1, -1)
        mismatches.append(("reverse", pair, "kproxy cannot write it: " + l, l))

    # ApiVersions fallback: v0 bodies with UNSUPPORTED_VERSION labelled as every higher version.
    fallback_lines = []
    api_versions_versions = sorted(p.version for p in defined if p.direction == "response" and p.api_key == 18)
    for line in java_lines:
        pair, hexin = parse_line_key(line)
        if pair == Pair("response", 18, 0):
            patched = hexin[:8] + "0023" + hexin[12:]   # correlation id, then ErrorCode = 35
            for v in api_versions_versions[1:]:
                fallback_lines.append(f"response 18 {v} {patched}")
    fallback_ok = 0
    if fallback_lines:
        text = "".join(l + "\n" for l in fallback_lines)
        rt = run_codec(codec, ["roundtrip"], text, "ApiVersions fallback roundtrip")
        dec = run_codec(codec, ["decode"], text, "ApiVersions fallback decode")
        for line, out, d in zip(fallback_lines, rt, dec):
            pair, hexin = parse_line_key(line)
            j = json.loads(d) if d.startswith("{") else {"error": d}
            if out != hexin:
                mismatches.append(("fallback", pair, "v0 fallback re-encoding: " + out[:200], line))
            elif "error" in j or j.get("version") != 0:
                mismatches.append(("fallback", pair, "v0 fallback decode: " + d[:200], line))
            else:
                fallback_ok += 1

    # Report.
    defined_set = set(defined)
    considered = [p for p in defined if p not in EXCLUDED]
    fwd_cov = [p for p in considered if fwd_ok[p] > 0 and not any(m[1] == p and m[0] == "forward" for m in mismatches)]
    rev_cov = [p for p in considered if rev_ok[p] > 0 and not any(m[1] == p and m[0] == "reverse" for m in mismatches)]
    unknown_to_cpp = [p for p in defined if p not in cpp_pairs]
    extra_in_cpp = sorted(p for p in cpp_pairs if p not in defined_set)
    unstable = [p for p in defined if stability[p][1] == "unstable"]

    say("")
    say(f"pairs defined by kafka-clients 4.4.0: {len(defined)} "
        f"({sum(1 for p in defined if p.direction == 'request')} request, "
        f"{sum(1 for p in defined if p.direction == 'response')} response; "
        f"{len(unstable)} unstable: {', '.join(label(p) for p in unstable) or 'none'})")
    say(f"pairs kproxy's codec knows: {len(cpp_pairs)}; defined but unknown to kproxy: {len(unknown_to_cpp)}; "
        f"known to kproxy only: {len(extra_in_cpp)}")
    for p in unknown_to_cpp[:20]:
        say(f"  unknown to kproxy: {label(p)}")
    for p in extra_in_cpp[:20]:
        say(f"  known to kproxy only: {label(p)}")
    say(f"excluded: {len(EXCLUDED)}")
    for p, why in sorted(EXCLUDED.items()):
        say(f"  {label(Pair(*p))}: {why}")
    say(f"forward (Kafka writes, kproxy re-encodes): {len(fwd_cov)}/{len(considered)} pairs byte-identical, "
        f"{sum(fwd_ok.values())}/{len(java_lines)} messages")
    if have_random:
        say(f"reverse (kproxy writes, Kafka re-encodes): {len(rev_cov)}/{len(considered)} pairs byte-identical, "
            f"{sum(rev_ok.values())}/{len(cpp_random)} messages")
    else:
        say("reverse (kproxy writes, Kafka re-encodes): NOT RUN - kproxy-codec has no random instances")
    say(f"fields (kproxy's decode JSON = Kafka's *DataJsonConverter JSON, field by field): "
        f"{json_ok}/{len(java_lines)} messages")
    if only_ours:
        say(f"  fields kproxy printed that Kafka's JSON never showed (tagged defaults?): {len(only_ours)}")
        for (lbl, pth), _ in sorted(only_ours.items())[:10]:
            say(f"    {lbl}: {pth}")
    say(f"ApiVersions v0 fallback: {fallback_ok}/{len(fallback_lines)} frames")
    say(f"normalising (Kafka's raw random bytes with default-valued tagged fields, kproxy re-encodes "
        f"like Kafka): {normalise_ok}/{len(raw_rows)} frames")
    say(f"damaged frames (cut, a byte changed or inserted), Kafka vs kproxy: {sum(mutant_stats.values())} frames")
    for verdict, n in sorted(mutant_stats.items(), key=lambda kv: -kv[1]):
        say(f"  {n:6}  {verdict}")
    say(f"edge cases (hand-written, Kafka vs kproxy): {len(edge)}")
    for l in edge_report:
        say(l)
    if known_open:
        say(f"KNOWN ISSUES still open ({len(known_open)}), reported to the codec; not counted as mismatches:")
        for name, expect, line, kafka, ours in known_open:
            say(f"  {name}: {expect}")
            say(f"    input:  {line if len(line) <= 160 else line[:160] + '...'}")
            say(f"    Kafka:  {kafka[:160]}")
            say(f"    kproxy: {ours[:160]}")
    if oracle_skips:
        say(f"oracle: {len(oracle_skips)} random frames Kafka itself refused (not compared), e.g. {oracle_skips[0]}")

    failing_path = os.path.join(work, "mismatches.txt")
    with open(failing_path, "w") as f:
        for side, pair, detail, line in mismatches:
            f.write(f"# {side} {label(pair)}: {detail}\n{line}\n")
    by_pair = collections.OrderedDict()
    for side, pair, detail, line in mismatches:
        by_pair.setdefault((side, pair), []).append((detail, line))
    say(f"mismatches: {len(mismatches)} messages in {len(by_pair)} (side, pair)s" + (f"; all failing lines in {failing_path}" if mismatches else ""))
    for (side, pair), items in by_pair.items():
        detail, line = items[0]
        say(f"  {side:8} {label(pair)}: {len(items)}x, first: {detail}")
        say(f"           input: {line if len(line) <= 240 else line[:240] + '...'}")

    full = (len(fwd_cov) == len(considered)) and (not have_random or len(rev_cov) == len(considered))
    ok = not mismatches and full and have_random
    say(f"differential: {'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.1f} s (seed {args.seed})")
    if not args.work_dir and ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
