"""Walk a packet across a whole Topology of simulated flow tables (see ``flowsim``).

Tests then read like the requirement: "the desktop's packet leaves s3 on the edge router's port
with ipv4_src = the lane address", "a spoofed packet never leaves through a bypass port".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.flowsim import FlowTable, Packet
from viplanes.topologies.model import PortRef, Topology

MAX_SWITCH_VISITS = 64  # a forwarding loop in the rules shows up as an error, not a hang


class ForwardingLoop(RuntimeError):
    pass


@dataclass(frozen=True)
class Outcome:
    """Where one copy of a packet ended up.

    kind: "host", "middlebox", "edge" (a node received it on ``leg``), "NORMAL" / "CONTROLLER" /
    "FLOOD" (handed to the switch's default forwarding or the controller), "drop" (no flow or
    no output), "unconnected" (sent out a port with nothing behind it).
    """

    kind: str
    node: str  # receiving node, or the switch for NORMAL/CONTROLLER/drop/unconnected
    port: PortRef  # the switch port it left by (arrived on, for drop)
    packet: Packet
    path: tuple[tuple[str, int, int | str], ...]  # (switch, in_port, out) per switch crossed
    leg: str = ""  # "inside"/"outside" for middleboxes and the edge router

    def left_by(self, switch: str, port: int) -> bool:
        return any(s == switch and out == port for s, _, out in self.path)


class Network:
    """Every switch of a topology as a FlowTable, joined by the topology's links."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.tables: dict[int, FlowTable] = {s.dpid: FlowTable() for s in topo.switches}
        self.behind: dict[PortRef, tuple[str, str, Any]] = {}  # port -> (kind, name, extra)
        for link in topo.links:
            self.behind[link.a] = ("link", "", link.b)
            self.behind[link.b] = ("link", "", link.a)
        for host in topo.hosts:
            if host.iface.attach:
                self.behind[host.iface.attach] = ("host", host.name, "")
        for mb in topo.middleboxes:
            for leg, iface in (("inside", mb.inside), ("outside", mb.outside)):
                if iface.attach:
                    self.behind[iface.attach] = ("middlebox", mb.name, leg)
        for leg, iface in (("inside", topo.edge.inside), ("outside", topo.edge.outside)):
            if iface.attach:
                self.behind[iface.attach] = ("edge", topo.edge.name, leg)

    def table(self, switch: str | int) -> FlowTable:
        dpid = switch if isinstance(switch, int) else self.topo.switch(switch).dpid
        return self.tables[dpid]

    def install(self, ofmsgs_by_dpid: Mapping[int, Iterable[Any]], now: float = 0.0) -> None:
        for dpid, ofmsgs in ofmsgs_by_dpid.items():
            self.tables[dpid].apply_all(ofmsgs, now)

    def set_link(self, name: str, up: bool) -> None:
        """Both ends of a link down (or up again), as a cut fibre: groups watching them fail
        over, and a packet sent out of one is lost."""
        link = next(lk for lk in self.topo.links if lk.name == name)
        for end in (link.a, link.b):
            ports = self.table(end.switch).down_ports
            if up:
                ports.discard(end.port)
            else:
                ports.add(end.port)

    def expire(self, now: float) -> None:
        for table in self.tables.values():
            table.expire(now)

    def send_from_host(self, host_name: str, packet: Mapping[str, Any]) -> list[Outcome]:
        attach = self.topo.host(host_name).iface.attach
        assert attach is not None
        return self.inject(attach, packet)

    def send_from_edge(self, packet: Mapping[str, Any]) -> list[Outcome]:
        """A packet the edge router sends into the campus (return traffic)."""
        attach = self.topo.edge.inside.attach
        assert attach is not None
        return self.inject(attach, packet)

    def inject(self, at: PortRef, packet: Mapping[str, Any]) -> list[Outcome]:
        """A packet arriving at switch port ``at``; follow it until every copy has ended."""
        outcomes: list[Outcome] = []
        queue: deque[tuple[PortRef, Packet, tuple[tuple[str, int, int | str], ...]]] = deque([(at, dict(packet), ())])
        visits = 0
        while queue:
            here, pkt, path = queue.popleft()
            visits += 1
            if visits > MAX_SWITCH_VISITS:
                raise ForwardingLoop(f"packet still moving after {MAX_SWITCH_VISITS} switches: {path[-6:]}")
            table = self.table(here.switch)
            outs = table.process(pkt, here.port)
            if not outs:
                outcomes.append(Outcome("drop", here.switch, here, pkt, path))
            for out, sent in outs:
                trail = path + ((here.switch, here.port, out),)
                if isinstance(out, str):
                    outcomes.append(Outcome(out, here.switch, here, sent, trail))
                    continue
                port = PortRef(here.switch, out)
                if out in table.down_ports:  # sent into a dead link: lost
                    outcomes.append(Outcome("lost", here.switch, port, sent, trail))
                    continue
                kind, name, extra = self.behind.get(port, ("unconnected", here.switch, ""))
                if kind == "link":
                    queue.append((extra, sent, trail))
                else:
                    outcomes.append(Outcome(kind, name, port, sent, trail, leg=extra))
        return outcomes
