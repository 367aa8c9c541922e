"""Admitting a decided lane request: the overlap and pool locks, the lane-pool address, the
flow budgets and switch readiness, then the row (with its audit and wake-up on PostgreSQL).

Split from ``manager.py`` (which decides and answers) so each module does one thing; the
manager holds one ``LaneAdmission``, built from the lane service's ``LaneContext``.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from viplanes.authz.tokens import Caller
from viplanes.errors import VipError
from viplanes.lanes.activation import LaneActivation
from viplanes.lanes.budgets import fits_switches
from viplanes.lanes.context import Claims, LaneContext
from viplanes.lanes.overlap import overlapping_lane, source_aliases
from viplanes.lanes.pool import NAT_LOCK_KEY, needs_pool_address
from viplanes.lanes.refusals import duplicate_lane, not_ready, pool_exhausted, spec_to_check
from viplanes.lanes.requests import LaneTrigger, lane_row
from viplanes.lanes.targets import LaneInput, LaneTarget, clamp_ttl
from viplanes.policy.rules import Decision, LaneRequest
from viplanes.store.lanesql.core import insert_lane
from viplanes.store.lanesql.postgres import insert_in_one
from viplanes.store.models import Lane


class LaneAdmission:
    """Writes an allowed request's row, or says which shared resource refuses it."""

    def __init__(self, context: LaneContext, activation: LaneActivation, claims: Claims) -> None:
        self.context = context
        self.activation = activation
        self.claims = claims

    def insert(
        self,
        conn: Connection,
        caller: Caller,
        body: LaneInput,
        target: LaneTarget,
        req: LaneRequest,
        decision: Decision,
        now: float,
        idempotency_key: str | None,
        digest: str,
        trigger: LaneTrigger | None = None,
    ) -> tuple[Lane | None, VipError | None]:
        src = str(req.src_ip)
        host = self.context.topology.host_by_ip(req.src_ip)
        immediate = req.starts_at <= now
        # a booked lane takes its lane-pool address when it starts (``tick``), not now
        # a takeover lane keeps the campus NAT's own mapping (``LaneTrigger.takeover``): no pool address
        nat = immediate and needs_pool_address(host, target.nets) and (trigger is None or trigger.takeover is None)
        # the lane pool's lock rides with the overlap lock: one round trip (same order as before)
        dup = overlapping_lane(
            conn,
            self.context.db,
            source_aliases(self.context.topology, src),
            req.protocol,
            target.nets,
            target.ports,
            req.src_port,
            req.starts_at,
            req.expires_at,
            then_lock=NAT_LOCK_KEY if nat else None,
        )
        if dup is not None:
            own = conn.scalar(select(Lane.principal_id).where(Lane.id == dup)) == caller.id or caller.is_operator
            return None, duplicate_lane(dup, own)
        nat_ip = None
        if nat:
            # One lane-pool address per host, shared by all its live lanes: the translation is
            # stateless 1:1 (host <-> address) and lanes of one host differ by their ports, so
            # the pool bounds concurrent hosts, not concurrent lanes.
            nat_ip = self.context.lane_pool.address_for(self.context.db, conn, src, locked=True)
            if nat_ip is None:
                return None, pool_exhausted(str(self.context.topology.lane_pool.prefix))
        refused = fits_switches(
            conn,
            self.context.db,
            self.context.topology,
            self.context.flow_costs,
            req,
            target,
            nat_ip,
            self.context.limits.max_matches,
            self.context.dataplane.switch_facts(),
        )
        if refused is not None:  # before the row is written and anything is sent
            return None, refused
        if immediate:
            waiting = self.activation.unready(spec_to_check(src, target, req, nat_ip, trigger))
            if waiting:
                return None, not_ready(waiting, self.context.dataplane.readiness())
        ttl = (
            clamp_ttl(target.ttl_s, self.context.limits.ttl_floor_s, self.context.limits.ttl_cap_s)
            if target.host
            else None
        )
        values = lane_row(caller, body, target, req, decision, now, nat_ip, ttl, idempotency_key, digest)
        if trigger is not None:
            values.update(trigger.columns())
        if self.context.db.is_sqlite:
            lane = insert_lane(conn, values)
        else:  # PostgreSQL: the audit row and the controllers' wake-up ride in the INSERT
            lane = insert_in_one(
                conn, values, now, caller.name, decision.reason, self.activation.wake_channel if immediate else None
            )
        if immediate:  # before commit: recover() must not pick it up meanwhile
            self.claims.claim(lane.id)
        return lane, None
