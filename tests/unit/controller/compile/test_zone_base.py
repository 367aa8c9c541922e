"""Deployments on one vswitchd keep their conntrack zones apart (issue 43): a per-deployment zone
base (``ct_zone_base`` in the topology, ``VIPLANES_CT_ZONE_BASE`` as a setting), and the lab's
and the tests' automatic choice of one (viplanes/lab/ctzones.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import ip_packet
from tests.support.netsim import Network
from tests.support.paths import REPO
from viplanes.controller.compile import conntrack
from viplanes.controller.compile.ctlane import zone_layout
from viplanes.controller.compile.lane import compile_desired, compile_lane_removal
from viplanes.controller.compile.shared import compile_shared_removal
from viplanes.domain.values import LaneSpec
from viplanes.lab import ctzones
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.model import Topology, with_ct_zone_base

NOW = 1_700_000_000.0
CLOUD, CLOUD6, FW_MAC = "203.0.113.10", "2001:db8:ff::10", "02:00:00:02:00:01"
TOPOLOGIES = sorted((REPO / "topologies").glob("*.yaml"))


def zones_in(msgs: Iterable[Any]) -> set[int]:
    """Every conntrack zone the messages name: ct() actions anywhere, zone flushes."""
    found: set[int] = set()

    def walk(actions: Iterable[Any]) -> None:
        for a in actions:
            if isinstance(a, parser.NXActionCT):
                found.add(a.zone_ofs_nbits)
                walk(a.actions)

    for msg in msgs:
        if isinstance(msg, parser.OFPFlowMod):
            for inst in msg.instructions:
                walk(getattr(inst, "actions", []))
        elif isinstance(msg, parser.OFPExperimenter) and msg.exp_type == conntrack.NXT_CT_FLUSH_ZONE:
            found.add(int.from_bytes(msg.data[6:8], "big"))
    return found


def every_lane(topo: Topology) -> list[LaneSpec]:
    """A lane from every host, NAT'd ones on every pool address the topology has (v6 too where
    the host has an address)."""
    lanes, lane_id = [], 1
    pool = list(topo.lane_addresses())
    for host in topo.hosts:
        if host.role == "cloud":
            continue
        src = str(host.iface.ip.ip)
        nat = str(pool.pop()) if host.needs_nat and pool else None
        nets = (f"{CLOUD}/32",) + ((f"{CLOUD6}/128",) if host.ip6 is not None and topo.edge.inside.ip6 else ())
        lanes.append(
            LaneSpec(lane_id, src, None, "tcp", None, None, nat, NOW + 3600, dst_nets=nets, dst_ports=((5201, 5201),))
        )
        lane_id += 1
    return lanes


def deployment_zones(topo: Topology) -> set[int]:
    """The zones a deployment's flows, lane removals and zone limits name."""
    from viplanes.controller.runtime.ctlimits import lane_zones

    lanes = every_lane(topo)
    desired, refused = compile_desired(topo, lanes, NOW)
    assert not refused, refused
    msgs = [m for ms in desired.values() for m in ms]
    dpids = tuple(sorted(desired))
    addrs = {d: {lane.nat_ip or lane.src_ip for lane in lanes} for d in dpids}
    msgs += [m for ms in compile_shared_removal(addrs, topo).values() for m in ms]
    msgs += [m for lane in lanes for ms in compile_lane_removal(lane.lane_id, dpids).values() for m in ms]
    return zones_in(msgs) | set(lane_zones(topo))


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.stem)
def test_two_deployments_with_their_own_slots_never_share_a_zone(path: Path, tmp_path: Path) -> None:
    """Two deployments of one topology file (two labs, a test and a lab) on one vswitchd: each
    claims a slot, and no zone either one's flows, flushes or limits name is the other's."""
    topo = load_topology(path)
    a, b = ctzones.claim_zone_base("one run", tmp_path), ctzones.claim_zone_base("one run", tmp_path)
    try:
        assert a.slot != b.slot  # the same run id, yet the held slot is skipped
        ctzones.check_fits(topo)
        za = deployment_zones(with_ct_zone_base(topo, a.base))
        zb = deployment_zones(with_ct_zone_base(topo, b.base))
        assert za and zb and not za & zb, sorted(za & zb)
        assert za <= set(zone_layout(with_ct_zone_base(topo, a.base)).zones())
        assert max(za) < a.base + ctzones.SLOT_WIDTH and max(zb) < b.base + ctzones.SLOT_WIDTH
        # the default deployment (slot 0) is never a claimed slot's
        assert not deployment_zones(topo) & (za | zb)
        # and one base for both, as every deployment had before: they share every zone
        assert deployment_zones(with_ct_zone_base(topo, a.base)) == za
    finally:
        a.release()
        b.release()


