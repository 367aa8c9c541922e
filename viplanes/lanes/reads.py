"""What the lane service answers without changing anything: one lane, a page of lanes, counters,
the lanes the data plane should carry, flow budgets and counts per state.

Split from ``manager.py`` so the module that writes lane state holds only writes: these methods
read (``get`` may row-lock for the caller's own write transaction) and never change a row.
``LaneManager`` holds one, built from the lane service's ``LaneContext``.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from viplanes.authz.tokens import Caller, sees_lane
from viplanes.domain.values import LaneCounters, LaneSpec
from viplanes.errors import NotFound
from viplanes.lanes import states
from viplanes.lanes.budgets import budgets_now
from viplanes.lanes.context import LaneContext
from viplanes.lanes.specs import SPEC_COLUMNS, spec_from_row
from viplanes.store.models import Lane, Principal

log = logging.getLogger("viplanes.lanes.manager")


class LaneReads:
    """The read side of the lane service."""

    def __init__(self, context: LaneContext) -> None:
        self.db = context.db
        self.dataplane = context.dataplane
        self.topology = context.topology
        self.clock = context.clock
        self.flow_costs = context.flow_costs

    def get(self, caller: Caller, lane_id: int, s: Session | None = None, lock: bool = False) -> Lane:
        """The lane if the caller may see it; ``lock`` row-locks it (PostgreSQL) for a change."""
        if s is None:
            with self.db.read() as s2:
                return self.get(caller, lane_id, s2)
        q = select(Lane).where(Lane.id == lane_id)
        if lock:  # of=: the eager join to principals stays unlocked; re-read what another txn wrote
            q = q.with_for_update(of=Lane).execution_options(populate_existing=True)
        lane = s.scalar(q)
        if lane is None or not sees_lane(caller, lane.principal_id):
            raise NotFound(f"no lane {lane_id}")
        return lane

    def list(
        self,
        caller: Caller,
        state: str | None = None,
        principal: str | None = None,
        src_ip: str | None = None,
        dst_ip: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Sequence[Lane]:
        q = select(Lane)
        if not caller.is_operator:
            q = q.where(Lane.principal_id == caller.id)
        elif principal is not None:
            owner = select(Principal.id).where(func.lower(Principal.name) == principal.lower())  # names ignore case
            q = q.where(Lane.principal_id == owner.scalar_subquery())
        for column, val in ((Lane.state, state), (Lane.src_ip, src_ip), (Lane.dst_ip, dst_ip)):
            if val is not None:
                q = q.where(column == val)
        with self.db.read() as s:
            return s.scalars(q.order_by(Lane.id.desc()).limit(limit).offset(offset)).all()

    def counters(self, caller: Caller, lane_id: int) -> tuple[Lane, LaneCounters | None]:
        lane = self.get(caller, lane_id)
        try:
            return lane, self.dataplane.counters(lane_id)
        except Exception:
            log.exception("counters of lane %s", lane_id)
            return lane, None

    def desired_lanes(self) -> builtins.list[LaneSpec]:  # ``list`` here is the method above
        """What the data plane should carry right now (the controller's reconcile source)."""
        now = self.clock()
        with self.db.read() as s:  # plain columns: no ORM identity map for 10,000 rows
            rows = s.execute(select(*SPEC_COLUMNS).where(Lane.state.in_(states.CARRIED), Lane.expires_at > now)).all()
        return [spec_from_row(r) for r in rows]

    def flow_budgets(self) -> builtins.list[tuple[str, int | None, int]]:
        """(switch, max_flows total, entries in use) per switch; empty without budgets."""
        if self.flow_costs is None:
            return []
        return budgets_now(self.db, self.topology, self.flow_costs, self.clock(), self.dataplane.switch_facts())

    def counts_by_state(self) -> dict[str, int]:
        with self.db.read() as s:
            return dict(s.execute(select(Lane.state, func.count()).group_by(Lane.state)).all())
