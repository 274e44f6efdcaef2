"""Issue #17: every kustomization under deploy/k8s checked three ways with real tools —

1. `kustomize build` (pinned, built from Go modules) renders it, and agrees with deploy/k8s/render.py
   (which the static tests in tests/integration/test_deploy_manifests.py use);
2. kubeconform -strict validates the output against the Kubernetes JSON schemas of several minor
   versions (shipped in the PyPI package kubernetes-validate, pinned by version and hash);
3. `kubectl apply --dry-run=server --validate=strict` sends it to a real kube-apiserver + etcd
   started on loopback by this module (full API validation and admission, nothing persisted).

The gateway overlay's Gateway and TLSRoute are validated against the Gateway API CRDs of the
pinned Go module sigs.k8s.io/gateway-api (experimental channel, where TLSRoute lives): their
kubeconform schemas in 2., the CRDs installed in the API server before 3.
(tests/container/k8s-tools/gateway-api-crds fetches and converts them, cached in .cache/container).

tests/container/negative/ holds kustomizations that must fail: a misspelt field (kubeconform and
the API server), a port name over 15 characters and a selector that does not match the pod
template (the API server; the schemas let both through). Their output lines are written to
build/test-logs/container/negative-cases.txt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
import yaml

from conftest import BIN, CACHE, LOGS, ROOT, tool

import kafka_harness as kh  # noqa: E402  (free_ports, _child_setup)

sys.path.insert(0, str(ROOT / "deploy" / "k8s"))
import render  # noqa: E402
from test_deploy_manifests import canonical  # noqa: E402

K8S = ROOT / "deploy" / "k8s"
NEGATIVE = Path(__file__).resolve().parent / "negative"
KUSTOMIZATIONS = ["base", "standalone", "overlays/chaos", "overlays/gateway"]

# Schemas: kubernetes-validate ships the Kubernetes JSON schemas of 1.25 .. 1.37.
SCHEMA_PACKAGE = "kubernetes-validate"
SCHEMA_PACKAGE_VERSION = "1.37.0"
SCHEMA_WHEEL_SHA256 = "85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9"
# The oldest release the sidecar manifests support (native sidecars: restartPolicy on an init
# container), the oldest upstream still supports, the one the API server below runs, the newest.
K8S_VERSIONS = ["1.29.0", "1.35.0", "1.36.0", "1.37.0"]


def _run(cmd: List[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 180)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def record_negative(case: str, check: str, out: str) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / "negative-cases.txt", "a") as f:
        f.write(f"{case} / {check}: {out}\n")


# ---------------------------------------------------------------------------------------------
# kustomize
# ---------------------------------------------------------------------------------------------

def kustomize_build(directory: Path) -> str:
    out = _run([tool("kustomize"), "build", directory])
    assert out.returncode == 0, f"kustomize build {directory}:\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Dict[str, Path]:
    """kustomize build output of every kustomization (and negative case), as files."""
    d = tmp_path_factory.mktemp("kustomize")
    files = {}
    for name in KUSTOMIZATIONS:
        files[name] = d / (name.replace("/", "-") + ".yaml")
        files[name].write_text(kustomize_build(K8S / name))
    for case in sorted(p.name for p in NEGATIVE.iterdir() if p.is_dir()):
        files[f"negative/{case}"] = d / f"negative-{case}.yaml"
        files[f"negative/{case}"].write_text(kustomize_build(NEGATIVE / case))
    return files


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_kustomize_build_agrees_with_render_py(built, path):
    docs = [d for d in yaml.safe_load_all(built[path].read_text()) if d]
    assert docs, "kustomize built nothing"

    def key(d):
        return (d["kind"], d["metadata"]["name"])
    theirs = sorted((canonical(d) for d in docs), key=key)
    ours = sorted((canonical(d) for d in render.render(K8S / path)), key=key)
    assert [key(d) for d in ours] == [key(d) for d in theirs]
    assert ours == theirs


# ---------------------------------------------------------------------------------------------
# kubeconform
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def schemas() -> Path:
    """Folder with <version>-local[-strict]/<kind>-<group>-<version>.json for K8S_VERSIONS, from
    the pinned kubernetes-validate wheel (pip download, hash checked). The schemas' absolute
    $id/$ref are made relative, or kubeconform looks for them on kubernetes.io."""
    root = CACHE / "schemas" / f"{SCHEMA_PACKAGE}-{SCHEMA_PACKAGE_VERSION}"
    want = [f"v{v}-local{s}" for v in K8S_VERSIONS for s in ("", "-strict")]
    if all((root / w / ".done").exists() for w in want):
        return root
    wheels = CACHE / "schemas" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = next(iter(wheels.glob(f"kubernetes_validate-{SCHEMA_PACKAGE_VERSION}-*.whl")), None)
    if wheel is None:
        out = _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--disable-pip-version-check", "-d", wheels, f"{SCHEMA_PACKAGE}=={SCHEMA_PACKAGE_VERSION}"],
                   timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        wheel = next(iter(wheels.glob(f"kubernetes_validate-{SCHEMA_PACKAGE_VERSION}-*.whl")))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert digest == SCHEMA_WHEEL_SHA256, f"{wheel.name}: sha256 {digest}, pinned {SCHEMA_WHEEL_SHA256}"
    prefix = "kubernetes_validate/kubernetes-json-schema/"
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for w in want:
            tmp = Path(tempfile.mkdtemp(prefix=f".{w}-", dir=root))
            n = 0
            for name in z.namelist():
                if not name.startswith(f"{prefix}{w}/") or not name.endswith(".json"):
                    continue
                schema = _relative_refs(json.loads(z.read(name)))
                (tmp / Path(name).name).write_text(json.dumps(schema))
                n += 1
            assert n > 100, f"{w}: only {n} schemas in {wheel.name}"
            (tmp / ".done").write_text(f"{n}\n")
            shutil.rmtree(root / w, ignore_errors=True)
            os.replace(tmp, root / w)
    return root


def _relative_refs(node):
    if isinstance(node, dict):
        node.pop("$id", None)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("/api/_definitions.json#"):
            node["$ref"] = ref[len("/api/"):]
        for v in node.values():
            _relative_refs(v)
    elif isinstance(node, list):
        for v in node:
            _relative_refs(v)
    return node


@pytest.fixture(scope="session")
def gateway_api() -> Path:
    """The Gateway API CRDs (crds.yaml) and their kubeconform schemas, from the pinned Go module
    sigs.k8s.io/gateway-api (tests/container/k8s-tools/gateway-api-crds; cached)."""
    out = _run([sys.executable, Path(__file__).resolve().parent / "k8s-tools" / "gateway-api-crds"], timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    root = Path(out.stdout.strip().splitlines()[-1])
    assert (root / "crds.yaml").exists() and (root / "schemas-strict" / "tlsroute_v1.json").exists()
    return root


def kubeconform(schemas: Path, version: str, manifest: Path, crds: Path = None) -> subprocess.CompletedProcess:
    location = f"{schemas}/{{{{ .NormalizedKubernetesVersion }}}}-local{{{{ .StrictSuffix }}}}/" \
               "{{ .ResourceKind }}{{ .KindSuffix }}.json"
    extra = ["-schema-location", f"{crds}/schemas-strict/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json"] \
        if crds else []
    return _run([tool("kubeconform"), "-strict", "-summary", "-kubernetes-version", version,
                 "-schema-location", location, *extra, manifest])


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_kubeconform_strict(schemas, gateway_api, built, path, version):
    out = kubeconform(schemas, version, built[path], gateway_api)
    assert out.returncode == 0, out.stdout + out.stderr
    # every object was validated against a schema (none skipped for a missing schema)
    m = re.search(r"(\d+) resources found.*Valid: (\d+), Invalid: (\d+), Errors: (\d+), Skipped: (\d+)", out.stdout)
    assert m, out.stdout
    found, valid, invalid, errors, skipped = map(int, m.groups())
    assert found == valid > 0 and invalid == errors == skipped == 0, out.stdout


def test_negative_misspelt_field_fails_kubeconform(schemas, built):
    for version in K8S_VERSIONS:
        out = kubeconform(schemas, version, built["negative/misspelt-field"])
        assert out.returncode != 0, out.stdout
        assert "readOnlyRootFileSystem" in out.stdout, out.stdout
    line = next(ln for ln in out.stdout.splitlines() if "readOnlyRootFileSystem" in ln)
    record_negative("misspelt-field", f"kubeconform -strict {version}", line.strip())


def test_gateway_overlay_validated_against_the_gateway_api_crds(schemas, gateway_api, built, tmp_path):
    """The Gateway and TLSRoute are checked against the CRD schemas, not skipped: a misspelt
    TLSRoute field fails."""
    text = built["overlays/gateway"].read_text()
    assert "sectionName: kafka-tls" in text
    bad = tmp_path / "gateway-misspelt.yaml"
    bad.write_text(text.replace("sectionName: kafka-tls", "sectionName: kafka-tls\n    sectoinName: kafka-tls", 1))
    out = kubeconform(schemas, "1.35.0", bad, gateway_api)
    assert out.returncode != 0, out.stdout
    assert re.search(r"TLSRoute kproxy is invalid.*sectoinName", out.stdout), out.stdout
    record_negative("gateway-misspelt-tlsroute-field", "kubeconform -strict 1.35.0", _last_line(out.stdout))


# ---------------------------------------------------------------------------------------------
# a real kube-apiserver + etcd on loopback
# ---------------------------------------------------------------------------------------------

class ApiServer:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.procs: List[subprocess.Popen] = []
        self.logs = []
        self.kubeconfig = workdir / "kubeconfig"

    def _spawn(self, name: str, cmd: List[str]) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "wb")
        self.logs.append(log)
        p = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, preexec_fn=kh._child_setup)
        self.procs.append(p)
        return p

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def start(self, timeout: float = 240) -> "ApiServer":
        client, peer, secure = kh.free_ports(3)
        etcd_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self._spawn("etcd", [tool("etcd"), "--name", "kt", "--data-dir", self.dir / "etcd",
                             "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                             "--initial-cluster", f"kt={peer_url}", "--unsafe-no-fsync", "--log-level", "warn"])
        key = self.dir / "sa.key"
        subprocess.run(["openssl", "ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", str(key)],
                       check=True, capture_output=True)
        token = hashlib.sha256(os.urandom(32)).hexdigest()
        (self.dir / "tokens.csv").write_text(f'{token},kproxy-test,1000,"system:masters"\n')
        self.apiserver = self._spawn("kube-apiserver", [
            tool("kube-apiserver"), "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", secure,
            "--cert-dir", self.dir / "pki", "--token-auth-file", self.dir / "tokens.csv",
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", key, "--service-account-signing-key-file", key,
            "--service-cluster-ip-range", "10.96.0.0/16", "--enable-priority-and-fairness=false",
            "--profiling=false", "--v=1"])
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "kt",
            "clusters": [{"name": "kt", "cluster": {"server": f"https://127.0.0.1:{secure}",
                                                    "insecure-skip-tls-verify": True}}],
            "users": [{"name": "kt", "user": {"token": token}}],
            "contexts": [{"name": "kt", "context": {"cluster": "kt", "user": "kt"}}]}))
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for name, p in zip(("etcd", "kube-apiserver"), self.procs):
                assert p.poll() is None, f"{name} exited {p.returncode}:\n{self.log(name)}"
            last = self.kubectl("get", "--raw", "/readyz")
            if last.returncode == 0 and self.kubectl("get", "namespace", "default").returncode == 0:
                return self
            time.sleep(1)
        raise AssertionError(f"kube-apiserver not ready in {timeout}s ({last.stderr.strip() if last else ''}):\n"
                             f"{self.log('kube-apiserver')}")

    def kubectl(self, *args, stdin: str = None) -> subprocess.CompletedProcess:
        return _run([tool("kubectl"), "--kubeconfig", self.kubeconfig, "--cache-dir", self.dir / "kubectl-cache",
                     *args], input=stdin, timeout=120)

    def version(self) -> str:
        out = self.kubectl("version", "-o", "json")
        return json.loads(out.stdout)["serverVersion"]["gitVersion"] if out.returncode == 0 else "?"

    def dry_run(self, manifest: Path) -> subprocess.CompletedProcess:
        return self.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", manifest)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for log in self.logs:
            log.close()


@pytest.fixture(scope="module")
def apiserver(gateway_api):
    LOGS.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kube-apiserver-", dir=LOGS))
    srv = ApiServer(workdir)
    try:
        srv.start()
        print(f"kube-apiserver {srv.version()} ready; logs in {workdir}")
        # the Gateway API CRDs (the gateway overlay's Gateway and TLSRoute), established first
        out = srv.kubectl("apply", "--server-side", "-f", gateway_api / "crds.yaml")
        assert out.returncode == 0, out.stdout + out.stderr
        out = srv.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                          "crd/gateways.gateway.networking.k8s.io", "crd/tlsroutes.gateway.networking.k8s.io")
        assert out.returncode == 0, out.stdout + out.stderr
        # the standalone kustomization's namespace (dry-run objects need their namespace to exist)
        for docs_path in KUSTOMIZATIONS:
            for d in render.render(K8S / docs_path):
                ns = d["metadata"].get("namespace")
                if ns and srv.kubectl("get", "namespace", ns).returncode != 0:
                    out = srv.kubectl("create", "namespace", ns)
                    assert out.returncode == 0, out.stderr
        yield srv
    finally:
        srv.stop()
    shutil.rmtree(workdir / "etcd", ignore_errors=True)


def test_apiserver_is_the_pinned_release(apiserver):
    assert apiserver.version() == "v1.35.4"


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_server_side_dry_run(apiserver, built, path):
    out = apiserver.dry_run(built[path])
    assert out.returncode == 0, out.stdout + out.stderr
    docs = [d for d in yaml.safe_load_all(built[path].read_text()) if d]
    for d in docs:
        assert re.search(rf"{d['kind'].lower()}[./\w-]*/{re.escape(d['metadata']['name'])} \w+ \(server dry run\)",
                         out.stdout), out.stdout
    # nothing was created
    assert apiserver.kubectl("get", "deployments", "-A", "-o", "name").stdout.strip() == ""
    assert apiserver.kubectl("get", "tlsroutes", "-A", "-o", "name").stdout.strip() == ""


NEGATIVE_SERVER = {
    "misspelt-field": r'unknown field "spec\.template\.spec\.initContainers\[0\]\.securityContext\.readOnlyRootFileSystem"',
    "long-port-name": r'ports\[0\]\.name: Invalid value: "kafka-bootstrap-port": must be no more than 15 characters',
    "selector-mismatch": r"selector.*does not match template `?labels",
}


@pytest.mark.parametrize("case", sorted(NEGATIVE_SERVER))
def test_negative_case_fails_server_side_dry_run(apiserver, built, case):
    out = apiserver.dry_run(built[f"negative/{case}"])
    assert out.returncode != 0, f"{case} was accepted:\n{out.stdout}"
    assert re.search(NEGATIVE_SERVER[case], out.stderr), out.stderr
    record_negative(case, "kubectl apply --dry-run=server --validate=strict", _last_line(out.stderr))


def test_negative_cases_the_schemas_let_through(schemas, built):
    """The long port name and the selector mismatch are schema-valid: only the API server catches
    them (which is why the stage runs one)."""
    for case in ("long-port-name", "selector-mismatch"):
        out = kubeconform(schemas, "1.35.0", built[f"negative/{case}"])
        record_negative(case, "kubeconform -strict 1.35.0", f"exit {out.returncode}: {_last_line(out.stdout)}")
        assert out.returncode == 0, out.stdout
