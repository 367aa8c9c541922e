"""Admitting a decided lane request: the overlap and pool locks, the lane-pool address, the
flow budgets and switch readiness, then the row (with its audit and wake-up on PostgreSQL).

Split from ``manager.py`` (which decides and answers) so each module does one thing; the
manager holds one ``LaneAdmission``, built from the lane service's ``LaneContext``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from viplanes.authz.tokens import Caller
from viplanes.errors import VipError
from viplanes.lanes.activation import LaneActivation
from viplanes.lanes.budgets import fits_switches
from viplanes.lanes.context import Claims, LaneContext
from viplanes.lanes.overlap import first_overlap, overlap_key, overlap_query, source_aliases
from viplanes.lanes.pool import NAT_LOCK_KEY, POOL_SRC, needs_pool_address
from viplanes.lanes.refusals import duplicate_lane, not_ready, pool_exhausted, spec_to_check
from viplanes.lanes.requests import LaneTrigger, lane_row
from viplanes.lanes.targets import LaneInput, LaneTarget, clamp_ttl
from viplanes.policy.rules import Decision, LaneRequest
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.lanesql.core import insert_lane, live_counts
from viplanes.store.lanesql.postgres import insert_in_one, lock_and_count, overlaps_and_address
from viplanes.store.models import Lane


class LaneAdmission:
    """Writes an allowed request's row, or says which shared resource refuses it."""

    def __init__(self, context: LaneContext, activation: LaneActivation, claims: Claims) -> None:
        self.context = context
        self.activation = activation
        self.claims = claims

    def _needs_pool(self, req: LaneRequest, target: LaneTarget, now: float, trigger: LaneTrigger | None) -> bool:
        # a booked lane takes its lane-pool address when it starts (``tick``), not now
        # a takeover lane keeps the campus NAT's own mapping (``LaneTrigger.takeover``): no pool address
        host = self.context.topology.host_by_ip(req.src_ip)
        immediate = req.starts_at <= now
        return immediate and needs_pool_address(host, target.nets) and (trigger is None or trigger.takeover is None)

    def _lock_keys(self, req: LaneRequest, target: LaneTarget, now: float, trigger: LaneTrigger | None) -> list[int]:
        """The advisory locks ``insert`` needs, in the order it takes them: the overlap
        decision's per (source, protocol), then the lane pool's."""
        srcs = source_aliases(self.context.topology, str(req.src_ip))
        return [overlap_key(srcs, req.protocol)] + (
            [NAT_LOCK_KEY] if self._needs_pool(req, target, now, trigger) else []
        )

    def count_live(
        self,
        conn: Connection,
        req: LaneRequest,
        target: LaneTarget,
        grant_ids: list[int],
        now: float,
        trigger: LaneTrigger | None,
    ) -> dict[int, int]:
        """Live lanes per grant for the quota. PostgreSQL: ``insert``'s advisory locks ride in the
        same statement (``lock_and_count``), one round trip for two; ``insert(locked=True)`` then
        takes none. Taken for a request the policy then refuses too: they are held for the rest
        of one short transaction."""
        if self.context.db.is_sqlite:
            return live_counts(conn, grant_ids, req.starts_at, req.expires_at)
        keys = self._lock_keys(req, target, now, trigger)
        return lock_and_count(conn, keys, grant_ids, req.starts_at, req.expires_at)

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
        locked: bool = False,
    ) -> tuple[Lane | None, VipError | None]:
        """``locked``: ``count_live`` took this request's advisory locks in this transaction
        (PostgreSQL); the overlap query and the pool lookup then go as one statement."""
        src = str(req.src_ip)
        immediate = req.starts_at <= now
        nat = self._needs_pool(req, target, now, trigger)
        db = self.context.db
        query, params = overlap_query(
            source_aliases(self.context.topology, src),
            req.protocol,
            target.nets,
            target.ports,
            req.src_port,
            req.starts_at,
            req.expires_at,
        )
        lookup = self.context.lane_pool.lookup_for_pg if nat and locked and not db.is_sqlite else None
        found: str | None = None
        rows: Sequence[Sequence[Any]]
        if locked and not db.is_sqlite:
            rows, found = overlaps_and_address(conn, query, params, lookup, {POOL_SRC: src})
        else:
            if not db.is_sqlite:  # the pool's lock rides with the overlap lock (SQLite writes are serial)
                keys = self._lock_keys(req, target, now, trigger)
                db.advisory_lock(conn, keys[0], keys[1] if len(keys) > 1 else None)
            rows = rawsql.rows(conn, query, params)
        dup = first_overlap(rows, target.nets, target.ports)
        if dup is not None:
            own = conn.scalar(select(Lane.principal_id).where(Lane.id == dup)) == caller.id or caller.is_operator
            return None, duplicate_lane(dup, own)
        nat_ip = None
        if nat:
            # One lane-pool address per host, shared by all its live lanes: the translation is
            # stateless 1:1 (host <-> address) and lanes of one host differ by their ports, so
            # the pool bounds concurrent hosts, not concurrent lanes.
            nat_ip = found if lookup is not None else self.context.lane_pool.address_for(db, conn, src, locked=True)
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
