"""Lane lifecycle: the manager that moves lanes through their states.

requested -> scheduled -> installing -> active -> expired | released | revoked, or failed with a
reason: the table and the columns of each move are ``viplanes.lanes.states``. The manager (with
its activation part, ``LaneActivation``, and its read part, ``LaneReads``: collaborators it
builds from one ``LaneContext``, never base classes) is the only code that changes a lane's state
(each change is audited); it talks to the database (source of truth) and to a
:class:`~viplanes.dataplane.base.Dataplane`, never to a switch.

Faults: a lane is never failed for a reason that is only about the switches being away right now
(:func:`~viplanes.dataplane.base.is_transient`). An immediate request while its switches are not
connected and reconciled is refused with 503 ``switches_not_ready`` (no row); a due scheduled lane
stays ``scheduled`` until its switches are ready; an activation that fails transiently leaves the
lane ``installing`` with reason ``waiting for the data plane: ...``. ``recover`` (the scheduler
calls it every few seconds) activates every ``installing`` lane nobody in this process is
activating, whoever left it so; a lane whose window ends first becomes ``expired``.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Sequence

from sqlalchemy.exc import IntegrityError

from viplanes.authz.tokens import Caller, sees_lane
from viplanes.dataplane.base import Dataplane
from viplanes.domain.clock import SteadyClock
from viplanes.domain.flowcost import FlowCoster
from viplanes.domain.values import LaneCounters, LaneSpec
from viplanes.errors import Conflict, NotFound, VipError
from viplanes.lanes import states
from viplanes.lanes.activation import LaneActivation, OutcomeHooks
from viplanes.lanes.admit import LaneAdmission
from viplanes.lanes.committed import activate_truthfully, committed_after_all
from viplanes.lanes.context import Claims, LaneContext
from viplanes.lanes.extension import judge_extension
from viplanes.lanes.idempotency import find_replay, request_digest
from viplanes.lanes.owners import ActiveOwners
from viplanes.lanes.pool import LanePool
from viplanes.lanes.reads import LaneReads
from viplanes.lanes.requests import LaneTrigger, refusal, to_request, within_bookings
from viplanes.lanes.resolver import Resolver, default_resolver
from viplanes.lanes.states import END_ACTIONS, TERMINAL, TRANSITIONS, can_move  # noqa: F401 - re-exported
from viplanes.lanes.targets import LaneInput, LaneLimits, LaneTarget, target_for_request
from viplanes.logs import lane_scope
from viplanes.policy.rules import check_grant, decide
from viplanes.store.db import Database
from viplanes.store.lanesql.core import (
    add_audit,
    end_lane,
    lane_from_row,
    lane_row_for_change,
    live_counts,
    owner_and_state,
    usable_grant_rules,
)
from viplanes.store.models import LIVE_STATES, Lane
from viplanes.store.records import audit, get_grant, rule_of
from viplanes.topologies.model import Topology

log = logging.getLogger(__name__)


def _noop(*_args: object) -> None:
    return None


class LaneManager:
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
        self.context = LaneContext(
            db=db,
            dataplane=dataplane,
            topology=topology,
            clock=clock or SteadyClock(),
            limits=limits or LaneLimits(),
            resolver=resolver or default_resolver(),
            lane_pool=LanePool(topology.lane_pool.prefix),
            flow_costs=flow_costs,
        )
        self.db, self.dataplane, self.topology = db, dataplane, topology
        self.clock, self.limits, self.flow_costs = self.context.clock, self.context.limits, flow_costs
        self.on_decision = on_decision
        self._owners = ActiveOwners()
        self._claims = Claims()
        self.activation = LaneActivation(self.context, self._claims, self._owners, on_activation)
        self.reads = LaneReads(self.context)
        self.admission = LaneAdmission(self.context, self.activation, self._claims)

    def announce_outcomes(self, hooks: OutcomeHooks) -> None:
        """The split deployment's controller hears every recorded activation (``cluster.node``)."""
        self.activation.hooks = hooks

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
        return target_for_request(body, self.topology, self.context.resolver, self.limits.max_matches)

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
                req = to_request(body, target, self.topology, now)  # the same body is the same request
                gathered = None
                if self.db.is_sqlite:
                    rules = usable_grant_rules(conn, caller.id, now, for_update=False, with_groups=caller.from_provider)
                else:  # the grants' and the decision's locks, then everything it reads: one message
                    gathered = self.admission.gather(conn, caller, req, target, now, trigger)
                    rules = gathered.rules
                if trigger is not None:
                    rules = [r for r in rules if r.grant_id == trigger.grant_id]
                if idempotency_key:  # after the grants' lock: two retries with one key queue there
                    first = find_replay(conn, caller.id, idempotency_key, digest)
                    if first is not None:
                        return first, False
                # Quota is the last check of a grant, so only grants that pass every other check need
                # their live lanes counted (one GROUP BY over fewer grants); the rest fail the same
                # way whatever the count. PostgreSQL counted them with the grants, in the same message.
                countable = [r.grant_id for r in rules if check_grant(req, r, now, 0).code in ("allowed", "quota")]
                live = self.admission.count_live(conn, req, countable, gathered)
                decision = decide(req, rules, self.topology, now, live)
                if decision.allowed and req.starts_at > now:
                    decision = within_bookings(conn, decision, rules)
                if decision.allowed:
                    lane, denial = self.admission.insert(
                        conn,
                        caller,
                        body,
                        target,
                        req,
                        decision,
                        now,
                        idempotency_key,
                        digest,
                        trigger,
                        gathered,
                    )
                else:
                    denial = refusal(decision)
                code = denial.code if denial is not None else decision.code
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
                        self.activation.wake_in(conn, f"lane:{lane.id}")
                elif lane.state == "installing" and self.activation.wake_channel is not None:
                    self.activation.wake_in(conn, f"lane:{lane.id}", sent=True)  # rode in the INSERT
        except BaseException as exc:
            if lane is None or not committed_after_all(self.db, lane, exc):
                if lane is not None:  # not committed: nothing to activate, release the claim
                    self._claims.release(lane.id)
                raise
        # counted once the decision is committed: a COMMIT that fails (PostgreSQL reports two
        # retries with one Idempotency-Key racing there; the first lane is then replayed) or a
        # lost connection is no decision
        self.on_decision(code)
        if denial is not None:
            raise denial
        assert lane is not None
        with lane_scope(lane.id):  # activation's log lines name the lane (and the request, if any)
            log.info("lane %d granted to %s: %s", lane.id, caller.name, lane.state)
            if lane.state == "installing":
                lane = activate_truthfully(self.activation.activate, self.db, lane)
        return lane, True

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
        early = self.dataplane.capabilities.removes_early
        if not self.db.is_sqlite and not early:
            # the plain success in one statement (viplanes/store/lanesql/postgres.py); an in-process
            # controller takes the path below instead, which sends the deletes first
            ended = self.activation.end_at_once(caller, lane_id, to, now)
            if ended is not None:
                return ended
        removal = self._begin_removal(lane_id) if early and self._may_end_active(caller, lane_id, now) else None
        try:
            if removal is not None and not self.db.is_sqlite:
                # the deletes are out: the end's lock, move and audit as one autocommit statement
                # (1 round trip where BEGIN + 3 + COMMIT were 5), while the switches work
                ended = self.activation.end_at_once(caller, lane_id, to, now, removed=True)
                if ended is not None:
                    self._owners.discard(lane_id)
                    return ended
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
                woken = was in states.CARRIED and removal is None and self.activation.wake_in(conn, f"ended:{lane_id}")
        finally:
            if removal is not None:  # the barriers, after the commit (or its failure)
                removal()
        self._owners.discard(lane_id)
        if was in states.CARRIED and removal is None and not woken:
            self.activation.deactivate(lane_id)
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
        """Send an active lane's deletes now (``PlaneCapabilities.removes_early``); the function to
        wait, or None."""
        if not self.dataplane.capabilities.removes_early:
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
            owner = self.reads.get(caller, lane_id, s)
            grant = get_grant(s, owner.grant_id, lock=True)
            lane = self.reads.get(caller, lane_id, s, lock=True)
            if lane.state not in LIVE_STATES:
                raise Conflict(f"lane {lane_id} is {lane.state}", code="lane_not_live")
            new_end = lane.expires_at + add_s
            live = live_counts(s.connection(), [grant.id], lane.starts_at, new_end, exclude=lane.id).get(grant.id, 0)
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
        self.on_decision(decision.code)  # committed (``request`` says why only then)
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
            self.activation.resend(lane_id)
        return lane

    def revoke_lanes(self, lane_ids: Sequence[int]) -> None:
        """Take lanes the store already ended (a grant revoked, a principal disabled) off the switches."""
        for lane_id in lane_ids:
            self.activation.deactivate(lane_id)

    # --- the read and clock-driven parts, under the names the API and the scheduler call -------

    def get(self, caller: Caller, lane_id: int) -> Lane:
        return self.reads.get(caller, lane_id)

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
        return self.reads.list(caller, state, principal, src_ip, dst_ip, limit, offset)

    def counters(self, caller: Caller, lane_id: int) -> tuple[Lane, LaneCounters | None]:
        return self.reads.counters(caller, lane_id)

    def desired_lanes(self) -> builtins.list[LaneSpec]:
        return self.reads.desired_lanes()

    def flow_budgets(self) -> builtins.list[tuple[str, int | None, int]]:
        return self.reads.flow_budgets()

    def counts_by_state(self) -> dict[str, int]:
        return self.reads.counts_by_state()

    def tick(self) -> dict[str, int]:
        return self.activation.tick()

    def recover(self) -> int:
        return self.activation.recover()
