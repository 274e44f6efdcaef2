"""Shared pieces of bench/proxy/run and bench/proxy/kafka_perf (Python 3 standard library only).

Building the tools, starting and always stopping child processes (they also die with this
process: PR_SET_PDEATHSIG), free ports, kproxy and HAProxy configs, /proc readings.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUILD = ROOT / "build-bench"
TARGETS = ["kproxy", "kproxy-sink-broker", "kproxy-load"]

_children: List[subprocess.Popen] = []


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- processes -------------------------------------------------------------------------------

def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setpgid(0, 0)


def spawn(args: List[str], log_path: Path, stdout=None, pin: Optional[str] = None,
          env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Starts a child in its own process group; stderr (and stdout unless given) go to log_path.
    `env`: variables set for the child on top of this process's environment."""
    if pin:
        args = ["taskset", "-c", pin] + args
    log_path.parent.mkdir(parents=True, exist_ok=True)
    err = open(log_path, "ab")
    p = subprocess.Popen(args, stdout=stdout if stdout is not None else err, stderr=err,
                         preexec_fn=_die_with_parent, cwd=ROOT, env=dict(os.environ, **env) if env else None)
    err.close()
    _children.append(p)
    return p


def stop(p: Optional[subprocess.Popen], timeout: float = 5.0) -> None:
    """SIGTERM, wait, then SIGKILL the process group of one child we started."""
    if p is None:
        return
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in _children:
        _children.remove(p)


def stop_all() -> None:
    for p in list(reversed(_children)):
        stop(p, timeout=3.0)


def install_cleanup() -> None:
    atexit.register(stop_all)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)


def raise_fd_limit(want: int = 65536) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target in ((want, max(want, hard)), (min(want, hard), hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, target)
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---- build -----------------------------------------------------------------------------------

def build(build_dir: Path, targets: List[str] = TARGETS) -> None:
    if not (build_dir / "build.ninja").exists():
        log(f"configuring {build_dir.relative_to(ROOT) if build_dir.is_relative_to(ROOT) else build_dir} (Release)")
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DKPROXY_TESTS=OFF"], check=True, stdout=subprocess.DEVNULL)
    log("building " + " ".join(targets) + " (ninja -j2)")
    r = subprocess.run(["ninja", "-C", str(build_dir), "-j2"] + targets, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:])
        raise SystemExit("build failed")


def binaries(build_dir: Path) -> Dict[str, Path]:
    return {
        "kproxy": build_dir / "proxy" / "kproxy",
        "sink": build_dir / "bench" / "proxy" / "kproxy-sink-broker",
        "load": build_dir / "bench" / "proxy" / "kproxy-load",
    }


# ---- ports and readiness ---------------------------------------------------------------------

def free_port_block(count: int) -> int:
    """A base port such that base .. base+count-1 are free now (loopback) and reserved for this
    process: tests/integration/ports.py's allocator, outside the kernel's ephemeral port range (a
    port taken from that range can be grabbed by any outgoing connection before a proxy binds it:
    a benchmark's smoke test once failed so, kproxy exiting 2 before it listened)."""
    return _ports().port_block(count)


def _ports():
    tests = str(Path(__file__).resolve().parents[2] / "tests" / "integration")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import ports  # noqa: E402 (tests/integration/ports.py)
    return ports


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def start_sink(bins: Dict[str, Path], logs: Path, pin: Optional[str] = None, max_seconds: int = 1800):
    p = spawn([str(bins["sink"]), "--listen", "127.0.0.1:0", "--max-seconds", str(max_seconds)], logs / "sink.log",
              stdout=subprocess.PIPE, pin=pin)
    line = p.stdout.readline().decode().strip()  # "listening on 127.0.0.1:PORT"
    if not line.startswith("listening on "):
        raise RuntimeError(f"the sink broker did not start: {line!r} (see {logs / 'sink.log'})")
    return p, int(line.rsplit(":", 1)[1])


# ---- proxies ---------------------------------------------------------------------------------

def kproxy_config(path: Path, listen_port: int, upstream: str, broker_base: int, workers: int,
                  admin_port: Optional[int] = None, metrics: Optional[Dict[str, bool]] = None) -> None:
    """kproxy's benchmark config: the defaults (metrics and tap on) plus the admin API when
    `admin_port` is given (its /metrics tells the connections per worker). `metrics`: keys of the
    config's metrics: section, e.g. {"frames": False} (the observatory off) or
    {"transactions": False} (only the transaction tracker off)."""
    admin = f"admin:\n  listen: 127.0.0.1:{admin_port}\n" if admin_port else ""
    if metrics:
        admin += "metrics:\n" + "".join(f"  {k}: {'true' if v else 'false'}\n" for k, v in metrics.items())
    path.write_text(
        "# generated by bench/proxy for one benchmark run\n"
        "listeners:\n"
        "  - name: bench\n"
        f"    listen: 127.0.0.1:{listen_port}\n"
        f"    upstream: {upstream}\n"
        "    advertise: 127.0.0.1\n"
        f"    broker_ports: {broker_base}\n"
        "limits:\n"
        "  max_connections: 30000\n"
        f"workers: {workers}\n"
        "drain_timeout: 2s\n"
        + admin +
        "log:\n"
        "  level: warn\n")


