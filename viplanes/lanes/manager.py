"""Lane lifecycle: the manager that moves lanes through their states.

requested -> scheduled -> installing -> active -> expired | released | revoked, or failed with a
reason: the table and the columns of each move are ``viplanes.lanes.states``. The manager (with
its activation part) is the only code that changes a lane's state (each change is audited); it
talks to the database (source of truth) and to a :class:`~viplanes.dataplane.base.Dataplane`, never
to a switch.

Faults: a lane is never failed for a reason that is only about the switches being away right now
(:func:`~viplanes.dataplane.base.is_transient`). An immediate request while its switches are not
connected and reconciled is refused with 503 ``switches_not_ready`` (no row); a due scheduled lane
stays ``scheduled`` until its switches are ready; an activation that fails transiently leaves the
lane ``installing`` with reason ``waiting for the data plane: ...``. ``recover`` (the scheduler
calls it every few seconds) activates every ``installing`` lane nobody in this process is
activating, whoever left it so; a lane whose window ends first becomes ``expired``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from viplanes.authz.tokens import Caller, sees_lane
from viplanes.dataplane.base import Dataplane
from viplanes.domain.clock import SteadyClock
from viplanes.domain.flowcost import FlowCoster
from viplanes.errors import Conflict, NotFound, VipError
from viplanes.lanes import states
from viplanes.lanes.activation import LaneActivation
from viplanes.lanes.budgets import fits_switches
from viplanes.lanes.committed import activate_truthfully, committed_after_all
from viplanes.lanes.extension import judge_extension
from viplanes.lanes.idempotency import find_replay, request_digest
from viplanes.lanes.overlap import overlapping_lane, source_aliases
from viplanes.lanes.owners import ActiveOwners
from viplanes.lanes.pool import NAT_LOCK_KEY, LanePool, needs_pool_address
from viplanes.lanes.reads import LaneReads
from viplanes.lanes.refusals import duplicate_lane, not_ready, pool_exhausted, spec_to_check
from viplanes.lanes.requests import LaneTrigger, lane_row, refusal, to_request, within_bookings
from viplanes.lanes.resolver import Resolver, default_resolver
from viplanes.lanes.states import END_ACTIONS, TERMINAL, TRANSITIONS, can_move  # noqa: F401 - re-exported
from viplanes.lanes.targets import LaneInput, LaneLimits, LaneTarget, clamp_ttl, target_for_request
from viplanes.logs import lane_scope
from viplanes.policy.rules import Decision, LaneRequest, check_grant, decide
from viplanes.store.db import Database
from viplanes.store.lanesql.core import (
    add_audit,
    end_lane,
    insert_lane,
    lane_from_row,
    lane_row_for_change,
    live_counts,
    owner_and_state,
    usable_grant_rules,
)
from viplanes.store.lanesql.postgres import insert_in_one
from viplanes.store.models import LIVE_STATES, Lane
from viplanes.store.records import audit, get_grant, rule_of
from viplanes.topologies.model import Topology

log = logging.getLogger(__name__)


def _noop(*_args: object) -> None:
    return None


class LaneManager(LaneActivation, LaneReads):
    """Requests, extends, ends and schedules lanes. Thread-safe: all state is in the database."""

    def __init__(
        self,
        db: Database,
        dataplane: Dataplane,
        topology: Topology,
        clock: Callable[[], float] | None = None,
        on_decision: Callable[[str], None] = _noop,
        on_activation: Callable[[float, bool], None] = _noop,
        resolver: Resolver | None = None,
        limits: LaneLimits | None = None,
        flow_costs: FlowCoster | None = None,
    ) -> None:
        self.db = db
        # the compiler's flow counts (controller/compile/budget.py), for switches with max_flows
        self.flow_costs = flow_costs
        self.resolver = resolver or default_resolver()
        self.limits = limits or LaneLimits()
        self.resend_lock = threading.Lock()  # an extension and a re-resolved name re-send one at a time
        self.dataplane = dataplane
        self.topology = topology
        # lane windows are judged on a clock a wall-clock step cannot move (viplanes/domain/clock.py)
        self.clock = clock or SteadyClock()
        self.on_decision = on_decision
        self.on_activation = on_activation
        self.lane_pool = LanePool(topology.lane_pool.prefix)
        self._activating: set[int] = set()  # lanes a thread of this process is activating now
        self._activating_lock = threading.Lock()
        self._owners = ActiveOwners()

    # --- request -----------------------------------------------------------------------------

    def request(
        self, caller: Caller, body: LaneInput, idempotency_key: str | None = None, trigger: LaneTrigger | None = None
    ) -> tuple[Lane, bool]:
        """Decide, store and (for an immediate lane) activate. Returns (lane, created).
        Retries with an Idempotency-Key: see ``viplanes.lanes.idempotency``. An automatic lane
        (``viplanes.auto``) passes its ``trigger``: only that grant may allow it, and the row says so."""
        digest = request_digest(body)
        target = self.target_of(body)
        try:
            return self._request(caller, body, target, idempotency_key, digest, trigger)
        except IntegrityError:
            # two retries with one key raced past the grant lock: the unique index kept one lane
            if idempotency_key:
                with self.db.read() as s:
                    first = find_replay(s.connection(), caller.id, idempotency_key, digest)
                if first is not None:
                    return first, False
            raise

    def target_of(self, body: LaneInput) -> LaneTarget:
        """Destination set and ports, a name resolved before any database lock is held."""
        return target_for_request(body, self.topology, self.resolver, self.limits.max_matches)

    def _request(
        self,
        caller: Caller,
        body: LaneInput,
        target: LaneTarget,
        idempotency_key: str | None,
        digest: str,
        trigger: LaneTrigger | None = None,
    ) -> tuple[Lane, bool]:
        now = self.clock()
        denial: VipError | None = None
        lane: Lane | None = None
        try:
            with self.db.write_connection() as conn:  # Core only: viplanes/store/lanesql/core.py says why
                rules = usable_grant_rules(
                    conn, caller.id, now, for_update=not self.db.is_sqlite, with_groups=caller.from_provider
                )
                if trigger is not None:
                    rules = [r for r in rules if r.grant_id == trigger.grant_id]
                if idempotency_key:
                    first = find_replay(conn, caller.id, idempotency_key, digest)
                    if first is not None:
                        return first, False
                req = to_request(body, target, self.topology, now)
                # Quota is the last check of a grant, so only grants that pass every other check need
                # their live lanes counted (one GROUP BY over fewer grants); the rest fail the same
                # way whatever the count.
                countable = [r.grant_id for r in rules if check_grant(req, r, now, 0).code in ("allowed", "quota")]
                decision = decide(
                    req, rules, self.topology, now, self._live_counts(conn, countable, req.starts_at, req.expires_at)
                )
                if decision.allowed and req.starts_at > now:
                    decision = within_bookings(conn, decision, rules)
                if decision.allowed:
                    lane, denial = self._insert(
                        conn, caller, body, target, req, decision, now, idempotency_key, digest, trigger
                    )
                else:
                    denial = refusal(decision)
                self.on_decision(denial.code if denial is not None else decision.code)
                if lane is None or self.db.is_sqlite:
                    add_audit(
                        conn,
                        now,
                        caller.name,
                        "lane.request",
                        f"lane:{lane.id}" if lane else "",
                        "allow" if denial is None else "deny",
                        denial.message if denial else decision.reason,
                    )
                    if lane is not None and lane.state == "installing":
                        self._wake_in(conn, f"lane:{lane.id}")
                elif lane.state == "installing" and self._wake_channel() is not None:
                    self._wake_in(conn, f"lane:{lane.id}", sent=True)  # rode in the INSERT
        except BaseException as exc:
            if lane is None or not committed_after_all(self.db, lane, exc):
                if lane is not None:  # not committed: nothing to activate, release the claim
                    self._release(lane.id)
                raise
        if denial is not None:
            raise denial
        assert lane is not None
        with lane_scope(lane.id):  # activation's log lines name the lane (and the request, if any)
            log.info("lane %d granted to %s: %s", lane.id, caller.name, lane.state)
            if lane.state == "installing":
                lane = activate_truthfully(self._activate, self.db, lane)
        return lane, True

    def _live_counts(
        self, conn: Connection, grant_ids: Sequence[int], start: float, end: float, exclude: int | None = None
    ) -> dict[int, int]:
        """Live lanes per grant whose time window overlaps [start, end): one GROUP BY."""
        return live_counts(conn, grant_ids, start, end, exclude)

    def _insert(
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
        host = self.topology.host_by_ip(req.src_ip)
        immediate = req.starts_at <= now
        # a booked lane takes its lane-pool address when it starts (``tick``), not now
        # a takeover lane keeps the campus NAT's own mapping (``LaneTrigger.takeover``): no pool address
        nat = immediate and needs_pool_address(host, target.nets) and (trigger is None or trigger.takeover is None)
        # the lane pool's lock rides with the overlap lock: one round trip (same order as before)
        dup = overlapping_lane(
            conn,
            self.db,
            source_aliases(self.topology, src),
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
            nat_ip = self.lane_pool.address_for(self.db, conn, src, locked=True)
            if nat_ip is None:
                return None, pool_exhausted(str(self.topology.lane_pool.prefix))
        refused = fits_switches(
            conn,
            self.db,
            self.topology,
            self.flow_costs,
            req,
            target,
            nat_ip,
            self.limits.max_matches,
            self.dataplane.switch_facts(),
        )
        if refused is not None:  # before the row is written and anything is sent
            return None, refused
        if immediate:
            waiting = self._unready(spec_to_check(src, target, req, nat_ip, trigger))
            if waiting:
                return None, not_ready(waiting, self.dataplane.readiness())
        ttl = clamp_ttl(target.ttl_s, self.limits.ttl_floor_s, self.limits.ttl_cap_s) if target.host else None
        values = lane_row(caller, body, target, req, decision, now, nat_ip, ttl, idempotency_key, digest)
        if trigger is not None:
            values.update(trigger.columns())
        if self.db.is_sqlite:
            lane = insert_lane(conn, values)
        else:  # PostgreSQL: the audit row and the controllers' wake-up ride in the INSERT
            lane = insert_in_one(
                conn, values, now, caller.name, decision.reason, self._wake_channel() if immediate else None
            )
        if immediate:  # before commit: recover() must not pick it up meanwhile
            self._claim(lane.id)
        return lane, None

    # --- changes -----------------------------------------------------------------------------

    def end(self, caller: Caller, lane_id: int, to: str) -> Lane:
        """Release (owner/operator) or revoke (operator) a live lane.

        An active lane's flows are deleted as soon as the caller is known to own it (from memory
        for a lane this process made active, ``lane_owners``; else from a committed read), before
        its end is written and committed: removing flows first fails closed (a failed commit
        leaves an active row that the next reconcile installs again). The change lock is taken
        before the write transaction, never inside it (one lock order). The answer waits for the
        commit and the barriers."""
        now = self.clock()
        early = self.dataplane.removes_early
        if not self.db.is_sqlite and not early:
            # the plain success in one statement (viplanes/store/lanesql/postgres.py); an in-process
            # controller takes the path below instead, which sends the deletes first
            ended = self._end_in_one(caller, lane_id, to, now)
            if ended is not None:
                return ended
        removal = self._begin_removal(lane_id) if early and self._may_end_active(caller, lane_id, now) else None
        try:
            with self.db.write_connection() as conn:
                row = lane_row_for_change(conn, lane_id, lock=not self.db.is_sqlite)
                if row is None or not sees_lane(caller, row["principal_id"]):
                    raise NotFound(f"no lane {lane_id}")
                was = row["state"]
                if was not in LIVE_STATES:
                    raise Conflict(f"lane {lane_id} is already {was}", code="lane_not_live")
                lane = lane_from_row(row, row.pop("owner_name"))
                end_lane(conn, lane_id, states.move(lane, to, f"{to} by {caller.name}", now))
                add_audit(conn, now, caller.name, END_ACTIONS[to], f"lane:{lane_id}", "done")
                woken = was in states.CARRIED and removal is None and self._wake_in(conn, f"ended:{lane_id}")
        finally:
            if removal is not None:  # the barriers, after the commit (or its failure)
                removal()
        self._owners.discard(lane_id)
        if was in states.CARRIED and removal is None and not woken:
            self._deactivate(lane_id)
        return lane

    def _may_end_active(self, caller: Caller, lane_id: int, now: float) -> bool:
        """The lane is active and the caller's (or the caller is an operator): from memory, or
        from one committed read. Only decides whether the deletes go out before the write
        transaction; that transaction still decides the answer."""
        owner = self._owners.owner(lane_id, now)
        if owner is None:
            with self.db.read_connection() as conn:
                row = owner_and_state(conn, lane_id)
            if row is None or row[1] not in (states.ACTIVE, states.INTERRUPTED):
                return False
            owner = row[0]
        return sees_lane(caller, owner)

    def _begin_removal(self, lane_id: int) -> Callable[[], None] | None:
        """Send an active lane's deletes now (``Dataplane.removes_early``); the function to wait,
        or None."""
        if not self.dataplane.removes_early:
            return None
        try:
            return self.dataplane.begin_deactivate(lane_id)
        except Exception:  # fall back to the removal after the commit
            log.exception("deactivate lane %s", lane_id)
            return None

    def extend(self, caller: Caller, lane_id: int, add_s: int) -> Lane:
        """Lengthen a live lane inside its grant (duration, grant end, quota, no overlap)."""
        now = self.clock()
        with self.db.write() as s:
            # grant first, then lane: the same order as request() and revoke, so no deadlock
            owner = self.get(caller, lane_id, s)
            grant = get_grant(s, owner.grant_id, lock=True)
            lane = self.get(caller, lane_id, s, lock=True)
            if lane.state not in LIVE_STATES:
                raise Conflict(f"lane {lane_id} is {lane.state}", code="lane_not_live")
            new_end = lane.expires_at + add_s
            live = self._live_counts(s.connection(), [grant.id], lane.starts_at, new_end, exclude=lane.id).get(
                grant.id, 0
            )
            decision, full = judge_extension(
                s,
                db=self.db,
                topology=self.topology,
                dataplane=self.dataplane,
                flow_costs=self.flow_costs,
                lane=lane,
                rule=rule_of(grant),
                live=live,
                add_s=add_s,
                now=now,
            )
            self.on_decision(decision.code)
            if decision.allowed:
                lane.duration_s += add_s
                lane.expires_at = new_end
            audit(
                s,
                now,
                caller.name,
                "lane.extend",
                f"lane:{lane_id}",
                "allow" if decision.allowed else "deny",
                decision.reason,
            )
        if full is not None:
            raise full
        if not decision.allowed:
            raise (
                refusal(decision)
                if decision.code != "duplicate_lane"
                else Conflict(decision.reason, code="duplicate_lane")
            )
        if lane.state in (states.ACTIVE, states.INTERRUPTED):  # refresh hard_timeout on the switches
            self._owners.add(lane_id, lane.principal_id, lane.expires_at, now)
            self._resend(lane_id)
        return lane

    def revoke_lanes(self, lane_ids: Sequence[int]) -> None:
        """Take lanes the store already ended (a grant revoked, a principal disabled) off the switches."""
        for lane_id in lane_ids:
            self._deactivate(lane_id)
