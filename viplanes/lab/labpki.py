"""The lab's OpenFlow PKI: one stable, machine-wide CA and "lab vswitchd" certificate.

Why machine-wide: ``ovs-vsctl set-ssl`` is global to an ovs-vswitchd, and the lab shares this
machine's vswitchd with other tests and runs at once (some with plain tcp controllers, which SSL
does not touch). So every lab run uses the same files, created once under a file lock, and the
vswitchd's SSL config is set only when it is empty; a different SSL config found there is never
replaced (``LabPKIError`` says what to do).

How the lab's controller trusts its switches: the lab bridges carry the topology's dpids, all
on the one shared vswitchd, so the lab vswitchd certificate names none; ``viplanes serve`` gets
``--switch-cert-pin <its sha256>`` (every dpid of the topology may be served by that one
vswitchd, as on a single-host site).

To run your own `serve` for the lab's switches (``viplanes lab shell --controller``)::

    viplanes serve --topology topologies/campus.yaml $(.venv/bin/python -m viplanes.lab.labpki)
The attack tests issue their own certificates with dpid SANs from the same CA.
"""

from __future__ import annotations

import fcntl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from viplanes import pki
from viplanes.settings.environ import one_setting

LAB_PKI_DIR = Path(one_setting("VIPLANES_LAB_PKI"))
VSWITCHD = "lab-vswitchd"


class LabPKIError(RuntimeError):
    """The lab PKI or the vswitchd's SSL config is not usable."""


LAB_UNFINISHED = 512  # unfinished TLS handshakes the lab allows (all from 127.0.0.1); see serve_args


@dataclass(frozen=True)
class LabPKI:
    dir: Path
    vswitchd_pin: str  # sha256 of the lab vswitchd certificate: serve's --switch-cert-pin

    @property
    def ca(self) -> Path:
        return self.dir / pki.CA_CERT

    @property
    def vswitchd_cert(self) -> Path:
        return self.dir / f"switch-{VSWITCHD}.crt"

    @property
    def vswitchd_key(self) -> Path:
        return self.dir / f"switch-{VSWITCHD}.key"

    def serve_args(self) -> list[str]:
        """Options that make `viplanes serve` / `controller run` accept the lab's switches.

        Every lab switch connects from 127.0.0.1, so the per-/24 cap on unfinished handshakes
        (64 by default) would refuse part of a lab reconnecting at once after a restart (140
        switches in 0.4 s: 54 refused, each back only after OVS's backoff); the lab lifts it."""
        return [
            "--pki",
            str(self.dir),
            "--switch-cert-pin",
            self.vswitchd_pin,
            *("--of-unfinished-per-prefix", str(LAB_UNFINISHED), "--of-unfinished-total", str(LAB_UNFINISHED)),
        ]


def ensure_lab_pki(pki_dir: Path = LAB_PKI_DIR, configure_vswitchd: bool = True) -> LabPKI:
    """Create the lab PKI if missing (idempotent, under a lock) and point the vswitchd at it."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    with open(pki_dir / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (pki_dir / pki.CA_CERT).exists():
            pki.init(pki_dir)
        elif not (pki_dir / pki.CONTROLLER_CERT).exists():
            pki.issue_controller(pki_dir)
        lab = LabPKI(pki_dir, "")
        if not lab.vswitchd_cert.exists() or not lab.vswitchd_key.exists():
            pki.issue_switch(pki_dir, VSWITCHD, [])
        lab = LabPKI(pki_dir, pki.cert_sha256(pki.load_cert(lab.vswitchd_cert)))
        if configure_vswitchd:
            _configure_vswitchd(lab)
    return lab


def _get_ssl() -> dict[str, str]:
    out = subprocess.run(["ovs-vsctl", "--timeout=10", "get-ssl"], capture_output=True, text=True, check=True).stdout
    fields = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if value:
            fields[key.strip()] = value.strip()
    return fields


def _configure_vswitchd(lab: LabPKI) -> None:
    want = {"Private key": str(lab.vswitchd_key), "Certificate": str(lab.vswitchd_cert), "CA Certificate": str(lab.ca)}
    try:
        have = _get_ssl()
        if all(have.get(k) == v for k, v in want.items()):
            return
        if any(have.get(k) for k in want):
            raise LabPKIError(
                f"ovs-vswitchd already has another SSL config ({have.get('Certificate')}); the lab "
                f"uses {lab.vswitchd_cert}. It is global, so the lab will not replace it: point "
                f"VIPLANES_LAB_PKI at that config's directory, or clear it (`ovs-vsctl del-ssl`) "
                "when nothing else uses it"
            )
        subprocess.run(
            ["ovs-vsctl", "--timeout=10", "set-ssl", want["Private key"], want["Certificate"], want["CA Certificate"]],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LabPKIError(f"ovs-vsctl ssl config failed: {exc}") from None


if __name__ == "__main__":  # `viplanes serve ... $(.venv/bin/python -m viplanes.lab.labpki)`: README, "Try it"
    print(" ".join(ensure_lab_pki().serve_args()))