def max_pairs() -> int:
    """Client+upstream connection pairs one proxy process can hold under this process's fd limit."""
    return (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 64) // 2


def haproxy_config(path: Path, listen_port: int, upstream: str, threads: int, bind_options: str = "",
                   server_options: str = "") -> None:
    """HAProxy in tcp mode from 127.0.0.1:listen_port to `upstream`; the options go after `bind` and
    `server` (bench/tls: "ssl crt FILE", "ssl verify required ca-file FILE")."""
    path.write_text(
        "# generated by bench/proxy for one benchmark run: plain TCP (L4) forwarding\n"
        "global\n"
        f"  nbthread {threads}\n"
        f"  maxconn {max_pairs()}\n"
        "defaults\n"
        "  mode tcp\n"
        "  timeout connect 5s\n"
        "  timeout client 10m\n"
        "  timeout server 10m\n"
        "frontend bench\n"
        f"  bind 127.0.0.1:{listen_port}{' ' + bind_options if bind_options else ''}\n"
        "  default_backend sink\n"
        "backend sink\n"
        f"  server s1 {upstream}{' ' + server_options if server_options else ''}\n")


def start_proxy(kind: str, bins: Dict[str, Path], logs: Path, upstream: str, workers: int,
                pin: Optional[str] = None, env: Optional[Dict[str, str]] = None, metrics: Optional[Dict[str, bool]] = None):
    """Starts kproxy or haproxy in front of `upstream`. Returns (process, listen port, broker base).
    `env`: extra environment for kproxy; `metrics`: its config's metrics: keys (kproxy_config)."""
    port = free_port_block(1)
    base = 0
    if kind == "kproxy":
        base = free_port_block(4)
        admin = free_port_block(1)
        cfg = logs / "kproxy.yaml"
        kproxy_config(cfg, port, upstream, base, workers, admin, metrics)
        p = spawn([str(bins["kproxy"]), "--config", str(cfg)], logs / "kproxy.log", pin=pin, env=env)
        p.admin_port = admin
    elif kind == "haproxy":
        cfg = logs / "haproxy.cfg"
        haproxy_config(cfg, port, upstream, workers)
        p = spawn(["haproxy", "-db", "-f", str(cfg)], logs / "haproxy.log", pin=pin)
    else:
        raise ValueError(kind)
    wait_listening(port, p)
    return p, port, base


# ---- /proc -----------------------------------------------------------------------------------

