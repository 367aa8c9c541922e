"""Lanes move to the best usable path when a link fails, are held when none is left, and come
back on whichever path returns (issue 42). Fake switches, packet walks, an injected clock."""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, rerouting_runtime, spec
from tests.support.packets import ip_packet
from tests.support.topos import redundant_campus
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.topologies.model import Topology

CLOUD = "203.0.113.10"


def _setup(fast_failover: bool = False) -> tuple[Topology, FakeClock, FakeSwitches, LaneRuntime]:
    """The redundant campus, the controller's re-route alone unless ``fast_failover``."""
    topo = redundant_campus(fast_failover)
    clock, switches, rt = rerouting_runtime(topo)
    assert rt.activate(spec(1, now=clock.now)).ok
    return topo, clock, switches, rt


def _walk(switches: FakeSwitches, topo: Topology) -> list[Any]:
    desktop = topo.host("desktop")
    pkt = ip_packet(desktop.iface.mac, topo.middleboxes[0].inside.mac, "10.1.0.10", CLOUD, "tcp", 40000, 5201)
    return switches.net.send_from_host("desktop", pkt)


def _down(rt: LaneRuntime, dpid: int, port: int, up: bool = False) -> None:
    rt.port_status(dpid, port, up)
    assert rt.reroute is not None
    rt.reroute.apply_now()


def test_a_failed_bypass_link_moves_the_lane_to_the_parallel_one_new_flows_first() -> None:
    topo, clock, switches, rt = _setup()
    (out,) = _walk(switches, topo)
    assert out.kind == "edge" and out.left_by("s2", 3)
    mark = len(switches.sent)
    _down(rt, 2, 3)
    (out,) = _walk(switches, topo)
    assert out.kind == "edge" and out.left_by("s2", 4) and not out.left_by("s2", 3)
    assert out.packet["ipv4_src"] == spec(1).nat_ip  # the same lane-pool address
    mods = [m.command for _, m in switches.sent[mark:] if isinstance(m, parser.OFPFlowMod) and m.cookie != 0]
    first_delete = next(i for i, c in enumerate(mods) if c in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT))
    assert ofp.OFPFC_ADD in mods[:first_delete]  # the new path went in before anything left
    assert ofp.OFPFC_ADD not in mods[first_delete:]
    assert rt.interrupted() == {}
    assert rt.reroute is not None and rt.reroute.reroutes == 1


def test_no_usable_path_holds_the_lane_and_names_the_links_then_any_path_brings_it_back() -> None:
    topo, clock, switches, rt = _setup()
    _down(rt, 2, 3)
    _down(rt, 3, 5)
    outs = _walk(switches, topo)
    assert [o.kind for o in outs] == ["drop"] and outs[0].node == "s1"  # held, not sent to the firewall
    why = rt.interrupted()[1]
    assert "s2:3-s3:3 down (port s2:3 down)" in why and "s2:4-s3:5 down (port s3:5 down)" in why
    # the link the lane was NOT using returns: after its hold-down the lane rides it
    _down(rt, 3, 5, up=True)
    assert [o.kind for o in _walk(switches, topo)] == ["drop"]  # still held down for 2 s
    clock.advance(2.1)
    assert rt.reroute is not None and rt.reroute.apply_now() is True
    (out,) = _walk(switches, topo)
    assert out.kind == "edge" and out.left_by("s2", 4)
    assert rt.interrupted() == {}


def test_a_port_off_every_lane_path_reroutes_nothing() -> None:
    topo, clock, switches, rt = _setup()
    mark = len(switches.sent)
    rt.port_status(1, 2, up=False)  # the server's host port: no declared link
    assert rt.reroute is not None and rt.reroute.apply_now() is False
    assert switches.sent[mark:] == []


