"""Every carried lane's packet/byte counters at once: one flow-stats request per switch.

``read_lane_counters`` (``LaneRuntime.counters``) answers one lane with one request per ingress
switch, which is right for
``GET /lanes/<id>/stats`` in the one-process mode. The split deployment's master publishes all
lanes' counters every few seconds (``viplanes.cluster.reports``); asking per lane would cost N
requests per round, so here each switch is asked once for every lane flow (the lane cookie
space, ``ALL_LANE_FLOWS``) and the answer is summed per lane over its ingress rules, the same
sum ``LaneRuntime.counters`` makes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile.cookies import ALL_LANE_FLOWS, EXACT_MASK, lane_cookie, lane_id_from_cookie
from viplanes.domain.values import LaneCounters, LaneSpec
from viplanes.topologies.model import Topology

Ingress = frozenset[tuple[int, int]]  # (dpid, in_port) of a lane's ingress rules


class StatsSource(Protocol):
    """What this module needs of a LaneRuntime."""

    @property
    def lanes(self) -> Mapping[int, LaneSpec]: ...

    @property
    def topology(self) -> Topology | None: ...

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None: ...


def sum_lane_counters(
    ingress: Mapping[int, Ingress], stats: Mapping[int, Iterable[Any] | None]
) -> dict[int, LaneCounters]:
    """Per lane: packets and bytes of its table-0 flows on its ingress (dpid, in_port) pairs.
    ``stats``: dpid -> flow-stats entries (None: the switch did not answer). A lane with an
    ingress switch that did not answer is left out rather than reported short."""
    totals = {lane_id: [0, 0] for lane_id in ingress}
    silent = {dpid for dpid, entries in stats.items() if entries is None}
    for dpid, entries in stats.items():
        for entry in entries or ():
            lane_id = lane_id_from_cookie(entry.cookie)
            if lane_id not in totals or entry.table_id != 0:  # table 1 sees conntrack replies again
                continue
            if (dpid, entry.match.get("in_port")) in ingress[lane_id]:
                totals[lane_id][0] += entry.packet_count
                totals[lane_id][1] += entry.byte_count
    return {
        lane_id: LaneCounters(packets=p, bytes=b)
        for lane_id, (p, b) in totals.items()
        if not any(dpid in silent or dpid not in stats for dpid, _ in ingress[lane_id])
    }


def read_all_lane_counters(plane: StatsSource, timeout_s: float = 2.0) -> dict[int, LaneCounters]:
    """The counters of every lane ``plane`` carries, one flow-stats request per ingress switch."""
    if plane.topology is None:
        return {}
    ingress: dict[int, Ingress] = {}
    for lane_id, lane in list(plane.lanes.items()):
        try:
            ingress[lane_id] = compiler.lane_ingress_ports(lane, plane.topology)
        except ValueError:
            continue
    dpids = sorted({dpid for pairs in ingress.values() for dpid, _ in pairs})
    stats = {dpid: plane.flow_stats(dpid, *ALL_LANE_FLOWS, timeout_s=timeout_s) for dpid in dpids}
    return sum_lane_counters(ingress, stats)


def read_lane_counters(plane: StatsSource, lane_id: int, timeout_s: float = 2.0) -> LaneCounters | None:
    """One lane's counters, one request per ingress switch; None when a switch did not answer.
    ``forward_bytes``: the bytes entering at the lane's forward ingress (its source's side)."""
    lane = plane.lanes.get(lane_id)
    if lane is None or plane.topology is None:
        return None
    try:
        ingress = compiler.lane_ingress_ports(lane, plane.topology)
    except ValueError:
        return None
    by_dpid: dict[int, set[int]] = {}
    for dpid, port in ingress:
        by_dpid.setdefault(dpid, set()).add(port)
    forward = compiler.lane_forward_ingress(lane, plane.topology)
    packets = octets = forward_octets = 0
    for dpid, ports in by_dpid.items():
        stats = plane.flow_stats(dpid, lane_cookie(lane_id), EXACT_MASK, timeout_s)
        if stats is None:
            return None
        for entry in stats:  # table 1 (conntrack replies) sees the reverse packets again
            if entry.table_id == 0 and entry.match.get("in_port") in ports:
                packets += entry.packet_count
                octets += entry.byte_count
                if (dpid, entry.match.get("in_port")) == forward:
                    forward_octets += entry.byte_count
    return LaneCounters(packets=packets, bytes=octets, forward_bytes=forward_octets)