def rss_bytes(pid: int) -> int:
    """Resident set of a process (VmRSS), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


IDLE_SETTLE_S = 2.0  # after a batch is open: deferred frees, upstream connects, kproxy's memory trim (1 s after the last open)


def _open_idle(load_bin: Path, target: str, count: int, log_path: Path, source: Optional[str], pin: Optional[str]):
    """Starts a kproxy-load --mode idle holding `count` connections; returns (process, its ready line)."""
    cmd = [str(load_bin), "--target", target, "--mode", "idle", "--connections", str(count), "--hold", "300",
           "--connect-concurrency", "100"]
    if source:
        cmd += ["--source", source]
    p = spawn(cmd, log_path, stdout=subprocess.PIPE, pin=pin)
    line = p.stdout.readline().decode().strip()
    if not line.startswith("{"):
        stop(p)
        raise RuntimeError(f"idle load generator failed: see {log_path}")
    return p, json.loads(line)


def idle_pair_bytes(pid: int, load_bin: Path, target: str, count: int, log_dir: Path, name: str,
                    source: Optional[str] = "127.0.0.2", pin: Optional[str] = None) -> dict:
    """Resident memory a proxy spends per idle connection pair: the one procedure bench/proxy/run and
    bench/tls/run share (their READMEs, "idle memory").

    1. VmRSS of the proxy, no connection yet (rss_base).
    2. A warm-up batch of max(10, count // 10) idle connections is opened and kept open (each did one
       ApiVersions round trip, so its upstream connection and any TLS handshake are done), then
       VmRSS again (rss_warm). What the first connections make once per process (a loop thread's
       read buffer, OpenSSL's tables on the first handshake, a registry's first growth) lands here.
    3. `count` more idle connections, then VmRSS (rss_idle).

    bytes_per_pair = (rss_idle - rss_warm) / the connections of step 3 that are ready: the cost of
    one more pair, whatever the count. Connections come from `source` (127.0.0.2 by default: on one
    loopback address the kernel can hand a client socket the port of one of the proxy's upstream
    sockets, which kproxy's self-connection check refuses)."""
    warm_n = max(10, count // 10)
    time.sleep(0.5)
    base = rss_bytes(pid)
    loaders = []
    try:
        p, warm = _open_idle(load_bin, target, warm_n, log_dir / f"idle-{name}-warm.log", source, pin)
        loaders.append(p)
        time.sleep(IDLE_SETTLE_S)
        rss_warm = rss_bytes(pid)
        p, ready = _open_idle(load_bin, target, count, log_dir / f"idle-{name}.log", source, pin)
        loaders.append(p)
        time.sleep(IDLE_SETTLE_S)
        rss_idle = rss_bytes(pid)
    finally:
        for p in loaders:
            stop(p)
    out = {"rss_base": base, "rss_warm": rss_warm, "rss_idle": rss_idle, "idle_ready": ready["ready"],
           "idle_failed": ready["failed"] + warm["failed"], "warm_ready": warm["ready"]}
    if ready["ready"] > 0:
        out["bytes_per_pair"] = (rss_idle - rss_warm) / ready["ready"]
    return out


def proxy_threads(pid: int, kind: str) -> List[int]:
    """The thread ids that carry a proxy's traffic: kproxy's worker threads (named kproxy-w<N>;
    libuv's resolver threads, started later from a worker, inherit its name, so per name the
    oldest thread), every thread of HAProxy (nbthread counts the main thread)."""
    tids = []
    seen = set()
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
        try:
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        if kind != "kproxy":
            tids.append(int(task.name))
        elif comm.startswith("kproxy-w") and comm not in seen:
            seen.add(comm)
            tids.append(int(task.name))
    return tids


def scrape(port: int, timeout: float = 5.0) -> str:
    """kproxy's /metrics text ("" if the admin API does not answer)."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            return r.read().decode()
    except OSError:
        return ""


def histogram_quantile(before: str, after: str, name: str, labels: dict, q: float):
    """Quantile `q` of a Prometheus histogram's growth between two scrapes of /metrics (the
    buckets of the series whose labels include `labels`, summed), interpolated linearly inside
    the bucket as Prometheus' histogram_quantile does; None when nothing was observed."""
    import re

    def buckets(text: str) -> dict:
        out = {}
        for m in re.finditer(r"^" + re.escape(name) + r"_bucket\{([^}]*)\}\s+(\S+)$", text, re.M):
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if any(got.get(k) != v for k, v in labels.items()):
                continue
            le = float("inf") if got["le"] == "+Inf" else float(got["le"])
            out[le] = out.get(le, 0.0) + float(m.group(2))
        return out

    b, a = buckets(before), buckets(after)
    grown = sorted((le, n - b.get(le, 0.0)) for le, n in a.items())
    if not grown or grown[-1][1] <= 0:
        return None
    rank = q * grown[-1][1]
    lower, below = 0.0, 0.0
    for le, n in grown:
        if n >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * ((rank - below) / (n - below) if n > below else 0.0)
        lower, below = le, n
    return lower


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---- real-time scheduling for the latency measure ----------------------------------------------

RT_PRIORITY = 10


def realtime_available() -> bool:
    """True when this process may use SCHED_FIFO (CAP_SYS_NICE) and chrt exists."""
    try:
        return subprocess.run(["chrt", "-f", str(RT_PRIORITY), "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def set_realtime(pid: int, on: bool) -> bool:
    """Every thread of `pid` to SCHED_FIFO (on) or back to SCHED_OTHER (off)."""
    args = ["chrt", "-a", "-f", "-p", str(RT_PRIORITY), str(pid)] if on else ["chrt", "-a", "-o", "-p", "0", str(pid)]
    return subprocess.run(args, capture_output=True).returncode == 0


def run_load(bins: Dict[str, Path], args: List[str], timeout: float, pin: Optional[str] = None, realtime: bool = False) -> dict:
    """Runs kproxy-load to the end and returns its result JSON (plus its exit code). `realtime`:
    under SCHED_FIFO (see set_realtime)."""
    cmd = [str(bins["load"])] + args
    if pin:
        cmd = ["taskset", "-c", pin] + cmd
    if realtime:
        cmd = ["chrt", "-f", str(RT_PRIORITY)] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
    _children.append(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p)
        raise RuntimeError(f"kproxy-load did not finish in {timeout} s: {' '.join(args)}")
    finally:
        if p in _children:
            _children.remove(p)
    result = None
    for line in out.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
    if result is None:
        raise RuntimeError(f"kproxy-load printed no result ({p.returncode}): {err.strip()[-2000:]}")
    result["exit_code"] = p.returncode
    result["stderr"] = err.strip()
    return result
