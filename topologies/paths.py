"""Where a lane runs: the switch path from a campus host to the edge router's inside port.

The graph holds switches and switch-to-switch links only. Middleboxes are never nodes, so no lane
path can cross a firewall or NAT; the only way around them is over links, preferably bypass ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from viplanes.topologies.model import Host, Link, Topology

# Cost of one hop: a path uses as few default (non-bypass) links as it can, then as few hops.
BYPASS_COST = 1
DEFAULT_LINK_COST = 1000


class NoLanePath(ValueError):
    """The host cannot have a lane: no switch path from it to the edge router's inside port."""


@dataclass(frozen=True)
class Hop:
    """One switch on a lane, in the forward direction (host -> edge)."""

    dpid: int
    switch: str
    in_port: int
    out_port: int


def edge_rank(link: Link) -> tuple[int, float, str]:
    """Of parallel links, the lane takes the bypass one, then the faster, then the first named."""
    return (BYPASS_COST if link.bypass else DEFAULT_LINK_COST, -link.mbps, link.name)


def switch_graph(topo: Topology) -> nx.MultiGraph:
    """Switches joined by every usable link, parallel ones included, keyed by ``Link.name``.

    Links in ``topo.unusable_links`` (down, damped, unverified: the controller's live view) are
    left out, so a path over this graph is one the lane can take now.
    """
    graph = nx.MultiGraph()
    graph.add_nodes_from(s.name for s in topo.switches)
    for link in topo.links:
        if link.name in topo.unusable_links:
            continue
        weight = BYPASS_COST if link.bypass else DEFAULT_LINK_COST
        graph.add_edge(link.a.switch, link.b.switch, key=link.name, link=link, weight=weight)
    return graph


def best_link(graph: nx.MultiGraph, u: str, v: str) -> Link:
    """The link a lane takes from ``u`` to ``v`` among the parallel ones in ``graph``."""
    return min((data["link"] for data in graph[u][v].values()), key=edge_rank)


def port_towards(link: Link, switch: str) -> int:
    """The port of ``link`` on ``switch``."""
    return link.a.port if link.a.switch == switch else link.b.port


_CACHE_ATTR = "_lane_path_cache"


def lane_path(topo: Topology, host_name: str, graph: nx.MultiGraph | None = None) -> tuple[Hop, ...]:
    """Hops from the host's attachment port to the edge router's inside attachment.

    A topology is immutable, so each host's answer is computed once and remembered on the
    topology object (a restart compiles thousands of lanes from a handful of hosts).
    """
    if graph is not None:
        return _compute_path(topo, host_name, graph)
    cache: dict[str, tuple[Hop, ...] | str] | None = topo.__dict__.get(_CACHE_ATTR)
    if cache is None:
        cache = {}
        object.__setattr__(topo, _CACHE_ATTR, cache)  # frozen dataclass: not a field
    if host_name not in cache:
        try:
            cache[host_name] = _compute_path(topo, host_name, switch_graph(topo))
        except NoLanePath as exc:
            cache[host_name] = str(exc)
    found = cache[host_name]
    if isinstance(found, str):
        raise NoLanePath(found)
    return found


def _compute_path(topo: Topology, host_name: str, graph: nx.MultiGraph) -> tuple[Hop, ...]:
    try:
        host: Host = topo.host(host_name)
    except StopIteration:
        raise NoLanePath(f"unknown host {host_name!r}") from None
    if host.role == "cloud":
        raise NoLanePath(f"host {host_name!r} is a cloud host outside the campus: lanes start at campus hosts")
    edge_at = topo.edge.inside.attach
    if edge_at is None or host.iface.attach is None:  # the loader forbids both; keep the message
        raise NoLanePath(f"host {host_name!r} or the edge router is not attached to a switch")
    start = host.iface.attach
    try:
        names = nx.shortest_path(graph, start.switch, edge_at.switch, weight="weight")
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        raise NoLanePath(
            f"no lane path from host {host_name!r} (at {start}) to the edge router "
            f"(at {edge_at}): switch {start.switch} has no link path to "
            f"{edge_at.switch} that avoids the middleboxes{_unusable_note(topo)}"
        ) from None
    hops = []
    in_port = start.port
    for i, name in enumerate(names):
        if i + 1 < len(names):
            link = best_link(graph, name, names[i + 1])
            out_port = port_towards(link, name)
            next_in = port_towards(link, names[i + 1])
        else:
            out_port, next_in = edge_at.port, 0
        hops.append(Hop(dpid=topo.switch(name).dpid, switch=name, in_port=in_port, out_port=out_port))
        in_port = next_in
    return tuple(hops)


def _unusable_note(topo: Topology) -> str:
    if not topo.unusable_links:
        return ""
    return " over usable links (not usable now: " + ", ".join(sorted(topo.unusable_links)) + ")"


def lane_paths(topo: Topology) -> dict[str, tuple[Hop, ...] | NoLanePath]:
    """Every host's lane path, or the reason it has none (for `topology check` and the API)."""
    graph = switch_graph(topo)
    out: dict[str, tuple[Hop, ...] | NoLanePath] = {}
    for host in topo.hosts:
        try:
            out[host.name] = lane_path(topo, host.name, graph)
        except NoLanePath as exc:
            out[host.name] = exc
    return out


def path_links(topo: Topology, hops: tuple[Hop, ...]) -> tuple[str, ...]:
    """The names of the declared links a path crosses, in order (re-route finds its lanes)."""
    ends = {(end.switch, end.port): link.name for link in topo.links for end in (link.a, link.b)}
    return tuple(ends[(h.switch, h.out_port)] for h in hops[:-1] if (h.switch, h.out_port) in ends)


def bypass_ports(topo: Topology) -> dict[int, set[int]]:
    """Per dpid, the ports that end a bypass link: default traffic must never use them."""
    out: dict[int, set[int]] = {}
    for link in topo.links:
        if link.bypass:
            for end in (link.a, link.b):
                out.setdefault(topo.switch(end.switch).dpid, set()).add(end.port)
    return out


def format_path(hops: tuple[Hop, ...]) -> str:
    """``s1[1>3] s2[1>3] s3[3>2]``: each switch with its in and out port."""
    return " ".join(f"{h.switch}[{h.in_port}>{h.out_port}]" for h in hops)