def test_another_deployments_flush_leaves_this_ones_connections(tmp_path: Path) -> None:
    """The bug of issue 43 on the simulated campus: two deployments of campus.yaml on one
    vswitchd (one conntrack table). Deployment B's lane of the same pool address ends and B
    flushes that address's zone; deployment A's connection must still get its reply. With one
    zone numbering for both (before), A's entry went and its SYN-ACK was dropped."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    nat_ip, desktop_ip = "198.51.100.200", "10.1.0.10"

    def outcome(base_a: int, base_b: int) -> list[tuple[str, str]]:
        topo_a, topo_b = with_ct_zone_base(topo, base_a), with_ct_zone_base(topo, base_b)
        lane = LaneSpec(7, desktop_ip, CLOUD, "tcp", 5201, None, nat_ip, NOW + 3600)
        net_a, net_b = Network(topo_a), Network(topo_b)
        for net, t in ((net_a, topo_a), (net_b, topo_b)):
            desired, _ = compile_desired(t, [lane], NOW)
            net.install(desired)
        net_b.tables[3].conntrack = net_a.tables[3].conntrack  # one datapath, one table
        desktop = topo.host("desktop")
        syn = dict(ip_packet(desktop.iface.mac, FW_MAC, desktop_ip, CLOUD, "tcp", 40000, 5201), tcp_flags=0x02)
        [out] = net_a.send_from_host("desktop", syn)
        assert (out.kind, out.packet["ipv4_src"]) == ("edge", nat_ip)
        net_b.install(compile_lane_removal(7, (1, 2, 3)))
        net_b.install(compile_shared_removal({3: {nat_ip, desktop_ip}, 1: {desktop_ip}, 2: {desktop_ip}}, topo_b))
        synack = ip_packet(topo.edge.inside.mac, topo.lane_pool.mac, CLOUD, nat_ip, "tcp", 5201, 40000)
        return [(o.kind, o.node) for o in net_a.send_from_edge(dict(synack, tcp_flags=0x12))]

    a, b = ctzones.claim_zone_base("flush", tmp_path), ctzones.claim_zone_base("flush", tmp_path)
    try:
        assert outcome(a.base, b.base) == [("host", "desktop")]
        assert outcome(a.base, a.base) == [("drop", "s3")]  # one numbering: B flushed A's entry
    finally:
        a.release()
        b.release()


def test_a_released_slot_is_free_again_and_all_slots_held_is_an_error(tmp_path: Path) -> None:
    held = [ctzones.claim_zone_base(f"run {i}", tmp_path) for i in range(ctzones.SLOTS - 1)]
    try:
        assert len({c.base for c in held}) == ctzones.SLOTS - 1
        assert all(c.base >= ctzones.slot_base(1) for c in held)
        with pytest.raises(ctzones.ZoneSlotError, match="slots is held"):
            ctzones.claim_zone_base("one more", tmp_path)
        freed = held.pop()
        freed.release()
        again = ctzones.claim_zone_base("one more", tmp_path)
        assert again.base == freed.base
        held.append(again)
    finally:
        for c in held:
            c.release()


def test_the_lab_hands_a_claimed_base_to_its_serve_unless_one_was_given(tmp_path: Path) -> None:
    """``start_stack``'s choice: a lab run outside the tests claims a slot for its `viplanes
    serve`; inside a test session (or with the operator's base) it keeps the given one."""
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    env: dict[str, str] = {}
    claim = ctzones.claim_for_env(env, topo, "lab run", tmp_path)
    assert claim is not None
    try:
        assert env == {"VIPLANES_CT_ZONE_BASE": str(claim.base)} and claim.base >= ctzones.slot_base(1)
        given = {"VIPLANES_CT_ZONE_BASE": "9216"}
        assert ctzones.claim_for_env(given, topo, "lab run", tmp_path) is None
        assert given == {"VIPLANES_CT_ZONE_BASE": "9216"}
    finally:
        claim.release()


def test_a_zone_base_that_does_not_fit_is_refused_with_the_range(tmp_path: Path) -> None:
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    with pytest.raises(ValueError, match=r"zones 65530\.\.65\d+ do not fit 1\.\.65535"):
        with_ct_zone_base(topo, 65530)
    with pytest.raises(ValueError, match="do not fit"):
        with_ct_zone_base(topo, 0)  # zone 0: every zone-less ct() on the vswitchd
    doc = yaml.safe_load((REPO / "topologies" / "campus.yaml").read_text())
    for bad in (65500, "lots", True):
        with pytest.raises(TopologyError, match="ct_zone_base"):
            parse_topology({**doc, "ct_zone_base": bad})
    assert parse_topology({**doc, "ct_zone_base": 0x2000}).ct_zone_base == 0x2000
    big = dataclasses.replace(topo, hosts=topo.hosts * 400)
    with pytest.raises(ctzones.ZoneSlotError, match="a lab slot holds"):
        ctzones.check_fits(big)


def test_the_setting_overrides_the_topology_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from viplanes.cli.serve import load_topology_option

    path = str(REPO / "topologies" / "campus.yaml")
    monkeypatch.delenv("VIPLANES_CT_ZONE_BASE", raising=False)
    assert load_topology_option(path).ct_zone_base == 0x1000
    monkeypatch.setenv("VIPLANES_CT_ZONE_BASE", "0x2400")
    assert load_topology_option(path).ct_zone_base == 0x2400
    for bad, why in (("many", "VIPLANES_CT_ZONE_BASE=.many.: expected an integer"), ("65535", "do not fit")):
        monkeypatch.setenv("VIPLANES_CT_ZONE_BASE", bad)
        with pytest.raises(click.ClickException, match=why) as exc:
            load_topology_option(path)
        assert "\n" not in exc.value.message
