"""Fast-failover groups (issue 42): a lane's backup path is installed beside its primary and the
switch itself moves the lane when the watched port goes down, no controller involved. Asked of
two redundant campuses: the shipped one and a ring with three parallel transits that only the
tests know (``tests/unit/fixtures/topologies/campus-ring.yaml``), so nothing here is specific
to one campus."""

from __future__ import annotations

from pathlib import Path

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import ip_packet
from tests.support.netsim import Network, Outcome
from tests.support.paths import TOPOLOGIES, UNIT_FIXTURES
from tests.support.topos import without_fast_failover
from viplanes.controller.compile import failover
from viplanes.controller.compile.budget import CompiledCosts
from viplanes.controller.compile.groups import group_delete, plan_groups
from viplanes.controller.compile.lane import compile_desired, compile_lane, lane_dpids
from viplanes.controller.compile.path import gateway_mac, lane_hops
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import path_links

NOW = 1_700_000_000.0
CLOUD = "203.0.113.10"
CAMPUSES = {
    "redundant": TOPOLOGIES / "campus-redundant.yaml",
    "ring": UNIT_FIXTURES / "topologies" / "campus-ring.yaml",
}
CASES = [(campus, host) for campus in CAMPUSES for host in ("desktop", "dtn")]


def load(campus: str, fast_failover: bool = True) -> Topology:
    topo = load_topology(Path(CAMPUSES[campus]))
    return topo if fast_failover else without_fast_failover(topo)


def lane_of(topo: Topology, host_name: str, lane_id: int = 7) -> LaneSpec:
    host = topo.host(host_name)
    nat = str(topo.lane_addresses()[0]) if host.needs_nat else None
    return LaneSpec(lane_id, str(host.iface.ip.ip), CLOUD, "tcp", 5201, None, nat, NOW + 3600)


def network(topo: Topology, lane: LaneSpec) -> Network:
    net = Network(topo)
    desired, refused = compile_desired(topo, [lane], NOW)
    assert not refused
    net.install(desired)
    return net


def send(net: Network, topo: Topology, host_name: str, flags: int = 0x010) -> list[Outcome]:
    host = topo.host(host_name)
    pkt = ip_packet(host.iface.mac, gateway_mac(topo, host), str(host.iface.ip.ip), CLOUD, "tcp", 40000, 5201)
    return net.send_from_host(host_name, dict(pkt, tcp_flags=flags))


def reply(net: Network, topo: Topology, lane: LaneSpec) -> list[Outcome]:
    dst = lane.nat_ip or lane.src_ip
    pkt = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, dst, "tcp", 5201, 40000)
    return net.send_from_edge(dict(pkt, tcp_flags=0x012))


@pytest.mark.parametrize(("campus", "host"), CASES)
def test_the_backup_shares_no_link_with_the_primary_after_it_parts(campus: str, host: str) -> None:
    topo = load(campus)
    lane = lane_of(topo, host)
    hops = lane_hops(lane, topo)
    backup = failover.backup_path(topo, hops)
    assert backup is not None
    assert backup.hops[0] == hops[0] or backup.diverge == 0
    assert backup.hops[-1].switch == hops[-1].switch and backup.hops[-1].out_port == hops[-1].out_port
    after = set(path_links(topo, hops[backup.diverge :]))
    assert not after & set(path_links(topo, backup.hops[backup.diverge :]))
    detour = {h.switch for h in backup.hops} - {h.switch for h in hops}
    assert all(topo.switch(s).dpid in lane_dpids(lane, topo) for s in detour)  # removal reaches them


@pytest.mark.parametrize(("campus", "host"), CASES)
def test_the_switch_moves_the_lane_itself_when_the_link_next_to_it_goes_down(campus: str, host: str) -> None:
    topo = load(campus)
    lane = lane_of(topo, host)
    hops = lane_hops(lane, topo)
    backup = failover.backup_path(topo, hops)
    assert backup is not None
    net = network(topo, lane)
    (before,) = send(net, topo, host, flags=0x002)  # the SYN: conntrack commits it at the border
    assert before.kind == "edge"
    d, c = backup.diverge, backup.rejoin
    net.set_link(path_links(topo, hops[d : d + 2])[0], up=False)  # the primary link leaving D
    (after,) = send(net, topo, host)  # the same tables: nobody told the controller
    assert after.kind == "edge" and after.left_by(hops[d].switch, backup.hops[d].out_port)
    assert after.packet["ipv4_src"] == before.packet["ipv4_src"]  # a NAT'd lane keeps its address
    net.set_link(path_links(topo, hops[d : d + 2])[0], up=True)
    net.set_link(path_links(topo, hops[c - 1 : c + 1])[0], up=False)  # the primary link into C
    outs = reply(net, topo, lane)
    assert [(o.kind, o.node) for o in outs] == [("host", host)], outs
    assert outs[0].packet["ipv4_dst"] == lane.src_ip


@pytest.mark.parametrize("campus", CAMPUSES)
def test_without_fast_failover_no_group_is_sent_and_a_cut_link_loses_the_lane(campus: str) -> None:
    topo = load(campus, fast_failover=False)
    lane = lane_of(topo, "dtn")
    msgs = [m for ms in compile_lane(lane, topo, NOW).values() for m in ms]
    assert not [m for m in msgs if isinstance(m, parser.OFPGroupMod)]
    hops = lane_hops(lane, topo)
    assert lane_dpids(lane, topo) == tuple(h.dpid for h in hops)
    net = network(topo, lane)
    net.set_link(path_links(topo, hops)[0], up=False)
    assert [o.kind for o in send(net, topo, "dtn", flags=0x002)] == ["lost"]  # until the controller re-routes


