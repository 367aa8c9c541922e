"""The OpenFlow listener's admission of connections before and during the TLS handshake: a cap
per source address on handshakes in progress, a bounded wait for a place beyond it (a lab's
switches all connect from 127.0.0.1), and a deadline that covers the wait (issue 13)."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from viplanes.controller.openflow.peerauth import SourceLimiter
from viplanes.controller.openflow.tls import TLSFiles


def test_source_limiter_caps_pending_handshakes_per_address():
    limiter = SourceLimiter(2)
    assert limiter.admit("10.0.0.1") and limiter.admit("10.0.0.1")
    assert not limiter.admit("10.0.0.1") and limiter.admit("10.0.0.2")
    limiter.done("10.0.0.1")
    assert limiter.admit("10.0.0.1")


def test_source_limiter_hands_a_freed_place_to_the_first_waiting_connection():
    limiter = SourceLimiter(1, queue_limit=2)
    assert limiter.admit("10.0.0.1") and not limiter.admit("10.0.0.1")
    assert limiter.wait("10.0.0.1", "b") and limiter.wait("10.0.0.1", "c")
    assert not limiter.wait("10.0.0.1", "d")  # the queue is full: closed at once
    assert limiter.waiting_count() == 2
    assert limiter.done("10.0.0.1") == "b"  # the place passes on, still counted as pending
    assert not limiter.admit("10.0.0.1")
    assert limiter.done("10.0.0.1") == "c" and limiter.done("10.0.0.1") is None
    assert limiter.pending == {} and limiter.waiting == {} and limiter.admit("10.0.0.1")


def _listener(campus_pki: Path, **limits: float):
    from os_ken.lib import hub

    from viplanes.controller.openflow.admission import Limits, ListenerSecurity
    from viplanes.controller.openflow.server import OpenFlowServer

    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    server = OpenFlowServer("127.0.0.1", 0, ListenerSecurity(tls=files, limits=Limits(**limits)))
    hub.spawn(server.serve_forever)
    return server


def test_listener_caps_connections_per_address_still_in_the_tls_handshake(campus_pki):
    server = _listener(campus_pki, pending_per_source=3, queued_per_source=1, tls_handshake_timeout_s=5.0)
    silent = []
    try:
        for _ in range(5):  # connect, never say a TLS word
            silent.append(socket.create_connection(server.address, timeout=2))
        silent[-1].settimeout(2)
        assert silent[-1].recv(1) == b""  # the fifth is closed at once (three in handshake, one waits)
        silent[3].settimeout(0.3)
        with pytest.raises(socket.timeout):  # the fourth waits for a place, open
            silent[3].recv(1)
        silent[0].settimeout(0.3)
        with pytest.raises(socket.timeout):  # the first three wait for their handshake deadline
            silent[0].recv(1)
    finally:
        for s in silent:
            s.close()
        server.close()


def test_a_waiting_switch_gets_its_handshake_when_a_place_frees(campus_pki):
    """A lab's switches all connect from 127.0.0.1: one over the per-address limit waits for a
    place instead of being closed (and coming back only after OVS's reconnect backoff)."""
    server = _listener(campus_pki, pending_per_source=1, queued_per_source=1, tls_handshake_timeout_s=5.0)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(campus_pki / "ca.crt"))
    ctx.load_cert_chain(str(campus_pki / "switch-host1.crt"), str(campus_pki / "switch-host1.key"))
    hog = socket.create_connection(server.address, timeout=2)  # holds the one place, silent
    done: dict = {}

    def switch() -> None:
        try:
            with ctx.wrap_socket(socket.create_connection(server.address, timeout=4)) as tls:
                done["version"] = tls.version()
        except (ssl.SSLError, OSError) as exc:
            done["error"] = exc

    try:
        thread = threading.Thread(target=switch)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive() and not done  # waiting, neither refused nor served
        hog.close()  # its handshake fails at once: the place passes to the waiting switch
        thread.join(4)
        assert done.get("version", "").startswith("TLS"), done
        assert server.handshakes.waiting == {}
    finally:
        hog.close()
        server.close()


def test_a_connection_that_waited_its_whole_deadline_is_closed_without_a_handshake(campus_pki, caplog):
    server = _listener(campus_pki, pending_per_source=1, queued_per_source=4, tls_handshake_timeout_s=0.4)
    hog = socket.create_connection(server.address, timeout=2)
    first, second = (socket.create_connection(server.address, timeout=2) for _ in range(2))
    try:
        # the hog's handshake times out at 0.4 s; the first waiter then gets (about) a handshake of
        # its own; the second, by then waiting for 0.8 s, is closed without one
        with caplog.at_level("WARNING", logger="viplanes.controller.openflow.server"):
            for conn in (first, second):
                conn.settimeout(3)
                assert conn.recv(1) == b""
        assert any("for a handshake place" in r.getMessage() for r in caplog.records), caplog.text
        deadline = time.monotonic() + 2  # the place is freed right after the close the peer saw
        while server.handshakes.pending and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.handshakes.pending == {} and server.handshakes.waiting == {}
    finally:
        for conn in (hog, first, second):
            conn.close()
        server.close()


def test_handshakes_in_flight_count_the_running_and_the_waiting_until_each_ends(campus_pki):
    """Reconciles wait on this gauge after a restart (``handshakes``): it must count a connection
    from accept to the end of its handshake, queued or running, and come back to zero."""
    server = _listener(campus_pki, pending_per_source=1, queued_per_source=2, tls_handshake_timeout_s=5.0)
    gauge = server.in_handshake

    def settles_at(n: int) -> bool:
        deadline = time.monotonic() + 2
        while gauge.in_flight != n and time.monotonic() < deadline:
            time.sleep(0.01)
        return gauge.in_flight == n

    hog = socket.create_connection(server.address, timeout=2)  # in its handshake, silent
    waiter = socket.create_connection(server.address, timeout=2)  # queued behind it
    late = socket.create_connection(server.address, timeout=2)  # queued too
    try:
        assert settles_at(3)
        assert not gauge.wait_idle(0.1)  # busy: a reconcile would wait
        hog.close()  # its handshake fails: the place passes to the waiter, still in flight
        assert settles_at(2)
        waiter.close()  # the same, to the last one
        assert settles_at(1)
        late.close()
        assert settles_at(0) and gauge.wait_idle(0.1)
    finally:
        for conn in (hog, waiter, late):
            conn.close()
        server.close()


def test_closing_the_listener_stops_counting_the_connections_it_drops(campus_pki):
    server = _listener(campus_pki, pending_per_source=1, queued_per_source=2, tls_handshake_timeout_s=5.0)
    conns = [socket.create_connection(server.address, timeout=2) for _ in range(3)]
    try:
        deadline = time.monotonic() + 2
        while server.in_handshake.in_flight != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.in_handshake.in_flight == 3
        server.close()  # the two queued are closed at once; the first is in its handshake
        assert server.in_handshake.in_flight == 1
        conns[0].close()
        assert server.in_handshake.wait_idle(2)
    finally:
        for conn in conns:
            conn.close()
        server.close()
