"""Firefly datagrams: the scitags format parsed, every bad one counted and none a traceback, and a
real UDP listener handing sightings to its sink."""

from __future__ import annotations

import json
import socket
import time
from ipaddress import ip_address

import pytest

from viplanes.detection.firefly import MAX_DATAGRAM, BadFirefly, FireflyListener, parse_firefly
from viplanes.domain.sighting import SightingKind, SightingState

HEADER = b"<134>1 2026-11-26T18:00:00Z dtn flowd - firefly-json - "


def firefly(state: str = "start", **flow: object) -> bytes:
    doc = {
        "version": 1,
        "flow-lifecycle": {"state": state, "start-time": "2026-11-26T18:00:00+00:00"},
        "flow-id": {
            "afi": "ipv4",
            "src-ip": "198.51.100.30",
            "dst-ip": "203.0.113.10",
            "protocol": "tcp",
            "src-port": 45000,
            "dst-port": 9000,
            **flow,
        },
        "context": {"experiment-id": 3, "activity-id": 1, "application": "xrootd"},
    }
    return HEADER + json.dumps(doc).encode()


def test_a_scitags_firefly_becomes_a_sighting():
    s = parse_firefly(firefly("end"), "198.51.100.30", 5.0)
    assert s.kind is SightingKind.FIREFLY and s.state is SightingState.END
    assert (s.src_ip, s.dst_ip, s.protocol, s.src_port, s.dst_port) == (
        ip_address("198.51.100.30"),
        ip_address("203.0.113.10"),
        6,
        45000,
        9000,
    )
    assert s.reporter == ip_address("198.51.100.30") and s.observed_at == 5.0
    assert s.evidence == {"experiment": "3", "activity": "1", "application": "xrootd"}
    # a v4 sender on a dual-stack socket arrives as ::ffff:a.b.c.d
    assert parse_firefly(firefly(), "::ffff:198.51.100.30", 0).reporter == ip_address("198.51.100.30")


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"<134>1 no json here", "bad_json"),
        (HEADER + b"{not json", "bad_json"),
        (HEADER + b"[1, 2]", "bad_json"),
        (HEADER + b'{"a": "\xff\xfe"}', "bad_json"),
        (HEADER + b"{" * 100_000, "too_big"),
        (HEADER + b'{"a":' + b"[" * 1400, "bad_json"),  # deep nesting: no RecursionError out
        (firefly(state="paused"), "bad_field"),
        (firefly(protocol="sctp"), "bad_field"),
        (firefly(**{"src-ip": "not-an-address"}), "bad_field"),
        (firefly(**{"dst-ip": "2001:db8::1"}), "bad_field"),
        (firefly(**{"dst-port": 70000}), "bad_field"),
        (firefly(**{"src-port": "45000"}), "bad_field"),
        (firefly(**{"src-port": True}), "bad_field"),
        (HEADER + json.dumps({"flow-id": [], "flow-lifecycle": {}}).encode(), "bad_field"),
    ],
)
def test_bad_datagrams_are_refused_with_a_reason(data, code):
    with pytest.raises(BadFirefly) as err:
        parse_firefly(data, "198.51.100.30", 0)
    assert err.value.code == code


def test_the_listener_counts_bad_datagrams_and_offers_good_ones():
    got = []

    class Sink:
        def offer(self, s):
            got.append(s)

    listener = FireflyListener(Sink(), "127.0.0.1", 0)
    listener.start()
    try:
        out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for data in (b"garbage", HEADER + b"{bad", b"x" * (MAX_DATAGRAM + 100), firefly()):
            out.sendto(data, listener.address)
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        out.close()
    finally:
        listener.stop()
    assert len(got) == 1 and got[0].reporter == ip_address("127.0.0.1")
    assert listener.counts["bad_json"] == 2 and listener.counts["too_big"] == 1


def test_fireflies_made_by_flowd_parse():
    """Two datagrams built by flowd 1.1.4's own encoder (``scitags.backends.udp_firefly``: its
    syslog header and ``firefly_json``), start and end, kept as a fixture."""
    from tests.support.paths import REPO

    path = REPO / "tests" / "unit" / "fixtures" / "auto" / "flowd-1.1.4-fireflies.txt"
    start, end = (parse_firefly(line.encode(), "198.51.100.30", 0) for line in path.read_text().splitlines())
    assert (start.state, end.state) == (SightingState.START, SightingState.END)
    assert (start.src_port, start.dst_port, str(start.dst_ip)) == (45000, 5201, "203.0.113.10")
    assert start.evidence == {"experiment": "3", "activity": "1", "application": "flowd v1.1.4"}
