"""Property tests: random campuses (trees plus extra links) and random lanes.

Whatever the shape: a lane's packet reaches the edge router's inside port and nothing else, its
reply reaches the host, and any packet that differs from the lane in one field never leaves by a
bypass port. The random campuses go through the loader, so they also check that valid files load.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.support.flowsim import ip_packet
from tests.support.netsim import Network, Outcome
from viplanes.controller.compile.ctlane import NEWCONN_MAX_LANE_ID
from viplanes.controller.compile.lane import compile_base, compile_lane, compile_lane_removal, lane_dpids
from viplanes.controller.compile.path import stateful
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import parse_topology
from viplanes.topologies.model import PortRef, Topology
from viplanes.topologies.paths import bypass_ports, lane_path

NOW = 50_000.0
EDGE_MAC = "02:00:00:ee:00:01"
FW_MAC = "02:00:00:f0:00:01"
POOL = ipaddress.IPv4Network("198.51.100.128/25")


@st.composite
def campuses(draw: st.DrawFn) -> dict[str, Any]:
    """A campus YAML document: a random tree of switches plus a few extra links."""
    n = draw(st.integers(1, 7))
    dpids = draw(st.lists(st.integers(1, 2**48), min_size=n, max_size=n, unique=True))
    next_port = [draw(st.integers(1, 40)) for _ in range(n)]

    def port(i: int) -> str:
        next_port[i] += draw(st.integers(1, 3))
        return f"s{i}:{next_port[i]}"

    links = []
    for i in range(1, n):
        parent = draw(st.integers(0, i - 1))
        links.append({"a": port(parent), "b": port(i), "mbps": 100, "bypass": draw(st.booleans())})
    for _ in range(draw(st.integers(0, 2)) if n > 1 else 0):
        a, b = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
        links.append({"a": port(a), "b": port(b), "mbps": 100, "bypass": draw(st.booleans())})
    edge_sw = draw(st.integers(0, n - 1))
    hosts = []
    for k in range(draw(st.integers(1, 5))):
        public = draw(st.booleans())
        hosts.append(
            {
                "name": f"h{k}",
                "role": "dtn" if public else draw(st.sampled_from(["desktop", "server"])),
                "mac": f"02:00:00:00:01:{k:02x}",
                "ip": f"198.51.100.{10 + k}/24" if public else f"10.0.{k}.{10 + k}/16",
                "gateway": "198.51.100.1" if public else "10.0.0.1",
                "attach": port(draw(st.integers(0, n - 1))),
                "nic_mbps": 100,
            }
        )
    return {
        "name": "random",
        "lane_pool": {"prefix": str(POOL), "mac": "02:ff:00:00:00:01"},
        "switches": [{"name": f"s{i}", "dpid": dpids[i]} for i in range(n)],
        "links": links,
        "hosts": hosts,
        "middleboxes": [
            {
                "name": "fw",
                "kind": "firewall",
                "mbps": 10,
                "inside": {"mac": FW_MAC, "ip": "10.0.0.1/16", "attach": port(draw(st.integers(0, n - 1)))},
                "outside": {"mac": "02:00:00:f0:00:02", "ip": "10.255.0.1/30"},
                "routes": [{"dst": "0.0.0.0/0", "via": "10.255.0.2"}],
            },
            {
                "name": "nat",
                "kind": "nat",
                "inside": {"mac": "02:00:00:f0:00:03", "ip": "10.255.0.2/30"},
                "outside": {"mac": "02:00:00:f0:00:04", "ip": "198.51.100.2/24", "attach": port(edge_sw)},
            },
        ],
        "edge": {
            "name": "edge",
            "inside": {"mac": EDGE_MAC, "ip": "198.51.100.1/24", "attach": port(edge_sw)},
            "outside": {"mac": "02:00:00:ee:00:02", "ip": "203.0.113.1/24"},
        },
    }


def reachable(topo: Topology, host: str) -> bool:
    try:
        lane_path(topo, host)
        return True
    except ValueError:
        return False


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Topology, LaneSpec]:
    topo = parse_topology(draw(campuses()), "random.yaml")
    candidates = [h.name for h in topo.hosts if reachable(topo, h.name)]
    assume(candidates)
    host = topo.host(draw(st.sampled_from(candidates)))
    rate = draw(st.one_of(st.none(), st.floats(0.5, 1000)))
    lane = LaneSpec(
        # a conntrack border needs a new-connection meter id per lane (ctlane)
        lane_id=draw(st.integers(1, NEWCONN_MAX_LANE_ID if stateful(topo) else 0xFFFF0000 - 8 if rate else 2**32 - 1)),
        src_ip=str(host.iface.ip.ip),
        dst_ip=str(ipaddress.IPv4Address(draw(st.integers(0x01000000, 0xDFFFFFFF)))),
        protocol=draw(st.sampled_from(["tcp", "udp"])),
        dst_port=draw(st.integers(1, 65535)),
        src_port=draw(st.one_of(st.none(), st.integers(1, 65535))),
        nat_ip=str(draw(st.sampled_from(list(POOL)))) if host.needs_nat else None,
        expires_at=NOW + draw(st.floats(1, 10**6)),
        rate_mbps=rate,
    )
    dst = ipaddress.IPv4Address(lane.dst_ip)
    campus = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/16", "10.255.0.0/30", "198.51.100.0/24")]
    assume(not any(dst in net for net in campus) and not dst.is_reserved and not dst.is_loopback)
    return topo, lane


def network(topo: Topology, *lanes: LaneSpec) -> Network:
    net = Network(topo)
    net.install(compile_base(topo))
    for lane in lanes:
        net.install(compile_lane(lane, topo, NOW))
    return net


def forward_packet(topo: Topology, lane: LaneSpec) -> dict[str, Any]:
    host = topo.host_by_ip(lane.src_ip)
    assert host is not None
    return ip_packet(
        host.iface.mac, FW_MAC, lane.src_ip, lane.dst_ip, lane.protocol, lane.src_port or 33333, lane.dst_port
    )


def reverse_packet(topo: Topology, lane: LaneSpec) -> dict[str, Any]:
    return ip_packet(
        EDGE_MAC,
        topo.lane_pool.mac,
        lane.dst_ip,
        lane.nat_ip or lane.src_ip,
        lane.protocol,
        lane.dst_port,
        lane.src_port or 33333,
    )


def bypass_exits(topo: Topology, outcomes: list[Outcome]) -> list[tuple[str, int]]:
    names = {s.dpid: s.name for s in topo.switches}
    ports = {(names[d], p) for d, ps in bypass_ports(topo).items() for p in ps}
    return [(s, out) for o in outcomes for s, _, out in o.path if (s, out) in ports]


@given(scenarios())
@settings(max_examples=150, deadline=None)
def test_lane_packet_reaches_edge_and_reply_reaches_host(scenario: tuple[Topology, LaneSpec]) -> None:
    topo, lane = scenario
    net = network(topo, lane)
    host = topo.host_by_ip(lane.src_ip)
    [out] = net.send_from_host(host.name, forward_packet(topo, lane))
    assert (out.kind, out.leg, out.port) == ("edge", "inside", topo.edge.inside.attach)
    assert out.packet["ipv4_src"] == (lane.nat_ip or lane.src_ip)
    assert out.packet["eth_dst"] == EDGE_MAC
    assert out.packet["ipv4_dst"] == lane.dst_ip
    assert out.packet[f"{lane.protocol}_dst"] == lane.dst_port
    mb_ports = {leg.attach for mb in topo.middleboxes for leg in (mb.inside, mb.outside)}
    assert not any(PortRef(s, o) in mb_ports for s, _, o in out.path if isinstance(o, int))
    [back] = net.send_from_edge(reverse_packet(topo, lane))
    assert (back.kind, back.node, back.port) == ("host", host.name, host.iface.attach)
    assert back.packet["ipv4_dst"] == lane.src_ip and back.packet["eth_dst"] == host.iface.mac


FORWARD_DEVIATIONS = ["in_port", "eth_src", "ipv4_src", "ipv4_dst", "protocol", "dst_port", "src_port"]
REVERSE_DEVIATIONS = ["in_port", "ipv4_src", "ipv4_dst", "protocol", "src_port", "dst_port"]


def _other(draw: st.DrawFn, value: int, lo: int, hi: int) -> int:
    return draw(st.integers(lo, hi).filter(lambda v: v != value))


def _deviate(draw: st.DrawFn, pkt: dict[str, Any], what: str, proto: str, sport: str, dport: str) -> dict[str, Any]:
    pkt = dict(pkt)
    if what == "eth_src":
        pkt["eth_src"] = f"02:00:00:99:{draw(st.integers(0, 255)):02x}:{draw(st.integers(0, 255)):02x}"
    elif what in ("ipv4_src", "ipv4_dst"):
        ip = int(ipaddress.IPv4Address(pkt[what]))
        pkt[what] = str(ipaddress.IPv4Address(_other(draw, ip, 1, 2**32 - 2)))
    elif what == "protocol":
        other = "udp" if proto == "tcp" else "tcp"
        pkt["ip_proto"] = 17 if other == "udp" else 6
        pkt[f"{other}_src"], pkt[f"{other}_dst"] = pkt.pop(f"{proto}_src"), pkt.pop(f"{proto}_dst")
    elif what in ("src_port", "dst_port"):
        key = sport if what == "src_port" else dport
        pkt[key] = _other(draw, pkt[key], 1, 65535)
    return pkt


@given(scenarios(), st.data())
@settings(max_examples=200, deadline=None)
def test_single_field_deviation_never_uses_a_bypass(scenario: tuple[Topology, LaneSpec], data: st.DataObject) -> None:
    topo, lane = scenario
    assume(bypass_ports(topo))
    net = network(topo, lane)
    host = topo.host_by_ip(lane.src_ip)
    proto = lane.protocol
    if data.draw(st.booleans(), label="reverse"):
        choices = REVERSE_DEVIATIONS if lane.src_port else [d for d in REVERSE_DEVIATIONS if d != "dst_port"]
        what = data.draw(st.sampled_from(choices), label="field")
        pkt = _deviate(data.draw, reverse_packet(topo, lane), what, proto, f"{proto}_src", f"{proto}_dst")
        at = topo.edge.inside.attach
    else:
        choices = FORWARD_DEVIATIONS if lane.src_port else FORWARD_DEVIATIONS[:-1]
        what = data.draw(st.sampled_from(choices), label="field")
        pkt = _deviate(data.draw, forward_packet(topo, lane), what, proto, f"{proto}_src", f"{proto}_dst")
        at = host.iface.attach
    if what == "in_port":  # the same packet from another port of the same switch
        at = PortRef(at.switch, data.draw(st.integers(1, 99_999).filter(lambda p: p != at.port)))
    outcomes = net.inject(at, pkt)
    assert outcomes and all(o.kind in ("NORMAL", "drop") for o in outcomes), outcomes
    assert not bypass_exits(topo, outcomes)


@given(scenarios(), st.integers(2, 4), st.data())
@settings(max_examples=100, deadline=None)
def test_removing_one_lane_leaves_the_others(
    scenario: tuple[Topology, LaneSpec], count: int, data: st.DataObject
) -> None:
    topo, first = scenario
    top = NEWCONN_MAX_LANE_ID if stateful(topo) else 0xFFFF0000 - 9
    lanes = [
        dataclasses.replace(
            first,
            lane_id=first.lane_id + i if first.lane_id + i <= top else first.lane_id - i,
            dst_port=(first.dst_port + i - 1) % 65535 + 1,
            dst_ports=(),
        )
        for i in range(count)
    ]
    net = network(topo, *lanes)
    gone = data.draw(st.sampled_from(lanes))
    net.install(compile_lane_removal(gone.lane_id, lane_dpids(gone, topo)))
    host = topo.host_by_ip(first.src_ip)
    for lane in lanes:
        kinds = {o.kind for o in net.send_from_host(host.name, forward_packet(topo, lane))}
        assert kinds == ({"NORMAL"} if lane is gone else {"edge"})
