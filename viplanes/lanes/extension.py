"""Whether a live lane may be lengthened: its grant, no overlap with a later lane, the switches'
flow budgets over the longer window.

Split from ``manager.py`` so the judgement reads as one function; it only reads (and takes the
overlap and budget locks of the caller's transaction). ``LaneManager.extend`` applies the answer
and audits it: the manager stays the one writer of lane state.
"""

from __future__ import annotations

import ipaddress

from sqlalchemy.orm import Session

from viplanes.dataplane.base import Dataplane
from viplanes.domain.flowcost import FlowCoster
from viplanes.errors import VipError
from viplanes.lanes.budgets import check_budget
from viplanes.lanes.overlap import overlapping_lane, row_nets, row_ports, source_aliases
from viplanes.lanes.specs import spec_of
from viplanes.policy.rules import Decision, GrantRule, LaneRequest, check_grant, lane_sources
from viplanes.store.db import Database
from viplanes.store.models import Lane
from viplanes.topologies.model import Topology


def extension_request(lane: Lane, add_s: int, topology: Topology) -> LaneRequest:
    """The lane as a request for its longer duration, for the grant's checks."""
    nets = tuple(ipaddress.ip_network(n) for n in row_nets(lane.dst_ip, lane.dst_nets))
    host = topology.host_by_ip(lane.src_ip)
    return LaneRequest(
        ipaddress.ip_address(lane.src_ip),
        None,
        lane.protocol,
        None,
        lane.src_port,
        lane.duration_s + add_s,
        lane.starts_at,
        lane.rate_mbps,
        dst_nets=nets,
        dst_ports=tuple(row_ports(lane.dst_port, lane.dst_ports)),
        src_addrs=lane_sources(host, nets) if host is not None else (),
    )


def judge_extension(
    s: Session,
    *,
    db: Database,
    topology: Topology,
    dataplane: Dataplane,
    flow_costs: FlowCoster | None,
    lane: Lane,
    rule: GrantRule,
    live: int,
    add_s: int,
    now: float,
) -> tuple[Decision, VipError | None]:
    """The decision on ``lane`` growing by ``add_s`` (``live``: the grant's other live lanes in
    the longer window), and the budget refusal when a switch would be full."""
    new_end = lane.expires_at + add_s
    req = extension_request(lane, add_s, topology)
    decision = check_grant(req, rule, now, live)
    dup = overlapping_lane(
        s,
        db,
        source_aliases(topology, lane.src_ip),
        lane.protocol,
        req.dst_nets,
        req.dst_ports,
        lane.src_port,
        lane.starts_at,
        new_end,
        exclude=lane.id,
    )
    if decision.allowed and dup is not None:
        decision = Decision(False, "duplicate_lane", "an identical lane uses this flow later", rule.grant_id)
    full = None  # the longer window may overlap bookings that fill a switch
    if decision.allowed and flow_costs is not None:
        full = check_budget(
            s.connection(),
            db,
            topology,
            flow_costs,
            spec_of(lane),
            lane.expires_at,
            new_end,
            dataplane.switch_facts(),
        )
        decision = decision if full is None else Decision(False, "switch_full", full.message, rule.grant_id)
    return decision, full
