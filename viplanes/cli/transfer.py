"""`viplanes transfer [lane options] -- CMD ARGS...`: a lane for exactly as long as a command runs.

The researcher's one command. It finds where CMD sends data (``viplanes.client.targets``) unless told,
holds a lane as a lease (``viplanes.client.http.LaneLease``) while CMD runs, forwards SIGINT/SIGTERM/
SIGHUP to CMD (one that comes before CMD starts releases the lane and stops the wrapper:
``SignalGate``), releases the lane the moment CMD exits and exits with CMD's exit code (128+N when
CMD died of signal N). While CMD runs the lane is read (every 2 s by default): when it loses every usable path
(``interrupted``, the reason naming the link or switch) and when it is carried again, the wrapper
says so. Without a lane CMD still runs, on the normal path, after a warning;
``--require-lane`` makes that an error instead (exit 1, or 3 when the API is unreachable).
Everything the wrapper says goes to stderr, prefixed ``viplanes:``, so CMD's output stays clean.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from viplanes.client.http import ApiClient, ApiError, LaneLease, LaneRefused
from viplanes.client.login import LoginError, bearer_for
from viplanes.client.targets import Destination, NoDestination, derive, rclone_advice
from viplanes.config import ClientConfig, ConfigError
from viplanes.domain.hostport import is_address
from viplanes.domain.values import is_decimal

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def say(message: str) -> None:
    click.echo(f"viplanes: {message}", err=True)


class Interrupted(BaseException):
    """A forwarded signal arrived before CMD ran: release what we hold, exit 128+N, run nothing."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalGate:
    """What SIGINT/SIGTERM/SIGHUP do to the wrapper, by phase, from its first line to its last.

    Before CMD runs a signal interrupts the wrapper (``Interrupted``), except inside ``held()``:
    the lane request, whose answer we must read to release the lane the server may just have
    made, and the start of CMD, which must not leave an orphan. There the signal waits for the
    end of the block. While CMD runs, a signal is forwarded to it. After CMD, signals are ignored
    so the release always finishes (it has its own timeouts). Without the gate, a SIGTERM in the
    milliseconds between "lane active" and CMD's start killed the wrapper with the lane held.
    """

    def __init__(self) -> None:
        self.child: subprocess.Popen[Any] | None = None
        self.pending: int | None = None
        self.holding = 0
        self.done = False  # CMD ended, or the wrapper was interrupted: no more interrupts
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in FORWARDED}

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.child is not None:
            if self.child.poll() is None:
                self.child.send_signal(signum)
            return
        if self.done:
            return
        if self.pending is None:
            self.pending = signum
        if not self.holding:
            self.done = True
            raise Interrupted(signum)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold signals for the block; at its end (however it ends) forward them to CMD or interrupt."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
            self._let_through()

    def _let_through(self) -> None:
        if self.holding or self.pending is None:
            return
        signum, self.pending = self.pending, None
        if self.child is not None:
            self.child.send_signal(signum)
        elif not self.done:
            self.done = True
            raise Interrupted(signum)


def local_source(host: str, port: int) -> str:
    """The address this machine would send from towards ``host`` (a UDP connect sends nothing)."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_UDP)
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.connect(addr)
        return str(sock.getsockname()[0]).split("%")[0]


def lane_body(
    dest: Destination | None,
    dst: str | None,
    dst_prefix: str | None,
    dst_ports: str | None,
    protocol: str | None,
    src: str | None,
    purpose: str | None,
    rate: float | None,
    argv: Sequence[str],
) -> dict[str, Any]:
    """The lane request for this transfer; explicit options win over what CMD revealed."""
    host = dst or (dest.host if dest and not dst_prefix else None)
    port = dest.port if dest else None
    body: dict[str, Any] = {
        "protocol": protocol or (dest.protocol if dest else "tcp"),
        "purpose": purpose or f"viplanes transfer: {' '.join(argv)[:400]}",
    }
    if dst_prefix:
        body["dst_prefix"] = dst_prefix
    elif host and is_address(host):
        body["dst_ip"] = host
    elif host:
        body["dst_host"] = host
    if dst_ports:
        items = [p.strip() for p in dst_ports.split(",")]
        body["dst_ports"] = (
            [int(p) if is_decimal(p) else p for p in items]
            if len(items) > 1
            else (int(items[0]) if is_decimal(items[0]) else items[0])
        )
    elif port is not None:
        body["dst_port"] = port
    else:
        raise NoDestination("no destination port: give --dst-ports")
    if rate is not None:
        body["rate_mbps"] = rate
    if not src:
        towards = host or (dst_prefix.split("/")[0] if dst_prefix else None)
        if towards is None:  # (no source was found this far without a destination: a crash before)
            raise NoDestination("no destination address: give --dst or --dst-prefix")
        src = local_source(towards, port or 9)
    body["src_ip"] = src
    return body


def lane_news(lane: dict[str, Any]) -> str:
    """What the researcher is told when the lane's state changes while CMD runs."""
    reason = lane.get("reason") or "no reason given"
    if lane["state"] == "interrupted":
        return (
            f"lane {lane['id']} interrupted: {reason}; the command keeps running and its packets are "
            "held until a path returns"
        )
    if lane["state"] == "active":
        return f"lane {lane['id']} resumed: {reason}"
    return f"lane {lane['id']} {lane['state']}: {reason}"


