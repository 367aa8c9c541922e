"""Background work per connected switch (issue 13): echoes and drift counts cost serve as little
as possible, with the same answers on the wire and the same dead-peer detection."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.openflow import flowstats
from viplanes.controller.openflow.server import GuardedDatapath


@pytest.fixture
def dp() -> Iterator[GuardedDatapath]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        peer = socket.create_connection(srv.getsockname())
        ours, _ = srv.accept()
    conn = GuardedDatapath(ours, ("127.0.0.1", 1))
    try:
        yield conn
    finally:
        conn._stopping.set()
        ours.close()
        peer.close()


def queued(conn: GuardedDatapath) -> list[bytes]:
    out = []
    while not conn.send_q.empty():
        buf, _close = conn.send_q.get_nowait()
        out.append(bytes(buf))
    return out


def test_an_echo_request_gets_os_ken_s_reply_byte_for_byte_without_its_parser(dp, monkeypatch):
    request = struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_ECHO_REQUEST, 12, 0xABCDEF) + b"ping"
    monkeypatch.setattr(ofproto_parser, "msg", lambda *a: pytest.fail("os-ken parsed an echo"))
    assert dp._answer_echo(request)
    expected = parser.OFPEchoReply(dp, data=b"ping")
    expected.xid = 0xABCDEF
    expected.serialize()
    assert queued(dp) == [bytes(expected.buf)]
    dp.unreplied_echo_requests.extend([7, 8])
    assert dp._answer_echo(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_ECHO_REPLY, 8, 7))
    assert dp.unreplied_echo_requests == [8]
    assert not dp._answer_echo(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_BARRIER_REPLY, 8, 9))


def test_a_peer_that_talks_gets_no_echo_requests(dp):
    now = time.monotonic()
    for second in range(60):  # the switch's own messages (OVS: its inactivity probe every 5 s)
        if second % 5 == 0:
            dp.last_heard = now + second
        dp.echo_tick(now + second + 0.5)
    assert queued(dp) == [] and not dp._stopping.is_set()


def test_a_silent_peer_gets_echo_requests_and_is_dropped_when_it_does_not_answer(dp):
    dp.max_unreplied_echo_requests = 2
    start = dp.last_heard
    for second in range(80):
        dp.echo_tick(start + second)
    sent = [struct.unpack_from("!BBHI", b)[1] for b in queued(dp)]
    assert sent == [ofp.OFPT_ECHO_REQUEST] * 3  # at 15, 30, 45 s; nothing back: dropped at 60
    assert dp._stopping.is_set()


def test_a_silent_peer_that_answers_the_echo_stays(dp):
    dp.max_unreplied_echo_requests = 1
    start, answered = dp.last_heard, 0
    for second in range(120):
        dp.echo_tick(start + second)
        for buf in queued(dp):  # answer each echo request the way the reader would
            xid = struct.unpack_from("!I", buf, 4)[0]
            dp._answer_echo(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_ECHO_REPLY, 8, xid))
            answered += 1
    assert answered == 7 and not dp._stopping.is_set()  # every 15 s: it answers, no more bytes


def test_one_thread_checks_every_connection(dp, monkeypatch):
    from viplanes.controller.openflow import echo

    sweeper = echo.EchoSweeper(tick_s=0.02)
    seen: list[float] = []
    monkeypatch.setattr(dp, "echo_tick", seen.append)
    before = threading.active_count()
    sweeper.add(dp)
    sweeper.add(dp)
    time.sleep(0.2)
    assert len(seen) >= 3 and threading.active_count() == before + 1
    sweeper.discard(dp)
    time.sleep(0.05)
    count = len(seen)
    time.sleep(0.1)
    assert len(seen) == count


def test_the_drift_probe_s_aggregate_reply_decodes_like_os_ken():
    body = struct.pack(ofp.OFP_AGGREGATE_STATS_REPLY_PACK_STR, 10, 1500, 4242)
    raw = (
        struct.pack("!BBHIHH4x", ofp.OFP_VERSION, ofp.OFPT_MULTIPART_REPLY, 16 + len(body), 5, ofp.OFPMP_AGGREGATE, 0)
        + body
    )
    entries, more = flowstats.decode_flow_stats_reply(raw)
    theirs = parser.OFPAggregateStats.parser(raw, ofp.OFP_MULTIPART_REPLY_SIZE)  # os-ken's body
    assert not more and len(entries) == 1
    assert entries[0].flow_count == theirs.flow_count == 4242
    assert tuple(entries[0]) == tuple(theirs)
    assert flowstats.decode_flow_stats_reply(raw[:30]) is None  # short: os-ken decides


class CountingSocket:
    """A socket that counts ``recv`` calls (each one a wake-up of the connection's reader)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.recvs = sock, 0

    def recv(self, size: int) -> bytes:
        self.recvs += 1
        return self.sock.recv(size)

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


def test_an_idle_reader_sleeps_through_the_socket_timeout_and_wakes_for_bytes(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as srv:
        peer = socket.create_connection(srv.getsockname())
        ours, _ = srv.accept()
    counting = CountingSocket(ours)
    conn = GuardedDatapath(counting, ("127.0.0.1", 1))
    conn.socket.settimeout(0.02)  # os-ken's is 5 s: an idle reader woke up every 5 s
    reader = threading.Thread(target=conn._recv_loop, daemon=True)
    try:
        reader.start()
        time.sleep(0.5)
        assert counting.recvs == 0  # was ~25 here: one per socket timeout
        peer.sendall(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_ECHO_REQUEST, 8, 77))
        deadline = time.monotonic() + 2
        while conn.send_q.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        # (before the hello exchange os-ken answers in its highest version, so do we)
        version = conn.ofproto.OFP_VERSION
        assert queued(conn) == [struct.pack("!BBHI", version, ofp.OFPT_ECHO_REPLY, 8, 77)]
        assert counting.recvs == 1
        conn.shutdown()  # still ends the reader at once
        reader.join(2)
        assert not reader.is_alive()
    finally:
        conn._stopping.set()
        ours.close()
        peer.close()


def test_a_tls_reader_sees_records_already_read_off_the_socket(tmp_path):
    import ssl

    from viplanes import pki
    from viplanes.controller.openflow.tls import ContextSource, TLSChannel, TLSFiles

    pki.init(tmp_path)
    pki.issue_switch(tmp_path, "host1", [1])
    files = TLSFiles(tmp_path / "ca.crt", tmp_path / "controller.crt", tmp_path / "controller.key")
    server_side, client_side = socket.socketpair()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(str(tmp_path / "switch-host1.crt"), str(tmp_path / "switch-host1.key"))
    channel = TLSChannel(server_side, ContextSource(files).get())
    shaking = threading.Thread(target=channel.handshake, args=(5.0,))
    shaking.start()
    with ctx.wrap_socket(client_side) as client:
        shaking.join(5)
        client.sendall(b"first")
        client.sendall(b"second")  # two records, on the socket before the reader looks
        time.sleep(0.2)
        got = channel.recv(65536)
        while got != b"firstsecond":
            assert channel.readable_within(0), "a record already read waits for the socket"
            got += channel.recv(65536)
        assert not channel.readable_within(0.05)
        client.sendall(b"third")
        assert channel.readable_within(2) and channel.recv(65536) == b"third"
    server_side.close()
