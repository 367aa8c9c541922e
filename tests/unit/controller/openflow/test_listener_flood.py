"""Abuse of the OpenFlow listener by peers that never finish a handshake (issue 28, item 2): a flood
of idle connections from many source prefixes, a slowloris trickling TLS bytes, and many hosts of
one /24. A switch with a campus certificate must still get through on every reconnect.

On the code before ``preadmit`` these failed: the flood held the listener at its 512-connection
cap (8 handshakes + 256 waiting per address, any number of addresses), so the switch was refused.
"""

from __future__ import annotations

import math
import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.support import handshake_flood
from tests.support.fake_switches import client_context
from viplanes.controller.openflow.tls import TLSFiles

FLOOD_SOURCES = [f"127.{n}.0.1" for n in range(10, 20)]  # ten /24s, one address each
FLOOD_PER_SOURCE = 70  # 700 in all: over the old 512 cap, over the new 64 per /24 and 128 in all


def _listener(campus_pki: Path, handshake_s: float | None = None):
    from os_ken.lib import hub

    from viplanes.controller.openflow.admission import Limits, ListenerSecurity
    from viplanes.controller.openflow.server import OpenFlowServer

    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    limits = Limits() if handshake_s is None else Limits(tls_handshake_timeout_s=handshake_s)
    server = OpenFlowServer("0.0.0.0", 0, ListenerSecurity(tls=files, limits=limits))
    hub.spawn(server.serve_forever)
    return server


def _switch_gets_hello(port: int, ctx: ssl.SSLContext, timeout_s: float = 2.0) -> bool:
    """One connect as a switch: TLS with a campus certificate, then the controller's OFPT_HELLO."""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        with raw, ctx.wrap_socket(raw) as tls:
            data = tls.recv(8)
            return len(data) >= 2 and data[1] == 0  # OFPT_HELLO
    except (ssl.SSLError, OSError):
        return False


def _reconnects(port: int, ctx: ssl.SSLContext, times: int) -> list[float]:
    """Reconnect ``times`` times like OVS (retry after 1 s, its backoff with max_backoff=1000);
    the seconds each took, or -1 when three tries all failed."""
    took = []
    for _ in range(times):
        t0 = time.monotonic()
        for _attempt in range(3):
            if _switch_gets_hello(port, ctx):
                took.append(time.monotonic() - t0)
                break
            time.sleep(1.0)
        else:
            took.append(-1.0)
        time.sleep(0.2)
    return took


@pytest.mark.parametrize("mode", ["idle", "slow"])
def test_a_switch_gets_in_on_every_reconnect_under_a_flood_of_unfinished_handshakes(campus_pki, mode, caplog):
    """...and the flood's refusals do not each write a log line (before: ~1,000 lines/s)."""
    caplog.set_level("WARNING", logger="viplanes.controller.openflow.server")
    server = _listener(campus_pki)
    port = server.address[1]
    ctx = client_context(campus_pki / "ca.crt", campus_pki / "switch-host1.crt", campus_pki / "switch-host1.key")
    # the flood lasts as long as the reconnects (stopped after them; 60 s at most)
    flood = handshake_flood.start("127.0.0.1", port, 60.0, FLOOD_PER_SOURCE, mode, FLOOD_SOURCES)
    t0 = time.monotonic()
    try:
        time.sleep(2.0)  # the flood is at full strength
        took = _reconnects(port, ctx, 8)
        print(f"{mode} flood: switch reconnects took {[round(t, 2) for t in took]} s")
        assert flood.poll() is None, "the flood ended before the reconnects did"
        stats = handshake_flood.stop(flood)
        lasted = time.monotonic() - t0
        print(f"{mode} flood: {stats}")
        assert stats["opened"] >= len(FLOOD_SOURCES) * FLOOD_PER_SOURCE
        assert all(t >= 0 for t in took), took  # refused three times in a row: locked out
        refusals = sum("refusing OpenFlow connection" in r.getMessage() for r in caplog.records)
        print(f"{mode} flood: {refusals} refusals logged")
        assert refusals <= 20 * (math.ceil(lasted / 10) + 1), (refusals, lasted)  # 20 lines per 10 s
    finally:
        if flood.poll() is None:
            flood.kill()
            flood.wait()
        server.close()


