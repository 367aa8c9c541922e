"""The campus OpenFlow PKI: a CA, the controller's certificate, one certificate per ovs-vswitchd.

Why our own: the controller accepts a switch only with a client certificate signed by the campus
CA, and authorizes it for a datapath id either by a pin in the topology (SHA-256 of the DER
certificate) or by the dpid written in the certificate as a subjectAltName URI
``urn:viplanes:dpid:<16 hex digits>`` (one vswitchd = one TLS identity serving several bridges,
so one certificate may list several dpids). Built with ``cryptography``; never shells out.

Layout of a PKI directory (keys are 0600)::

    ca.crt ca.key                  the campus CA (keep ca.key offline in production)
    controller.crt controller.key  what the controller presents (switches check it against ca.crt)
    switch-NAME.crt switch-NAME.key

The CA and certificates are here; the deny-list of switch certificates is ``denylist``.

Modules: ``denylist``.

Imports today: privatefile (the deny-list's 0600 writes). Never (.importlinter): anything of ours
above the shared facts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DPID_URN = "urn:viplanes:dpid:"
CA_DAYS = 3650
LEAF_DAYS = 825
CA_CERT, CA_KEY = "ca.crt", "ca.key"
CONTROLLER_CERT, CONTROLLER_KEY = "controller.crt", "controller.key"


class PKIError(ValueError):
    """A PKI directory or certificate is missing or unusable (message says how to fix it)."""


@dataclass(frozen=True)
class Issued:
    cert_path: Path
    key_path: Path
    sha256: str  # of the DER certificate: the pin for the topology's cert_sha256


def dpid_urn(dpid: int) -> str:
    return f"{DPID_URN}{dpid:016x}"


def cert_sha256(cert: x509.Certificate | bytes) -> str:
    """The pin of a certificate: hex SHA-256 of its DER encoding (PEM or DER bytes accepted)."""
    if isinstance(cert, bytes):
        der = (
            cert
            if not cert.lstrip().startswith(b"-----")
            else x509.load_pem_x509_certificate(cert).public_bytes(serialization.Encoding.DER)
        )
    else:
        der = cert.public_bytes(serialization.Encoding.DER)
    return hashlib.sha256(der).hexdigest()


def cert_dpids(cert: x509.Certificate) -> set[int]:
    """The datapath ids a certificate names in its subjectAltName URIs."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    found = set()
    for uri in san.get_values_for_type(x509.UniformResourceIdentifier):
        if uri.lower().startswith(DPID_URN):
            try:
                found.add(int(uri[len(DPID_URN) :], 16))
            except ValueError:
                continue
    return found


def _write_private(path: Path, data: bytes) -> None:
    """Write a key readable by its owner only (created 0600, never world-readable for a moment)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "VIP Lanes campus"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(Path(path).read_bytes())
    except OSError as exc:
        raise PKIError(f"{path}: {exc.strerror or exc}") from None
    except ValueError:
        raise PKIError(f"{path}: not a PEM certificate") from None


def _load_ca(pki_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    if not (pki_dir / CA_CERT).is_file():
        raise PKIError(f"{pki_dir}: no campus CA there (create it with `viplanes pki init --dir {pki_dir}`)")
    cert = load_cert(pki_dir / CA_CERT)
    try:
        key = serialization.load_pem_private_key((pki_dir / CA_KEY).read_bytes(), None)
    except OSError:
        raise PKIError(
            f"{pki_dir / CA_KEY}: missing; the CA key is needed to issue "
            f"certificates (viplanes pki init --dir {pki_dir})"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):  # `pki init` writes an EC key
        raise PKIError(f"{pki_dir / CA_KEY}: not an elliptic-curve private key")
    return cert, key


def init_ca(pki_dir: Path, name: str = "VIP Lanes campus CA") -> Issued:
    """Create the campus CA in an empty (or CA-less) directory; refuses to overwrite one."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    if (pki_dir / CA_CERT).exists() or (pki_dir / CA_KEY).exists():
        raise PKIError(f"{pki_dir} already holds a CA; use another --dir or `viplanes pki rotate`")
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    _write_private(pki_dir / CA_KEY, _key_pem(key))
    _write_public(pki_dir / CA_CERT, cert.public_bytes(serialization.Encoding.PEM))
    return Issued(pki_dir / CA_CERT, pki_dir / CA_KEY, cert_sha256(cert))


def issue(
    pki_dir: Path,
    stem: str,
    common_name: str,
    *,
    dpids: Iterable[int] = (),
    dns_names: Iterable[str] = (),
    ips: Iterable[str] = (),
    server: bool = False,
    days: int = LEAF_DAYS,
) -> Issued:
    """Issue ``STEM.crt``/``STEM.key`` signed by the directory's CA (replacing earlier ones)."""
    ca_cert, ca_key = _load_ca(pki_dir)
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(dpid_urn(d)) for d in sorted(set(dpids))]
    names += [x509.DNSName(n) for n in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = pki_dir / f"{stem}.crt", pki_dir / f"{stem}.key"
    _write_private(key_path, _key_pem(key))
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path, cert_sha256(cert))


def issue_controller(pki_dir: Path, hosts: Iterable[str] = ("localhost", "127.0.0.1")) -> Issued:
    dns = [h for h in hosts if not _is_ip(h)]
    ips = [h for h in hosts if _is_ip(h)]
    return issue(pki_dir, "controller", "viplanes controller", dns_names=dns, ips=ips, server=True)


def issue_switch(pki_dir: Path, name: str, dpids: Iterable[int]) -> Issued:
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise PKIError(f"switch name {name!r}: use letters, digits, '-', '_' or '.'")
    return issue(pki_dir, f"switch-{name}", f"ovs-vswitchd {name}", dpids=dpids)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def init(pki_dir: Path, hosts: Iterable[str] = ("localhost", "127.0.0.1")) -> tuple[Issued, Issued]:
    """``viplanes pki init``: the CA and the controller's certificate."""
    ca = init_ca(pki_dir)
    return ca, issue_controller(pki_dir, hosts)


def controller_files(pki_dir: Path) -> tuple[Path, Path, Path]:
    """(ca.crt, controller.crt, controller.key) of a PKI directory, or PKIError saying the fix."""
    files = (pki_dir / CA_CERT, pki_dir / CONTROLLER_CERT, pki_dir / CONTROLLER_KEY)
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise PKIError(
            f"--pki {pki_dir}: missing {', '.join(missing)} (create it with "
            f"`viplanes pki init --dir {pki_dir}`, or run with --insecure-tcp "
            "for a lab without TLS)"
        )
    return files
