"""The cabling probes end to end in one process (``prober.py``): the runtime packet-outs its
probes, a simulated cabling carries each to the switch it is really plugged into, that switch's
compiled flows punt it, and what comes back makes links unverified, re-routes the lanes and
shows in ``/readyz``'s data. Fake switches, an injected clock (issue 42)."""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.flowsim import make_packet
from tests.support.paths import REPO
from viplanes.controller.compile.linkprobe import ETH_TYPE_PROBE, PROBE_DST
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.probeframe import ProbeCodec
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import PortRef, Topology
from viplanes.topologies.paths import lane_path

REDUNDANT = REPO / "topologies" / "campus-redundant.yaml"
End = tuple[int, int]


class Cabling:
    """Where each port's cable really goes; a packet-out of a probe arrives at the far end."""

    def __init__(self, topo: Topology, switches: FakeSwitches, swap: tuple[End, End] | None = None) -> None:
        self.topo, self.switches = topo, switches
        self.peer: dict[End, End] = {}
        for ln in topo.links:
            a = (topo.switch(ln.a.switch).dpid, ln.a.port)
            b = (topo.switch(ln.b.switch).dpid, ln.b.port)
            self.peer[a], self.peer[b] = b, a
        if swap is not None:  # two cables exchanged at one switch: x's far end is now y's
            x, y = swap
            px, py = self.peer[x], self.peer[y]
            self.peer[x], self.peer[py], self.peer[y], self.peer[px] = py, x, px, y
        self.punted: list[tuple[End, bytes]] = []

    def send(self, dpid: int, ofmsgs: list[Any]) -> bool:
        rest = [m for m in ofmsgs if not isinstance(m, parser.OFPPacketOut)]
        for m in ofmsgs:
            if isinstance(m, parser.OFPPacketOut):
                far = self.peer[(dpid, m.actions[0].port)]
                at = PortRef(self.topo.switch_by_dpid(far[0]).name, far[1])  # type: ignore[union-attr]
                pkt = make_packet(eth_src="02:00:00:00:00:01", eth_dst=PROBE_DST, eth_type=ETH_TYPE_PROBE)
                if [o.kind for o in self.switches.net.inject(at, pkt)] == ["CONTROLLER"]:
                    self.punted.append((far, bytes(m.data)))
        return self.switches.send(dpid, rest) if rest else True

    def deliver(self, rt: LaneRuntime) -> None:
        punted, self.punted = self.punted, []
        for (dpid, port), frame in punted:
            assert rt.probe_in(dpid, port, frame)


def _runtime(swap: tuple[End, End] | None = None) -> tuple[Topology, FakeClock, LaneRuntime, Cabling]:
    topo = load_topology(REDUNDANT)
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches, base_flows=True)  # every switch reconciled
    cabling = Cabling(topo, switches, swap)
    rt.send = cabling.send
    assert rt.reroute is not None and rt.probes is not None
    rt.reroute._start = lambda fn: None  # re-route by hand (apply_now), not on a thread
    return topo, clock, rt, cabling


def _round(rt: LaneRuntime, cabling: Cabling, clock: FakeClock) -> None:
    assert rt.probes is not None and rt.reroute is not None
    rt.probes.round()
    cabling.deliver(rt)
    rt.reroute.apply_now()
    clock.advance(1.0)


def test_a_campus_cabled_as_declared_is_verified_and_stays_usable() -> None:
    _, clock, rt, cabling = _runtime()
    for _ in range(7):
        _round(rt, cabling, clock)
    assert rt.probes is not None and rt.probes.sent == 7 * 16 and rt.probes.accepted == 7 * 16
    assert all(v.state == "up" for v in rt.link_views())
    assert rt.readiness()["ready"]