def test_the_worker_wakes_when_a_returning_links_hold_down_ends() -> None:
    """A link back up changes nothing at once (held down), yet its hold-down's end must wake
    the worker: it waited with no deadline before the report."""
    topo, clock, switches, rt = _setup()
    assert rt.reroute is not None
    started: list[object] = []
    rt.reroute._start = started.append
    _down(rt, 2, 3)
    rt.reroute._wake.clear()
    rt.port_status(2, 3, up=True)
    assert rt.reroute._wake.is_set()


def test_readiness_names_a_link_that_is_not_usable() -> None:
    topo, clock, switches, rt = _setup()
    assert rt.readiness()["ready"] is True
    rt.port_status(3, 5, up=False)
    body = rt.readiness()
    assert body["ready"] is False
    assert {"name": "s2:4-s3:5", "state": "down", "reason": "port s3:5 down", "bypass": True} in body["links"]


def test_metrics_show_each_link_and_the_reroutes() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from viplanes.api.metrics import _Links

    topo, clock, switches, rt = _setup()
    _down(rt, 2, 3)
    registry = CollectorRegistry()
    registry.register(_Links(rt))
    text = generate_latest(registry).decode()
    assert 'viplanes_link_up{link="s2:3-s3:3"} 0.0' in text
    assert 'viplanes_link_up{link="s2:4-s3:5"} 1.0' in text
    assert "viplanes_reroutes_total 1.0" in text
    assert 'viplanes_reroute_seconds_bucket{le="+Inf"} 1.0' in text


def _many(n: int) -> tuple[Topology, FakeClock, FakeSwitches, LaneRuntime]:
    topo, clock, switches, rt = _setup()
    for lane_id in range(2, n + 1):
        assert rt.activate(spec(lane_id, now=clock.now, dst_port=5200 + lane_id)).ok
    return topo, clock, switches, rt


def _walk_port(switches: FakeSwitches, topo: Topology, port: int) -> list[Any]:
    desktop = topo.host("desktop")
    pkt = ip_packet(desktop.iface.mac, topo.middleboxes[0].inside.mac, "10.1.0.10", CLOUD, "tcp", 40000, port)
    return switches.net.send_from_host("desktop", pkt)


def test_a_reroute_reads_no_switch_back_and_touches_only_the_switches_whose_flows_change() -> None:
    """1,000 lanes took seconds when every switch's flows were read back and reconciled: the
    lanes' old and new messages are known, so only their difference is sent."""
    topo, clock, switches, rt = _many(4)
    mark = len(switches.sent)
    _down(rt, 3, 3)
    sent = switches.sent[mark:]
    assert not [m for _, m in sent if isinstance(m, parser.OFPFlowStatsRequest)]
    assert {d for d, _ in sent} == {2, 3}  # s1 (the lanes' first hop) keeps its flows as they are
    barriers = [d for d, m in sent if isinstance(m, parser.OFPBarrierRequest)]
    assert sorted(barriers) == [2, 2, 2, 3, 3, 3]  # three rounds, one barrier per switch each
    for lane_id, port in [(1, 5201), (2, 5202), (3, 5203), (4, 5204)]:
        (out,) = _walk_port(switches, topo, port)
        assert out.kind == "edge" and out.left_by("s2", 4) and not out.left_by("s2", 3), lane_id


def test_a_reroute_turns_no_lane_before_every_later_hop_has_its_new_flows() -> None:
    """Make before break across switches: s2's forward rule turns to the other link only after
    s3 holds the rule for packets arriving on it (the old code sent both in one round)."""
    topo, clock, switches, rt = _many(2)
    mark = len(switches.sent)
    _down(rt, 3, 3)
    sent = [(d, m) for d, m in switches.sent[mark:]]
    barrier_at = [i for i, (_, m) in enumerate(sent) if isinstance(m, parser.OFPBarrierRequest)]

    def first(dpid: int, want: Any) -> int:
        return next(i for i, (d, m) in enumerate(sent) if d == dpid and isinstance(m, parser.OFPFlowMod) and want(m))

    def outputs(m: Any) -> set[int]:
        return {a.port for i in m.instructions for a in getattr(i, "actions", []) if hasattr(a, "port")}

    s3_new = first(3, lambda m: m.command == ofp.OFPFC_ADD and m.match.get("in_port") == 5)
    s2_turn = first(2, lambda m: m.command == ofp.OFPFC_ADD and m.match.get("in_port") == 1 and 4 in outputs(m))
    assert s3_new < s2_turn
    assert any(s3_new < b < s2_turn for b in barrier_at)  # and confirmed before it