@pytest.mark.parametrize("campus", CAMPUSES)
def test_backup_flows_count_against_the_budget(campus: str) -> None:
    topo = load(campus)
    lane = lane_of(topo, "dtn")
    backup = failover.backup_path(topo, lane_hops(lane, topo))
    assert backup is not None
    detour = {h.switch for h in backup.hops} - {h.switch for h in lane_hops(lane, topo)}
    own = CompiledCosts(topo).lane(lane).own
    assert detour and all(own.get((s, 0), 0) == 2 for s in detour)  # forward + reverse, pre-installed
    plain = CompiledCosts(load(campus, fast_failover=False)).lane(lane).own
    assert all((s, 0) not in plain for s in detour)


def test_one_group_per_lane_and_switch_with_the_primary_port_watched_first() -> None:
    topo = load("redundant")
    lane = lane_of(topo, "desktop")
    per_dpid = compile_lane(lane, topo, NOW)
    groups = {d: [m for m in ms if isinstance(m, parser.OFPGroupMod)] for d, ms in per_dpid.items()}
    gid = failover.group_id_for(lane.lane_id)
    assert {d: [(g.group_id, g.type, [b.watch_port for b in g.buckets]) for g in gs] for d, gs in groups.items()} == {
        1: [],
        2: [(gid, ofp.OFPGT_FF, [3, 4])],  # forward at s2: bypass a, then bypass b
        3: [(gid, ofp.OFPGT_FF, [3, 5])],  # reverse at s3: towards s2 over a, then b
    }
    for msgs in per_dpid.values():  # each group precedes the flows that send to it
        first_use = next((i for i, m in enumerate(msgs) if _uses_group(m)), len(msgs))
        assert all(i < first_use for i, m in enumerate(msgs) if isinstance(m, parser.OFPGroupMod))


def _uses_group(msg: object) -> bool:
    insts = getattr(msg, "instructions", None) or []
    return any(isinstance(a, parser.OFPActionGroup) for i in insts for a in getattr(i, "actions", []) or [])


def test_group_ids_are_the_apps_own_range() -> None:
    assert failover.group_id_for(1) == failover.GROUP_BASE + 1
    assert failover.lane_of_group(failover.GROUP_BASE + 9) == 9
    assert failover.lane_of_group(5) is None and failover.lane_of_group(ofp.OFPG_ALL) is None
    assert failover.group_id_for(ofp.OFPG_MAX) is None  # no group: the lane keeps its primary only


def test_group_reconcile_adds_modifies_and_deletes_only_the_apps_groups() -> None:
    gid = failover.group_id_for(3)
    assert gid is not None
    want = [failover.group_mod(gid, (3, 4)), failover.group_mod(gid + 1, (6, 7))]
    have = [
        parser.OFPGroupDescStats(type_=ofp.OFPGT_FF, group_id=gid, buckets=failover.group_mod(gid, (4, 3)).buckets),
        parser.OFPGroupDescStats(type_=ofp.OFPGT_FF, group_id=gid + 2, buckets=[]),  # a lane that ended
        parser.OFPGroupDescStats(type_=ofp.OFPGT_ALL, group_id=5, buckets=[]),  # not ours
    ]
    plan = plan_groups(want, have)
    assert [(m.command, m.group_id) for m in plan.first] == [(ofp.OFPGC_MODIFY, gid), (ofp.OFPGC_ADD, gid + 1)]
    assert [(m.command, m.group_id) for m in plan.last] == [(ofp.OFPGC_DELETE, gid + 2)]
    same = [parser.OFPGroupDescStats(type_=ofp.OFPGT_FF, group_id=m.group_id, buckets=m.buckets) for m in want]
    kept = plan_groups(want, same)
    assert (kept.first, kept.last, kept.kept) == ((), (), 2)
    assert group_delete(gid).command == ofp.OFPGC_DELETE


@pytest.mark.parametrize("campus", CAMPUSES)
def test_a_dead_transit_switch_is_failed_over_both_ways_by_the_switches_alone(campus: str) -> None:
    """Every port of the DTN lane's transit switch goes dark: its neighbours' watched ports go
    down, so its access switch sends forward over the detour and the border sends replies back
    over it, before any controller re-route."""
    topo = load(campus)
    lane = lane_of(topo, "dtn")
    hops = lane_hops(lane, topo)
    net = network(topo, lane)
    assert [o.kind for o in send(net, topo, "dtn", flags=0x002)] == ["edge"]
    transit = hops[1].switch
    for link in topo.links:
        if transit in (link.a.switch, link.b.switch):
            net.set_link(link.name, up=False)
    outs = send(net, topo, "dtn")
    assert [o.kind for o in outs] == ["edge"] and not any(s == transit for s, _, _ in outs[0].path)
    back = reply(net, topo, lane)
    assert [(o.kind, o.node) for o in back] == [("host", "dtn")]
    assert not any(s == transit for s, _, _ in back[0].path)
