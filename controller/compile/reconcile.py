"""Bring one switch's app flows to the desired set without wiping it. Pure: messages in, messages out.

Input: the ``ofmsgs`` the compiler wants on the switch (``compile_desired``) and the flow-stats
entries read back from it (filtered to the app's cookie range). Output: deletes of stale flows
(strict: match + priority + cookie), adds of missing flows, refreshes of flows whose hard timeout
runs out before their lane does; identical flows are left alone, so their counters and durations
go on.

Refresh (lanes outlive OpenFlow's 16-bit hard_timeout, and a lane may be extended while the
controller was away). Measured on OVS 3.1 with OpenFlow 1.3:

- re-ADD of an identical flow (no ``OFPFF_RESET_COUNTS``): counters kept, hard_timeout set to the
  new value and restarted, but the flow's duration restarts at 0;
- ``MODIFY_STRICT`` with the same actions: counters and duration kept, hard_timeout's value kept
  (the new one is ignored) but its clock restarted from now.

So a lane flow that already has the maximum hard_timeout (65535) and still should have it is
refreshed with ``MODIFY_STRICT`` (nothing visible changes but the deadline); any other flow whose
deadline is too early is re-added with the exact remaining lifetime, so the safety net stays
exact. A flow is refreshed only once fewer than ``REFRESH_MARGIN_S`` seconds are left on it, so a
periodic refresh sends nothing most of the time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.cookies import BASE_COOKIE, address_from_cookie, lane_id_from_cookie
from viplanes.controller.compile.ctlane import NEWCONN_METER_BASE
from viplanes.controller.compile.failover import lane_of_group
from viplanes.controller.compile.flowkey import cached_key
from viplanes.controller.compile.groups import GroupPlan
from viplanes.controller.compile.lane import MAX_HARD_TIMEOUT, PRIORITY_TABLE_MISS, compile_flow_delete

REFRESH_MARGIN_S = 3600  # refresh when a flow has less than this left and its lane needs more
SLACK_S = 5  # timeouts are whole seconds and the read-back is a little old


@dataclass(frozen=True)
class Plan:
    """What one switch needs. ``ofmsgs`` is the order to send them in."""

    deletes: tuple[Any, ...]
    meters: tuple[Any, ...]
    adds: tuple[Any, ...]
    refreshes: tuple[Any, ...]
    kept: int
    # fast-failover groups (``groups.plan_groups``): set up before the adds, deleted last
    groups: tuple[Any, ...] = ()
    group_deletes: tuple[Any, ...] = ()

    @property
    def ofmsgs(self) -> list[Any]:
        return [*self.deletes, *self.meters, *self.groups, *self.adds, *self.refreshes, *self.group_deletes]

    @property
    def empty(self) -> bool:
        return not (self.deletes or self.meters or self.adds or self.refreshes or self.groups or self.group_deletes)


def refresh_mod(flow: Any) -> Any:
    """MODIFY_STRICT of a desired FlowMod: restarts the hard-timeout clock on OVS, keeps counters
    and duration."""
    return parser.OFPFlowMod(
        None,
        table_id=flow.table_id,
        command=ofp.OFPFC_MODIFY_STRICT,
        priority=flow.priority,
        cookie=flow.cookie,
        match=flow.match,
        instructions=flow.instructions,
        flags=flow.flags,
        hard_timeout=flow.hard_timeout,
        idle_timeout=flow.idle_timeout,
        buffer_id=ofp.OFP_NO_BUFFER,
    )


def default_forwarding() -> Any:
    """The only flow a controller without a topology installs: table-miss -> NORMAL."""
    return parser.OFPFlowMod(
        None,
        cookie=BASE_COOKIE,
        command=ofp.OFPFC_ADD,
        priority=PRIORITY_TABLE_MISS,
        match=parser.OFPMatch(),
        buffer_id=ofp.OFP_NO_BUFFER,
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(ofp.OFPP_NORMAL)])],
    )


def _seconds_left(stats: Any, clock_restarted: float | None, now: float) -> float | None:
    """Seconds until the switch's hard timeout removes this flow; None when it has none.

    Flow stats only tell the flow's age; after a MODIFY_STRICT the hard-timeout clock restarted
    later than that, which only the sender knows (``clock_restarted``)."""
    if not stats.hard_timeout:
        return None
    left = stats.hard_timeout - stats.duration_sec - stats.duration_nsec / 1e9
    if clock_restarted is not None:
        left = max(left, clock_restarted + stats.hard_timeout - now)
    return left


def _refresh(
    desired: Any, stats: Any, clock_restarted: float | None, now: float, desired_age: float = 0.0
) -> Any | None:
    """None when the flow lives long enough; else the message that re-times it.

    ``desired_age``: how long before ``now`` the desired hard timeout was computed. A slow
    flow-stats read must not make every flow look short of time (it once re-added 14,651 flows)."""
    want = desired.hard_timeout
    if not want:
        return None  # base flows never time out
    left = _seconds_left(stats, clock_restarted, now)
    if left is not None and (left >= REFRESH_MARGIN_S or left >= want - desired_age - SLACK_S):
        return None
    if want == MAX_HARD_TIMEOUT and stats.hard_timeout == MAX_HARD_TIMEOUT:
        return refresh_mod(desired)
    return desired  # re-ADD: exact deadline, counters kept


def _delete(stats: Any) -> Any:
    """DELETE_STRICT for a read-back flow (os-ken's OFPFlowStats or a wire-decoded entry)."""
    if not isinstance(stats.match, parser.OFPMatch):
        stats = dataclasses.replace(stats, match=stats.ofp_match())
    return compile_flow_delete(stats)


def _meters_of(flow: Any) -> set[int]:
    return {inst.meter_id for inst in flow.instructions or () if isinstance(inst, parser.OFPInstructionMeter)}


def _modify(meter: Any) -> Any:
    return parser.OFPMeterMod(
        None, command=ofp.OFPMC_MODIFY, flags=meter.flags, meter_id=meter.meter_id, bands=meter.bands
    )


def plan_switch(
    desired: Sequence[Any],
    actual: Iterable[Any],
    now: float = 0.0,
    restarted: Mapping[Any, float] | None = None,
    desired_at: float | None = None,
) -> Plan:
    """Diff one switch. ``desired``: FlowMods (ADD) and MeterMods, their hard timeouts computed
    at ``desired_at`` (default ``now``); ``actual``: OFPFlowStats of the app's cookie range only
    (flows of other apps must not be passed in), read at ``now``; ``restarted``: flow_key -> when
    we last sent it a MODIFY_STRICT refresh (the caller remembers)."""
    desired_age = 0.0 if desired_at is None else max(0.0, now - desired_at)
    restarted = restarted or {}
    want: dict[Any, Any] = {}
    meter_mods: dict[int, Any] = {}
    for msg in desired:
        if isinstance(msg, parser.OFPMeterMod):
            meter_mods[msg.meter_id] = msg
        elif isinstance(msg, parser.OFPFlowMod):
            want[cached_key(msg)] = msg  # a repeated flow collapses to one
    wanted = list(want.values())
    # each key is hashed once: a flow key is a nested tuple whose hash Python does not keep,
    # and a restart compares 46,576 of them (four lookups each were a quarter of its GIL time)
    kept: list[tuple[Any, Any, Any]] = []  # (key, desired, stats)
    deletes = []
    stale_meters: set[int] = set()
    for stats in actual:
        key = cached_key(stats)
        match = want.pop(key, None)  # a second entry with the same identity is deleted
        if match is not None:
            kept.append((key, match, stats))
        else:
            deletes.append(_delete(stats))
            stale_meters |= _meters_of(stats)
    adds = list(want.values())  # what no entry matched
    refreshes = [
        r
        for key, msg, stats in kept
        if (r := _refresh(msg, stats, restarted.get(key) if restarted else None, now, desired_age)) is not None
    ]
    needed = set().union(*(_meters_of(m) for m in adds)) if adds else set()
    # meters of every wanted flow: only asked when a deleted flow had one (rare; a restart
    # that keeps every flow skipped walking 46,000 instruction lists)
    in_use = set().union(*(_meters_of(m) for m in wanted)) if stale_meters else set()
    # a stale lane's meter goes with its flows (OVS would keep it forever otherwise)
    meters = [parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=m) for m in sorted(stale_meters - in_use)]
    # a needed meter a deleted flow used exists already: MODIFY it (an ADD would be refused)
    meters += [
        _modify(meter_mods[m]) if m in stale_meters else meter_mods[m] for m in sorted(needed) if m in meter_mods
    ]
    return Plan(
        deletes=tuple(deletes),
        meters=tuple(meters),
        adds=tuple(adds),
        refreshes=tuple(refreshes),
        kept=len(kept) - len(refreshes),
    )


