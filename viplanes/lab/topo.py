"""A Mininet ``Topo`` for any `Topology`: one OVS per switch, hosts, middleboxes, the edge router.

Switch ports are the topology's real OpenFlow port numbers. Switches get a run prefix
(``vl<run>s1``) because their bridges and ports live in the machine's root namespace, where two
runs (or another test's bridges) must never collide; hosts and middleboxes live in their own
namespaces and keep their topology names.
"""

from __future__ import annotations

from typing import Any

from mininet.link import Link, TCIntf
from mininet.topo import Topo

from viplanes.topologies.model import Interface, Topology

from .nodes import EdgeRouter, Firewall, LabHost, LabSwitch, Nat

IFNAMSIZ = 15  # Linux interface names: at most 15 characters


def switch_name(prefix: str, name: str, index: int, max_port: int) -> str:
    """The bridge name for a topology switch; falls back to an index if the name is too long."""
    suffix = f"-eth{max_port}"
    candidate = f"{prefix}{name}"
    if len(candidate) + len(suffix) <= IFNAMSIZ and candidate.isalnum():
        return candidate
    fallback = f"{prefix}x{index}"
    if len(fallback) + len(suffix) > IFNAMSIZ:
        raise ValueError(f"switch names with prefix {prefix!r} do not fit in {IFNAMSIZ} chars")
    return fallback


def leg_name(node: str, leg: str) -> str:
    """Interface name of a middlebox/router leg inside its namespace, e.g. ``fw-in``."""
    return f"{node[: IFNAMSIZ - len(leg) - 1]}-{leg}"


class ShapedIntf(TCIntf):
    """Mininet's htb shaping with an explicit quantum (no "quantum is big" warning per link)."""

    def bwCmds(self, bw: float | None = None, **params: Any) -> tuple[list[str], str]:
        cmds, parent = super().bwCmds(bw=bw, **params)
        return [c.replace("htb rate", "htb quantum 1514 rate") for c in cmds], parent


class ShapedLink(Link):
    """A veth pair shaped with htb at ``bw`` Mbit/s in both directions (no netem here)."""

    def __init__(self, node1: str, node2: str, **params: Any) -> None:
        shaping = {k: params.pop(k) for k in ("bw", "txo", "rxo", "gro") if k in params}
        super().__init__(
            node1, node2, cls1=ShapedIntf, cls2=ShapedIntf, params1=dict(shaping), params2=dict(shaping), **params
        )


def _link_opts(mbps: float | None) -> dict[str, Any]:
    """Link options: htb at ``mbps`` on both ends, checksum offloads and GRO off."""
    opts: dict[str, Any] = {"cls": ShapedLink, "txo": False, "rxo": False, "gro": False}
    if mbps:
        opts["bw"] = float(mbps)
    return opts


class LabTopo(Topo):
    """The whole campus as a Mininet topology; ``names`` maps topology names to Mininet names."""

    def build(self, topology: Topology, prefix: str = "vl0000", shape: bool = True) -> None:
        self.topology = topology
        self.names: dict[str, str] = {}
        max_port = _max_port(topology)
        for index, sw in enumerate(topology.switches, start=1):
            name = switch_name(prefix, sw.name, index, max_port)
            self.names[sw.name] = name
            self.addSwitch(name, cls=LabSwitch, dpid=f"{sw.dpid:016x}")

        def bw(mbps: float | None) -> dict[str, Any]:
            return _link_opts(mbps if shape else None)

        for link in topology.links:
            self.addLink(
                self.names[link.a.switch],
                self.names[link.b.switch],
                port1=link.a.port,
                port2=link.b.port,
                **bw(link.mbps),
            )

        for host in topology.hosts:
            self.names[host.name] = host.name
            v6 = {"ip6": str(host.iface.ip6), "gateway6": str(host.gateway6)} if host.iface.ip6 else {}
            cpu = {"cpu_cores": host.cpu_cores, "cpu_group": f"{prefix}/{host.name}"} if host.cpu_cores else {}
            self.addHost(
                host.name,
                cls=LabHost,
                ip=str(host.iface.ip),
                mac=host.iface.mac,
                defaultRoute=f"via {host.gateway}",
                **v6,
                **cpu,
            )
            att = host.iface.attach
            assert att is not None, f"host {host.name} is not attached to a switch"
            self.addLink(
                host.name,
                self.names[att.switch],
                port2=att.port,
                intfName1=f"{host.name[:10]}-eth0",
                **bw(host.nic_mbps),
            )

        for box in topology.middleboxes:
            self.names[box.name] = box.name
            cls = Firewall if box.kind == "firewall" else Nat
            legs = [_leg(box.name, "in", box.inside), _leg(box.name, "out", box.outside)]
            opts: dict[str, Any] = {
                "cls": cls,
                "legs": legs,
                "routes": _routes(box.routes),
                "legs6": _legs6(box.name, box.inside, box.outside),
                "routes6": routes6(topology, box.routes),
            }
            if box.kind == "firewall":
                opts.update(inside=legs[0][0], outside=legs[1][0], mbps=box.mbps if shape else None)
            else:
                opts.update(outside=legs[1][0])
            self.addHost(box.name, **opts)

        edge = topology.edge
        self.names[edge.name] = edge.name
        self.addHost(
            edge.name,
            cls=EdgeRouter,
            routes=_routes(edge.routes),
            legs=[_leg(edge.name, "in", edge.inside), _leg(edge.name, "out", edge.outside)],
            legs6=_legs6(edge.name, edge.inside, edge.outside),
            routes6=edge_routes6(topology),
            masquerade=_router_nat_sources(topology),
        )

        self._cable_legs(topology)

    def _cable_legs(self, topology: Topology) -> None:
        """Cable every router leg to its switch port, or to the leg on the same subnet."""
        legs = [(box.name, "in", box.inside) for box in topology.middleboxes]
        legs += [(box.name, "out", box.outside) for box in topology.middleboxes]
        legs += [(topology.edge.name, "in", topology.edge.inside), (topology.edge.name, "out", topology.edge.outside)]
        loose = []
        for node, leg, iface in legs:
            if iface.attach is None:
                loose.append((node, leg, iface))
                continue
            self.addLink(
                node,
                self.names[iface.attach.switch],
                port2=iface.attach.port,
                intfName1=leg_name(node, leg),
                **_link_opts(None),
            )
        # Legs without a switch port are cabled pairwise to the leg that shares their subnet.
        while loose:
            node, leg, iface = loose.pop(0)
            peer = next((x for x in loose if x[2].ip.network == iface.ip.network), None)
            if peer is None:
                raise ValueError(f"{node} leg {leg} has no switch port and no peer on {iface.ip.network}")
            loose.remove(peer)
            self.addLink(
                node, peer[0], intfName1=leg_name(node, leg), intfName2=leg_name(peer[0], peer[1]), **_link_opts(None)
            )


