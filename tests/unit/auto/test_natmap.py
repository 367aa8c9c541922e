"""The NAT pairing (``viplanes/auto/natmap.py``): a pre-NAT sampled flow gets a proposed mapping
only from exactly one post-NAT flow of the same destination, port and protocol, seen at about
the same time and rate; the counters of two watch flows must then agree."""

from __future__ import annotations

import dataclasses
from ipaddress import ip_address
from typing import Any

import pytest

from viplanes.auto.natmap import NatPairing, confirmed, watches_for
from viplanes.domain.sighting import Sighting, SightingKind, SightingState
from viplanes.domain.values import FlowWatch, NatMapping, WatchMark
from viplanes.topologies.model import Topology

NAT_BOX = "198.51.100.2"
CLOUD = "203.0.113.10"


def seen(
    src: str, sport: int, *, dst: str = CLOUD, dport: int = 5201, rate: float = 15e6, at: float = 10.0
) -> Sighting:
    return Sighting(
        kind=SightingKind.SFLOW,
        state=SightingState.ONGOING,
        src_ip=ip_address(src),
        dst_ip=ip_address(dst),
        protocol=6,
        src_port=sport,
        dst_port=dport,
        observed_at=at,
        rate_bps=rate,
    )


@pytest.fixture
def pairing() -> NatPairing:
    return NatPairing(frozenset({ip_address(NAT_BOX)}))


def pre(**kw: Any) -> Sighting:
    return seen("10.1.0.10", 40000, **kw)


def test_a_unique_pair_is_proposed(pairing: NatPairing) -> None:
    assert pairing.note(seen(NAT_BOX, 51234, rate=14e6, at=10.2))
    found = pairing.pair(pre())
    assert (found.mapping, found.reason) == (NatMapping(NAT_BOX, 51234), "paired")


def test_no_post_nat_flow_no_pair(pairing: NatPairing) -> None:
    found = pairing.pair(pre())
    assert (found.mapping, found.reason) == (None, "nat_unpaired")


def test_two_candidates_are_ambiguous(pairing: NatPairing) -> None:
    """Two connections through the NAT to the same place at about the same rate: which is ours
    is unknowable from samples, so neither is taken over."""
    pairing.note(seen(NAT_BOX, 51234))
    pairing.note(seen(NAT_BOX, 51299, rate=16e6))
    found = pairing.pair(pre())
    assert (found.mapping, found.reason) == (None, "nat_ambiguous")


def test_a_rate_far_from_ours_does_not_pair(pairing: NatPairing) -> None:
    pairing.note(seen(NAT_BOX, 51234, rate=2e6))
    found = pairing.pair(pre(rate=15e6))
    assert (found.mapping, found.reason) == (None, "nat_rate_mismatch")


def test_a_rate_mismatch_leaves_the_one_alike(pairing: NatPairing) -> None:
    pairing.note(seen(NAT_BOX, 51234, rate=15e6))
    pairing.note(seen(NAT_BOX, 52000, rate=1e6))  # a mouse to the same place: not ours
    assert pairing.pair(pre()).mapping == NatMapping(NAT_BOX, 51234)


@pytest.mark.parametrize(
    "forged",
    [
        {"dst": "203.0.113.11"},  # another host's destination
        {"dport": 443},  # another port
        {"at": 13.0},  # outside the window
    ],
)
def test_a_post_nat_flow_elsewhere_or_older_does_not_pair(pairing: NatPairing, forged: dict[str, Any]) -> None:
    """A forged (or real) post-NAT sample naming another destination, port or moment is no
    candidate for this connection."""
    pairing.note(seen(NAT_BOX, 51234, **forged))
    assert pairing.pair(pre()).reason == "nat_unpaired"


def test_only_nat_boxes_are_candidates(pairing: NatPairing) -> None:
    assert not pairing.note(seen("198.51.100.30", 51234))  # the DTN is no NAT box
    assert not pairing.note(dataclasses.replace(seen(NAT_BOX, 51234), src_port=None))
    assert not pairing.note(dataclasses.replace(seen(NAT_BOX, 51234), rate_bps=None))
    assert pairing.pair(pre()).reason == "nat_unpaired"


def test_the_candidates_are_bounded() -> None:
    pairing = NatPairing(frozenset({ip_address(NAT_BOX)}), max_candidates=100)
    for port in range(1024, 1024 + 10_000):
        pairing.note(seen(NAT_BOX, port, dst="203.0.113.99"))
    assert len(pairing) == 100
    pairing.note(seen(NAT_BOX, 51234))
    assert pairing.pair(pre()).mapping == NatMapping(NAT_BOX, 51234)
    pairing.expire(100.0)
    assert len(pairing) == 0


@pytest.mark.parametrize(
    "pre_n, post_n, ok",
    [
        (120, 118, True),
        (120, 100, True),  # within 25 % + 8 packets
        (120, 60, False),  # another connection at half the rate
        (120, 0, False),  # a port the NAT did not choose
        (0, 0, False),  # the connection is not running
        (0, 120, False),
        (20, 27, True),  # the slack of packets in flight
        (1, 1, False),  # counters that have not caught up prove nothing
        (15, 15, False),
    ],
)
def test_the_confirmation_rule(pre_n: int, post_n: int, ok: bool) -> None:
    assert confirmed(pre_n, post_n) is ok


def test_the_watches_are_at_the_host_and_the_nat_box(topo: Topology) -> None:
    ws = watches_for(topo, pre(), NatMapping(NAT_BOX, 51234), nonce=7)
    assert ws == [  # the access switch marks 0 -> 7, the NAT box's switch restores 7 -> 0
        FlowWatch("s1", 1, "10.1.0.10", CLOUD, "tcp", 40000, 5201, WatchMark(0, 7)),
        FlowWatch("s3", 1, NAT_BOX, CLOUD, "tcp", 51234, 5201, WatchMark(7, 0)),
        FlowWatch("s3", 1, NAT_BOX, CLOUD, "tcp", None, 5201, WatchMark(7, 0)),  # the sweep
    ]
    assert watches_for(topo, pre(), NatMapping("198.51.100.30", 51234), nonce=7) is None  # not a NAT box
