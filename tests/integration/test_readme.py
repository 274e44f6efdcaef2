"""The README's first screen cannot rot (issue #49): every YAML and shell snippet of its three
"I want to…" entries runs here, in order, against the session's real Kafka broker, as a user would
paste them, with only the addresses and paths of this run put in (each replacement must still
find its text, so a changed snippet fails here instead of silently running something else):

- the sidecar entry's config goes through `kproxy check-config`, then its shell block starts
  kproxy with it and waits for /readyz;
- the chaos entry applies its scenario, runs its producer (which must end without error), lists
  the transactions and the rules, clears the scenario and runs its scripts/conformance cell;
- the wire entry's taps run in the background while a producer writes through kproxy (each must
  print something), its metrics pipeline must find the metrics, its `--json` must be JSON.

Also: each entry stays short (at most 15 lines of prose and code), and the links they give exist.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Tuple

import clients
import kafka_harness as kh
import ports
import slowness
from test_proxy_support import kproxy_binary

README = kh.REPO_ROOT / "README.md"
ENTRY_MAX_LINES = 15  # issue #49: "each at most ~15 lines"


def entries() -> Dict[str, List[Tuple[str, str]]]:
    """The "## I want to…" section's entries: title -> [(language, code)] in order, plus the
    entry's whole text under the key "<title>/text"."""
    text = README.read_text()
    m = re.search(r"^## I want to…\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no '## I want to…' section"
    out: Dict = {}
    for block in re.split(r"(?m)^### ", m.group(1))[1:]:
        title, body = block.split("\n", 1)
        out[title] = [(lang, code) for lang, code in re.findall(r"```(\w+)\n(.*?)```", body, re.S)]
        out[title + "/text"] = body.split("\nThe commands above talk")[0]
    return out


def anchors() -> set:
    """GitHub's anchors of the README's headings: lower case, punctuation dropped, spaces as '-'."""
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", README.read_text(), re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return out


def test_readme_has_three_short_entries_with_live_links():
    e = entries()
    titles = [t for t in e if not t.endswith("/text")]
    assert titles == ["…put kproxy beside my app",
                      "…make my transactional client fail on purpose and see whether it survives",
                      "…see what my clients do on the wire"], titles
    for t in titles:
        body = e[t + "/text"]
        lines = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("```")]
        assert len(lines) <= ENTRY_MAX_LINES, f"{t}: {len(lines)} lines (at most {ENTRY_MAX_LINES})"
        assert e[t], f"{t}: no snippet"
        links = re.findall(r"\]\(([^)]+)\)", body)
        assert links, f"{t}: no link to its full section"
        for link in links:
            if link.startswith("#"):
                assert link[1:] in anchors(), f"{t}: link to {link}, a heading the README does not have"
            else:
                assert (kh.REPO_ROOT / link.split("#")[0]).exists(), f"{t}: link to {link}, which does not exist"


class Snippets:
    """The entries' snippets as one bash script, with this run's addresses and paths."""

    def __init__(self, workdir: Path, bootstrap: str, topic: str):
        self.listen, self.admin = ports.free_ports(2)
        self.base = ports.port_block(9)
        self.bin_dir = str(Path(kproxy_binary()).parent)
        self.workdir = workdir
        root = str(kh.REPO_ROOT)
        self.replacements = [
            ("127.0.0.1:9092", f"127.0.0.1:{self.listen}"),
            ("127.0.0.1:9644", f"127.0.0.1:{self.admin}"),
            ("broker_ports: 9100", f"broker_ports: {self.base}"),
            ("kafka-1.example.com:9092", bootstrap),
            ("$PWD/build-release/proxy", self.bin_dir),
            ("scenarios/", f"{root}/scenarios/"),
            ("'build/java-classes:.cache/kafka-4.4.0/libs/*'", f"'{clients.java_classes()}:{kh.kafka_classpath()}'"),
            ("--topic orders", f"--topic {topic}"),
            # The conformance cell runs the kproxy under test (else it builds build-release/).
            ("scripts/conformance", f"{root}/scripts/conformance --kproxy {kproxy_binary()}"),
            ("--out /tmp/c.md --json /tmp/c.json", f"--out {workdir}/c.md --json {workdir}/c.json"),
        ]

    def apply(self, code: str) -> Tuple[str, set]:
        used = set()
        for old, new in self.replacements:
            if old in code:
                used.add(old)
                code = code.replace(old, new)
        return code, used


