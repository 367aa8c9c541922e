"""Flow-table budgets: a lane that would not fit a switch's ``max_flows`` is refused before
anything is written or sent (HTTP 409 ``switch_full``).

Used entries on a switch = its base flows + the own flows of every live lane (requested,
scheduled, installing, active) whose window overlaps the new lane's + the shared flows of each
address those lanes use, once per address (an upper bound: two of those lanes need not overlap
each other, and a request may be refused that a peak-by-peak count would let in). Bookings count for their whole window, so a booking
can never find its switch full when it starts; lanes whose windows do not overlap the request's
do not count against it. Costs come from the compiler (``FlowCoster``). Decisions are serialised
by one advisory lock (PostgreSQL; SQLite writes are serial), taken only when a switch has a limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import Connection, select

from viplanes.domain.flowcost import FlowCost, FlowCoster, Slot
from viplanes.domain.switchfacts import SwitchFacts, effective_max
from viplanes.domain.values import LaneSpec
from viplanes.errors import Conflict, VipError
from viplanes.lanes import states
from viplanes.lanes.features import feature_refusal
from viplanes.lanes.specs import SPEC_COLUMNS, spec_from_row
from viplanes.lanes.targets import LaneTarget
from viplanes.policy.rules import LaneRequest
from viplanes.store.db import Database
from viplanes.store.models import Lane
from viplanes.topologies.capcheck import budgeted
from viplanes.topologies.model import Topology

BUDGET_LOCK_KEY = (3 << 32) + 0xB0D6E7  # one key: budgets span every source and grant


@dataclass(frozen=True)
class Shortfall:
    switch: str
    table: int | None  # None: the switch's total
    needed: int
    left: int


def usage(base: Mapping[Slot, int], costs: Iterable[FlowCost]) -> Counter[Slot]:
    """Entries per (switch, table): base + own + shared, each shared address counted once (the
    largest count any lane of it needs)."""
    used: Counter[Slot] = Counter(base)
    shared: dict[str, dict[Slot, int]] = {}
    for cost in costs:
        used.update(cost.own)
        for addr, slots in cost.shared.items():
            mine = shared.setdefault(addr, {})
            for slot, n in slots.items():
                mine[slot] = max(mine.get(slot, 0), n)
    for slots in shared.values():
        used.update(slots)
    return used


def needed_by(cost: FlowCost, live: Iterable[FlowCost]) -> Counter[Slot]:
    """What the new lane adds: its own entries and the shared ones no live lane has yet."""
    present = usage({}, [FlowCost(shared=c.shared) for c in live])
    need: Counter[Slot] = Counter(cost.own)
    for slots in cost.shared.values():
        for slot, n in slots.items():
            if n > present.get(slot, 0):
                need[slot] += n
    return need


def _total(counts: Mapping[Slot, int], switch: str) -> int:
    return sum(n for (sw, _), n in counts.items() if sw == switch)


def shortfall(
    topo: Topology,
    base: Mapping[Slot, int],
    live: list[FlowCost],
    cost: FlowCost,
    facts: Mapping[str, SwitchFacts] | None = None,
) -> Shortfall | None:
    """The first switch (path order: the topology's) where the lane does not fit, or None. A
    switch that refused an entry for a full table counts against what it held then (``facts``)."""
    used = usage(base, live)
    need = needed_by(cost, live)
    for sw in topo.switches:
        limit = sw.caps.max_flows
        total = effective_max(limit.total, (facts or {}).get(sw.name))
        if total is not None:
            n = _total(need, sw.name)
            left = total - _total(used, sw.name)
            if n > left:
                return Shortfall(sw.name, None, n, max(0, left))
        for table, cap in limit.tables:
            n = need.get((sw.name, table), 0)
            left = cap - used.get((sw.name, table), 0)
            if n > left:
                return Shortfall(sw.name, table, n, max(0, left))
    return None


def live_specs(conn: Connection, start: float, end: float) -> list[LaneSpec]:
    """Every live lane whose window overlaps [start, end)."""
    rows = conn.execute(
        select(*SPEC_COLUMNS).where(Lane.state.in_(states.LIVE), Lane.starts_at < end, Lane.expires_at > start)
    )
    return [spec_from_row(r) for r in rows]


def refusal(short: Shortfall) -> VipError:
    where = short.switch if short.table is None else f"{short.switch} table {short.table}"
    return Conflict(
        f"{where}'s flow table is full for this lane: it needs {short.needed} entries there, "
        f"{short.left} are left; try again when a lane ends",
        {"switch": short.switch, "table": short.table, "needed": short.needed, "left": short.left},
        code="switch_full",
    )


def fits_switches(
    conn: Connection,
    db: Database,
    topo: Topology,
    costs: FlowCoster | None,
    req: LaneRequest,
    target: LaneTarget,
    nat_ip: str | None,
    max_matches: int = 64,
    facts: Mapping[str, SwitchFacts] | None = None,
) -> VipError | None:
    """The request's refusal when a switch on its path lacks a feature it needs or has no room
    for its entries (``costs`` None: no switch has a budget); None when it fits."""
    lacking = feature_refusal(
        topo, str(req.src_ip), req.rate_mbps, target.ports, n_nets=len(target.nets), max_matches=max_matches
    )
    if lacking is not None or costs is None:
        return lacking
    spec = LaneSpec(
        0,
        str(req.src_ip),
        target.single_address(),
        req.protocol,  # type: ignore[arg-type]
        target.single_port(),
        req.src_port,
        nat_ip,
        req.expires_at,
        req.rate_mbps,
        tuple(target.net_strings()),
        target.ports,
    )
    return check_budget(conn, db, topo, costs, spec, req.starts_at, req.expires_at, facts)


def check_budget(
    conn: Connection,
    db: Database,
    topo: Topology,
    costs: FlowCoster,
    spec: LaneSpec,
    start: float,
    end: float,
    facts: Mapping[str, SwitchFacts] | None = None,
) -> VipError | None:
    """Refusal when ``spec`` (window [start, end)) does not fit; takes the budget lock first."""
    if not budgeted(topo):
        return None
    db.advisory_lock(conn, BUDGET_LOCK_KEY)
    live = [costs.lane(s) for s in live_specs(conn, start, end)]
    short = shortfall(topo, costs.base(), live, costs.lane(spec), facts)
    return refusal(short) if short is not None else None


def report(
    topo: Topology, costs: FlowCoster, live: list[LaneSpec], facts: Mapping[str, SwitchFacts] | None = None
) -> list[tuple[str, int | None, int]]:
    """(switch, the total counted against (max_flows, lowered by a table-full) or None, entries
    in use) per switch: /metrics and the console."""
    used = usage(costs.base(), [costs.lane(s) for s in live])
    return [
        (sw.name, effective_max(sw.caps.max_flows.total, (facts or {}).get(sw.name)), _total(used, sw.name))
        for sw in topo.switches
    ]


def budgets_now(
    db: Database, topo: Topology, costs: FlowCoster, now: float, facts: Mapping[str, SwitchFacts] | None = None
) -> list[tuple[str, int | None, int]]:
    """``report`` for the lanes live at ``now``: what /metrics and the switches page show."""
    with db.read() as s:
        live = live_specs(s.connection(), now, now + 0.001)
    return report(topo, costs, live, facts)
