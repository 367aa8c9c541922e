"""How lanes reach the data plane: activation with its per-process claim, and the clock-driven
part (start due lanes, expire ended ones, recover stuck ones). Every state change it makes is
one of ``viplanes.lanes.states``'s.

``LaneManager`` (viplanes/lanes/manager.py) holds one ``LaneActivation``, built from the lane
service's ``LaneContext``, the claim set and the owners memory it shares with the manager. Split
from manager.py so each file does one thing: the manager decides and stores requests, this
module carries them out over time.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from viplanes.authz.tokens import Caller
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.domain.values import ActivationResult, LaneSpec
from viplanes.lanes import states
from viplanes.lanes.context import Claims, LaneContext
from viplanes.lanes.outcomes import failed_by, outcome_of
from viplanes.lanes.overlap import row_nets
from viplanes.lanes.owners import ActiveOwners
from viplanes.lanes.pool import needs_pool_address
from viplanes.lanes.specs import SPEC_COLUMNS, spec_from_row, spec_of, takeover_of
from viplanes.store.lanesql.core import (
    add_audit,
    installing_lanes,
    lane_for_change,
    lanes_due,
    owner_and_state,
    record_activation,
)
from viplanes.store.lanesql.postgres import RECORD_MAX, end_in_one, notify_in, record_in_one
from viplanes.store.models import LIVE_STATES, Lane
from viplanes.store.records import audit

log = logging.getLogger("viplanes.lanes.manager")


@dataclass(frozen=True)
class OutcomeHooks:
    """What the split deployment's controller hears of recorded activations
    (``viplanes.cluster.node``); the default hears nothing."""

    # (connection, lane id -> new state, activated_at of the active ones) inside the transaction
    # that recorded activations: the controller NOTIFYs the waiting API processes with it
    # (viplanes.cluster.handoff)
    committed: Callable[[Connection, dict[int, str], float], None] | None = None
    # PostgreSQL: the channel ``activate_batch`` NOTIFYs itself, in the one statement that records
    # a round (viplanes.store.lanesql.postgres.record_in_one); ``announced`` hears what it announced
    done_channel: str | None = None
    announced: Callable[[dict[int, str]], None] | None = None


def _noop(*_args: object) -> None:
    return None


class LaneActivation:
    """Activation, deactivation, ``tick`` and ``recover`` of the lane service."""

    def __init__(
        self,
        context: LaneContext,
        claims: Claims,
        owners: ActiveOwners,
        on_activation: Callable[[float, bool], None] = _noop,
    ) -> None:
        self.db = context.db
        self.dataplane = context.dataplane
        self.clock = context.clock
        self.topology = context.topology
        self.lane_pool = context.lane_pool
        self.resend_lock = context.resend_lock
        self.claims = claims
        self.owners = owners  # lanes recorded active here, for ``end``'s early deletes
        self.on_activation = on_activation
        self.hooks = OutcomeHooks()

    @property
    def caps(self) -> PlaneCapabilities:
        """How the data plane carries lanes (fixed when the plane was built)."""
        return self.dataplane.capabilities

    def wake_in(self, conn: Connection, payload: str, sent: bool = False) -> bool:
        """Inside the transaction that commits a lane ``installing`` (``lane:<id>``) or ended
        (``ended:<id>``): a data plane in another process is woken at the commit (the split
        deployment's NOTIFY, no round trip of its own). False when it is not: the caller then
        goes through ``activate``/``deactivate`` as usual. ``sent``: the NOTIFY on
        ``wake_channel`` rode in a statement already; only the data plane's bookkeeping."""
        channel = self.caps.wake_channel
        if channel is None or self.db.is_sqlite:
            return False
        self.dataplane.expect_wake(payload)  # before the NOTIFY: the answer may follow the commit
        if not sent:
            notify_in(conn, channel, payload)
        return True

    @property
    def wake_channel(self) -> str | None:
        """The channel the data plane listens on in another process (the split's), or None."""
        return self.caps.wake_channel

    def end_at_once(self, caller: Caller, lane_id: int, to: str, now: float, removed: bool = False) -> Lane | None:
        """PostgreSQL: ``end``'s lock, move, audit and wake-up as one autocommit statement. None
        (nothing written) unless the lane was live and the caller's: ``end`` then says why.
        ``removed``: the lane's deletes were sent already (``begin_deactivate``): no wake-up, no
        second removal."""
        channel = None if removed else self.wake_channel  # the split's NOTIFY channel
        with self.db.statement_connection() as conn:
            ended = end_in_one(
                conn,
                lane_id,
                to,
                f"{to} by {caller.name}",
                now,
                caller.name,
                states.END_ACTIONS[to],
                caller.id,
                caller.is_operator,
                channel,
            )
        if ended is None:
            return None
        lane, was, woken = ended
        if was in states.CARRIED and not woken and not removed:
            self.deactivate(lane_id)
        return lane

    def unready(self, spec: LaneSpec) -> list[str]:
        try:
            return self.dataplane.unready(spec)
        except Exception:  # a readiness bug must not block every request
            log.exception("readiness of lane %s", spec.lane_id)
            return []

    # --- activation --------------------------------------------------------------------------

    def activate(self, lane: Lane) -> Lane:
        """Ask the data plane to carry an installing lane (claimed by ``Claims.claim``); record active,
        failed, or, for a transient reason, leave it installing for ``recover``."""
        try:
            return self._activate_claimed(lane)
        finally:
            self.claims.release(lane.id)

    def _activate_claimed(self, lane: Lane) -> Lane:
        spec = spec_of(lane)
        t0 = time.perf_counter()
        try:
            result = self.dataplane.activate(spec)
        except Exception as exc:  # a broken controller must fail the lane, not the request
            log.exception("activate lane %s", lane.id)
            result = failed_by(exc, time.perf_counter() - t0)
        latency = time.perf_counter() - t0
        self.on_activation(latency, result.ok)
        if result.ok and self.caps.records_outcome:
            # the split deployment's controller committed it active: write nothing; its NOTIFY
            # said when (then the conditional UPDATE moved it installing -> active: still live)
            if result.committed_at is not None:
                states.apply(lane, states.values(states.ACTIVE, at=result.committed_at))
                return lane
            with self.db.read() as s:  # an older controller's NOTIFY, or no NOTIFY: read it back
                lane = s.get(Lane, lane.id) or lane
            if lane.state not in LIVE_STATES:  # ended while installing
                self.deactivate(lane.id)
            return lane
        now = self.clock()
        if not self.db.is_sqlite and self.hooks.committed is None:
            return self._record_alone(lane, result, latency, now)
        with self.db.write_connection() as conn:
            moved = self._record(conn, lane, result, latency, now)
            if moved and self.hooks.committed is not None:
                self.hooks.committed(conn, {lane.id: lane.state}, now)
            if not moved:
                lane = lane_for_change(conn, lane.id, lock=False) or lane
        if not moved and result.ok and lane.state not in LIVE_STATES:  # ended while installing
            self.deactivate(lane.id)
        return lane

    def _record(self, conn: Connection, lane: Lane, result: ActivationResult, latency: float, now: float) -> bool:
        """Record active, failed, or, for a transient reason, leave it installing for ``recover``:
        one conditional UPDATE, so the transition happens only if nobody ended the lane meanwhile.
        True when it moved (then ``lane``, the detached copy the caller answers with, says so)."""
        values, outcome, why = outcome_of(lane, result, latency, now)
        moved = record_activation(conn, lane.id, values)  # Core, not the ORM: viplanes/store/lanesql/core.py
        if moved:
            add_audit(conn, now, "system", "lane.activate", f"lane:{lane.id}", outcome, why)
            self._moved(lane, values, now)
        return moved

    def _moved(self, lane: Lane, values: dict[str, Any], now: float) -> None:
        states.apply(lane, values)
        if lane.state in ("active", "interrupted"):  # a hint until the commit: ``end`` re-checks
            self.owners.add(lane.id, lane.principal_id, lane.expires_at, now)

    def _record_alone(self, lane: Lane, result: ActivationResult, latency: float, now: float) -> Lane:
        """PostgreSQL, no one to tell (``serve``): ``_record``'s UPDATE and audit row as one
        autocommit statement (``record_in_one``), 1 round trip where BEGIN + 2 + COMMIT were 4."""
        values, outcome, why = outcome_of(lane, result, latency, now)
        with self.db.statement_connection() as conn:
            moved = record_in_one(conn, [(lane.id, values, outcome, why)], now, "")
        if lane.id in moved:
            self._moved(lane, values, now)
            return lane
        with self.db.read_connection() as conn:
            lane = lane_for_change(conn, lane.id, lock=False) or lane
        if result.ok and lane.state not in LIVE_STATES:  # ended while installing
            self.deactivate(lane.id)
        return lane

    def _record_in_one(self, lanes: list[Lane], results: list[ActivationResult], now: float) -> set[int]:
        """PostgreSQL with a done channel (the split's controller): the round's UPDATEs, audit
        rows and done-NOTIFY as one autocommit statement (``record_in_one``) where the general
        path is BEGIN + 2 per lane + NOTIFY + COMMIT. Returns the ids of the lanes that did not
        move (ended while installing)."""
        done_channel = self.hooks.done_channel
        assert done_channel is not None
        outcomes = []
        for lane, result in zip(lanes, results, strict=True):
            values, outcome, why = outcome_of(lane, result, result.latency_s, now)
            outcomes.append((lane.id, values, outcome, why))
        with self.db.statement_connection() as conn:
            moved = record_in_one(conn, outcomes, now, done_channel)
        for lane, (_, values, _, _) in zip(lanes, outcomes, strict=True):
            if lane.id in moved:
                states.apply(lane, values)
        if moved and self.hooks.announced is not None:
            self.hooks.announced(moved)
        return {lane.id for lane in lanes if lane.id not in moved}

    def activate_batch(self, lanes: list[Lane]) -> None:
        """Activate claimed installing lanes together: the data plane's ``activate_many`` (one
        barrier per switch for all of them) and one transaction for every outcome. Each lane keeps
        its own result: one refused lane fails alone, one unconfirmed switch leaves the lanes that
        cross it installing. A data plane that does not activate in batches gets one lane after
        the other, as ``_activate``."""
        if not self.caps.batches:
            for lane in lanes:
                self.activate(lane)
            return
        try:
            t0 = time.perf_counter()
            missing = ActivationResult(False, "data plane busy: no result for this lane", 0.0)
            failed = missing
            try:
                results = self.dataplane.activate_many([spec_of(ln) for ln in lanes])
            except Exception as exc:  # a broken controller must fail the lanes, not the round
                log.exception("activate %d lanes", len(lanes))
                results = {}
                failed = failed_by(exc, time.perf_counter() - t0)
            now = self.clock()
            ended: list[int] = []
            if self.hooks.done_channel is not None and not self.db.is_sqlite and len(lanes) <= RECORD_MAX:
                chosen = [results.get(lane.id) or (failed if not results else missing) for lane in lanes]
                for result in chosen:
                    self.on_activation(result.latency_s, result.ok)
                unmoved = self._record_in_one(lanes, chosen, now)
                ok_unmoved = [
                    lane for lane, result in zip(lanes, chosen, strict=True) if lane.id in unmoved and result.ok
                ]
                if ok_unmoved:
                    with self.db.read_connection() as conn:
                        for lane in ok_unmoved:
                            current = lane_for_change(conn, lane.id, lock=False)
                            if current is not None and current.state not in LIVE_STATES:
                                ended.append(lane.id)  # ended while installing: its flows go again
                for lane_id in ended:
                    self.deactivate(lane_id)
                return
            with self.db.write_connection() as conn:
                moved: dict[int, str] = {}
                for lane in lanes:
                    result = results.get(lane.id) or (failed if not results else missing)
                    self.on_activation(result.latency_s, result.ok)
                    if self._record(conn, lane, result, result.latency_s, now):
                        moved[lane.id] = lane.state
                    elif result.ok:
                        current = lane_for_change(conn, lane.id, lock=False)
                        if current is not None and current.state not in LIVE_STATES:
                            ended.append(lane.id)  # ended while installing: its flows go again
                if moved and self.hooks.committed is not None:
                    self.hooks.committed(conn, moved, now)
            for lane_id in ended:
                self.deactivate(lane_id)
        finally:
            for lane in lanes:
                self.claims.release(lane.id)

    def resend(self, lane_id: int) -> None:
        """Send a live lane again from its committed row (an extension's new hard_timeout). A
        release that commits meanwhile holds the data plane's change lock from its deletes to
        its commit, so this send lands either before those deletes or after the commit, where
        the state read after it sees the end and takes the flows down again."""
        with self.resend_lock:  # re-read: a name's new set may have been written meanwhile
            with self.db.read() as s:
                row = s.execute(select(*SPEC_COLUMNS).where(Lane.id == lane_id)).one()
            result = self.dataplane.activate(spec_from_row(row))
            if result.ok:
                with self.db.read_connection() as conn:
                    current = owner_and_state(conn, lane_id)
                if current is None or current[1] not in LIVE_STATES:
                    self.deactivate(lane_id)  # ended while we re-sent it
        if not result.ok:
            log.warning("lane %s extended but the data plane refresh failed: %s", lane_id, result.reason)

    def deactivate(self, lane_id: int) -> None:
        try:
            self.dataplane.deactivate(lane_id)
        except Exception:  # hard_timeout and the next reconcile still remove the flows
            log.exception("deactivate lane %s", lane_id)

    # --- time --------------------------------------------------------------------------------

    def tick(self) -> dict[str, int]:
        """Start due scheduled lanes, expire ended ones. Called by the scheduler thread and tests.
        A read first: most ticks find nothing due and then take no write transaction."""
        now = self.clock()
        with self.db.read_connection() as conn:
            if not lanes_due(conn, now):
                return {"started": 0, "expired": 0}
        with self.db.write() as s:
            # FOR UPDATE (PostgreSQL): a lane released meanwhile is re-checked and skipped, not revived
            due = s.scalars(
                select(Lane).where(Lane.state == "scheduled", Lane.starts_at <= now).with_for_update(of=Lane)
            ).all()
            starting = []
            for lane in due:
                if lane.expires_at <= now:
                    states.move(lane, states.EXPIRED, "ended before it could start", now)
                    audit(s, now, "system", "lane.expire", f"lane:{lane.id}", "done", lane.reason)
                elif lane.id not in self.claims and not self.unready(spec_of(lane)):
                    if not self._take_pool_address(s, lane):
                        states.move(
                            lane, states.FAILED, "the lane address pool was exhausted when the lane was due", now
                        )
                        audit(s, now, "system", "lane.start", f"lane:{lane.id}", "failed", lane.reason)
                        continue
                    states.move(lane, states.INSTALLING)  # not before its switches are back: no failed start
                    audit(s, now, "system", "lane.start", f"lane:{lane.id}", "done")
                    starting.append(lane)
            ending = s.scalars(
                select(Lane).where(Lane.state.in_(states.CARRIED), Lane.expires_at <= now).with_for_update(of=Lane)
            ).all()
            for lane in ending:
                states.move(lane, states.EXPIRED, "duration ended", now)
                audit(s, now, "system", "lane.expire", f"lane:{lane.id}", "done")
            ended_ids = [lane.id for lane in ending]
        starting = [lane for lane in starting if self.claims.claim(lane.id)]  # after commit: never leaked
        if starting:
            self.activate_batch(starting)
        for lane_id in ended_ids:
            self.deactivate(lane_id)
        return {"started": len(starting), "expired": len(ended_ids)}

    def _take_pool_address(self, s: Any, lane: Lane) -> bool:
        """A booked lane of a NAT'd host gets its lane-pool address when it starts, not when it is
        booked: a lane booked months ahead held an address from the booking on (and a grant
        with max_lanes=1 could book one per host of its prefix, exhausting the pool for everyone
        while none of its lanes ran). False: the pool is exhausted now."""
        if lane.nat_ip is not None or takeover_of(lane.trigger_detail) is not None:
            return True  # booked before this rule, or started already; a takeover keeps the NAT's
        nets = [ipaddress.ip_network(n) for n in row_nets(lane.dst_ip, lane.dst_nets)]
        if not needs_pool_address(self.topology.host_by_ip(lane.src_ip), nets):
            return True
        lane.nat_ip = self.lane_pool.address_for(self.db, s, lane.src_ip)
        return lane.nat_ip is not None

    def recover(self) -> int:
        """Activate ``installing`` lanes that no thread of this process is activating: left by a
        crash, a failed state update (database outage) or a transient activation failure.
        Lanes whose switches are not ready wait for the next call; expiry is ``tick``'s."""
        now = self.clock()
        with self.db.read_connection() as conn:  # autocommit on PostgreSQL: one round trip
            stuck = installing_lanes(conn, now)
        claimed = [lane for lane in stuck if not self.unready(spec_of(lane)) and self.claims.claim(lane.id)]
        if claimed:
            self.activate_batch(claimed)
        return len(claimed)
