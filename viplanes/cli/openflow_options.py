"""The OpenFlow security options shared by `viplanes serve`, `viplanes controller run` and the
launcher: TLS by default (``--pki DIR``), plain TCP only with ``--insecure-tcp``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from viplanes.cli.settingsload import BadSetting
from viplanes.controller.openflow.admission import Limits, ListenerSecurity
from viplanes.controller.openflow.peerauth import SwitchTrust, normalize_pins
from viplanes.controller.openflow.tls import TLSFiles
from viplanes.controller.runtime.links import LinkSettings
from viplanes.settings import Settings
from viplanes.topologies.model import Topology

_ADMISSION = "viplanes.openflow_admission"  # ctx.meta key: the admission options given
_LINKS = "viplanes.link_settings"  # ctx.meta key: the link damping options given


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep an admission option in ``ctx.meta`` (read by ``listener_security``), so that the
    commands sharing these options need no parameter of their own for each."""
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_ADMISSION, {})[param.name] = value
    return value


# (option, Limits field, type, help): the listener's admission caps (docs/switch-auth.md)
_LIMIT_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    (
        "--of-unfinished-per-prefix",
        "unfinished_per_prefix",
        click.IntRange(1),
        "connections not through TLS yet per source /24 (IPv4) or /64 (IPv6) [default: 64]",
    ),
    ("--of-unfinished-total", "unfinished_total", click.IntRange(1), "the same, in all [default: 128]"),
    ("--of-max-switches", "max_switches", click.IntRange(1), "switch connections through TLS at once [default: 512]"),
    (
        "--of-handshake-timeout",
        "tls_handshake_timeout_s",
        click.FloatRange(0.1),
        "seconds a connection may wait for, then spend in, its TLS handshake [default: 5]",
    ),
)


def _remember_link(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_LINKS, {})[param.name] = value
    return value


# (option, LinkSettings field, setting, help): flap damping and cabling probes of the live links
# (docs/dataplane.md). The setting's value (VIPLANES_LINK_*, ``[links]`` of the file; parsed with
# every other setting, a bad one exit 78) is the default; the option, when given, overrides it.
_LINK_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "--link-hold-down",
        "hold_down_s",
        "VIPLANES_LINK_HOLD_DOWN_S",
        "seconds a link that went down must stay up before lanes use it again, doubled per further drop [default: 2]",
    ),
    (
        "--link-max-hold-down",
        "max_hold_down_s",
        "VIPLANES_LINK_MAX_HOLD_DOWN_S",
        "the doubling stops here [default: 60]",
    ),
    (
        "--link-probe-interval",
        "probe_s",
        "VIPLANES_LINK_PROBE_S",
        "seconds between cabling probes on each declared link end; a link not seen both ways within "
        "5 intervals, or seen between other ports, is unverified (0: no probes) [default: 1]",
    ),
)


def link_settings(settings: Settings) -> LinkSettings:
    """The live links' damping and probes: the process's settings (VIPLANES_LINK_*), each
    overridden by its ``--link-*`` option when one was given."""
    ctx = click.get_current_context(silent=True)
    given: dict[str, Any] = dict(ctx.meta.get(_LINKS, {})) if ctx is not None else {}
    links = LinkSettings(**{field: given.get(field, settings.number(env)) for _, field, env, _ in _LINK_OPTIONS})
    if links.max_hold_down_s < links.hold_down_s:
        if given:
            raise click.BadParameter("must be at least --link-hold-down", param_hint="--link-max-hold-down")
        raise BadSetting(
            f"VIPLANES_LINK_MAX_HOLD_DOWN_S={_num(links.max_hold_down_s)}: must be at least "
            f"VIPLANES_LINK_HOLD_DOWN_S ({_num(links.hold_down_s)})"
        )
    return links


def _num(value: float) -> str:
    return f"{value:g}"


def openflow_security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--pki``, ``--insecure-tcp``, ``--switch-cert-pin``, ``--switch-deny-list``, the
    admission caps and the link damping options on a click command."""
    for flag, name, env, text in reversed(_LINK_OPTIONS):
        fn = click.option(
            flag,
            name,
            type=click.FloatRange(0, 3600),
            default=None,
            expose_value=False,
            callback=_remember_link,
            help=f"{text}; overrides {env}",
        )(fn)
    for flag, name, kind, text in reversed(_LIMIT_OPTIONS):  # click lists the last applied first
        fn = click.option(flag, name, type=kind, default=None, expose_value=False, callback=_remember, help=text)(fn)
    fn = click.option(
        "--switch-deny-list",
        "switch_deny_list",
        envvar="VIPLANES_SWITCH_DENY_LIST",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_remember,
        help="file of denied switch certificate fingerprints (viplanes pki deny), re-read when it "
        "changes [default: PKI_DIR/denied-switches]; env VIPLANES_SWITCH_DENY_LIST",
    )(fn)
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
    from viplanes.pki import denylist as pki_denylist

    ctx = click.get_current_context(silent=True)
    given: dict[str, Any] = dict(ctx.meta.get(_ADMISSION, {})) if ctx is not None else {}
    deny_list = given.pop("switch_deny_list", None)
    limits = Limits(**given)

    try:
        fleet = normalize_pins(pins)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--switch-cert-pin") from None
    trust = SwitchTrust(topology=topology, fleet_pins=fleet)
    if insecure_tcp:
        if pki_dir is not None:
            raise click.UsageError("--insecure-tcp and --pki exclude each other")
        return ListenerSecurity(tls=None, trust=trust, limits=limits)
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
    deny_path = deny_list or pki_denylist.default_path(pki_dir)
    try:
        pki_denylist.read(deny_path)  # unreadable: say so now, not at the first switch
    except pki.PKIError as exc:
        raise click.ClickException(f"--switch-deny-list {exc}") from None
    return ListenerSecurity(tls=files, trust=trust, limits=limits, deny_list=deny_path)