def test_two_swapped_cables_take_both_links_out_and_the_lane_path_avoids_them() -> None:
    """s6's two cables exchanged: the DTN's lanes take the other two-hop bypass path, via s7."""
    topo, clock, rt, cabling = _runtime(swap=((6, 1), (6, 2)))
    assert lane_path(topo, "dtn")[1].switch == "s6"  # the declared best path crosses s6
    _round(rt, cabling, clock)  # one round: a miscabling needs no grace
    views = {v.name: v for v in rt.link_views()}
    assert views["s5:2-s6:1"].state == "unverified"
    assert views["s5:2-s6:1"].reason == (
        "miscabled: probes from s5:2 arrive at s6:2; probes from s6:1 arrive at s3:6; s5:2 hears s6:2; "
        "s6:1 hears s3:6 (declared s5:2 <-> s6:1)"
    )
    assert views["s6:2-s3:6"].state == "unverified" and "s6:2 hears s5:2" in views["s6:2-s3:6"].reason
    assert {n for n, v in views.items() if not v.usable} == {"s5:2-s6:1", "s6:2-s3:6"}
    ready = rt.readiness()
    assert not ready["ready"] and any("s6:2 hears s5:2" in link["reason"] for link in ready["links"])
    assert rt.topology is not None and lane_path(rt.topology, "dtn")[1].switch == "s7"


def test_forged_and_replayed_probes_from_a_link_port_change_nothing() -> None:
    _, clock, rt, cabling = _runtime()
    assert rt.probes is not None
    rt.probes.round()
    frames = list(cabling.punted)
    cabling.deliver(rt)
    forged = ProbeCodec(window_s=5.0, secret=b"guess" * 7).build(6, 1, clock.now)  # "s6:1 is at s3:7"
    assert rt.probe_in(3, 7, forged)
    (far, frame) = next((far, f) for far, f in frames if far != (3, 7))
    assert rt.probe_in(3, 7, frame)  # recorded at ``far``, played back into s3:7 within the window
    for _ in range(3):
        _round(rt, cabling, clock)
    assert [(v.name, v.reason) for v in rt.link_views() if v.state != "up"] == []
    assert dict(rt.probes.refused) == {"bad_mac": 1, "replayed": 1}


def test_a_link_never_seen_is_unverified_after_the_grace_and_usable_before() -> None:
    """Start-up: s7's probes never leave it (a dead transmitter, say): its links are usable until
    both its switches are ready and 5 intervals have passed, then unverified."""
    _, clock, rt, cabling = _runtime()
    rt.state.reconciled.pop(7)  # s7 not ready: links to it not armed, so not judged
    real = cabling.send

    def mute_s7(dpid: int, ofmsgs: list[Any]) -> bool:
        if dpid == 7:
            ofmsgs = [m for m in ofmsgs if not isinstance(m, parser.OFPPacketOut)]
        return real(dpid, ofmsgs) if ofmsgs else True

    rt.send = mute_s7
    for _ in range(7):
        _round(rt, cabling, clock)
    assert all(v.state == "up" for v in rt.link_views())
    rt.state.reconciled[7] = rt.state.reconciled[6]  # s7 ready now; still silent
    clock_at = clock.now
    while clock.now - clock_at < 4.5:
        _round(rt, cabling, clock)
        assert all(v.state == "up" for v in rt.link_views())
    for _ in range(2):
        _round(rt, cabling, clock)
    views = {v.name: v for v in rt.link_views() if not v.usable}
    assert set(views) == {"s5:3-s7:1", "s7:2-s3:7"}
    assert views["s5:3-s7:1"].reason == "not seen: no probe s7:1 -> s5:3 within 5 s"


def test_a_port_down_while_the_controller_was_away_is_known_at_connect() -> None:
    topo = load_topology(REDUNDANT)
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    switches.down_ports.add((3, 6))
    rt = inline_runtime(topo, clock, switches)
    assert rt.read_ports(3)
    views = {v.name: v for v in rt.link_views() if not v.usable}
    assert list(views) == ["s6:2-s3:6"] and views["s6:2-s3:6"].reason == "port s3:6 down"
    # found down, not seen to drop: its first up is not held down (nothing flapped)
    rt.port_status(3, 6, True)
    assert all(v.state == "up" for v in rt.link_views())
