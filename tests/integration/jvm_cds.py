"""Class-data sharing (AppCDS) archives for the JVMs the tests start: Kafka brokers, the storage
format tool, and the Java test clients. Stdlib only.

A JVM start spends most of its first seconds loading and verifying classes from the jars; a CDS
archive holds them pre-parsed and is mapped into memory instead (measured on the project's 2-core
machine under load: a one-node broker ready in 14 s instead of 20-28 s, the storage tool in 1.9 s
instead of 4.4 s). Nothing else changes: same classes, same flags.

    opts = jvm_cds.options("kafka", classpath)    # JVM options to put before -cp
    ...start the JVM, wait until it has done its startup work...
    jvm_cds.recorded("kafka")                     # (only acts after a recording run)

How an archive comes to be: while `kind` (a JVM flavour with one classpath) has no archive, the
first JVM of that kind in a process records the classes it loads (-XX:DumpLoadedClassList). Once
the caller says that JVM got through its startup (`recorded`), a background thread dumps the
archive from that list (java -Xshare:dump, niced) into ARCHIVE_DIR, then renames it into place;
later JVMs of that kind, in this process and in later runs, use it (-XX:SharedArchiveFile). The
file name carries a digest of the java binary and of every jar on the classpath (name, size,
mtime), so a new JDK or new jars get a new archive, never a stale one. An unusable archive is
ignored by the JVM (-Xshare:auto, the default). A flock keeps concurrent runs from dumping the same
archive twice. $KPROXY_TEST_CDS=0 turns all of it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import subprocess
import threading
from pathlib import Path
from typing import Dict, List, Optional

ARCHIVE_DIR = Path(__file__).resolve().parents[2] / "build" / "jvm-cds"
MIN_CLASSES = 500  # a class list shorter than this is from a JVM that died early: no archive from it


def enabled() -> bool:
    return os.environ.get("KPROXY_TEST_CDS", "1") != "0"


class _Kind:
    def __init__(self, name: str, java: str, classpath: str, dump_opts: List[str]):
        self.name, self.java, self.classpath, self.dump_opts = name, java, classpath, dump_opts
        self.key = _digest(java, classpath)
        self.archive = ARCHIVE_DIR / f"{name}-{self.key}.jsa"
        self.classlist: Optional[Path] = None  # this process's recording, once one was handed out
        self.dumping: Optional[threading.Thread] = None


_KINDS: Dict[str, _Kind] = {}
_LOCK = threading.Lock()


def _digest(java: str, classpath: str) -> str:
    h = hashlib.sha256()
    real = os.path.realpath(java)
    with contextlib.suppress(OSError):
        st = os.stat(real)
        h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update(classpath.encode() + b"\0")
    for entry in classpath.split(os.pathsep):
        for f in sorted(glob.glob(entry[:-1] + "*.jar") if entry.endswith("*") else [entry]):
            with contextlib.suppress(OSError):
                st = os.stat(f)
                h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def options(kind: str, java: str, classpath: str, dump_opts: Optional[List[str]] = None,
            record: bool = True) -> List[str]:
    """JVM options for a JVM of `kind` (java binary + classpath): use its archive if there is one,
    else (record=True) record the loaded classes if no JVM of this process did yet, else nothing.
    dump_opts: JVM options for making the archive (the GC the JVMs of this kind run with)."""
    if not enabled():
        return []
    with _LOCK:
        k = _KINDS.get(kind)
        if k is None or k.java != java or k.classpath != classpath:
            k = _KINDS[kind] = _Kind(kind, java, classpath, list(dump_opts or []))
        if k.archive.exists():
            return [f"-XX:SharedArchiveFile={k.archive}"]
        if k.classlist is not None or not record:
            return []
        with contextlib.suppress(OSError):
            ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
            _remove_stale()
            k.classlist = ARCHIVE_DIR / f"{kind}-{k.key}.{os.getpid()}.classlist"
            k.classlist.unlink(missing_ok=True)
            return [f"-XX:DumpLoadedClassList={k.classlist}"]
        return []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _remove_stale() -> None:
    """Class lists and half-made archives of processes that are gone."""
    for p in list(ARCHIVE_DIR.glob("*.classlist")) + list(ARCHIVE_DIR.glob("*.tmp")):
        try:
            pid = int(p.name.split(".")[1])
        except (IndexError, ValueError):
            continue
        if not _pid_alive(pid):
            with contextlib.suppress(OSError):
                p.unlink()


def recorded(kind: str) -> None:
    """The recording JVM of `kind` got through its startup: dump the archive in the background
    (no-op if there is nothing to dump, or an archive exists or is being made)."""
    with _LOCK:
        k = _KINDS.get(kind)
        if (k is None or k.classlist is None or k.dumping is not None or k.archive.exists()
                or not k.classlist.exists()):
            return
        k.dumping = threading.Thread(target=_dump, args=(k,), name=f"cds-dump-{kind}", daemon=True)
        k.dumping.start()


# Set by kafka_harness: what every child JVM runs before exec (own session, PR_SET_PDEATHSIG).
child_setup = None


def _nice_child() -> None:
    with contextlib.suppress(OSError):
        os.nice(10)
    if child_setup is not None:
        child_setup()


def _dump(k: _Kind) -> None:
    lock_path = ARCHIVE_DIR / f"{k.name}-{k.key}.lock"
    tmp = ARCHIVE_DIR / f"{k.name}-{k.key}.{os.getpid()}.jsa.tmp"
    try:
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # another process is making it
            if k.archive.exists():
                return
            # The recording JVM may still be running and writing: take the complete lines so far.
            text = k.classlist.read_text(errors="replace")
            text = text[:text.rfind("\n") + 1]
            if text.count("\n") < MIN_CLASSES:
                return
            snapshot = tmp.with_suffix(".classlist")
            snapshot.write_text(text)
            cmd = [k.java, *k.dump_opts, "-Xshare:dump", f"-XX:SharedClassListFile={snapshot}",
                   f"-XX:SharedArchiveFile={tmp}", "-cp", k.classpath]
            with open(ARCHIVE_DIR / f"{k.name}-{k.key}.dump.log", "wb") as log:
                # Popen from this thread: PR_SET_PDEATHSIG ties the JVM to it, and it waits.
                rc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      preexec_fn=_nice_child).wait()
            if rc == 0 and tmp.exists() and tmp.stat().st_size > 0:
                os.replace(tmp, k.archive)
                for old in ARCHIVE_DIR.glob(f"{k.name}-*.jsa"):  # archives for an older JDK or jars
                    if old != k.archive:
                        with contextlib.suppress(OSError):
                            old.unlink()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            tmp.with_suffix(".classlist").unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            k.classlist.unlink(missing_ok=True)


def stats() -> str:
    parts = []
    for k in _KINDS.values():
        state = "archive" if k.archive.exists() else ("dumping" if k.dumping and k.dumping.is_alive() else "none")
        parts.append(f"{k.name}: {state}")
    return ", ".join(parts) if parts else "no JVM started"