def test_a_slowloris_is_closed_at_the_handshake_deadline(campus_pki):
    """Bytes that trickle in keep nothing open past ``tls_handshake_timeout_s`` (5 s default; 2 s
    here, so the test does not wait out the default)."""
    server = _listener(campus_pki, handshake_s=2.0)
    try:
        sock = socket.create_connection(("127.0.0.1", server.address[1]), timeout=1)
        t0 = time.monotonic()
        closed_at = None
        for byte in handshake_flood.TLS_RECORD_START * 3:
            try:
                sock.send(bytes([byte]))
                sock.settimeout(0.4)
                if sock.recv(1) == b"":
                    closed_at = time.monotonic() - t0
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_at = time.monotonic() - t0
                break
        sock.close()
        assert closed_at is not None and closed_at < 2.0 + 1.5, closed_at
    finally:
        server.close()


def test_many_hosts_of_one_slash24_share_its_budget_of_unfinished_handshakes(campus_pki):
    """Twenty addresses of 127.0.0.0/24, ten idle connections each: no more than 64 stay open
    (the old per-address limit let all 200 stay), and a switch from another /24 still gets in."""
    server = _listener(campus_pki)
    port = server.address[1]
    ctx = client_context(campus_pki / "ca.crt", campus_pki / "switch-host1.crt", campus_pki / "switch-host1.key")
    conns = []
    try:
        for n in range(11, 31):
            for _ in range(10):
                s = socket.socket()
                s.bind((f"127.0.0.{n}", 0))
                s.connect(("127.0.0.1", port))
                conns.append(s)
        time.sleep(1.0)
        open_ = 0
        for s in conns:
            s.settimeout(0.01)
            try:
                if s.recv(1) != b"":
                    open_ += 1
            except TimeoutError:
                open_ += 1
            except OSError:
                pass
        print(f"one /24, 200 idle connections: {open_} still open after 1 s")
        assert open_ <= 64, open_
        assert _switch_gets_hello_from(port, ctx, "127.9.0.1")
    finally:
        for s in conns:
            s.close()
        server.close()


def _switch_gets_hello_from(port: int, ctx: ssl.SSLContext, source: str) -> bool:
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(source, 0))
        with raw, ctx.wrap_socket(raw) as tls:
            data = tls.recv(8)
            return len(data) >= 2 and data[1] == 0
    except (ssl.SSLError, OSError):
        return False


def test_ipv6_sources_share_their_slash64_on_a_dual_stack_listener(campus_pki):
    """100 idle connections from ::1 (its /64) on a listener bound to "::": at most 64 stay open,
    and an IPv4 switch (seen as ::ffff:127.0.0.1, counted as 127.0.0.0/24) still gets in."""
    from os_ken.lib import hub

    from viplanes.controller.openflow.admission import ListenerSecurity
    from viplanes.controller.openflow.server import OpenFlowServer

    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    server = OpenFlowServer("::", 0, ListenerSecurity(tls=files))
    hub.spawn(server.serve_forever)
    port = server.address[1]
    ctx = client_context(campus_pki / "ca.crt", campus_pki / "switch-host1.crt", campus_pki / "switch-host1.key")
    conns = [socket.create_connection(("::1", port)) for _ in range(100)]
    try:
        time.sleep(1.0)
        open_ = 0
        for s in conns:
            s.settimeout(0.01)
            try:
                open_ += s.recv(1) != b""
            except TimeoutError:
                open_ += 1
            except OSError:
                pass
        print(f"::1, 100 idle connections: {open_} still open after 1 s")
        assert open_ <= 64, open_
        assert _switch_gets_hello(port, ctx)
    finally:
        for s in conns:
            s.close()
        server.close()


def test_a_known_switch_gets_in_under_a_flood_from_its_own_slash24(campus_pki):
    """Issue 41: an attacker at 127.0.0.2 holding 127.0.0.0/24's 64 places got the switch at
    127.0.0.1 0 of 17 reconnects. A switch address that finished TLS before takes a stranger's
    place in its own /24."""
    server = _listener(campus_pki)
    port = server.address[1]
    ctx = client_context(campus_pki / "ca.crt", campus_pki / "switch-host1.crt", campus_pki / "switch-host1.key")
    assert _switch_gets_hello_from(port, ctx, "127.0.0.1")  # its first connection: known from now on
    flood = handshake_flood.start("127.0.0.1", port, 60.0, FLOOD_PER_SOURCE, "idle", ["127.0.0.2"])
    try:
        time.sleep(2.0)  # the flood holds every place of 127.0.0.0/24
        took = _reconnects(port, ctx, 8)
        print(f"same-/24 flood: switch reconnects took {[round(t, 2) for t in took]} s")
        assert all(t >= 0 for t in took), took
        assert flood.poll() is None, "the flood ended before the reconnects did"
    finally:
        if flood.poll() is None:
            flood.kill()
        flood.wait()
        server.close()