def meter_lane(meter_id: int) -> int:
    """The lane a meter belongs to: its rate cap (the lane id) or its new-connection meter."""
    return meter_id - NEWCONN_METER_BASE if meter_id > NEWCONN_METER_BASE else meter_id


def without_lanes(plan: Plan, lane_ids: set[int], addresses: Set[str] = frozenset()) -> Plan:
    """The plan minus everything that concerns these lanes and the shared flows of these
    addresses (changed while the plan was made)."""

    def keep(msg: Any) -> bool:
        if addresses and address_from_cookie(msg.cookie) in addresses:
            return False
        return lane_id_from_cookie(msg.cookie) not in lane_ids

    return Plan(
        deletes=tuple(filter(keep, plan.deletes)),
        meters=tuple(m for m in plan.meters if meter_lane(m.meter_id) not in lane_ids),
        adds=tuple(filter(keep, plan.adds)),
        refreshes=tuple(filter(keep, plan.refreshes)),
        kept=plan.kept,
        groups=tuple(g for g in plan.groups if lane_of_group(g.group_id) not in lane_ids),
        group_deletes=tuple(g for g in plan.group_deletes if lane_of_group(g.group_id) not in lane_ids),
    )


def with_groups(plan: Plan, groups: GroupPlan) -> Plan:
    """The plan with the switch's group changes in their places."""
    return dataclasses.replace(plan, groups=groups.first, group_deletes=groups.last)


def stale_lanes(plan: Plan) -> set[int]:
    """Lane ids whose flows the plan deletes (their meters may go too)."""
    return {lid for d in plan.deletes if (lid := lane_id_from_cookie(d.cookie)) is not None}