def test_a_port_flapped_every_100_ms_for_5_s_reroutes_once_not_fifty_times() -> None:
    """An attacker with a cable toggles a bypass port every 100 ms. Each report wakes the worker
    (worst case: it re-checks after every one); the lanes move once, off the link, and stay off
    it until the port has been quiet for the (doubled) hold-down."""
    topo, clock, switches, rt = _many(3)
    assert rt.reroute is not None
    reroute = rt.reroute
    mark = len(switches.sent)
    up = True
    for _ in range(50):  # 5 s of reports, one every 100 ms
        clock.advance(0.1)
        up = not up
        rt.port_status(2, 3, up)
        reroute.apply_now()
    assert reroute.reroutes == 1
    after_first = [m for _, m in switches.sent[mark:] if isinstance(m, parser.OFPFlowMod)]
    (out,) = _walk(switches, topo)
    assert out.kind == "edge" and out.left_by("s2", 4)  # on the other link the whole time
    rt.port_status(2, 3, True)  # quiet from now on
    for _ in range(50):  # the next 5 s: held down, nothing moves
        clock.advance(0.1)
        reroute.apply_now()
    assert reroute.reroutes == 1
    assert len([m for _, m in switches.sent[mark:] if isinstance(m, parser.OFPFlowMod)]) == len(after_first)
    clock.advance(60.0)  # the hold-down (doubled per drop, at most 60 s) is over: back once
    assert reroute.apply_now() is True and reroute.reroutes == 2


def test_a_failed_switch_away_only_misses_its_deletes_and_no_switch_is_reconciled() -> None:
    """A transit switch that failed may be gone from the controller: the DTN's lanes still move
    to the other transit switch, and the failed one's old flows are its reconcile's on return."""
    topo, clock, switches, rt = _setup()
    for lane_id in (11, 12):
        dtn = spec(lane_id, now=clock.now, src_ip="198.51.100.30", nat_ip=None, dst_port=5200 + lane_id)
        assert rt.activate(dtn).ok
    assert rt.reroute is not None
    calls: list[int] = []
    rt.reroute.resync.reconcile_switch = lambda dpid, timeout_s=10.0: calls.append(dpid)  # type: ignore[method-assign]
    rt.connected.discard(6)  # s6 (the DTN lanes' transit) is gone
    mark = len(switches.sent)
    rt.port_status(5, 2, False)  # its neighbours report their ports to it down
    rt.port_status(3, 6, False)
    rt.reroute.apply_now()
    sent = switches.sent[mark:]
    assert {d for d, _ in sent} == {3, 5, 7} and calls == []
    assert [m for d, m in sent if d == 7 and isinstance(m, parser.OFPFlowMod) and m.command == ofp.OFPFC_ADD]


def test_with_fast_failover_groups_a_link_going_and_coming_back_moves_the_lane_each_time() -> None:
    topo, clock, switches, rt = _setup(fast_failover=True)
    groups = [m for _, m in switches.sent if isinstance(m, parser.OFPGroupMod)]
    assert groups, "the desktop's lane over parallel links has a backup group"
    assert rt.reroute is not None
    for up in (False, True, False, True):
        rt.port_status(2, 3, up)
        clock.advance(120.0)  # past any hold-down
        rt.reroute.apply_now()
        (out,) = _walk(switches, topo)
        assert out.kind == "edge" and out.left_by("s2", 3 if up else 4), f"link up={up}"
    assert rt.reroute is not None and rt.reroute.reroutes == 4
