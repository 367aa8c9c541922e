"""The lanes' fast-failover groups on (fake) switches: installed with the lane, deleted when it
ends (no group left behind), put back and cleaned up by the reconcile of a reconnecting switch,
and recomputed by the controller's re-route. Over the shipped redundant campus and the ring that
only the tests know."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, rerouting_runtime
from tests.support.flowsim import FlowTable, ip_packet
from tests.support.paths import TOPOLOGIES, UNIT_FIXTURES
from viplanes.controller.compile import failover
from viplanes.controller.compile.cookies import lane_id_from_cookie
from viplanes.controller.compile.path import gateway_mac, lane_hops
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import path_links

CLOUD = "203.0.113.10"
CAMPUSES = [TOPOLOGIES / "campus-redundant.yaml", UNIT_FIXTURES / "topologies" / "campus-ring.yaml"]


def _setup(path: Path) -> tuple[Topology, FakeClock, FakeSwitches, LaneRuntime]:
    topo = load_topology(path)
    clock, switches, rt = rerouting_runtime(topo)
    return topo, clock, switches, rt


def _lanes(topo: Topology, clock: FakeClock) -> list[LaneSpec]:
    out = []
    for lane_id, name in ((11, "desktop"), (12, "dtn")):
        host = topo.host(name)
        nat = str(topo.lane_addresses()[0]) if host.needs_nat else None
        out.append(LaneSpec(lane_id, str(host.iface.ip.ip), CLOUD, "tcp", 5201, None, nat, clock.now + 3600))
    return out


def _groups(switches: FakeSwitches) -> dict[int, set[int]]:
    return {dpid: set(t.groups) for dpid, t in switches.net.tables.items() if t.groups}


def _reaches_edge(switches: FakeSwitches, topo: Topology, lane: LaneSpec) -> bool:
    host = topo.host_by_ip(lane.src_ip)
    assert host is not None
    pkt = ip_packet(host.iface.mac, gateway_mac(topo, host), lane.src_ip, CLOUD, "tcp", 40000, 5201)
    outs = switches.net.send_from_host(host.name, dict(pkt, tcp_flags=0x002))
    return [o.kind for o in outs] == ["edge"]


@pytest.mark.parametrize("path", CAMPUSES, ids=["redundant", "ring"])
def test_groups_come_with_the_lane_and_go_with_it(path: Path) -> None:
    topo, clock, switches, rt = _setup(path)
    lanes = _lanes(topo, clock)
    for lane in lanes:
        assert rt.activate(lane).ok
    gids = {failover.group_id_for(lane.lane_id) for lane in lanes}
    assert _groups(switches) and set().union(*_groups(switches).values()) == gids
    for lane in lanes:
        assert _reaches_edge(switches, topo, lane)
        rt.deactivate(lane.lane_id)
    assert _groups(switches) == {}  # no group left behind
    ids = {lane.lane_id for lane in lanes}
    assert not [e for t in switches.net.tables.values() for e in t.flows if lane_id_from_cookie(e.cookie) in ids]


@pytest.mark.parametrize("path", CAMPUSES, ids=["redundant", "ring"])
def test_a_reconnecting_switch_gets_its_groups_back_and_loses_stale_ones(path: Path) -> None:
    topo, clock, switches, rt = _setup(path)
    lane = _lanes(topo, clock)[1]  # the DTN: its group sits at its access switch
    assert rt.activate(lane).ok
    first = lane_hops(lane, topo)[0].dpid
    stale = failover.group_id_for(99)
    assert stale is not None
    switches.net.tables[first] = FlowTable()  # vswitchd restarted: no flows, no groups
    switches.net.tables[first].groups[stale] = failover.group_mod(stale, (1, 2))  # a lane ended meanwhile
    switches.net.tables[first].groups[5] = failover.group_mod(5, (1, 2))  # another app's group
    rt.reconcile_switch(first)
    assert set(switches.net.tables[first].groups) == {failover.group_id_for(lane.lane_id), 5}
    assert _reaches_edge(switches, topo, lane)
    hops = lane_hops(lane, topo)
    switches.net.set_link(path_links(topo, hops)[0], up=False)
    assert _reaches_edge(switches, topo, lane)  # the restored group fails over


@pytest.mark.parametrize("path", CAMPUSES, ids=["redundant", "ring"])
def test_the_controllers_reroute_recomputes_the_backups(path: Path) -> None:
    topo, clock, switches, rt = _setup(path)
    lanes = _lanes(topo, clock)
    for lane in lanes:
        assert rt.activate(lane).ok
    cut = path_links(topo, lane_hops(lanes[1], topo))[0]
    switches.net.set_link(cut, up=False)  # the switch fails over at once
    assert _reaches_edge(switches, topo, lanes[1])
    link = next(lk for lk in topo.links if lk.name == cut)
    switches.down_ports.update({(topo.switch(e.switch).dpid, e.port) for e in (link.a, link.b)})
    rt.port_status(topo.switch(link.a.switch).dpid, link.a.port, False)
    assert rt.reroute is not None and rt.reroute.apply_now()
    view = rt.state.topology
    assert view is not None and cut in view.unusable_links
    for lane in lanes:
        assert _reaches_edge(switches, topo, lane)
        assert cut not in path_links(view, lane_hops(lane, view))
        backup = failover.backup_path(view, lane_hops(lane, view))
        assert backup is None or cut not in path_links(view, backup.hops)
    desired, _ = rt.resync.desired(clock())
    want = {d: {m.group_id for m in failover.groups_of(ms)} for d, ms in desired.items()}
    assert _groups(switches) == {d: g for d, g in want.items() if g}  # new backups in, old ones out
    assert rt.check_drift() == []  # the drift probe expects the new paths' flows, not the old


@pytest.mark.parametrize("path", CAMPUSES, ids=["redundant", "ring"])
def test_a_backup_switch_that_is_away_does_not_stop_the_lane(path: Path) -> None:
    """Only the lane's own path must be connected: the detour's switch gets its flows from its
    reconcile when it comes back."""
    topo, clock, switches, rt = _setup(path)
    lane = _lanes(topo, clock)[1]
    hops = lane_hops(lane, topo)
    backup = failover.backup_path(topo, hops)
    assert backup is not None
    (detour,) = backup.extra_dpids(hops)
    rt.switch_down(detour)
    assert rt.activate(lane).ok
    assert not [e for e in switches.net.tables[detour].flows if lane_id_from_cookie(e.cookie) == lane.lane_id]
    rt.switch_up(detour)
    switches.net.set_link(path_links(topo, hops)[0], up=False)
    assert _reaches_edge(switches, topo, lane)
