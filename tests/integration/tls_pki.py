"""A throw-away PKI for the TLS integration tests, made with the `openssl` command line tool.

    pki = TestPki(tmp_dir)
    pki.ca                                  # CA certificate (PEM) clients and kproxy trust
    broker = pki.issue("broker", "IP:127.0.0.1,DNS:localhost")
    broker.cert, broker.key, broker.keystore   # keystore = key + certificate, Kafka's PEM keystore
    pki.issue("old", "IP:127.0.0.1", days=-1)  # already expired
    pki.issue("x", "IP:127.0.0.1", unrelated_ca=True)  # signed by a CA nobody trusts

EC P-256 keys (fast to make; Kafka's PEM keystore and OpenSSL both take them) as unencrypted PKCS#8.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Identity:
    cert: Path
    key: Path
    keystore: Path  # the key followed by the certificate: Kafka's ssl.keystore.type=PEM file


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr}")


class TestPki:
    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path):
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca, self._ca_key = self._make_ca("ca", "kproxy test CA")
        self.unrelated_ca, self._unrelated_key = self._make_ca("unrelated-ca", "unrelated CA")

    def _make_ca(self, name: str, cn: str):
        cert, key = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
                 "-out", str(cert), "-subj", f"/CN={cn}", "-days", "2",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.dir)
        return cert, key

    def issue(self, name: str, sans: str, days: int = 2, unrelated_ca: bool = False) -> Identity:
        """A certificate for `sans` ("IP:127.0.0.1,DNS:localhost") valid `days` from now (-1: expired)."""
        key, csr, cert = self.dir / f"{name}.key", self.dir / f"{name}.csr", self.dir / f"{name}.pem"
        ext = self.dir / f"{name}.ext"
        ext.write_text(f"basicConstraints=CA:FALSE\nsubjectAltName={sans}\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
                 "-out", str(csr), "-subj", f"/CN={name}", cwd=self.dir)
        ca, ca_key = (self.unrelated_ca, self._unrelated_key) if unrelated_ca else (self.ca, self._ca_key)
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
                 "-out", str(cert), "-days", str(days), "-extfile", str(ext), cwd=self.dir)
        keystore = self.dir / f"{name}.keystore.pem"
        keystore.write_text(key.read_text() + cert.read_text())
        return Identity(cert, key, keystore)
