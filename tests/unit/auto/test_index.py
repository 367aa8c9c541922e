"""The cheap rejection: the grant index finds covering grants by source prefix, and a sighting
outside every automatic grant costs microseconds whatever the number of grants."""

from __future__ import annotations

import dataclasses
import ipaddress
import time

from viplanes.auto.index import AutoGrant, GrantIndex
from viplanes.auto.policy import AutoPolicy
from viplanes.policy.rules import parse_ports

ip = ipaddress.ip_address


def grant(gid: int, src: str, dst: str = "203.0.113.0/24", ports: tuple[str, ...] = ("9000-9100",)) -> AutoGrant:
    return AutoGrant(
        gid,
        gid,
        f"p{gid}",
        "researcher",
        (ipaddress.ip_network(src),),
        (ipaddress.ip_network(dst),),
        frozenset({"tcp"}),
        parse_ports(ports),
        3600,
        AutoPolicy(enabled=True, fireflies=True),
    )


def test_candidates_by_source_destination_protocol_and_port():
    idx = GrantIndex([grant(1, "10.1.0.0/24"), grant(2, "10.1.0.10/32"), grant(3, "2001:db8:1::/64")])
    assert [g.grant_id for g in idx.candidates(ip("10.1.0.10"), ip("203.0.113.5"), 6, 9000)] == [1, 2]
    assert [g.grant_id for g in idx.candidates(ip("10.1.0.11"), ip("203.0.113.5"), 6, 9000)] == [1]
    assert idx.candidates(ip("10.1.0.10"), ip("203.0.113.5"), 17, 9000) == []  # udp not granted
    assert idx.candidates(ip("10.1.0.10"), ip("203.0.113.5"), 6, 22) == []
    assert idx.candidates(ip("10.1.0.10"), ip("198.18.0.1"), 6, 9000) == []
    assert idx.candidates(ip("10.2.0.10"), ip("203.0.113.5"), 6, 9000) == []
    assert idx.candidates(ip("2001:db8:2::1"), ip("203.0.113.5"), 6, 9000) == []


def test_a_rejected_sighting_costs_microseconds_with_a_thousand_grants():
    grants = [grant(i, f"10.{i // 250}.{i % 250}.0/24") for i in range(1000)]
    grants += [grant(2000 + i, f"10.200.{i}.7/32") for i in range(100)]
    idx = GrantIndex(grants)
    src, dst = ip("172.16.5.5"), ip("203.0.113.5")
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        idx.candidates(src, dst, 6, 9000)
    per_us = (time.perf_counter() - t0) / n * 1e6
    print(f"rejected sighting: {per_us:.2f} us with {len(grants)} grants")
    assert per_us < 50  # ~2 us here; a loaded 2-core machine gets 25x headroom


def test_the_detectors_prefilter_is_the_grants_source_and_destination():
    """sFlow detection keeps state only for flows some automatic grant could carry: a flood of
    other flows (any source or destination outside every such grant) never reaches its table."""
    idx = GrantIndex([grant(1, "10.1.0.0/24"), grant(3, "2001:db8:1::/64", dst="2001:db8:9::/48")])
    assert idx.may_concern(ip("10.1.0.10"), ip("203.0.113.5"))
    assert idx.may_concern(ip("2001:db8:1::5"), ip("2001:db8:9::1"))
    assert not idx.may_concern(ip("10.1.0.10"), ip("198.51.100.9"))  # destination outside
    assert not idx.may_concern(ip("10.2.0.10"), ip("203.0.113.5"))  # source outside
    assert not idx.may_concern(ip("203.0.113.5"), ip("10.1.0.10"))  # the reverse direction
    assert not idx.may_concern(ip("2001:db8:1::5"), ip("203.0.113.5"))  # other family
    assert not GrantIndex([]).may_concern(ip("10.1.0.10"), ip("203.0.113.5"))


def _with(gid: int, src: str, **policy: object) -> AutoGrant:
    return dataclasses.replace(grant(gid, src), policy=AutoPolicy(enabled=True, **policy))  # type: ignore[arg-type]


def test_rate_floor_is_the_lowest_rate_a_covering_grant_lanes_at():
    """A detector's per-flow threshold (issue 44); 0 where the detector's own threshold decides:
    no covering grant, or one that may trigger by bytes or has no rate."""
    idx = GrantIndex(
        [
            _with(1, "10.1.0.0/24", min_rate_mbps=8),
            _with(2, "10.1.0.10/32", min_rate_mbps=20),
            _with(3, "10.2.0.0/24", min_rate_mbps=1),
            _with(4, "10.3.0.0/24", min_rate_mbps=8, min_bytes=10**6),
            _with(5, "10.4.0.0/24", fireflies=True),
        ]
    )
    floor = idx.rate_floor
    assert floor(ip("10.1.0.10"), ip("203.0.113.5"), 6, 9000) == 8e6  # grants 1 and 2: the lower
    assert floor(ip("10.1.0.11"), ip("203.0.113.5"), 6, 9000) == 8e6
    assert floor(ip("10.2.0.10"), ip("203.0.113.5"), 6, 9000) == 1e6
    assert floor(ip("10.3.0.10"), ip("203.0.113.5"), 6, 9000) == 0  # its bytes may trigger first
    assert floor(ip("10.4.0.10"), ip("203.0.113.5"), 6, 9000) == 0
    assert floor(ip("10.1.0.10"), ip("203.0.113.5"), 6, 22) == 0  # outside every grant
    # a post-NAT flow: any source, the lowest towards the destination, protocol and port
    assert idx.rate_floor_to(ip("203.0.113.5"), 6, 9000) == 0  # grant 4 (bytes) and 5 reach it too
    only_rates = GrantIndex([_with(1, "10.1.0.0/24", min_rate_mbps=8), _with(3, "10.2.0.0/24", min_rate_mbps=1)])
    assert only_rates.rate_floor_to(ip("203.0.113.5"), 6, 9000) == 1e6
    assert only_rates.rate_floor_to(ip("203.0.113.5"), 17, 9000) == 0  # udp: no grant
    assert only_rates.rate_floor_to(ip("198.18.0.1"), 6, 9000) == 0
    assert only_rates.may_reach(ip("203.0.113.5")) and not only_rates.may_reach(ip("198.18.0.1"))
