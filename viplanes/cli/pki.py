"""`viplanes pki ...`: make and rotate the campus OpenFlow certificates (see ``viplanes.pki``)."""

from __future__ import annotations

from pathlib import Path

import click

from viplanes import pki
from viplanes.pki import denylist as pki_denylist

_DIR = click.option(
    "--dir",
    "pki_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="PKI directory (ca.crt, controller.crt, switch-NAME.crt, keys 0600)",
)


def _dpid(text: str) -> int:
    try:
        value = int(text, 0) if text.lower().startswith("0x") else int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a datapath id (decimal or 0x-hex)") from None
    if not 0 < value < 1 << 64:
        raise click.BadParameter(f"{text!r} is out of range (1 .. 2^64-1)")
    return value


def _switch_instructions(pki_dir: Path, name: str, issued: pki.Issued, dpids: list[int]) -> None:
    d = pki_dir.resolve()
    click.echo(f"switch certificate {issued.cert_path} (key {issued.key_path})")
    click.echo(f"dpids: {', '.join(f'{x} ({pki.dpid_urn(x)})' for x in dpids)}")
    click.echo(f"sha256 pin: {issued.sha256}")
    click.echo("topology pin (optional; without it the dpids in the certificate authorize it):")
    click.echo(f"  cert_sha256: {issued.sha256}")
    click.echo(f"on the switch host (copy {name}'s key and cert and ca.crt there first):")
    click.echo("  ovs-vsctl get-ssl   # set-ssl REPLACES this vswitchd's one SSL setting, for every bridge:")
    click.echo("                      # run the next line only when it prints nothing (or these files)")
    click.echo(f"  ovs-vsctl set-ssl {d / f'switch-{name}.key'} {d / f'switch-{name}.crt'} {d / pki.CA_CERT}")
    for dpid in dpids:  # the bridge's dpid must be the certificate's (and the topology's)
        click.echo(f"  ovs-vsctl set bridge BRIDGE other-config:datapath-id={dpid:016x}   # one bridge per dpid")
    click.echo("  ovs-vsctl set-fail-mode BRIDGE secure   # standalone forwards around the lanes when we are away")
    click.echo("  ovs-vsctl set-controller BRIDGE ssl:CONTROLLER_HOST:6653")
    click.echo("when get-ssl names other files, another controller on this host uses TLS: do not replace")
    click.echo("them (its switches would fail); see docs/switch-auth.md, 'A vswitchd shared with others': give the")
    click.echo("lane bridges a vswitchd of their own (deploy/ovs-lanes, docs/switches.md)")


def _fail(exc: Exception) -> None:
    raise click.ClickException(str(exc)) from None


@click.group()
def pki_group() -> None:
    """Campus CA and certificates for OpenFlow over TLS."""


@pki_group.command("init")
@_DIR
@click.option(
    "--host",
    "hosts",
    multiple=True,
    default=("localhost", "127.0.0.1"),
    show_default=True,
    help="name or address the switches reach the controller at (repeatable)",
)
def init_cmd(pki_dir: Path, hosts: tuple[str, ...]) -> None:
    """Create the campus CA and the controller's certificate."""
    try:
        ca, ctl = pki.init(pki_dir, hosts)
    except (pki.PKIError, OSError, ValueError) as exc:
        _fail(exc)
    click.echo(f"campus CA {ca.cert_path} (key {ca.key_path}: keep it offline in production)")
    click.echo(f"controller certificate {ctl.cert_path} (key {ctl.key_path})")
    click.echo(f"start the controller with: viplanes serve --pki {pki_dir.resolve()}")


@pki_group.command("switch")
@_DIR
@click.option("--name", required=True, help="the switch host (one ovs-vswitchd = one certificate)")
@click.option("--dpid", "dpids", multiple=True, required=True, help="datapath id this vswitchd may claim (repeatable)")
def switch_cmd(pki_dir: Path, name: str, dpids: tuple[str, ...]) -> None:
    """Issue a switch (ovs-vswitchd) certificate naming its datapath ids."""
    values = sorted({_dpid(d) for d in dpids})
    try:
        if (pki_dir / f"switch-{name}.crt").exists():
            raise pki.PKIError(f"switch-{name}.crt exists; use `viplanes pki rotate switch`")
        issued = pki.issue_switch(pki_dir, name, values)
    except (pki.PKIError, OSError) as exc:
        _fail(exc)
    _switch_instructions(pki_dir, name, issued, values)


@pki_group.group("rotate")
def rotate() -> None:
    """Re-issue a certificate without dropping lanes.

    Open TLS sessions stay up: a certificate is only checked at connect. The controller reloads
    its own certificate files at the next connection; a switch uses its new certificate the next
    time it connects (ovs-vswitchd re-reads the files it was given). With a pin in the topology,
    list both fingerprints (cert_sha256: [OLD, NEW]) before the switch reconnects, then drop OLD.
    """