def _leg(node: str, leg: str, iface: Interface) -> tuple[str, str, str]:
    return (leg_name(node, leg), iface.mac, str(iface.ip))


def _legs6(node: str, inside: Interface, outside: Interface) -> list[tuple[str, str]]:
    return [
        (leg_name(node, leg), str(iface.ip6))
        for leg, iface in (("in", inside), ("out", outside))
        if iface.ip6 is not None
    ]


def _ifaces(topology: Topology) -> list[Interface]:
    out = [h.iface for h in topology.hosts]
    out += [i for box in topology.middleboxes for i in (box.inside, box.outside)]
    return out + [topology.edge.inside, topology.edge.outside]


def routes6(topology: Topology, routes: tuple) -> list[tuple[str, str]]:
    """The v6 twins of a box's v4 routes (the topology lists v4 routes only): the next hop is
    the v6 address of the leg holding the v4 next hop, the destination the v6 networks of the
    interfaces on the v4 destination (``::/0`` for a default route). Legs without ip6: no twin."""
    out = []
    for dst, via in routes:
        hop = next((i.ip6 for i in _ifaces(topology) if i.ip.ip == via and i.ip6 is not None), None)
        if hop is None:
            continue
        nets = (
            {"::/0"}
            if dst.prefixlen == 0
            else {str(i.ip6.network) for i in _ifaces(topology) if i.ip6 is not None and i.ip.network == dst}
        )
        out += [(net, str(hop.ip)) for net in sorted(nets)]
    return out


def edge_routes6(topology: Topology) -> list[tuple[str, str]]:
    """The edge router's routes to campus v6 networks not on its legs: via the middlebox leg on
    its inside v6 subnet (the campus's normal path; a lane takes replies off it at the border)."""
    inside = topology.edge.inside.ip6
    if inside is None:
        return []
    hop = next(
        (
            i.ip6
            for box in topology.middleboxes
            for i in (box.inside, box.outside)
            if i.ip6 is not None and i.ip6.network == inside.network
        ),
        None,
    )
    if hop is None:
        return []
    on_link = {inside.network} | ({topology.edge.outside.ip6.network} if topology.edge.outside.ip6 else set())
    nets = {
        str(h.iface.ip6.network)
        for h in topology.hosts
        if h.iface.ip6 is not None and h.role != "cloud" and h.iface.ip6.network not in on_link
    }
    return [(net, str(hop.ip)) for net in sorted(nets)]


def _routes(routes: tuple) -> list[tuple[str, str]]:
    return [(str(dst), str(via)) for dst, via in routes]


def _max_port(topology: Topology) -> int:
    ports = [link.a.port for link in topology.links] + [link.b.port for link in topology.links]
    ifaces = [h.iface for h in topology.hosts]
    ifaces += [i for box in topology.middleboxes for i in (box.inside, box.outside)]
    ifaces += [topology.edge.inside, topology.edge.outside]
    ports += [i.attach.port for i in ifaces if i.attach is not None]
    return max(ports, default=1)


def _router_nat_sources(topology: Topology) -> list[str]:
    """The private host networks the edge router translates when it is the ``nat_router``."""
    if topology.nat_router != topology.edge.name:
        return []
    return sorted({str(h.iface.ip.network) for h in topology.hosts if h.needs_nat})
