"""Fast-failover groups: a lane's backup path installed beside its primary, so a switch moves the
lane by itself when a port of the primary goes down, before the controller hears of it. Pure.

Where both switches that would hold a group declare ``fast_failover`` (``topologies/profiles.py``;
OVS does, the ``single_table`` profile does not), a lane gets a *backup*: from the first switch of
its path that has one (the *divergence* switch D), a detour over usable links that shares no link
with the primary from D on and no switch with it but D and the switch where it *rejoins* (C). The
lane is compiled over both paths and the two merged:

- flows the paths share are the same messages (kept once);
- the two flows that differ only in where they send the packet become one flow ending in an
  ``OFPGT_FF`` group: at D the forward flows (bucket 1 watches the primary's port, bucket 2 the
  detour's), at C the reverse flows (towards the host), conntrack reply flows included;
- the detour's switches, and the detour's ends at D and C, get the lane's flows over the detour.

A group watches its own switch's port only, so the switch fails over by itself when the link next
to D (forward) or next to C (reverse) goes down; a link further along the primary is the
controller's to re-route (``controller/runtime/reroute.py``), as on switches without groups.
Either way the controller's re-route then recompiles every lane over the usable links, with a
new backup where one is left. The backup's flows are always installed and count against the
flow budgets (``budget.py`` counts what ``compile_lane`` emits): a backup installed only on
failure would need the controller, which is what the group is there to avoid.

One group per lane and switch: its id is ``GROUP_BASE`` + the lane id, so a lane's groups are
found, deleted and reconciled by id alone (``groups.py``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import networkx as nx
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.flowkey import action_key, instructions_key, match_key
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import (
    BYPASS_COST,
    DEFAULT_LINK_COST,
    Hop,
    best_link,
    edge_rank,
    port_towards,
    switch_graph,
)

OFMsgs = list[Any]

GROUP_BASE = 0x10000000  # group ids at and above it are the lanes' (lane id added)
GROUP_MAX = ofp.OFPG_MAX  # 0xffffff00: the last group id OpenFlow 1.3 allows


def group_id_for(lane_id: int) -> int | None:
    """The lane's group id on every switch that holds one; None when the id does not fit."""
    gid = GROUP_BASE + lane_id
    return gid if lane_id >= 1 and gid <= GROUP_MAX else None


def lane_of_group(group_id: int) -> int | None:
    """The lane a group id belongs to; None for a group that is not the app's."""
    return group_id - GROUP_BASE if GROUP_BASE < group_id <= GROUP_MAX else None


@dataclass(frozen=True)
class Backup:
    """A lane's backup path: the whole of it (host -> edge), and where it leaves and rejoins
    the primary (indexes into the primary's hops)."""

    hops: tuple[Hop, ...]
    diverge: int
    rejoin: int

    def extra_dpids(self, primary: tuple[Hop, ...]) -> tuple[int, ...]:
        """Switches on the backup only (the detour between D and C)."""
        on_primary = {h.dpid for h in primary}
        return tuple(h.dpid for h in self.hops if h.dpid not in on_primary)


def _detour(
    graph: nx.MultiGraph, avoid_links: set[str], avoid_switches: set[str], src: str, dst: str
) -> tuple[int, list[str]]:
    """(cost, the cheapest switch path src -> dst) over ``graph`` without those links and
    switches; (0, []) when there is none."""
    sub = nx.MultiGraph()
    sub.add_nodes_from(n for n in graph.nodes if n not in avoid_switches)
    for u, v, key, data in graph.edges(keys=True, data=True):
        if key not in avoid_links and u not in avoid_switches and v not in avoid_switches:
            sub.add_edge(u, v, key=key, **data)
    try:
        names = list(nx.shortest_path(sub, src, dst, weight="weight"))
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return 0, []
    return sum(BYPASS_COST if best_link(sub, u, v).bypass else DEFAULT_LINK_COST for u, v in pairwise(names)), names


_CACHE_ATTR = "_backup_path_cache"


def backup_path(topo: Topology, hops: tuple[Hop, ...]) -> Backup | None:
    """The backup of a primary path over ``topo``'s usable links, or None (no detour exists).

    The first switch that has a detour is D; of its detours the cheapest (fewest default
    links, then fewest hops; then the nearest rejoin) is taken. Remembered on the topology
    (immutable) per primary path, as ``lane_path`` remembers paths: every lane of a host
    shares them."""
    cache: dict[tuple[Hop, ...], Backup | None] | None = topo.__dict__.get(_CACHE_ATTR)
    if cache is None:
        cache = {}
        object.__setattr__(topo, _CACHE_ATTR, cache)  # frozen dataclass: not a field
    if hops not in cache:
        cache[hops] = _backup_path(topo, hops)
    return cache[hops]


def _backup_path(topo: Topology, hops: tuple[Hop, ...]) -> Backup | None:
    if len(hops) < 2:
        return None
    graph = switch_graph(topo)
    names = [h.switch for h in hops]
    ends = {(end.switch, end.port): link.name for link in topo.links for end in (link.a, link.b)}
    primary_links = {ends[(h.switch, h.out_port)] for h in hops[:-1] if (h.switch, h.out_port) in ends}
    for d in range(len(hops) - 1):
        best: tuple[int, int, list[str]] | None = None
        for c in range(d + 1, len(hops)):
            others = {n for i, n in enumerate(names) if i not in (d, c)}
            cost, path = _detour(graph, primary_links, others, names[d], names[c])
            if len(path) < 2:
                continue
            key = (cost, c, path)
            if best is None or key[:2] < best[:2]:
                best = key
        if best is not None:
            return _splice(topo, graph, hops, d, best[1], best[2], primary_links)
    return None