def run_forwarding(argv: Sequence[str], gate: SignalGate) -> int:
    """Run CMD with our stdio, signals forwarded by ``gate``; CMD's exit code (128+N for signal N)."""
    try:
        with gate.held():
            gate.child = child = subprocess.Popen(list(argv))
    except OSError as exc:
        say(f"cannot run {argv[0]}: {exc.strerror or exc}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    code = child.wait()
    return 128 - code if code < 0 else code


def _summary(lease: LaneLease, stats: dict[str, Any] | None, ran_s: float, released_s: float) -> str:
    head = f"lane {lease.id} released {released_s:.2f} s after the command ended"
    if not stats or not stats.get("available") or stats.get("bytes") is None:
        return head + "; the controller reported no counters"
    nbytes = int(stats["bytes"])
    rate = nbytes * 8 / ran_s / 1e6 if ran_s > 0 else 0.0
    return (
        head
        + f"; carried {nbytes} bytes ({nbytes / 1e6:.1f} MB, {stats.get('packets')} packets) in {ran_s:.1f} s, mean {rate:.1f} Mbit/s"
    )


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("--src", default=None, help="source address (default: this machine's address towards the destination)")
@click.option("--dst", default=None, help="destination address or host name (default: found in CMD)")
@click.option("--dst-prefix", default=None, help="every address of this prefix")
@click.option("--dst-ports", default=None, help='port, range or list: 443 | 50000-51000 | 5201,9000-9100')
@click.option("--protocol", type=click.Choice(["tcp", "udp"]), default=None)
@click.option("--rate", type=click.FloatRange(0, min_open=True), default=None, help="Mbit/s cap")
@click.option("--purpose", default=None)
@click.option(
    "--lease",
    "lease_s",
    type=click.IntRange(5, 3600),
    default=60,
    show_default=True,
    help="seconds the lane outlives a wrapper that dies without releasing it",
)
@click.option("--wait-timeout", type=float, default=30.0, show_default=True, help="seconds to wait for the lane")
@click.option(
    "--watch-every",
    "watch_s",
    type=click.FloatRange(0.1, 60),
    default=2.0,
    show_default=True,
    help="seconds between reads of the lane's state while CMD runs (interrupted / resumed)",
)
@click.option("--require-lane", is_flag=True, help="do not run CMD without a lane (exit 1)")
@click.option("--api-url", envvar="VIPLANES_API_URL", default=None)
@click.option("--token", envvar="VIPLANES_TOKEN", default=None)
@click.option(
    "--ca-file",
    envvar="VIPLANES_CA_FILE",
    default=None,
    help="CA the API's certificate must chain to [default: system]",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def transfer(
    src: str | None,
    dst: str | None,
    dst_prefix: str | None,
    dst_ports: str | None,
    protocol: str | None,
    rate: float | None,
    purpose: str | None,
    lease_s: int,
    wait_timeout: float,
    watch_s: float,
    require_lane: bool,
    api_url: str | None,
    token: str | None,
    ca_file: str | None,
    cmd: tuple[str, ...],
) -> None:
    """Run CMD on a VIP lane: request it, hold it while CMD runs, release it when CMD ends.

    \b
    viplanes transfer -- rclone copy data s3remote:bucket
    viplanes transfer --dst-ports 50000-51000 --dst dtn.example.org -- globus-url-copy ...
    """
    argv = list(cmd)
    gate = SignalGate()
    gate.install()
    held: list[LaneLease] = []  # the lease, as soon as it exists: an interrupt may come at any line
    try:
        advice = rclone_advice(argv)
        if advice:
            say(advice)
        _hold_lane(
            held,
            argv,
            src,
            dst,
            dst_prefix,
            dst_ports,
            protocol,
            rate,
            purpose,
            lease_s,
            (wait_timeout, watch_s),
            require_lane,
            api_url,
            token,
            ca_file,
            gate,
        )
        started = time.monotonic()
        code = run_forwarding(argv, gate)
        gate.done = True
        ended = time.monotonic()
        for lease in held:
            stats = lease.stats()  # before release: a released lane's counters are gone from the switches
            lease.release()
            say(_summary(lease, stats, ended - started, time.monotonic() - ended))
            for warning in lease.warnings:
                say(f"warning: {warning}")
    except Interrupted as stop:  # before CMD ran (the gate is done: no second interrupt)
        for lease in held:
            lease.release()
        say(
            f"{signal.Signals(stop.signum).name} before the command started: the command was not run"
            + (f", lane {held[0].id} released" if held and held[0].id else "")
        )
        code = 128 + stop.signum
    finally:
        gate.restore()
    sys.exit(code)


def _derive(argv: list[str], explicit: bool, ports: bool) -> Destination | None:
    """What CMD reveals, when the options leave something open (a given --dst still needs a port)."""
    if explicit and ports:
        return None
    try:
        return derive(argv)
    except NoDestination as exc:
        raise NoDestination("no destination port: give --dst-ports" if explicit else str(exc)) from None


def _hold_lane(
    held: list[LaneLease],
    argv: list[str],
    src: str | None,
    dst: str | None,
    dst_prefix: str | None,
    dst_ports: str | None,
    protocol: str | None,
    rate: float | None,
    purpose: str | None,
    lease_s: int,
    waits: tuple[float, float],
    require_lane: bool,
    api_url: str | None,
    token: str | None,
    ca_file: str | None,
    gate: SignalGate,
) -> None:
    """Put the lease in ``held`` before it starts; take it out again (after a warning, or exit with
    --require-lane) when there is no lane. The lane request itself holds signals (``gate.held``)."""

    def no_lane(message: str, code: int = 1) -> None:
        if require_lane:
            say(f"error: {message}")
            sys.exit(code)
        say(f"warning: {message}; running the command on the normal (firewall) path")

    try:
        dest = _derive(argv, explicit=bool(dst or dst_prefix), ports=bool(dst_ports))
        if dest is not None and not (dst or dst_prefix):
            say(f"destination {dest.host} port {dest.port}/{dest.protocol} (from {dest.how})")
        body = lane_body(dest, dst, dst_prefix, dst_ports, protocol, src, purpose, rate, argv)
        cfg = ClientConfig.load(api_url, token, ca_file)
        # the stored campus login when no API token is given: refreshed (and so the group grant's
        # membership renewed) by the lease's own extend calls while CMD runs
        api = ApiClient(cfg, bearer=bearer_for(cfg.token))
    except (NoDestination, ConfigError, LoginError) as exc:
        no_lane(str(exc))
        return
    except OSError as exc:
        no_lane(f"no route to the destination: {exc}")
        return
    wait_timeout, watch_s = waits  # (seconds to wait for the lane, between reads of its state)
    lease = LaneLease(
        api, body, lease_s=lease_s, wait_s=wait_timeout, watch_s=watch_s, on_change=lambda lane: say(lane_news(lane))
    )
    held.append(lease)
    try:
        lane = lease.start(request_guard=gate.held)
    except LaneRefused as exc:
        held.remove(lease)
        own = _own_active_lane(api, exc)
        if own is not None:
            say(
                f"your lane {own['id']} for this flow is already active: the command runs on it "
                f"(this command does not release it; it ends at {own.get('expires_at')} or with "
                f"`viplanes lane release {own['id']}`)"
            )
            return
        no_lane(f"no lane: {exc}", 3 if exc.status == 0 else 1)
        return
    where = lane.get("dst_host") or ", ".join(lane.get("dst_nets") or [str(lane.get("dst_ip"))])
    say(
        f"lane {lane['id']} active: {lane['src_ip']} -> {where} ports {', '.join(lane.get('dst_ports') or [])} "
        f"({lane.get('match_count')} matches); lease {lease_s} s, renewed every {lease.renew_s} s"
    )


def _own_active_lane(api: ApiClient, refused: LaneRefused) -> dict[str, Any] | None:
    """The caller's own identical lane when the refusal was ``duplicate_lane`` and that lane is
    active (it carries this flow already), else None."""
    lane_id = refused.details.get("lane_id")
    if refused.error != "duplicate_lane" or not isinstance(lane_id, int):
        return None
    try:
        lane = api.lane(lane_id)
    except ApiError:
        return None
    return lane if lane.get("state") == "active" else None