def test_readme_snippets_run(kafka, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=3)
    e = entries()
    snip = Snippets(tmp_path, kafka.bootstrap(), topic_name)
    used: set = set()
    script = ["set -euo pipefail", 'BG_PIDS="$PWD/bg.pids"', ': > "$BG_PIDS"']
    configs = 0
    taps: List[Path] = []
    for title in [t for t in e if not t.endswith("/text")]:
        for lang, code in e[title]:
            code, u = snip.apply(code)
            used |= u
            if lang == "yaml":
                name = re.match(r"# (\S+\.yaml)", code)
                assert name, f"{title}: a YAML snippet that does not say its file name on its first line"
                (tmp_path / name.group(1)).write_text(code)
                check = subprocess.run([kproxy_binary(), "check-config", str(tmp_path / name.group(1))],
                                       capture_output=True, text=True, timeout=60)
                assert check.returncode == 0, f"{title}: kproxy check-config:\n{check.stdout}{check.stderr}"
                configs += 1
                continue
            assert lang == "sh", f"{title}: a {lang} snippet (only yaml and sh are run)"
            script.append(f"echo '### {title}'")
            for line in code.rstrip("\n").split("\n"):
                command = line.split("  #")[0].rstrip()
                if re.match(r"^kproxy tap\b", command):
                    # Streams until Ctrl-C: runs in the background, its output checked below.
                    out = tmp_path / f"tap-{len(taps)}.out"
                    taps.append(out)
                    script += [f"{command} > {out} 2>&1 &", 'echo $! >> "$BG_PIDS"']
                elif command.endswith("&"):
                    script += [line, 'echo $! >> "$BG_PIDS"']
                else:
                    script.append(line)
    assert configs == 1, "the sidecar entry's config"
    missing = {old for old, _ in snip.replacements} - used
    assert not missing, f"the snippets no longer contain {missing}: update this test with them"
    (tmp_path / "snippets.sh").write_text("\n".join(script) + "\n")

    # kproxy ctl / tap / transactions default to 127.0.0.1:9644, the config's admin address; here
    # that address is the test's port (the replacement above), given the way the README names.
    env = {**os.environ, "KPROXY_ADMIN": f"127.0.0.1:{snip.admin}"}
    env.pop("KPROXY_ADMIN_TOKEN", None)
    bg: List[int] = []
    try:
        # Output to a file, not a pipe: the background kproxy keeps its inherited stdout open.
        log = tmp_path / "snippets.out"
        with open(log, "wb") as sink:
            r = subprocess.run(["bash", str(tmp_path / "snippets.sh")], cwd=tmp_path, env=env, stdout=sink,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=slowness.scaled(900),
                               preexec_fn=kh._child_setup)
        bg = [int(p) for p in (tmp_path / "bg.pids").read_text().split()]
        out = log.read_text(errors="replace")
        assert r.returncode == 0, f"the README's snippets failed (exit {r.returncode}):\n{out[-8000:]}"
        # The sidecar entry: kproxy ready in front of the broker.
        assert '"status":"ready"' in out.replace(" ", ""), out[-4000:]
        # The chaos entry: the account and the rules were printed; the conformance cell ran.
        assert "Ended transactions, newest first" in out and "Since start:" in out, out[-6000:]
        assert "commit-answer-lost" in out and "coordinator-moved" in out, out[-6000:]
        # The wire entry: the metrics grep found the counters; the JSON is JSON.
        assert re.search(r"^kproxy_requests_total\{", out, re.M), out[-4000:]
        doc = json.loads(out[out.rindex("\n{\n") + 1:])  # `kproxy transactions --json`, the last output
        assert doc["outcomes"]["committed"] >= 1, doc

        # The taps run while a producer writes through kproxy; each prints what it saw.
        assert len(taps) == 2, taps
        prod = clients.txn_produce(f"127.0.0.1:{snip.listen}", topic_name, 20, 2, key_prefix="readme-tap-")
        assert prod["ok"], prod
        deadline = time.monotonic() + slowness.scaled(30)
        while time.monotonic() < deadline and not all(t.exists() and t.read_text().strip() for t in taps):
            time.sleep(0.2)
        for t in taps:
            assert t.read_text().strip(), f"{t.name}: the tap printed nothing while a producer ran"
        assert "Produce" in taps[0].read_text()
        assert re.search(r"\bend\b|\bbegin\b", taps[1].read_text()), taps[1].read_text()[-2000:]
    finally:
        if not bg and (tmp_path / "bg.pids").exists():
            bg = [int(p) for p in (tmp_path / "bg.pids").read_text().split()]
        for pid in bg:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in bg:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
