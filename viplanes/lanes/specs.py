"""Lane rows -> :class:`~viplanes.domain.values.LaneSpec` (what the data plane is told to carry)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from viplanes.domain.values import LaneSpec, NatMapping
from viplanes.store.models import Lane

# the columns of ``spec_of``, in this order (``desired_lanes`` reads only these, no ORM objects)
SPEC_COLUMNS = (
    Lane.id,
    Lane.src_ip,
    Lane.dst_ip,
    Lane.protocol,
    Lane.dst_port,
    Lane.src_port,
    Lane.nat_ip,
    Lane.expires_at,
    Lane.rate_mbps,
    Lane.dst_nets,
    Lane.dst_ports,
    Lane.dst_host,
    Lane.trigger_detail,
)
NAT_ADDRESS, NAT_PORT = "nat_address", "nat_port"  # a takeover lane's mapping, in its trigger_detail


def takeover_of(detail: str | None) -> NatMapping | None:
    """The NAT mapping a takeover lane's record holds (``viplanes.auto``), or None. It lives in
    the trigger's evidence, so the audit of the lane shows which address and port it took over."""
    if not detail or NAT_PORT not in detail:  # no JSON parse for the other lanes
        return None
    data = json.loads(detail)
    return NatMapping(str(data[NAT_ADDRESS]), int(data[NAT_PORT]))


def spec_from_row(r: Sequence[Any]) -> LaneSpec:
    nets = tuple(r[9]) if r[9] else ()
    ports = tuple((int(lo), int(hi)) for lo, hi in r[10]) if r[10] else ()
    return LaneSpec(
        lane_id=r[0],
        src_ip=r[1],
        dst_ip=r[2],
        protocol=r[3],
        dst_port=r[4],
        src_port=r[5],
        nat_ip=r[6],
        expires_at=r[7],
        rate_mbps=r[8],
        dst_nets=nets,
        dst_ports=ports,
        dst_host=r[11],
        takeover=takeover_of(r[12]) if len(r) > 12 else None,
    )


def spec_of(lane: Lane, dst_nets: list[str] | None = None) -> LaneSpec:
    """The lane as the data plane sees it; ``dst_nets`` overrides the stored set (a re-resolved name
    is activated before it is written)."""
    nets = dst_nets if dst_nets is not None else lane.dst_nets
    dst_ip = lane.dst_ip if dst_nets is None else None
    return spec_from_row(
        (
            lane.id,
            lane.src_ip,
            dst_ip,
            lane.protocol,
            lane.dst_port,
            lane.src_port,
            lane.nat_ip,
            lane.expires_at,
            lane.rate_mbps,
            nets,
            lane.dst_ports,
            lane.dst_host,
            lane.trigger_detail,
        )
    )
