"""What `viplanes lab shell` tells its user: why switches did not connect, and how to try a lane.

Why a module: the shell's last screen (console address, tokens, a lane from the ``mininet>``
prompt) and its TLS diagnosis are the first hour of a new operator; they are tested without a lab.
"""

from __future__ import annotations

import socket
import ssl
import sys
from pathlib import Path

from viplanes.controller.openflow import tlsdiag
from viplanes.topologies.model import Topology

from .labpki import LabPKI, LabPKIError, ensure_lab_pki


def probe_controller(host: str, port: int, lab: LabPKI, timeout_s: float = 5.0) -> str | None:
    """Shake hands with an OpenFlow controller as the lab's vswitchd does; the OpenSSL reason
    when that fails (None: it would accept the lab's switches, or nothing answers TLS)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # OVS checks the chain, not a name
    ctx.load_verify_locations(lab.ca)
    ctx.load_cert_chain(lab.vswitchd_cert, lab.vswitchd_key)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, ctx.wrap_socket(raw) as tls:
            tls.settimeout(1.0)  # TLS 1.3: a refused client certificate arrives as an alert
            try:
                tls.recv(1)
            except TimeoutError:
                pass
    except ssl.SSLError as exc:
        return str(exc.reason or exc)
    except OSError:
        return None
    return None


def why_not_connected(log_text: str | None, probe_reason: str | None) -> list[str]:
    """Lines naming the cause and the fix of switches that did not connect (empty: unknown)."""
    lines = tlsdiag.diagnose_log(log_text or "")
    if probe_reason and not lines:
        why = tlsdiag.explain(probe_reason)
        if probe_reason == "CERTIFICATE_VERIFY_FAILED":  # seen from the switch's side: reversed
            why = f"the controller's certificate is not signed by the lab CA the switches trust; fix: {tlsdiag.LAB_FIX}"
        lines.append(f"{probe_reason}: {why or 'TLS handshake refused'}")
    return lines


def explain_unconnected(error: str, serve_log: Path | None, openflow: tuple[str, int]) -> list[str]:
    """For a "did not connect" error: the cause and fix, from our serve's log or, for a
    controller of someone else's, from a handshake made with the lab switches' certificate."""
    if "did not connect" not in error:
        return []
    log = serve_log.read_text(errors="replace") if serve_log and serve_log.exists() else None
    probe = None
    if log is None:
        try:
            probe = probe_controller(*openflow, ensure_lab_pki(configure_vswitchd=False))
        except (LabPKIError, OSError):
            probe = None
    return why_not_connected(log, probe)


def banner(topo: Topology, api_url: str | None, researcher: str | None, operator: str | None) -> str:
    """The shell's last words before ``mininet>``: a lane to try, then the console and tokens."""
    desk = next((h for h in topo.hosts if h.role == "desktop"), topo.hosts[0])
    cloud = next((h for h in topo.hosts if h.role == "cloud"), topo.hosts[-1])
    cli = Path(sys.executable).parent / "viplanes"
    dst = cloud.iface.ip.ip
    lines = [
        "try a lane from the mininet> prompt"
        + (
            " (the token is already in this shell's environment):"
            if api_url
            else " (export VIPLANES_API_URL and VIPLANES_TOKEN first):"
        ),
        f"  mininet> {desk.name} iperf3 -c {dst} -p 5201 -P 10 -t 5     # the normal path: firewall and NAT",
        f"  mininet> sh {cli} lane request --src {desk.iface.ip.ip} --dst {dst} --dst-port 5201 "
        "--duration 10m --purpose try --wait",
        f"  mininet> {desk.name} iperf3 -c {dst} -p 5201 -P 10 -t 5     # through the lane",
        f"  mininet> sh {cli} lane list",
    ]
    if api_url:
        lines += [
            f"console: {api_url}/ui/  (sign in with a token below)",
            f"researcher: export VIPLANES_API_URL={api_url} VIPLANES_TOKEN={researcher}",
            f"operator token: {operator}",
        ]
    else:
        lines.append("console: the one of the controller given with --controller")
    return "\n".join(lines)