def _splice(
    topo: Topology, graph: nx.MultiGraph, hops: tuple[Hop, ...], d: int, c: int, names: list[str], avoid: set[str]
) -> Backup:
    out = list(hops[:d])
    in_port = hops[d].in_port
    for u, v in pairwise(names):
        link = min((data["link"] for key, data in graph[u][v].items() if key not in avoid), key=edge_rank)
        out.append(Hop(dpid=topo.switch(u).dpid, switch=u, in_port=in_port, out_port=port_towards(link, u)))
        in_port = port_towards(link, v)
    out.append(Hop(dpid=hops[c].dpid, switch=hops[c].switch, in_port=in_port, out_port=hops[c].out_port))
    out += hops[c + 1 :]
    return Backup(hops=tuple(out), diverge=d, rejoin=c)


def usable(topo: Topology, hops: tuple[Hop, ...], backup: Backup | None) -> bool:
    """Whether the switches that would hold the lane's groups (D and C) have groups."""
    if backup is None:
        return False
    return all(topo.switch(hops[i].switch).caps.features.fast_failover for i in (backup.diverge, backup.rejoin))


# ---- merging the two compiled paths -----------------------------------------------------------
def _slot(msg: Any) -> Hashable:
    return (msg.table_id, msg.priority, match_key(msg.match))


def _split(msg: Any) -> tuple[list[Any], list[Any], int] | None:
    """(other instructions, actions before the output, output port) of a flow whose apply-actions
    end in one output; None for any other flow."""
    others, actions = [], None
    for inst in msg.instructions or ():
        if isinstance(inst, parser.OFPInstructionActions) and inst.type == ofp.OFPIT_APPLY_ACTIONS:
            actions = list(inst.actions)
        else:
            others.append(inst)
    if not actions or not isinstance(actions[-1], parser.OFPActionOutput):
        return None
    return others, actions[:-1], int(actions[-1].port)


def _via_group(primary: Any, backup: Any, group_id: int) -> tuple[Any, tuple[int, int]] | None:
    """The primary flow sending through the group instead, and (primary port, backup port);
    None when the two flows differ in anything but their output port."""
    a, b = _split(primary), _split(backup)
    if a is None or b is None or instructions_key(a[0]) != instructions_key(b[0]):
        return None
    if [action_key(x) for x in a[1]] != [action_key(x) for x in b[1]] or a[2] == b[2]:
        return None
    actions = [*a[1], parser.OFPActionGroup(group_id)]
    flow = parser.OFPFlowMod(
        None,
        table_id=primary.table_id,
        cookie=primary.cookie,
        command=primary.command,
        priority=primary.priority,
        idle_timeout=primary.idle_timeout,
        hard_timeout=primary.hard_timeout,
        flags=primary.flags,
        buffer_id=ofp.OFP_NO_BUFFER,
        match=primary.match,
        instructions=[*a[0], parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)],
    )
    return flow, (a[2], b[2])


def group_mod(group_id: int, ports: tuple[int, int], command: int = ofp.OFPGC_ADD) -> Any:
    """A fast-failover group: the first bucket whose port is live sends the packet out of it."""
    buckets = [
        parser.OFPBucket(weight=0, watch_port=port, watch_group=ofp.OFPG_ANY, actions=[parser.OFPActionOutput(port)])
        for port in ports
    ]
    return parser.OFPGroupMod(None, command=command, type_=ofp.OFPGT_FF, group_id=group_id, buckets=buckets)


def merge(primary: dict[int, OFMsgs], backup: dict[int, OFMsgs], group_id: int) -> dict[int, OFMsgs] | None:
    """The lane's messages over both paths, a group where their flows part; None when they
    conflict in a way a group cannot resolve (the lane then keeps its primary path only)."""
    out = {dpid: list(msgs) for dpid, msgs in primary.items()}
    for dpid, msgs in backup.items():
        have = out.setdefault(dpid, [])
        slots = {_slot(m): i for i, m in enumerate(have) if isinstance(m, parser.OFPFlowMod)}
        meters = {m.meter_id for m in have if isinstance(m, parser.OFPMeterMod)}
        ports: tuple[int, int] | None = None
        for msg in msgs:
            if isinstance(msg, parser.OFPMeterMod):
                if msg.meter_id not in meters:
                    have.insert(0, msg)
                    slots = {k: i + 1 for k, i in slots.items()}
                    meters.add(msg.meter_id)
                continue
            if not isinstance(msg, parser.OFPFlowMod):
                return None
            at = slots.get(_slot(msg))
            if at is None:
                slots[_slot(msg)] = len(have)
                have.append(msg)
                continue
            if instructions_key(have[at].instructions) == instructions_key(msg.instructions):
                continue  # the same flow on both paths
            merged = _via_group(have[at], msg, group_id)
            if merged is None or (ports is not None and merged[1] != ports):
                return None
            have[at], ports = merged
        if ports is not None:
            have.insert(0, group_mod(group_id, ports))
    return out


def groups_of(ofmsgs: OFMsgs) -> list[Any]:
    """The group messages in a switch's list."""
    return [m for m in ofmsgs if isinstance(m, parser.OFPGroupMod)]
