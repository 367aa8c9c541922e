"""The OpenFlow security options shared by `viplanes serve`, `viplanes controller run` and the
launcher: TLS by default (``--pki DIR``), plain TCP only with ``--insecure-tcp``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from viplanes.controller.openflow.admission import ListenerSecurity
from viplanes.controller.openflow.peerauth import SwitchTrust, normalize_pins
from viplanes.controller.openflow.tls import TLSFiles
from viplanes.topologies.model import Topology


def openflow_security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--pki``, ``--insecure-tcp``, ``--switch-cert-pin`` on a click command."""
    fn = click.option(
        "--switch-cert-pin",
        "switch_cert_pins",
        multiple=True,
        metavar="SHA256",
        help="certificate fingerprint allowed for every switch without a pin of "
        "its own (one ovs-vswitchd serving all bridges; repeatable)",
    )(fn)
    fn = click.option(
        "--insecure-tcp",
        is_flag=True,
        default=False,
        help="plain TCP OpenFlow, switches not authenticated (labs only; logged as a WARNING every minute)",
    )(fn)
    fn = click.option(
        "--pki",
        "pki_dir",
        envvar="VIPLANES_PKI",
        default=None,
        type=click.Path(file_okay=False, path_type=Path),
        help="directory with ca.crt, controller.crt, controller.key (viplanes pki init); env VIPLANES_PKI",
    )(fn)
    return fn


def listener_security(
    pki_dir: Path | None, insecure_tcp: bool, pins: Iterable[str], topology: Topology | None
) -> ListenerSecurity:
    """The listener's security from the options, or a one-line ClickException with the fix."""
    from viplanes import pki

    try:
        fleet = normalize_pins(pins)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--switch-cert-pin") from None
    trust = SwitchTrust(topology=topology, fleet_pins=fleet)
    if insecure_tcp:
        if pki_dir is not None:
            raise click.UsageError("--insecure-tcp and --pki exclude each other")
        return ListenerSecurity(tls=None, trust=trust)
    if pki_dir is None:
        raise click.ClickException(
            "OpenFlow runs over TLS: give --pki DIR with ca.crt, controller.crt, controller.key "
            "(create one with `viplanes pki init --dir DIR`), or --insecure-tcp for a lab "
            "without TLS"
        )
    try:
        ca, cert, key = pki.controller_files(pki_dir)
    except pki.PKIError as exc:
        raise click.ClickException(str(exc)) from None
    files = TLSFiles(ca=ca, cert=cert, key=key)
    try:
        from viplanes.controller.openflow.tls import server_context

        server_context(files)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise click.ClickException(f"--pki {pki_dir}: {exc}") from None
    return ListenerSecurity(tls=files, trust=trust)
