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
from viplanes.store.lanesql.gather import Gathered, gather
from viplanes.store.lanesql.postgres import insert_at_commit
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

    def count_live(
        self, conn: Connection, req: LaneRequest, grant_ids: list[int], gathered: Gathered | None
    ) -> dict[int, int]:
        """Live lanes per grant for the quota: read with the grants on PostgreSQL (``gather``),
        else counted now, for the grants that pass every other check."""
        if gathered is not None:
            return gathered.live
        return live_counts(conn, grant_ids, req.starts_at, req.expires_at)

    def gather(
        self,
        conn: Connection,
        caller: Caller,
        req: LaneRequest,
        target: LaneTarget,
        now: float,
        trigger: LaneTrigger | None,
    ) -> Gathered:
        """PostgreSQL: the grants (row-locked), the overlap lock and (a pool address needed) the
        pool's lock, then the quota's counts, the overlap candidates and the pool address, as one
        message (``viplanes/store/lanesql/gather.py``). Taken for a request the policy then refuses
        too: the locks are held for the rest of one short transaction."""
        src = str(req.src_ip)
        srcs = source_aliases(self.context.topology, src)
        nat = self._needs_pool(req, target, now, trigger)
        query, params = overlap_query(
            srcs, req.protocol, target.nets, target.ports, req.src_port, req.starts_at, req.expires_at
        )
        keys = [overlap_key(srcs, req.protocol)] + ([NAT_LOCK_KEY] if nat else [])
        lookup = self.context.lane_pool.lookup_for_pg if nat else None
        return gather(conn, caller.id, now, caller.from_provider, keys, query, params, lookup, {POOL_SRC: src})

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
        gathered: Gathered | None = None,
    ) -> tuple[Lane | None, VipError | None]:
        """``gathered``: PostgreSQL's locks were taken and the candidates and the pool address read
        with the grants (``gather``); SQLite reads them now (its writes are serial)."""
        src = str(req.src_ip)
        immediate = req.starts_at <= now
        nat = self._needs_pool(req, target, now, trigger)
        db = self.context.db
        rows: Sequence[Sequence[Any]]
        if gathered is not None:
            rows = gathered.candidates
        elif not db.is_sqlite:  # the overlap and pool decisions need gather's locks
            raise RuntimeError("a PostgreSQL admission reads through gather()")
        else:
            query, params = overlap_query(
                source_aliases(self.context.topology, src),
                req.protocol,
                target.nets,
                target.ports,
                req.src_port,
                req.starts_at,
                req.expires_at,
            )
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
            pool = self.context.lane_pool
            nat_ip = (
                gathered.address
                if gathered is not None and pool.lookup_for_pg is not None
                else pool.address_for(db, conn, src, locked=True)
            )
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
            if immediate:  # before commit: recover() must not pick it up meanwhile
                self.claims.claim(lane.id)
        else:  # PostgreSQL: the audit row and the controllers' wake-up ride in the INSERT, the INSERT
            assert gathered is not None  # with the COMMIT; the id came with the reads
            values["id"] = gathered.next_id
            if immediate:  # before the commit is sent: recover() must not pick it up meanwhile
                self.claims.claim(gathered.next_id)
            lane = insert_at_commit(
                conn, values, now, caller.name, decision.reason, self.activation.wake_channel if immediate else None
            )
        return lane, None