@rotate.command("controller")
@_DIR
@click.option("--host", "hosts", multiple=True, default=("localhost", "127.0.0.1"), show_default=True)
def rotate_controller(pki_dir: Path, hosts: tuple[str, ...]) -> None:
    """Re-issue controller.crt/key (same CA); used for every connection from now on."""
    try:
        old = pki.cert_sha256(pki.load_cert(pki_dir / pki.CONTROLLER_CERT))
        issued = pki.issue_controller(pki_dir, hosts)
    except (pki.PKIError, OSError) as exc:
        _fail(exc)
    click.echo(f"controller certificate re-issued: {issued.cert_path}")
    click.echo(f"old sha256 {old}\nnew sha256 {issued.sha256}")
    click.echo("switches already connected keep their sessions; new connections get the new one")


@rotate.command("switch")
@_DIR
@click.option("--name", required=True)
@click.option("--dpid", "dpids", multiple=True, required=True)
def rotate_switch(pki_dir: Path, name: str, dpids: tuple[str, ...]) -> None:
    """Re-issue switch-NAME.crt/key; prints both pins for the rotation window."""
    values = sorted({_dpid(d) for d in dpids})
    try:
        old = pki.cert_sha256(pki.load_cert(pki_dir / f"switch-{name}.crt"))
        issued = pki.issue_switch(pki_dir, name, values)
    except (pki.PKIError, OSError) as exc:
        _fail(exc)
    _switch_instructions(pki_dir, name, issued, values)
    click.echo(f"rotation window pin: cert_sha256: [{old}, {issued.sha256}]")


# exit codes of the deny-list commands (1: any other PKI error, 2: click usage)
EXIT_BAD_ARGUMENT = 3  # neither a fingerprint nor a certificate file
EXIT_NOT_DENIED = 4  # `pki undeny` of a fingerprint not on the list

_DENY_FILE = click.option(
    "--file",
    "deny_file",
    envvar="VIPLANES_SWITCH_DENY_LIST",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the deny-list (default: DIR/denied-switches, what `serve --pki DIR` reads); env VIPLANES_SWITCH_DENY_LIST",
)
_DENY_DIR = click.option(
    "--dir",
    "pki_dir",
    envvar="VIPLANES_PKI",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="PKI directory holding the deny-list; env VIPLANES_PKI",
)


def _deny_path(pki_dir: Path | None, deny_file: Path | None) -> Path:
    if deny_file is not None:
        return deny_file
    if pki_dir is None:
        raise click.UsageError("give --dir PKI_DIR (or --file DENY_LIST)")
    return pki_denylist.default_path(pki_dir)


def _exit(message: str, code: int) -> None:
    click.echo(f"Error: {message}", err=True)
    raise SystemExit(code)


@pki_group.command("deny")
@_DENY_DIR
@_DENY_FILE
@click.argument("target", metavar="FINGERPRINT|CERTFILE")
def deny_cmd(pki_dir: Path | None, deny_file: Path | None, target: str) -> None:
    """Deny a switch certificate: the controller refuses it and drops a switch using it within
    seconds, without a restart."""
    path = _deny_path(pki_dir, deny_file)
    try:
        fp, what = pki_denylist.fingerprint_of(target)
    except pki.PKIError as exc:
        _exit(str(exc), EXIT_BAD_ARGUMENT)
    try:
        added = pki_denylist.deny(path, fp, what)
    except (pki.PKIError, OSError) as exc:
        _fail(exc)
    click.echo(f"{'denied' if added else 'already denied'}: {fp} ({path})")


@pki_group.command("undeny")
@_DENY_DIR
@_DENY_FILE
@click.argument("target", metavar="FINGERPRINT|CERTFILE")
def undeny_cmd(pki_dir: Path | None, deny_file: Path | None, target: str) -> None:
    """Take a certificate off the deny-list (its switch may connect again)."""
    path = _deny_path(pki_dir, deny_file)
    try:
        fp, _ = pki_denylist.fingerprint_of(target)
    except pki.PKIError as exc:
        _exit(str(exc), EXIT_BAD_ARGUMENT)
    try:
        removed = pki_denylist.undeny(path, fp)
    except (pki.PKIError, OSError) as exc:
        _fail(exc)
    if not removed:
        _exit(f"{fp} is not on the deny-list {path}", EXIT_NOT_DENIED)
    click.echo(f"no longer denied: {fp} ({path})")


@pki_group.command("denied")
@_DENY_DIR
@_DENY_FILE
def denied_cmd(pki_dir: Path | None, deny_file: Path | None) -> None:
    """List the denied certificate fingerprints, one a line with its note."""
    path = _deny_path(pki_dir, deny_file)
    try:
        entries = pki_denylist.read(path)
    except pki.PKIError as exc:
        _fail(exc)
    for fp, note in entries.items():
        click.echo(f"{fp}  {note}".rstrip())
