"""The local control plane's certificates: a CA (which the API server trusts for clients),
the API server's serving certificate, the service-account key pair, and client certificates
for the identities of `local up --kubelet` (kubelets, kube-proxy, the API server dialling
kubelets). openssl, P-256 keys: generating them is instant."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from reconciler.errors import LocalStackError

CA_CERT = "ca.crt"


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LocalStackError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")


def make_pki(pki: Path, extra_ips: Sequence[str] = ()) -> None:
    """CA, serving cert for 127.0.0.1 (and `extra_ips`) and a service-account key pair; kept
    across restarts, the serving cert remade when the addresses it must name change.

    P-256 keys rather than RSA: generating them is instant, which is a good part of `up` time.
    """
    ca_cert = pki / CA_CERT
    pki.mkdir(parents=True, exist_ok=True)
    ext = (
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.96.0.1"
        + "".join(f",IP:{ip}" for ip in extra_ips)
        + "\nextendedKeyUsage=serverAuth\n"
    )
    same_names = (pki / "ext.cnf").exists() and (pki / "ext.cnf").read_text() == ext
    if (pki / "apiserver.crt").exists() and (pki / "sa.pub").exists() and same_names:
        return
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    if not ca_cert.exists():
        _openssl("req", "-x509", *ec, "-days", "3650", "-subj", "/CN=sunk-reconciler-local-ca",
                 "-keyout", str(pki / "ca.key"), "-out", str(ca_cert))  # fmt: skip
    _openssl("req", *ec, "-subj", "/CN=kube-apiserver",
             "-keyout", str(pki / "apiserver.key"), "-out", str(pki / "apiserver.csr"))  # fmt: skip
    (pki / "ext.cnf").write_text(ext)
    _openssl("x509", "-req", "-in", str(pki / "apiserver.csr"),
             "-CA", str(ca_cert), "-CAkey", str(pki / "ca.key"), "-CAcreateserial",
             "-days", "3650", "-extfile", str(pki / "ext.cnf"),
             "-out", str(pki / "apiserver.crt"))  # fmt: skip
    if not (pki / "sa.pub").exists():
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                 str(pki / "sa.key"))  # fmt: skip
        _openssl("ec", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def client_cert(pki: Path, file_stem: str, common_name: str,
                organization: str = "") -> tuple[Path, Path]:  # fmt: skip
    """A client certificate from the local CA (made once): its certificate and key."""
    cert, key = pki / f"{file_stem}.crt", pki / f"{file_stem}.key"
    if cert.exists() and key.exists():
        return cert, key
    subject = f"/CN={common_name}" + (f"/O={organization}" if organization else "")
    csr = pki / f"{file_stem}.csr"
    ext = pki / "client-ext.cnf"
    ext.write_text("extendedKeyUsage=clientAuth\n")
    for argv in (
        ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-subj", subject, "-keyout", str(key), "-out", str(csr)],
        ["x509", "-req", "-in", str(csr), "-CA", str(pki / CA_CERT),
         "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "3650",
         "-extfile", str(ext), "-out", str(cert)],
    ):  # fmt: skip
        _openssl(*argv)
    key.chmod(0o600)
    return cert, key
