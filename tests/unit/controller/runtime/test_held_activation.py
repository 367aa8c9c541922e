"""Lanes activated while a link is down (issue 42's review): held from the start when no usable
path is left and carried by the re-route when one returns; shared flows compiled over the live
view; a re-sent lane's fast-failover groups get its new buckets. Fake switches, packet walks."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, rerouting_runtime, spec
from tests.support.packets import ip_packet
from tests.support.topos import redundant_campus
from viplanes.controller.compile import failover
from viplanes.controller.compile.cookies import shared_cookie
from viplanes.controller.compile.groups import group_key
from viplanes.controller.compile.path import gateway_mac
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

CLOUD = "203.0.113.10"


def _setup(fast_failover: bool = False) -> tuple[Topology, FakeClock, FakeSwitches, LaneRuntime]:
    topo = redundant_campus(fast_failover)
    clock, switches, rt = rerouting_runtime(topo)
    return topo, clock, switches, rt


def _port(rt: LaneRuntime, dpid: int, port: int, up: bool) -> None:
    rt.port_status(dpid, port, up)
    assert rt.reroute is not None
    rt.reroute.apply_now()


def _walk(switches: FakeSwitches, topo: Topology, host: str = "desktop") -> list[Any]:
    h = topo.host(host)
    pkt = ip_packet(h.iface.mac, gateway_mac(topo, h), str(h.iface.ip.ip), CLOUD, "tcp", 40000, 5201)
    return switches.net.send_from_host(host, dict(pkt, tcp_flags=0x002))


def _dtn_lane(topo: Topology, clock: FakeClock, lane_id: int = 21) -> LaneSpec:
    host = topo.host("dtn")
    nat = str(topo.lane_addresses()[0]) if host.needs_nat else None
    return LaneSpec(lane_id, str(host.iface.ip.ip), CLOUD, "tcp", 5201, None, nat, clock.now + 3600)


def test_a_lane_activated_with_no_usable_path_is_held_then_carried_when_a_path_returns() -> None:
    topo, clock, switches, rt = _setup()
    _port(rt, 2, 3, up=False)  # both of the desktop's bypass links down
    _port(rt, 3, 5, up=False)
    result = rt.activate(spec(1, now=clock.now))
    assert result.ok and result.held  # carried, not refused with NoLanePath
    assert "s2:3-s3:3 down" in result.reason and "s2:4-s3:5 down" in result.reason
    assert rt.interrupted() == {1: result.reason}  # the lane service's view says the same
    outs = _walk(switches, topo)
    assert [o.kind for o in outs] == ["drop"] and outs[0].node == "s1"  # held at its first switch
    _port(rt, 3, 5, up=True)
    clock.advance(2.1)  # the link's hold-down
    assert rt.reroute is not None and rt.reroute.apply_now() is True
    (out,) = _walk(switches, topo)
    assert out.kind == "edge" and out.left_by("s2", 4)  # carried without being asked again
    assert rt.interrupted() == {}


def test_a_lane_activated_while_a_link_is_down_gets_its_shared_flows_on_its_live_path() -> None:
    """The DTN's lane over the s7 transit path (s5-s6 down): its ICMP transit flows go to s7,
    not to s6 of its declared path; and they move with the lane when the view changes."""
    topo, clock, switches, rt = _setup()
    _port(rt, 5, 2, up=False)
    lane = _dtn_lane(topo, clock)
    assert rt.activate(lane).ok
    (out,) = _walk(switches, topo, "dtn")
    assert out.kind == "edge" and out.left_by("s7", 2)
    need = {dpid for per_dpid in rt.lanes.shared_flows(lane).values() for dpid in per_dpid}
    assert 7 in need and 6 not in need
    assert {dpid for dpid, _ in rt.lanes.users()} == need
    cookies = {shared_cookie(a) for a in rt.lanes.shared_flows(lane)}
    assert not [e for e in switches.net.tables[6].flows if e.cookie in cookies]
    assert [e for e in switches.net.tables[7].flows if e.cookie in cookies]
    _port(rt, 5, 3, up=False)  # the s7 path down too, the s6 path back after its hold-down
    _port(rt, 5, 2, up=True)
    clock.advance(2.1)
    assert rt.reroute is not None and rt.reroute.apply_now() is True
    need = {dpid for per_dpid in rt.lanes.shared_flows(lane).values() for dpid in per_dpid}
    assert 6 in need and 7 not in need
    assert {dpid for dpid, _ in rt.lanes.users()} == need


def test_a_re_sent_lane_gets_its_new_group_buckets_although_the_group_exists() -> None:
    """The switch holds the lane's fast-failover group with an older path's buckets: the re-sent
    lane's ADD is refused (the group exists) and its MODIFY puts the new buckets in place."""
    topo, clock, switches, rt = _setup(fast_failover=True)
    lane = _dtn_lane(topo, clock)
    assert rt.activate(lane).ok
    gid = failover.group_id_for(lane.lane_id)
    assert gid is not None
    holders = [dpid for dpid, t in switches.net.tables.items() if gid in t.groups]
    assert holders
    wanted = {dpid: switches.net.tables[dpid].groups[gid] for dpid in holders}
    for dpid in holders:  # as an older path left them: the buckets the other way round
        old = wanted[dpid]
        ports = tuple(b.watch_port for b in reversed(old.buckets))
        switches.net.tables[dpid].groups[gid] = failover.group_mod(gid, (ports[0], ports[1]))
    result = rt.activate(dataclasses.replace(lane, expires_at=lane.expires_at + 600))  # an extension
    assert result.ok, result.reason
    for dpid in holders:
        now = switches.net.tables[dpid].groups[gid]
        assert group_key(now.type, now.buckets) == group_key(wanted[dpid].type, wanted[dpid].buckets), dpid
