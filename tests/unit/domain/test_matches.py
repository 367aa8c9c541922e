"""lane_matches: exactly the lane's packets, in a form os-ken accepts."""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.domain.matches import lane_matches, match_count
from viplanes.domain.values import LaneSpec


def hit(fields: dict[str, Any], pkt: dict[str, Any]) -> bool:
    for name, want in fields.items():
        got = pkt.get(name)
        if got is None:
            return False
        if isinstance(want, tuple):
            value, mask = want
            if isinstance(value, str):
                a, v, m = (int(ipaddress.ip_address(x)) for x in (got, value, mask))
                if a & m != v & m:
                    return False
            elif got & mask != value & mask:
                return False
        elif got != want:
            return False
    return True


def spec(**over: Any) -> LaneSpec:
    base: dict[str, Any] = dict(
        lane_id=7,
        src_ip="10.1.0.10",
        dst_ip=None,
        protocol="tcp",
        dst_port=None,
        src_port=None,
        nat_ip="198.51.100.193",
        expires_at=2e9,
        dst_nets=("203.0.113.16/28", "2001:db8:ff::10/128"),
        dst_ports=((50000, 51000),),
    )
    base.update(over)
    return LaneSpec(**base)


@given(
    st.integers(1, 65535),
    st.sampled_from(
        ["203.0.113.16", "203.0.113.31", "203.0.113.32", "203.0.113.15", "2001:db8:ff::10", "2001:db8:ff::11"]
    ),
)
@settings(max_examples=300, deadline=None)
def test_exactly_the_lanes_packets(port: int, dst: str) -> None:
    s = spec()
    v6 = ":" in dst
    src = "2001:db8:1::10" if v6 else "198.51.100.193"
    key = "ipv6" if v6 else "ipv4"
    pkt = {
        "eth_type": 0x86DD if v6 else 0x0800,
        "ip_proto": 6,
        f"{key}_src": src,
        f"{key}_dst": dst,
        "tcp_src": 40000,
        "tcp_dst": port,
    }
    inside = 50000 <= port <= 51000 and dst in ("203.0.113.16", "203.0.113.31", "2001:db8:ff::10")
    ms = lane_matches(s, "198.51.100.193", "2001:db8:1::10")
    assert any(hit(m.fwd, pkt) for m in ms) == inside
    back = {**pkt, f"{key}_src": dst, f"{key}_dst": src, "tcp_src": port, "tcp_dst": 40000}
    assert any(hit(m.rev, back) for m in ms) == inside


def test_counts_and_os_ken_accepts_every_match() -> None:
    s = spec(src_port=40000)
    ms = lane_matches(s, "198.51.100.193", "2001:db8:1::10")
    assert len(ms) == match_count(s) == 2 * 9
    for m in ms:
        for fields in (m.fwd, m.rev):
            parser.OFPMatch(**fields)  # raises on a field or mask form os-ken does not know
    assert all(m.fwd["tcp_src"] == 40000 and m.rev["tcp_dst"] == 40000 for m in ms)
    single = LaneSpec(1, "10.1.0.10", "203.0.113.10", "udp", 5201, None, None, 2e9)
    [m] = lane_matches(single, "10.1.0.10", None)
    assert m.fwd == {
        "eth_type": 0x0800,
        "ip_proto": 17,
        "ipv4_src": "10.1.0.10",
        "ipv4_dst": "203.0.113.10",
        "udp_dst": 5201,
    }


def test_family_without_source_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="IPv6"):
        lane_matches(spec(), "198.51.100.193", None)
