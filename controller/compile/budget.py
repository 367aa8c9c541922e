"""Flow entries per switch and table, counted from the messages the compiler really emits (never
from a formula that could drift from it): the lane service's budget check asks this."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.base import compile_base
from viplanes.controller.compile.lane import compile_lane
from viplanes.controller.compile.shared import lane_addresses
from viplanes.domain.flowcost import FlowCost, Slot
from viplanes.domain.values import LaneSpec
from viplanes.topologies.capcheck import budgeted
from viplanes.topologies.model import Topology

FAR_FUTURE = 4.0e9  # any expiry: hard_timeout does not change how many entries a lane takes


def _slots(topo: Topology, by_dpid: Mapping[int, list[Any]]) -> dict[Slot, int]:
    names = {sw.dpid: sw.name for sw in topo.switches}
    count: Counter[Slot] = Counter()
    for dpid, msgs in by_dpid.items():
        for msg in msgs:
            if isinstance(msg, parser.OFPFlowMod):  # meters live in the meter table, not here
                count[(names[dpid], msg.table_id)] += 1
    return dict(count)


class CompiledCosts:
    """:class:`viplanes.domain.flowcost.FlowCoster` over one topology; lanes of one shape cost the
    same whatever their id or expiry, so costs are cached by shape."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._base = _slots(topo, compile_base(topo))
        self._lane = lru_cache(maxsize=4096)(self._compute)

    def base(self) -> Mapping[Slot, int]:
        return self._base

    def lane(self, spec: LaneSpec) -> FlowCost:
        return self._lane(dataclasses.replace(spec, lane_id=1, expires_at=FAR_FUTURE, dst_host=None))

    def _compute(self, spec: LaneSpec) -> FlowCost:
        if spec.nat_ip is None:
            host = self.topo.host_by_ip(spec.src_ip)
            if host is not None and host.needs_nat:
                # a booking takes its lane-pool address when it starts: any address costs the same
                spec = dataclasses.replace(spec, nat_ip=str(self.topo.lane_addresses()[0]))
        try:
            own = _slots(self.topo, compile_lane(spec, self.topo, 0.0))
        except ValueError:
            return FlowCost()
        shared = {addr: _slots(self.topo, by_dpid) for addr, by_dpid in lane_addresses(spec, self.topo).items()}
        return FlowCost(own=own, shared=shared)


def flow_costs_for(topo: Topology) -> CompiledCosts | None:
    """The counts the lane service's budget check needs, when a switch has ``max_flows``
    (docs/hardware.md); None otherwise: without a budget nothing is counted or locked."""
    return CompiledCosts(topo) if budgeted(topo) else None
